package intercept

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/tokens"
)

// Benchmarks of proxyd's own work on a small keep-alive request (issue 12),
// without the network and TLS around it that BenchmarkKeepAliveScrubbed
// and BenchmarkProxy measure too:
//
//	go test -run '^$' -bench 'Hot' -benchmem ./intercept/

// BenchmarkHotScrubResponse: an ordinary answer (a few headers, 1 KiB of
// HTML) from a host that was sent values, none of them in it.
func BenchmarkHotScrubResponse(b *testing.B) {
	s := &Server{cfg: Config{MaxBodyBytes: 10 << 20}}
	sc := testScrubber()
	page := []byte(strings.Repeat("<p>nothing secret here, just a page</p>\n", 26)[:1024])
	h := http.Header{
		"Content-Type":              {"text/html; charset=utf-8"},
		"Cache-Control":             {"private, max-age=0, no-cache"},
		"Etag":                      {`"5f3a9c1e2b"`},
		"Server":                    {"shop/1.0"},
		"Strict-Transport-Security": {"max-age=31536000; includeSubDomains"},
		"X-Content-Type-Options":    {"nosniff"},
		"Vary":                      {"Accept-Encoding, Cookie"},
		"Set-Cookie":                {"session=Zm9vYmFyYmF6cXV4; Path=/; Secure; HttpOnly"},
		"Date":                      {"Tue, 01 Dec 2026 17:37:00 GMT"},
		"Content-Length":            {"1024"},
	}
	b.ReportAllocs()
	for b.Loop() {
		resp := &http.Response{Status: "200 OK", StatusCode: 200, Header: h.Clone(), ContentLength: int64(len(page)),
			Body: io.NopCloser(bytes.NewReader(page))}
		out, err := s.scrubResponse(sc, http.MethodGet, resp)
		if err != nil {
			b.Fatal(err)
		}
		out.Body.Close()
	}
}

// BenchmarkHotHiddenValues: the hidden-value check of a GET with the
// headers a browser sends, in a session holding a card's token and
// stand-ins.
func BenchmarkHotHiddenValues(b *testing.B) {
	s := &Server{cfg: Config{MaxBodyBytes: 10 << 20}}
	var pats []tokens.Pattern
	for i, v := range []string{"av_card_1_number_u7x2k", "4242420000004242", "4242 4200 0000 4242", "4242-4200-0000-4242", "Tr0ub4dor&3xyz!"} {
		pats = append(pats, tokens.Pattern{Value: []byte(v), ID: i})
	}
	rm := &requestMatch{valueMatch: &valueMatch{long: tokens.NewMatcher(pats)}}
	u, _ := url.Parse("https://shop.test/products/blue-shirt?ref=home&utm_source=news")
	req := &http.Request{Method: http.MethodGet, URL: u, Header: browserHeader()}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.hiddenValues(rm, req, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHotCheckRawHeader: the raw header check of a browser's GET.
func BenchmarkHotCheckRawHeader(b *testing.B) {
	var raw strings.Builder
	raw.WriteString("GET /products/blue-shirt?ref=home HTTP/1.1\r\nHost: shop.test\r\n")
	for k, vs := range browserHeader() {
		for _, v := range vs {
			raw.WriteString(k + ": " + v + "\r\n")
		}
	}
	raw.WriteString("\r\n")
	r := strings.NewReader(raw.String())
	br := bufio.NewReaderSize(r, maxHeaderBytes+4096)
	b.ReportAllocs()
	for b.Loop() {
		r.Seek(0, io.SeekStart)
		br.Reset(r)
		if err := checkRawHeader(br); err != nil {
			b.Fatal(err)
		}
	}
}

func browserHeader() http.Header {
	return http.Header{
		"User-Agent":         {"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"},
		"Accept":             {"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"},
		"Accept-Language":    {"en-US,en;q=0.9"},
		"Accept-Encoding":    {"gzip, deflate, br, zstd"},
		"Referer":            {"https://shop.test/"},
		"Cookie":             {"session=Zm9vYmFyYmF6cXV4; cart=3; consent=yes"},
		"Sec-Fetch-Dest":     {"document"},
		"Sec-Fetch-Mode":     {"navigate"},
		"Sec-Fetch-Site":     {"same-origin"},
		"Sec-Ch-Ua":          {`"Chromium";v="131", "Not_A Brand";v="24"`},
		"Sec-Ch-Ua-Mobile":   {"?0"},
		"Sec-Ch-Ua-Platform": {`"Linux"`},
		"Priority":           {"u=0, i"},
	}
}

// isHopByHop's length shortcut answers as the plain case-folding
// comparison with every name in hopByHop does.
func TestIsHopByHop_AsCaseFolding(t *testing.T) {
	names := []string{"", "Te", "TE", "te", "Tf", "Connection", "connection", "CONNECTION", "User-Agent",
		"Keep-Alive", "\u212Aeep-Alive", "Proxy-Authorization", "proxy-authenticate", "Trailer", "Referer",
		"Transfer-Encoding", "Upgrade", "Proxy-Connection", "Content-Type", "Set-Cookie", "ſet-Cookie",
		strings.Repeat("x", 70), "Expect", "Host"}
	for _, n := range names {
		want := false
		for _, h := range hopByHop {
			want = want || strings.EqualFold(h, n)
		}
		if got := isHopByHop(n); got != want {
			t.Errorf("isHopByHop(%q) = %v, want %v", n, got, want)
		}
	}
}
