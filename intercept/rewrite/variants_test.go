package rewrite

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"html"
	"net/url"
	"strings"
	"testing"
	"unicode/utf16"
)

// decoders undo each encoding ScrubVariants may emit; a variant must decode
// back to the real value with at least one of them.
var decoders = map[string]func(string) (string, bool){
	"raw":   func(s string) (string, bool) { return s, true },
	"query": func(s string) (string, bool) { v, err := url.QueryUnescape(s); return v, err == nil },
	"path":  func(s string) (string, bool) { v, err := url.PathUnescape(s); return v, err == nil },
	"json": func(s string) (string, bool) {
		var v string
		return v, json.Unmarshal([]byte(`"`+s+`"`), &v) == nil
	},
	"base64":    decodeB64(base64.StdEncoding),
	"base64url": decodeB64(base64.URLEncoding),
	"base64raw": decodeB64(base64.RawStdEncoding),
	"b64rawurl": decodeB64(base64.RawURLEncoding),
	"html":      func(s string) (string, bool) { return html.UnescapeString(s), true },
	"card": func(s string) (string, bool) {
		return strings.NewReplacer(" ", "", "-", "", "+", "", "%20", "", "&nbsp;", "", "&#160;", "", `\u00a0`, "", "\u00a0", "").Replace(s), true
	},
}

func decodeB64(enc *base64.Encoding) func(string) (string, bool) {
	return func(s string) (string, bool) {
		b, err := enc.DecodeString(s)
		return string(b), err == nil
	}
}

func TestP10_ScrubVariants(t *testing.T) {
	cases := []struct {
		name, real, standIn string
		mustHave            []string // encodings of real that must be listed
	}{
		{"password", realPW, "Q@rs/x>ab<&'z\"", []string{
			url.QueryEscape(realPW), url.PathEscape(realPW),
			`p@ss/w\u003crd\u003e\u0026\"x'y`, `p@ss/w<rd>&\"x'y`, `p@ss\/w\u003crd\u003e\u0026\"x'y`,
			base64.StdEncoding.EncodeToString([]byte(realPW)), base64.RawURLEncoding.EncodeToString([]byte(realPW)),
			html.EscapeString(realPW), "p@ss/w&lt;rd&gt;&amp;&quot;x&apos;y", "p@ss/w&#60;rd&#62;&#38;&#34;x&#39;y",
			"&#112;&#64;", `\u0070\u0040`, `p\u0040ss\u002fw\u003crd`, "P@SS/W<RD>",
		}},
		{"visa", realNumber, "4111119999991111", []string{
			"4111 1111 1111 1111", "4111-1111-1111-1111", "4111+1111+1111+1111", "4111%201111", "4111&nbsp;1111", `4111\u00a01111`, "&#52;&#49;&#49;&#49;", `\u0034\u0031`, "NDExMTExMTExMTExMTExMQ==",
			"4111\u00a01111", `\u0034\u0031\u0031`,
		}},
		{"amex", "378282246310005", "378282999990005", []string{"3782 822463 10005", "3782-822463-10005", "3782 8224 6310 005"}},
		{"diners", "30569309025904", "30569399995904", []string{"3056 930902 5904", "3056 9309 0259 04"}},
		{"cvv", realCVV, standInCVV, []string{"&#55;&#51;&#55;", "NzM3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vs := ScrubVariants([]byte(tc.real), []byte(tc.standIn))
			if string(vs[0][0]) != tc.real || string(vs[0][1]) != tc.standIn {
				t.Fatal("raw pair not first")
			}
			listed := map[string]bool{}
			for _, v := range vs {
				if listed[string(v[0])] {
					t.Fatalf("duplicate variant %s", show(v[0]))
				}
				listed[string(v[0])] = true
				// Each pair is one encoding applied to both values.
				if !explained(tc.real, tc.standIn, v) {
					t.Fatalf("pair %s -> %s is not one encoding of real and stand-in", show(v[0]), show(v[1]))
				}
			}
			for _, m := range tc.mustHave {
				found := false
				for v := range listed {
					if strings.Contains(v, m) {
						found = true
					}
				}
				if !found {
					t.Fatalf("no variant contains %s", show(m))
				}
			}
		})
	}
}

// TestP10_ScrubVariantsScrubEverywhere builds a scrubber from the variants,
// as the proxy does, and checks a page carrying the value in every encoding
// comes out without it.
func TestP10_ScrubVariantsScrubEverywhere(t *testing.T) {
	vs := ScrubVariants([]byte(realPW), []byte("Q@rs/x>ab<&'z\""))
	var scrub naiveReplacer
	for _, v := range vs {
		scrub.pairs = append(scrub.pairs, [2]string{string(v[0]), string(v[1])})
	}
	var page bytes.Buffer
	for _, v := range vs {
		page.WriteString("<p>" + string(v[0]) + "</p>\n")
	}
	out, _, err := ScrubBody("text/html", "gzip", compress(t, "gzip", page.Bytes()), scrub, 0)
	if err != nil {
		t.Fatal(err)
	}
	plain := decompress(t, "gzip", out)
	for _, v := range vs {
		if bytes.Contains(plain, v[0]) {
			t.Fatalf("an encoding of the real value (%d bytes) survived", len(v[0]))
		}
	}
}

// explained reports whether pair is one encoding ScrubVariants knows applied
// to real and to standIn alike.
func explained(real, standIn string, pair [2][]byte) bool {
	one := func(r, s string) bool {
		for _, dec := range decoders {
			dr, ok1 := dec(r)
			ds, ok2 := dec(s)
			if ok1 && ok2 && dr == real && ds == standIn {
				return true
			}
		}
		// Upper-casing cannot be undone: check it forwards.
		return r == strings.ToUpper(real) && s == strings.ToUpper(standIn)
	}
	r, s := string(pair[0]), string(pair[1])
	if one(r, s) {
		return true
	}
	// Inside a larger base64 document, at one of three alignments.
	for a, esc := range [...]int{0, 1, 2, 0, 1, 2, 0, 1, 2} {
		real, standIn := []byte(real), []byte(standIn)
		if esc := a / 3; esc > 0 {
			real, standIn = jsonEscape(real, esc == 1), jsonEscape(standIn, esc == 1)
		}
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			ir, is := string(base64Inner(enc, real, esc)), string(base64Inner(enc, standIn, esc))
			if r == ir && s == is || r == strings.ReplaceAll(ir, "/", `\/`) && s == strings.ReplaceAll(is, "/", `\/`) {
				return true
			}
		}
	}
	// UTF-16 of another known form.
	for _, le := range []bool{true, false} {
		dr, ok1 := fromUTF16([]byte(r), le)
		ds, ok2 := fromUTF16([]byte(s), le)
		if ok1 && ok2 && one(dr, ds) {
			return true
		}
	}
	return false
}

func fromUTF16(b []byte, littleEndian bool) (string, bool) {
	if len(b)%2 != 0 {
		return "", false
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		if littleEndian {
			u[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
		} else {
			u[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
		}
	}
	return string(utf16.Decode(u)), true
}
