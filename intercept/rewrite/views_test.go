package rewrite

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

func TestP9_EncodedViewsExposeHiddenTokens(t *testing.T) {
	cases := map[string]string{
		"xml entity":          "<n>&#97;v_card_1_number_u7x2k</n>",
		"json in text":        `note: {"n":"\u0061v_card_1_number_u7x2k"}`,
		"percent in text":     "see av%5Fcard%5F1%5Fnumber%5Fu7x2k",
		"json inside a form":  "data=%7B%22n%22%3A%22%5Cu0061v_card_1_number_u7x2k%22%7D",
		"html named entities": "x&lt;av_card_1_number_u7x2k&gt;",
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			found := strings.Contains(body, tokNumber)
			for _, v := range EncodedViews([]byte(body)) {
				found = found || strings.Contains(string(v), tokNumber)
			}
			if !found {
				t.Fatal("token not visible in any view")
			}
		})
	}
	if v := EncodedViews([]byte("plain text")); len(v) != 0 {
		t.Fatalf("%d views of text with nothing to decode", len(v))
	}
}

func TestP9_DecodeMatchesBody(t *testing.T) {
	plain := []byte(`{"a":"` + tokNumber + `"}`)
	got, err := Decode("zstd, gzip", compress(t, "gzip", compress(t, "zstd", plain)), 0)
	if err != nil || string(got) != string(plain) {
		t.Fatalf("Decode: %v", err)
	}
}

// TestP9_TokenUnderBase64IsFound: a token or long stand-in base64-encoded,
// alone or inside a larger document, in either alphabet, padded or not, at
// any byte offset, is in one of the views the proxy scans, and a view of a
// large body costs a bounded multiple of its size.
func TestP9_TokenUnderBase64IsFound(t *testing.T) {
	encs := map[string]*base64.Encoding{"std": base64.StdEncoding, "url": base64.URLEncoding, "rawstd": base64.RawStdEncoding, "rawurl": base64.RawURLEncoding}
	for _, secret := range []string{tokNumber, standInPW, "4111119999991111"} {
		for name, enc := range encs {
			for pad := range 3 {
				doc := `{"sub":"` + strings.Repeat("u", pad) + `","card":"` + secret + `","note":"<a/b>?"}`
				b64 := enc.EncodeToString([]byte(doc))
				jwt := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + b64 + ".c2ln"
				cases := map[string]string{
					"bearer":           "Authorization: Bearer " + b64,
					"basic":            "Authorization: Basic " + enc.EncodeToString([]byte(strings.Repeat("u", pad)+":"+secret)),
					"alone":            `{"v":"` + enc.EncodeToString([]byte(secret)) + `"}`,
					"jwt in json":      `{"id_token":"` + jwt + `"}`,
					"json slash":       `{"blob":"` + strings.ReplaceAll(b64, "/", `\/`) + `"}`,
					"form":             "x=1&blob=" + url.QueryEscape(b64) + "&y=2",
					"glued to letters": "data=abc" + b64,
				}
				for where, body := range cases {
					t.Run(fmt.Sprintf("%s/%s/%d/%s", show(secret), name, pad, where), func(t *testing.T) {
						found := false
						for _, v := range EncodedViews([]byte(body)) {
							found = found || strings.Contains(string(v), secret)
						}
						if !found {
							t.Fatal("value not visible in any view")
						}
					})
				}
			}
		}
	}

	t.Run("bounded on a large body", func(t *testing.T) {
		var big bytes.Buffer
		for big.Len() < 1<<20 {
			big.WriteString(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xef, 0xbe}, 300)))
			big.WriteString("%2B")
		}
		total := 0
		for _, v := range EncodedViews(big.Bytes()) {
			total += len(v)
		}
		if total > 8*big.Len() {
			t.Fatalf("views of a %d-byte body take %d bytes", big.Len(), total)
		}
		words := []byte(strings.Repeat("short words only, none ten long. ", 30000))
		if v := EncodedViews(words); len(v) != 0 {
			t.Fatalf("%d views of text without a base64 run", len(v))
		}
	})
}

// TestP9_Base64ViewsMatchDecodingEachOffset: the views read off one
// decoding of each run (shifted bits) are byte for byte the views of
// decoding each run from each of its first four characters, the
// definition, for runs of every length mod 4 in either alphabet, several
// runs per body.
func TestP9_Base64ViewsMatchDecodingEachOffset(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_"
	seed := uint32(7)
	next := func() uint32 { seed = seed*1664525 + 1013904223; return seed >> 8 }
	for n := 0; n < 400; n++ {
		var b []byte
		for range 1 + int(next()%4) {
			for range int(next() % 90) {
				b = append(b, alphabet[next()%uint32(len(alphabet))])
			}
			b = append(b, " .=\"%"[next()%5])
		}
		var want [][]byte
		runs := base64Runs(nil, b)
		if len(runs) > 0 {
			for k := range 4 {
				var v []byte
				for i, r := range runs {
					if i > 0 {
						v = append(v, '\n')
					}
					v = decodeBase64Run(v, b[r[0]+k:r[1]])
				}
				want = append(want, v)
			}
		}
		got := appendBase64Views(nil, b, 4)
		if len(got) != len(want) {
			t.Fatalf("%q: %d views, want %d", b, len(got), len(want))
		}
		for k := range want {
			if !bytes.Equal(got[k], want[k]) {
				t.Fatalf("%q: view %d\n got %x\nwant %x", b, k, got[k], want[k])
			}
		}
	}
}

// BenchmarkEncodedViews1MiB: the views of a 1 MiB JSON body whose padding
// is one long base64-alphabet run (the bench harness's echo body).
func BenchmarkEncodedViews1MiB(b *testing.B) {
	body := []byte(`{"card":"av_card_1_number_x","amount":42.0,"pad":"` + strings.Repeat("x", 1<<20) + `"}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		EncodedViews(body)
	}
}

// TestP9_EachEncodedViewMatchesEncodedViews: EachEncodedView hands fn
// EncodedViews's views, one a call, byte for byte, in the same order.
func TestP9_EachEncodedViewMatchesEncodedViews(t *testing.T) {
	bodies := []string{
		"plain text",
		`{"a":"` + base64.StdEncoding.EncodeToString([]byte(tokNumber)) + `","b":"x\/y` + strings.Repeat("Q", 37) + `"}`,
		"x=1&blob=" + url.QueryEscape(base64.StdEncoding.EncodeToString([]byte(`{"n":"`+tokNumber+`"}`))) + "&y=a%2Bb+c",
		"<n>&#97;v_card&amp;" + strings.Repeat("abcdefghij", 9) + "</n> data=abc" + base64.RawURLEncoding.EncodeToString([]byte(standInPW)),
		strings.Repeat("xyz0123456789-_", 400) + " " + strings.Repeat("QUJD", 10),
	}
	for i, body := range bodies {
		want := EncodedViews([]byte(body))
		var got [][]byte
		EachEncodedView([]byte(body), func(v []byte) bool {
			got = append(got, bytes.Clone(v))
			return true
		})
		if len(got) != len(want) {
			t.Fatalf("body %d: %d calls, %d views", i, len(got), len(want))
		}
		for k := range want {
			if !bytes.Equal(got[k], want[k]) {
				t.Fatalf("body %d: call %d\n%q\nview\n%q", i, k, got[k], want[k])
			}
		}
	}
}
