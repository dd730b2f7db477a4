package rewrite

import (
	"bytes"
	"net/http"
	"net/url"
	"testing"

	agentvault "github.com/agentvault/agentvault"
)

type formatCase struct {
	name string
	in   string
	want string
	n    int
	code agentvault.Code // expected error code, "" for success
}

func runFormat(t *testing.T, cases []formatCase, f func([]byte, Replacer) ([]byte, int, error)) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, n, err := f([]byte(tc.in), testReplacer())
			if tc.code != "" {
				if agentvault.ErrorCode(err) != tc.code {
					t.Fatalf("error code = %s, want %s", show(agentvault.ErrorCode(err)), show(tc.code))
				}
				if out != nil {
					t.Fatalf("got %d output bytes alongside an error", len(out))
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if string(out) != tc.want || n != tc.n {
				t.Fatalf("got %s (%d replacements), want %s (%d)", show(out), n, show(tc.want), tc.n)
			}
		})
	}
}

func TestP9_Form(t *testing.T) {
	runFormat(t, []formatCase{
		{"token value", "number=" + tokNumber + "&x=1", "number=" + realNumber + "&x=1", 1, ""},
		{"short stand-in as whole field", "cvc=" + standInCVV, "cvc=" + realCVV, 1, ""},
		{"CVV inside longer number untouched", "amount=41234&zip=1234", "amount=41234&zip=1234", 0, ""},
		{"percent-encoded token", "n=av%5Fcard%5F1%5Fnumber%5Fu7x2k", "n=" + realNumber, 1, ""},
		{"token as key", tokCVV + "=on", realCVV + "=on", 1, ""},
		{"special chars re-encoded", "pw=" + standInPW, "pw=" + url.QueryEscape(realPW), 1, ""},
		{"untouched bytes kept", "a=%7e+b&c&=&d=" + standInCVV + "&e=%zz", "a=%7e+b&c&=&d=" + realCVV + "&e=%zz", 1, ""},
		{"token among text", "note=see+" + tokNumber + "+ok", "note=see+" + realNumber + "+ok", 1, ""},
		{"no match returns input", "a=1&b=2", "a=1&b=2", 0, ""},
		{"forbidden token refused", "pw=" + tokForbid, "", 0, agentvault.CodeTokenNotAllowed},
	}, Form)
}

func TestP9_JSONUnicodeEscapes(t *testing.T) {
	runFormat(t, []formatCase{
		{"plain token", `{"number":"` + tokNumber + `"}`, `{"number":"` + realNumber + `"}`, 1, ""},
		{"\\u escapes", `{"number":"\u0061v_card_1_number_u7x2k"}`, `{"number":"` + realNumber + `"}`, 1, ""},
		{"upper-case \\u", `{"number":"\u0041v_card"}`, `{"number":"\u0041v_card"}`, 0, ""},
		{"every char escaped", `["\u0031\u0032\u0033"]`, `["` + realCVV + `"]`, 1, ""},
		{"surrogate pair kept around token", `{"a":"\ud83d\ude00` + tokNumber + `"}`, "{\"a\":\"\U0001F600" + realNumber + `"}`, 1, ""},
		{"escaped slash", `{"u":"av_card_1_number_u7x2k\/x"}`, `{"u":"` + realNumber + `/x"}`, 1, ""},
		{"key", `{"` + tokCVV + `":1}`, `{"` + realCVV + `":1}`, 1, ""},
		{"CVV typed as number", `{"cvv": 123 , "n":1234}`, `{"cvv": 737 , "n":1234}`, 1, ""},
		{"digits inside a bare word untouched", `{a:x123, b:x-123}`, `{a:x123, b:x-123}`, 0, ""},
		{"short stand-in inside string untouched", `{"a":"x123"}`, `{"a":"x123"}`, 0, ""},
		{"replacement escaped", `{"pw":"` + standInPW + `"}`, `{"pw":"p@ss/w<rd>&\"x'y"}`, 1, ""},
		{"whitespace and order kept", "{ \"z\" : [1, 2.50e3 ,\"" + standInCVV + "\"],\n\t\"a\":null }", "{ \"z\" : [1, 2.50e3 ,\"" + realCVV + "\"],\n\t\"a\":null }", 1, ""},
		{"untouched escapes kept", `{"a":"\u00e9\n","b":"` + tokCVV + `"}`, `{"a":"\u00e9\n","b":"` + realCVV + `"}`, 1, ""},
		{"ndjson", "{\"a\":\"" + tokCVV + "\"}\n{\"a\":\"" + tokCVV + "\"}\n", "{\"a\":\"" + realCVV + "\"}\n{\"a\":\"" + realCVV + "\"}\n", 2, ""},
		{"unterminated string still searched", `{"a":"` + tokNumber, `{"a":"` + realNumber, 1, ""},
		{"forbidden token behind escapes", `{"a":"\u0061v_login_evil_password_u7x2k"}`, "", 0, agentvault.CodeTokenNotAllowed},
	}, JSON)
}

func TestP9_JSONNumberThatCannotStayANumber(t *testing.T) {
	r := naiveReplacer{pairs: [][2]string{{"123", "012"}}}
	_, _, err := JSON([]byte(`{"cvv":123}`), r)
	if agentvault.ErrorCode(err) != agentvault.CodeSubstitution {
		t.Fatalf("code = %s, want %s", show(agentvault.ErrorCode(err)), show(agentvault.CodeSubstitution))
	}
}

func TestP9_URL(t *testing.T) {
	cases := []struct {
		name, in, want string
		n              int
	}{
		{"path segment", "https://a.example/pay/" + tokNumber + "/x", "https://a.example/pay/" + realNumber + "/x", 1},
		{"encoded path segment", "https://a.example/av%5Fcard%5F1%5Fcvv%5Fu7x2k", "https://a.example/" + realCVV, 1},
		{"short segment whole only", "https://a.example/123/x1234", "https://a.example/737/x1234", 1},
		{"query value and key", "https://a.example/?" + tokCVV + "=" + tokNumber + "&b=%7e", "https://a.example/?" + realCVV + "=" + realNumber + "&b=%7e", 2},
		{"query special chars", "https://a.example/p?pw=" + standInPW, "https://a.example/p?pw=" + url.QueryEscape(realPW), 1},
		{"path special chars", "https://a.example/p/" + standInPW, "https://a.example/p/" + url.PathEscape(realPW), 1},
		{"RawPath kept for untouched segment", "https://a.example/a%2Fb/" + tokCVV, "https://a.example/a%2Fb/" + realCVV, 1},
		{"userinfo", "https://" + tokCVV + ":" + standInPW + "@a.example/", "https://" + realCVV + ":" + url.QueryEscape(realPW) + "@a.example/", 2},
		{"nothing", "https://a.example/a%2Fb?q=1", "https://a.example/a%2Fb?q=1", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, err := url.Parse(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			n, err := URL(u, testReplacer())
			if err != nil {
				t.Fatal(err)
			}
			got := u.String()
			if tc.name == "userinfo" {
				// url.UserPassword escapes with its own rules; compare decoded.
				pw, _ := u.User.Password()
				if u.User.Username() != realCVV || pw != realPW || n != tc.n {
					t.Fatalf("userinfo not rewritten (%d replacements)", n)
				}
				return
			}
			if got != tc.want || n != tc.n {
				t.Fatalf("got %s (%d), want %s (%d)", show(got), n, show(tc.want), tc.n)
			}
			if u.RawPath != "" {
				if p, _ := url.PathUnescape(u.RawPath); p != u.Path {
					t.Fatalf("RawPath %s does not decode to Path %s", show(u.RawPath), show(u.Path))
				}
			}
		})
	}
}

func TestP9_Header(t *testing.T) {
	basic := func(user, pass string) string {
		r, _ := http.NewRequest("GET", "https://a.example/", nil)
		r.SetBasicAuth(user, pass)
		return r.Header.Get("Authorization")
	}
	cases := []struct {
		name, header, in, want string
		n                      int
	}{
		{"basic auth both halves", "Authorization", basic(tokCVV, standInPW), basic(realCVV, realPW), 2},
		{"basic auth untouched", "Authorization", basic("alice", "x"), basic("alice", "x"), 0},
		{"bearer token", "Authorization", "Bearer " + tokNumber, "Bearer " + realNumber, 1},
		{"cookie values", "Cookie", "a=1; cvv=" + standInCVV + `; n="` + tokNumber + `"; x=41234`, "a=1; cvv=" + realCVV + `; n="` + realNumber + `"; x=41234`, 2},
		{"url-encoded cookie token", "Cookie", "n=av%5Fcard%5F1%5Fnumber%5Fu7x2k", "n=" + realNumber, 1},
		{"custom header whole field", "X-Cvv", standInCVV, realCVV, 1},
		{"content-length not a CVV", "Content-Length", standInCVV, standInCVV, 0},
		{"referer query", "Referer", "https://a.example/?c=" + standInCVV, "https://a.example/?c=" + realCVV, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			h.Set(tc.header, tc.in)
			n, err := Header(h, testReplacer())
			if err != nil {
				t.Fatal(err)
			}
			if got := h.Get(tc.header); got != tc.want || n != tc.n {
				t.Fatalf("got %s (%d), want %s (%d)", show(got), n, show(tc.want), tc.n)
			}
		})
	}
}

func TestP9_HeaderRefusesBrokenStructure(t *testing.T) {
	r := naiveReplacer{pairs: [][2]string{{"standin-semi", "a;b=c"}, {"standin-crlf", "a\r\nX-Evil: 1"}}}
	for _, tc := range []struct{ name, header, value string }{
		{"semicolon in cookie value", "Cookie", "s=standin-semi"},
		{"CRLF in header value", "X-Data", "standin-crlf"},
		{"token in header name", "X-standin-semi", "v"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{tc.header: {tc.value}}
			_, err := Header(h, r)
			if agentvault.ErrorCode(err) != agentvault.CodeSubstitution {
				t.Fatalf("code = %s, want %s", show(agentvault.ErrorCode(err)), show(agentvault.CodeSubstitution))
			}
			if h[tc.header][0] != tc.value {
				t.Fatal("header changed although the rewrite was refused")
			}
		})
	}
}

func TestP10_ScrubSetCookieAndLocation(t *testing.T) {
	scrub := naiveReplacer{pairs: [][2]string{{realNumber, "4111119999991111"}, {realCVV, standInCVV}}}
	h := http.Header{}
	h.Set("Set-Cookie", "last="+realCVV+"; Path=/; Comment="+realNumber)
	h.Set("Location", "https://a.example/done?card="+realNumber)
	n, err := Header(h, scrub)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 || h.Get("Set-Cookie") != "last="+standInCVV+"; Path=/; Comment=4111119999991111" ||
		h.Get("Location") != "https://a.example/done?card=4111119999991111" {
		t.Fatalf("scrub incomplete: %d replacements", n)
	}
}

// TestP9_ScanJSONStringMatchesByteLoop: the quote-to-quote scan ends every
// string literal where the byte-by-byte reading (a backslash escapes the
// next byte, whatever it is) ends it, on every string of quotes,
// backslashes and letters up to length 9.
func TestP9_ScanJSONStringMatchesByteLoop(t *testing.T) {
	naive := func(b []byte, start int) (int, bool) {
		for j := start + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1, true
			}
		}
		return len(b), false
	}
	var walk func(b []byte)
	walk = func(b []byte) {
		in := append([]byte{'"'}, b...)
		e, c, esc := newJSONStrings(in).scan(0)
		if we, wc := naive(in, 0); e != we || c != wc {
			t.Fatalf("%q: end %d %v, want %d %v", in, e, c, we, wc)
		}
		if want := bytes.IndexByte(in[1:e], '\\') >= 0; esc != want {
			t.Fatalf("%q: escaped %v, want %v", in, esc, want)
		}
		if len(b) == 9 {
			return
		}
		for _, c := range []byte{'"', '\\', 'a'} {
			walk(append(b, c))
		}
	}
	walk(nil)
}

// TestP9_JSONStringsInSequence: one jsonStrings scanning a document's
// literals one after another (as the JSON walk does, keeping the place of
// the next backslash between them) ends each where the byte loop does.
func TestP9_JSONStringsInSequence(t *testing.T) {
	naive := func(b []byte, start int) (int, bool, bool) {
		esc := false
		for j := start + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				esc = true
				j++
			case '"':
				return j + 1, true, esc
			}
		}
		return len(b), false, esc
	}
	alphabet := []byte(`"\a:`)
	for n := 0; n < 20000; n++ {
		doc := make([]byte, 1+n%23)
		for i, x := 0, n; i < len(doc); i, x = i+1, x/3+i*7 {
			doc[i] = alphabet[(x+i*i)%len(alphabet)]
		}
		s := newJSONStrings(doc)
		for i := 0; i < len(doc); {
			if doc[i] != '"' {
				i++
				continue
			}
			e, c, esc := s.scan(i)
			if we, wc, wesc := naive(doc, i); e != we || c != wc || esc != wesc {
				t.Fatalf("%q at %d: %d %v %v, want %d %v %v", doc, i, e, c, esc, we, wc, wesc)
			}
			i = e
		}
	}
}
