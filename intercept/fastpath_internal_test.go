package intercept

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/intercept/rewrite"
	"github.com/agentvault/agentvault/tokens"
)

// The fast paths of issue 12 that read names and media types without
// copying them must answer as the copying code they replaced.

func TestLowerIsMatchesToLower(t *testing.T) {
	for _, name := range []string{"Content-Length", "content-length", "CONTENT-LENGTH", "Content-Lengt", "Content-Lengths",
		"Transfer-Encodİng", "Transfer-Encoding", "Connection", "Conneçtion", "", "\xff", "Trans\u212Afer"} {
		for _, lower := range []string{"content-length", "transfer-encoding", "connection"} {
			if got, want := lowerIs([]byte(name), lower), strings.ToLower(name) == lower; got != want {
				t.Errorf("lowerIs(%q, %q) = %v, want %v", name, lower, got, want)
			}
		}
	}
}

// FuzzP8_RawHeaderCheckMatchesReference holds checkRawHeader, which reads
// the header block in place, to the version that split a copy of it into
// strings: the same refusals with the same reasons.
func FuzzP8_RawHeaderCheckMatchesReference(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\ncontent-length: 3\r\n\r\nabc",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \u212Aunked\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n",
		"GET / HTTP/1.1\nHost: a\n\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: close, X-Card\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: Keep-Alive\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encodİng: gzip\r\n\r\n", // "İ" lower-cases to "i"
		"GET / HTTP/1.1\r\nHost a\r\n\r\n", "GET / HTTP/1.1\r\nX Y: a\r\n\r\n", "GET / HTTP/1.1\r\n: a\r\n\r\n",
		"GET / HTTP/1.1\r\n\r\n", "\r\n\r\n", "\n\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got := checkRawHeader(bufio.NewReaderSize(strings.NewReader(raw), maxHeaderBytes+4096))
		want := checkRawHeaderRef(bufio.NewReaderSize(strings.NewReader(raw), maxHeaderBytes+4096))
		if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
			t.Fatalf("%q: got %v, want %v", raw, got, want)
		}
	})
}

// checkRawHeaderRef is checkRawHeader as it was before issue 12.
func checkRawHeaderRef(br *bufio.Reader) error {
	bad := func(why string) error { return agentvault.Errorf(agentvault.CodeMalformedRequest, "%s", why) }
	var block []byte
	for n := 1; ; {
		b, err := br.Peek(n)
		if buffered := min(br.Buffered(), maxHeaderBytes); buffered > len(b) {
			b, _ = br.Peek(buffered)
		}
		if i := indexHeaderEnd(b); i >= 0 {
			block = b[:i]
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) || n >= maxHeaderBytes {
			return bad("request header too large")
		}
		if err != nil {
			return agentvault.Wrap(agentvault.CodeTimeout, err, "request header not received")
		}
		n = min(len(b)+1, maxHeaderBytes)
	}
	lines := strings.Split(string(block[:len(block)-1]), "\n")
	cl, te := 0, 0
	for i, line := range lines {
		if !strings.HasSuffix(line, "\r") {
			return bad("bare LF in request header")
		}
		line = strings.TrimSuffix(line, "\r")
		if i == 0 || line == "" {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			return bad("obsolete header line folding")
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return bad("malformed header line")
		}
		value = strings.TrimSpace(value)
		switch strings.ToLower(name) {
		case "content-length":
			cl++
		case "transfer-encoding":
			te++
			if !strings.EqualFold(value, "chunked") {
				return bad("unsupported transfer encoding")
			}
		case "connection":
			for _, tok := range strings.Split(value, ",") {
				switch strings.ToLower(strings.TrimSpace(tok)) {
				case "", "keep-alive", "close", "upgrade":
				default:
					return bad("Connection header names an end-to-end header")
				}
			}
		}
	}
	if cl > 1 || te > 1 || (cl > 0 && te > 0) {
		return bad("ambiguous message length")
	}
	return nil
}

// hiddenRef is the per-view, per-piece check hiddenValues runs when
// hiddenClean finds something: true when it finds nothing.
func hiddenRef(rm *requestMatch, views [][]byte) bool {
	clean := func(v []byte) bool { return !containsTokenShape(v) && !rm.long.Contains(v) }
	for _, v := range views {
		if !clean(v) {
			return false
		}
	}
	for _, v := range views {
		if !rewrite.EachEncodedView(v, clean) {
			return false
		}
	}
	return true
}

func hiddenTestMatch() (*requestMatch, []string) {
	vals := []string{"av_card_1_number_u7x2k", "4242420000004242", "4242 4200 0000 4242", "Tr0ub4dor&3xyz!"}
	var pats []tokens.Pattern
	for i, v := range vals {
		pats = append(pats, tokens.Pattern{Value: []byte(v), ID: i})
	}
	return &requestMatch{valueMatch: &valueMatch{long: tokens.NewMatcher(pats), hide: hidePrefilter(pats)}}, vals
}

// TestP9_HiddenValuesOnePassKeepsRefusals: a token or stand-in behind an
// encoding in a header (base64 at any offset, percent or HTML escapes) is
// still refused, with the code the per-piece checks give.
func TestP9_HiddenValuesOnePassKeepsRefusals(t *testing.T) {
	s := &Server{cfg: Config{MaxBodyBytes: 10 << 20}}
	rm, _ := hiddenTestMatch()
	b64 := func(v string) string { return base64.StdEncoding.EncodeToString([]byte(v)) }
	cases := []struct {
		name, header string
		code         agentvault.Code // "": passes
	}{
		{"plain header", "text/html, */*", ""},
		{"ordinary base64", b64("just a session id, nothing else"), ""},
		{"token", "Bearer av_card_1_number_u7x2k", agentvault.CodeTokenNotAllowed},
		{"token in base64", "Bearer " + b64("av_card_1_number_u7x2k"), agentvault.CodeTokenNotAllowed},
		{"token in base64 glued", "Bearer x" + b64("{\"t\":\"av_card_1_number_u7x2k\"}"), agentvault.CodeTokenNotAllowed},
		{"other token shape in base64", b64("av_login_shop_password_abcde"), agentvault.CodeTokenNotAllowed},
		{"stand-in in base64", b64("user:4242420000004242"), agentvault.CodeSubstitution},
		{"stand-in percent-encoded", "q=4242%20" + "4200%200000%204242", agentvault.CodeSubstitution},
		{"stand-in HTML-escaped", "Tr0ub4dor&amp;3xyz!", agentvault.CodeSubstitution},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, _ := url.Parse("https://shop.test/p?x=1")
			req := &http.Request{URL: u, Header: http.Header{"Accept": {"*/*"}, "X-Test": {tc.header}}}
			err := s.hiddenValues(rm, req, nil)
			if got := agentvault.ErrorCode(err); err != nil && got != tc.code || err == nil && tc.code != "" {
				t.Fatalf("got %v, want code %q", err, tc.code)
			}
		})
	}
}

// TestP9_HiddenValuesOnePassAgreesWithPieces: on views built at random from
// the session's values, their encodings and fragments, hiddenClean never
// says clean where a piece holds something.
func TestP9_HiddenValuesOnePassAgreesWithPieces(t *testing.T) {
	rm, vals := hiddenTestMatch()
	var bits []string
	for _, v := range vals {
		bits = append(bits, v, v[:5], v[5:], base64.StdEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte("x"+v)),
			url.QueryEscape(v), strings.ReplaceAll(v, "&", "&amp;"), strings.ReplaceAll(v, "_", `\u005f`))
	}
	bits = append(bits, "a", "Zm9v", "==", "%", "+", "\n", " ", "&", ";", "\\", "_", "av", "AAAAAAAAAA", "/", "-")
	rnd := rand.New(rand.NewPCG(9, 0))
	pad := strings.Repeat("x", joinViewMax)
	found := 0
	for range 3000 {
		var views [][]byte
		for range 1 + rnd.IntN(2) {
			var b strings.Builder
			big := rnd.IntN(3) == 0 // a view past joinViewMax, scanned alone
			n := rnd.IntN(8)
			for i := range n {
				if big && i == n/2 {
					b.WriteString(pad)
				}
				b.WriteString(bits[rnd.IntN(len(bits))])
			}
			if big && n == 0 {
				b.WriteString(pad)
			}
			views = append(views, []byte(b.String()))
		}
		ref := hiddenRef(rm, views)
		if !ref {
			found++
		}
		if ref != hiddenClean(rm, views) && !ref {
			t.Fatalf("one pass missed what the pieces hold in %q", views)
		}
	}
	if found < 100 {
		t.Fatalf("only %d of the random views hold something: the test proves little", found)
	}
}

func TestReadPastEndMatchesLimitedCopy(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name  string
		reads []readResult
	}{
		{"eof", []readResult{{0, io.EOF}}},
		{"empty then eof", []readResult{{0, nil}, {0, io.EOF}}},
		{"extra byte", []readResult{{1, nil}, {0, io.EOF}}},
		{"extra byte and error", []readResult{{1, boom}}},
		{"extra byte and eof", []readResult{{1, io.EOF}}},
		{"error", []readResult{{0, nil}, {0, boom}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, want := io.Copy(io.Discard, io.LimitReader(&scriptedReader{reads: tc.reads}, 1))
			if got := readPastEnd(&scriptedReader{reads: tc.reads}); got != want {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}

type readResult struct {
	n   int
	err error
}

type scriptedReader struct{ reads []readResult }

func (s *scriptedReader) Read(p []byte) (int, error) {
	if len(s.reads) == 0 {
		return 0, io.EOF
	}
	r := s.reads[0]
	s.reads = s.reads[1:]
	return r.n, r.err
}

// scrubResponse deletes the hop-by-hop fields from the map directly, which
// is Header.Del only for names already in canonical form.
func TestHopByHopNamesCanonical(t *testing.T) {
	for _, h := range hopByHop {
		if http.CanonicalHeaderKey(h) != h {
			t.Errorf("%q is not canonical", h)
		}
	}
}

// TestP9_HiddenValuesLargeBodyBase64: in a body too large to join (over
// joinViewMax), a token or a long stand-in under base64 at any offset, in
// either alphabet, is still refused although a body without one is not
// decoded (the base64 prefilter); an ordinary large body passes.
func TestP9_HiddenValuesLargeBodyBase64(t *testing.T) {
	s := &Server{cfg: Config{MaxBodyBytes: 10 << 20}}
	rm, _ := hiddenTestMatch()
	pad := strings.Repeat("x", 2*joinViewMax)
	body := func(blob string) []byte {
		return []byte(`{"pad":"` + pad + `","blob":"` + blob + `","tail":"` + pad + `"}`)
	}
	cases := []struct {
		name string
		body []byte
		code agentvault.Code // "": passes
	}{
		{"padding", body("nothing here"), ""},
		{"ordinary base64", body(base64.StdEncoding.EncodeToString([]byte("a session blob, nothing else in it"))), ""},
		{"random base64", []byte(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xef, 0xbe, 0x01}, joinViewMax))), ""},
	}
	for i, v := range []string{"av_card_1_number_u7x2k", "AV_LOGIN_shop_PASSWORD_abcde", "4242420000004242", "Tr0ub4dor&3xyz!"} {
		code := agentvault.CodeSubstitution
		if strings.HasPrefix(strings.ToLower(v), "av_") {
			code = agentvault.CodeTokenNotAllowed
		}
		for j, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawURLEncoding} {
			for glue := range 3 {
				blob := strings.Repeat("Q", glue+i+j) + enc.EncodeToString([]byte(strings.Repeat("?", glue)+v+"~~"))
				cases = append(cases, struct {
					name string
					body []byte
					code agentvault.Code
				}{fmt.Sprintf("%s enc%d glue%d", v, j, glue), body(blob), code})
			}
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, _ := url.Parse("https://shop.test/p")
			req := &http.Request{URL: u, Header: http.Header{"Content-Type": {"application/json"}}}
			err := s.hiddenValues(rm, req, tc.body)
			if got := agentvault.ErrorCode(err); err != nil && got != tc.code || err == nil && tc.code != "" {
				t.Fatalf("got %v, want code %q", err, tc.code)
			}
		})
	}
}

// TestBase64PrefilterBuiltOnceUnderConcurrency: requests of one session
// sharing its matcher build the prefilter once, whoever comes first, and
// all get its answer (run with -race).
func TestBase64PrefilterBuiltOnceUnderConcurrency(t *testing.T) {
	_, vals := hiddenTestMatch()
	var long []tokens.Pattern
	for _, v := range vals {
		long = append(long, tokens.Pattern{Value: []byte(v)})
	}
	rm := &requestMatch{valueMatch: &valueMatch{longVals: long}}
	hidden := []byte("xx" + base64.StdEncoding.EncodeToString([]byte("zz4242420000004242")) + "xx")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if !rm.mayHideBase64(hidden) || rm.mayHideBase64([]byte(strings.Repeat("x", 64))) {
				t.Error("prefilter answer wrong under concurrency")
			}
		})
	}
	wg.Wait()
}

// TestBufConnLetsItsReaderGo: the peek reader in front of a tunnel's TLS
// layer hands out what it holds, then is dropped, and reads go to the
// connection (an idle tunnel keeps no 4 KiB buffer, P14).
func TestBufConnLetsItsReaderGo(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() { _, _ = a.Write([]byte("abc")) }()
	br := bufio.NewReaderSize(b, 4096)
	if _, err := br.Peek(3); err != nil {
		t.Fatal(err)
	}
	c := &bufConn{Conn: b, r: br}
	p := make([]byte, 8)
	if n, err := c.Read(p); err != nil || string(p[:n]) != "abc" {
		t.Fatalf("read %q, %v", p[:n], err)
	}
	go func() { _, _ = a.Write([]byte("de")) }()
	if n, err := c.Read(p); err != nil || string(p[:n]) != "de" {
		t.Fatalf("read %q, %v", p[:n], err)
	}
	if c.r != nil {
		t.Fatal("the drained reader is still held")
	}
}
