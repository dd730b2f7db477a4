package intercept

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/intercept/rewrite"
	"github.com/agentvault/agentvault/tokens"
	"github.com/agentvault/agentvault/vault"
)

// benchMatch is a session's request matcher as newRequestMatch builds it
// for a card number and a login password, without a broker: pattern IDs
// index reals.
func benchMatch() (*requestMatch, [][]byte) {
	vals := []string{"av_card_1_number_u7x2k", "4242420000004242", "4242 4200 0000 4242", "4242-4200-0000-4242",
		"av_login_bench_password_u7x2k", "CwnbcKbyyp1zdQxyEkmv0317"}
	reals := [][]byte{[]byte("4242424242424242"), []byte("4242424242424242"), []byte("4242 4242 4242 4242"), []byte("4242-4242-4242-4242"),
		[]byte("BenchPassw0rdForEcho2026"), []byte("BenchPassw0rdForEcho2026")}
	var pats []tokens.Pattern
	for i, v := range vals {
		pats = append(pats, tokens.Pattern{Value: []byte(v), ID: i})
	}
	return &requestMatch{m: tokens.NewMatcher(pats), long: tokens.NewMatcher(pats), longVals: pats}, reals
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
				out, _, err := rewrite.BodyInPlace("application/json", "", work, r, s.cfg.MaxBodyBytes)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.hiddenValues(rm, req, out); err != nil {
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
