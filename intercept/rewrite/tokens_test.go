package rewrite

import (
	"bytes"
	"net/http"
	"net/url"
	"testing"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/tokens"
)

// The real replacer satisfies the consumer-side interface.
var _ Replacer = (*tokens.Replacer)(nil)

// realTokensReplacer builds a tokens.Replacer over the test values: tokens
// and the long stand-in anywhere, the CVV stand-in as a whole field only; the
// forbidden token refuses like an out-of-scope one.
func realTokensReplacer() *tokens.Replacer {
	vals := []string{realNumber, realCVV, realCVV, realPW}
	pats := []tokens.Pattern{
		{Value: []byte(tokNumber), ID: 0},
		{Value: []byte(tokCVV), ID: 1},
		{Value: []byte(standInCVV), ID: 2, WholeField: true},
		{Value: []byte(standInPW), ID: 3},
		{Value: []byte(tokForbid), ID: 4},
	}
	return tokens.NewReplacer(tokens.NewMatcher(pats), func(id int) ([]byte, error) {
		if id == 4 {
			return nil, agentvault.Errorf(agentvault.CodeTokenNotAllowed, "token not allowed here")
		}
		return []byte(vals[id]), nil
	})
}

// TestP9_WithTokensReplacer runs the main formats against the real
// tokens.Replacer rather than the naive test one.
func TestP9_WithTokensReplacer(t *testing.T) {
	r := realTokensReplacer()
	in, boundary := buildMultipart(t, []testPart{formField("cvc", standInCVV), formField("zip", "41234"), formField("n", tokNumber)})
	cases := []struct{ name, ct, body, want string }{
		{"json escapes", "application/json", `{"n":"\u0061v_card_1_number_u7x2k","c":123,"z":1234}`, `{"n":"` + realNumber + `","c":737,"z":1234}`},
		{"form", "application/x-www-form-urlencoded", "cvc=123&amount=41234&n=av%5Fcard%5F1%5Fnumber%5Fu7x2k", "cvc=737&amount=41234&n=" + realNumber},
		{"multipart", "multipart/form-data; boundary=" + boundary, string(in),
			string(bytes.Replace(bytes.Replace(in, []byte(tokNumber), []byte(realNumber), 1), []byte("\r\n\r\n"+standInCVV+"\r\n"), []byte("\r\n\r\n"+realCVV+"\r\n"), 1))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := Body(tc.ct, "gzip", compress(t, "gzip", []byte(tc.body)), r, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := decompress(t, "gzip", out); string(got) != tc.want {
				t.Fatalf("got %s, want %s", show(got), show(tc.want))
			}
		})
	}

	u, _ := url.Parse("https://a.example/p/" + tokCVV + "?c=123&x=41234")
	if n, err := URL(u, r); err != nil || n != 2 || u.String() != "https://a.example/p/737?c=737&x=41234" {
		t.Fatalf("URL: n=%d err=%v", n, err)
	}
	h := http.Header{}
	req, _ := http.NewRequest("GET", "https://a.example/", nil)
	req.SetBasicAuth("alice", standInPW)
	h.Set("Authorization", req.Header.Get("Authorization"))
	if n, err := Header(h, r); err != nil || n != 1 {
		t.Fatalf("Header: n=%d err=%v", n, err)
	}
	req.Header = h
	if _, pw, _ := req.BasicAuth(); pw != realPW {
		t.Fatal("Basic password not substituted")
	}
	if _, _, err := Body("application/json", "", []byte(`{"p":"\u0061v_login_evil_password_u7x2k"}`), r, 0); agentvault.ErrorCode(err) != agentvault.CodeTokenNotAllowed {
		t.Fatalf("forbidden token: code = %s", show(agentvault.ErrorCode(err)))
	}
}
