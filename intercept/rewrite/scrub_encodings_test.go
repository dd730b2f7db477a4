package rewrite

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/tokens"
)

// scrubPairs are real values with their stand-ins as the proxy makes them:
// a card number keeps its first 6 and last 4 digits, a password its length.
// The second password's stand-in differs from it in its first and last
// characters too, so the bits base64 mixes with the neighbours' differ.
var scrubPairs = []struct{ name, real, standIn string }{
	{"card", realNumber, "4111119999991111"},
	{"password", "correct-horse-battery1", "cxqzfntAzbmvw-kpqrbzw1"},
	{"password edges differ", `p@ss/w<rd>&+x'y`, "Q@rt/x>ab<&'zqZ"},
}

// matcherScrub scrubs b as free text with a tokens.Matcher built from
// ScrubVariants exactly as intercept's newScrubber builds it.
func matcherScrub(t *testing.T, real, standIn string, b []byte) []byte {
	t.Helper()
	var pats []tokens.Pattern
	var to [][]byte
	for _, v := range ScrubVariants([]byte(real), []byte(standIn)) {
		pats = append(pats, tokens.Pattern{Value: v[0], ID: len(to), WholeField: len(v[0]) < 6, WordBounded: true})
		to = append(to, v[1])
	}
	r := tokens.NewReplacer(tokens.NewMatcher(pats), func(id int) ([]byte, error) { return to[id], nil })
	out, _, err := r.ReplaceText(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkScrubbed fails when decoded still holds the real value, or, where
// the stand-in shares the real value's first and last character (the bits
// base64 shares with the neighbours), when it lacks the stand-in; around it
// the document must decode as it was.
func checkScrubbed(t *testing.T, real, standIn, decoded, want string) {
	t.Helper()
	if strings.Contains(decoded, real) {
		t.Fatal("the real value is still in the decoded document")
	}
	if real[0] == standIn[0] && real[len(real)-1] == standIn[len(standIn)-1] {
		if decoded != strings.Replace(want, real, standIn, -1) {
			t.Fatalf("decoded %s, want the stand-in in place of the real value", show(decoded))
		}
		return
	}
	// Elsewhere the middle is the stand-in's and the rest is intact.
	if !strings.Contains(decoded, standIn[1:len(standIn)-1]) {
		t.Fatalf("decoded %s lacks the stand-in", show(decoded))
	}
	i := strings.Index(want, real)
	if len(decoded) != len(want) || decoded[:i] != want[:i] || decoded[i+len(real):] != want[i+len(real):] {
		t.Fatal("the bytes around the value changed")
	}
}

// TestP10_ScrubsBase64InsideBasicAuthEcho: a page echoing the Authorization
// header it got (base64 of "user:<value>") shows the stand-in, whatever the
// user name's length puts the value at within a base64 group.
func TestP10_ScrubsBase64InsideBasicAuthEcho(t *testing.T) {
	for _, p := range scrubPairs {
		for _, user := range []string{"al", "bob", "user", "alice", "carol1"} {
			t.Run(p.name+"/"+user, func(t *testing.T) {
				cred := user + ":" + p.real
				enc := base64.StdEncoding.EncodeToString([]byte(cred))
				page := []byte(`<pre>Authorization: Basic ` + enc + "</pre>\n" + `{"headers":{"Authorization":"Basic ` + enc + `"}}`)
				out := matcherScrub(t, p.real, p.standIn, page)
				for _, line := range strings.Split(string(out), "\n") {
					_, b64, _ := strings.Cut(line, "Basic ")
					b64, _, _ = strings.Cut(b64, `"`)
					b64, _, _ = strings.Cut(b64, "<")
					got, err := base64.StdEncoding.DecodeString(b64)
					if err != nil {
						t.Fatalf("scrubbed echo is no longer base64: %v", err)
					}
					checkScrubbed(t, p.real, p.standIn, string(got), cred)
				}
			})
		}
	}
}

// TestP10_ScrubsBase64DocumentAnyAlignment: a JSON document holding the
// value, base64-encoded in either alphabet, padded or not, as a JWT-like
// payload or a blob field, comes back holding the stand-in at every byte
// offset of the value modulo 3.
func TestP10_ScrubsBase64DocumentAnyAlignment(t *testing.T) {
	encs := map[string]*base64.Encoding{"std": base64.StdEncoding, "url": base64.URLEncoding, "rawstd": base64.RawStdEncoding, "rawurl": base64.RawURLEncoding}
	for _, p := range scrubPairs {
		for name, enc := range encs {
			for pad := range 3 {
				t.Run(p.name+"/"+name+"/"+strings.Repeat("x", pad), func(t *testing.T) {
					doc, err := json.Marshal(map[string]any{"sub": "u_" + strings.Repeat("x", pad), "card": p.real, "iat": 1767225600, "scope": "pay?~~>"})
					if err != nil {
						t.Fatal(err)
					}
					hdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
					payload := enc.EncodeToString(doc)
					page := []byte(`{"id_token":"` + hdr + "." + payload + `.c2lnbmF0dXJl","blob":"` + payload + `"}`)
					out := matcherScrub(t, p.real, p.standIn, page)
					var got struct{ IDToken, Blob string }
					if err := json.Unmarshal(out, &struct {
						IDToken *string `json:"id_token"`
						Blob    *string `json:"blob"`
					}{&got.IDToken, &got.Blob}); err != nil {
						t.Fatalf("scrubbed page is no longer JSON: %v", err)
					}
					parts := strings.Split(got.IDToken, ".")
					if len(parts) != 3 || parts[0] != hdr || parts[2] != "c2lnbmF0dXJl" {
						t.Fatal("JWT framing changed")
					}
					for _, b64 := range []string{parts[1], got.Blob} {
						dec, err := enc.DecodeString(b64)
						if err != nil {
							t.Fatalf("scrubbed payload is no longer base64: %v", err)
						}
						// The document holds the value as json.Marshal escapes it.
						checkScrubbed(t, string(jsonEscape([]byte(p.real), true)), string(jsonEscape([]byte(p.standIn), true)), string(dec), string(doc))
					}
				})
			}
		}
	}
}

// TestP10_ScrubsUTF16Body: a body declared UTF-16 (either byte order, with
// or without a BOM) holding the value raw, JSON-escaped or as spaced card
// groups comes back holding the stand-in.
func TestP10_ScrubsUTF16Body(t *testing.T) {
	for _, p := range scrubPairs {
		for _, le := range []bool{true, false} {
			order := map[bool]string{true: "le", false: "be"}[le]
			t.Run(p.name+"/"+order, func(t *testing.T) {
				forms := []string{p.real, strings.ToUpper(p.real), string(jsonEscape([]byte(p.real), true))}
				want := []string{p.standIn, strings.ToUpper(p.standIn), string(jsonEscape([]byte(p.standIn), true))}
				if allDigits([]byte(p.real)) {
					forms = append(forms, "4111 1111 1111 1111", "4111-1111-1111-1111")
					want = append(want, "4111 1199 9999 1111", "4111-1199-9999-1111")
				}
				text := "\ufeff<html><body>\n"
				wantText := text
				for i, f := range forms {
					text += "<p>Your value: " + f + " é</p>\n"
					wantText += "<p>Your value: " + want[i] + " é</p>\n"
				}
				out := matcherScrub(t, p.real, p.standIn, utf16Bytes([]byte(text), le))
				got, _ := fromUTF16(out, le)
				if strings.Contains(got, p.real) || strings.Contains(strings.ToUpper(got), strings.ToUpper(p.real)) {
					t.Fatal("the real value is still in the decoded body")
				}
				if got != wantText {
					t.Fatalf("decoded %s, want %s", show(got), show(wantText))
				}
				if !bytes.Equal(utf16Bytes([]byte(got), le), out) {
					t.Fatal("the scrubbed body is not UTF-16 any more")
				}
			})
		}
	}
}
