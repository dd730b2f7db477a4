package intercept

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/intercept/rewrite"
	"github.com/agentvault/agentvault/tokens"
	"github.com/agentvault/agentvault/vault"
)

// benchMatch is a session's request matcher for a card number and a login
// password, without a broker: its values, and the real value of each.
func benchMatch() (*requestMatch, [][]byte) {
	vals := []string{"av_card_1_number_u7x2k", "4242420000004242", "4242 4200 0000 4242", "4242-4200-0000-4242",
		"av_login_bench_password_u7x2k", "CwnbcKbyyp1zdQxyEkmv0317"}
	reals := [][]byte{[]byte("4242424242424242"), []byte("4242424242424242"), []byte("4242 4242 4242 4242"), []byte("4242-4242-4242-4242"),
		[]byte("BenchPassw0rdForEcho2026"), []byte("BenchPassw0rdForEcho2026")}
	return requestMatchOf(vals, make([]reqPattern, len(vals))), reals
}

// echoBody is bench/'s 1 MiB JSON echo body carrying v.
func echoBody(v string) []byte {
	head := `{"card":"` + v + `","name":"Bench User","email":"bench@example.test","amount":42.0,"pad":"`
	return []byte(head + strings.Repeat("x", 1<<20-len(head)-2) + `"}`)
}

// BenchmarkHotBody1MiB is proxyd's own work on bench/'s 1 MiB JSON echo
// (no network, no TLS, no broker): the request body's substitution and
// hidden-value check ("request"), and the echoed response's scrub
// ("response", streamed as a body over 256 KiB is), for a body carrying a
// login stand-in and for one carrying nothing of the session.
//
//	go test -run '^$' -bench HotBody1MiB -benchmem -cpuprofile cpu.out ./intercept/
func BenchmarkHotBody1MiB(b *testing.B) {
	s := &Server{cfg: Config{MaxBodyBytes: 10 << 20}}
	rm, reals := benchMatch()
	sc := newScrubber([]released{
		{real: vault.NewSecret([]byte("4242424242424242")), standIn: "4242420000004242", kind: vault.KindCard},
		{real: vault.NewSecret([]byte("BenchPassw0rdForEcho2026")), standIn: "CwnbcKbyyp1zdQxyEkmv0317", kind: vault.KindLogin},
	})
	u, _ := url.Parse("https://bench.test/echo")
	b.Run("copy", func(b *testing.B) { // the reference: what reading the body costs on top of TLS
		body, work := echoBody(""), make([]byte, 1<<20)
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			copy(work, body)
		}
	})
	for _, c := range []struct{ name, v string }{{"standin", "CwnbcKbyyp1zdQxyEkmv0317"}, {"none", "nothing-of-the-session"}} {
		body := echoBody(c.v)
		b.Run("request-"+c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			req := &http.Request{Method: http.MethodPost, URL: u, Header: http.Header{"Content-Type": {"application/json"}}}
			work := make([]byte, len(body))
			for b.Loop() {
				copy(work, body) // the body as read, which substituteRequest rewrites over
				r := checkedReplacer{tokens.NewReplacer(rm.m, func(id int) ([]byte, error) { return reals[id], nil })}
				if _, err := s.substituteBody(rm, req, work, r); err != nil {
					b.Fatal(err)
				}
			}
		})
		echo := bytes.ReplaceAll(body, []byte(c.v), []byte("BenchPassw0rdForEcho2026"))
		b.Run("response-"+c.name, func(b *testing.B) {
			b.SetBytes(int64(len(echo)))
			b.ReportAllocs()
			buf := make([]byte, 32<<10)
			for b.Loop() {
				resp := &http.Response{Status: "200 OK", StatusCode: 200, ContentLength: int64(len(echo)),
					Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(echo))}
				out, err := s.scrubResponse(sc, http.MethodPost, resp)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.CopyBuffer(io.Discard, out.Body, buf); err != nil {
					b.Fatal(err)
				}
				out.Body.Close()
			}
		})
	}
}

// TestP9_BodyFastPathAgreesWithFullPath: a large body the fast path takes
// (requestMatch.holdsNothing) is one the full path would forward as it is,
// and substituteBody answers as the full path does (rewrite.Body, then
// hiddenValues on its result) whichever way it goes: the same bytes
// upstream, or the same refusal. Each body is a small document with a
// value of the session (plain, short, in base64, percent-, JSON- or
// HTML-escaped, a token shape the session did not authorize, pieces of
// them) at each position, padded past the size the fast path starts at,
// under several media types and a gzip coding.
func TestP9_BodyFastPathAgreesWithFullPath(t *testing.T) {
	s := &Server{cfg: Config{MaxBodyBytes: 10 << 20}}
	vals := []string{"av_card_1_number_u7x2k", "4242420000004242", "4242 4200 0000 4242", "CwnbcKbyyp1zdQxyEkmv0317", "123"}
	reals := []string{"4242424242424242", "4242424242424242", "4242 4242 4242 4242", "BenchPassw0rdForEcho2026", "737"}
	rm := requestMatchOf(vals, make([]reqPattern, len(vals)))
	b64 := func(v string) string { return base64.StdEncoding.EncodeToString([]byte(v)) }
	inserts := []string{"", "plain words", "av_", "AV_x", "av_login_shop_password_abcde", "x123x", "1234", "%41", "+", `\u0041`, "&amp;",
		b64("av_card_1_number_u7x2k"), b64("zz" + vals[3]), b64("av_"), "Zm9vYmFy", vals[3][:10], vals[1][4:]}
	for _, v := range vals {
		inserts = append(inserts, v, url.QueryEscape(v), strings.ReplaceAll(v, "_", `\u005f`), strings.ReplaceAll(v, "a", "&#97;"))
	}
	heads := []struct{ ct, doc string }{
		{"application/json", `{"a":"xx","n":12,"b":["yy",3]}`},
		{"text/plain", "one two, three"},
		{"application/x-www-form-urlencoded", "a=xx&b=yy"},
		{"multipart/form-data; boundary=zz", "--zz\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nxx\r\n--zz--\r\n"},
	}
	pad := strings.Repeat("x", joinViewMax+1)
	u, _ := url.Parse("https://bench.test/echo")
	fast, full := 0, 0
	for _, h := range heads {
		for _, ce := range []string{"", "gzip"} {
			for i := 0; i <= len(h.doc); i++ {
				if ce != "" && (h.ct != "application/json" || i%4 != 0) {
					continue // a coded body never takes the fast path: a few suffice
				}
				for _, ins := range inserts {
					doc := h.doc + pad
					if h.ct == "application/json" {
						doc = h.doc[:len(h.doc)-1] + `,"pad":"` + pad + `"}`
					}
					plain := []byte(doc[:i] + ins + doc[i:])
					body := plain
					if ce == "gzip" {
						var buf bytes.Buffer
						zw := gzip.NewWriter(&buf)
						zw.Write(plain)
						zw.Close()
						body = buf.Bytes()
					}
					req := &http.Request{Method: http.MethodPost, URL: u, Header: http.Header{"Content-Type": {h.ct}}}
					if ce != "" {
						req.Header.Set("Content-Encoding", ce)
					}
					r := checkedReplacer{tokens.NewReplacer(rm.m, func(id int) ([]byte, error) { return []byte(reals[id]), nil })}
					want, n, werr := rewrite.Body(h.ct, ce, body, r, s.cfg.MaxBodyBytes)
					if werr == nil {
						werr = s.hiddenValues(rm, req, want)
					}
					name := fmt.Sprintf("%s %s %q at %d", h.ct, ce, ins, i)
					if rm.holdsNothing(h.ct, ce, body) {
						fast++
						if werr != nil || n != 0 || !bytes.Equal(want, body) {
							t.Fatalf("%s: fast path taken, but the full path gives %d changes, error %v", name, n, werr)
						}
					} else {
						full++
					}
					got, gerr := s.substituteBody(rm, req, bytes.Clone(body), r)
					if agentvault.ErrorCode(gerr) != agentvault.ErrorCode(werr) || (gerr == nil) != (werr == nil) {
						t.Fatalf("%s: error %v, the full path's %v", name, gerr, werr)
					}
					if werr == nil && !bytes.Equal(got, want) {
						t.Fatalf("%s: body differs from the full path's", name)
					}
				}
			}
		}
	}
	if !rm.holdsNothing("application/json", "", echoBody("nothing-of-the-session")) {
		t.Fatal("bench/'s echo body without a value does not take the fast path")
	}
	if fast < 50 || full < 50 {
		t.Fatalf("fast path %d times, full path %d: both must be exercised", fast, full)
	}
	t.Logf("fast path %d, full path %d", fast, full)
}
