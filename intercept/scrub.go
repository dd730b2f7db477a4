package intercept

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/intercept/rewrite"
	"github.com/agentvault/agentvault/vault"
	"golang.org/x/net/http/httpguts"
)

// scrubResponse replaces every real value released in the session (and its
// encodings) by its stand-in (P10) in everything the client sees of the
// response: the reason phrase, header names and values, the body and the
// trailers. A body of known length up to smallBody is scrubbed whole
// (decoded, by media type, then as text) and keeps a length; when nothing
// matched it goes on exactly as the site sent it, compression included. A
// longer or unsized body is decoded and scrubbed as a stream and sent on as
// identity, chunked.
//
// Trailers are scrubbed, not dropped: browsers do not show them to pages
// today, but other clients (curl, gRPC over h2) read them and keep their
// meaning. An HTTP/1.1 client gets them only after a chunked body (Go drops
// them after a sized one, as before). They are scrubbed in place once the body has been read to its
// end, which is when the transport fills them in, and before Response.Write
// (HTTP/1.1, chunked) or serveH2 sends them.
func (s *Server) scrubResponse(sc *scrubber, method string, resp *http.Response) (*http.Response, error) {
	for _, h := range hopByHop {
		delete(resp.Header, h) // Header.Del, less canonicalising what already is
	}
	if sc == nil {
		return resp, nil
	}
	hit := s.scrubHit
	// HTTP/1.1 "HTTP/1.1 200 <reason>": Response.Write sends resp.Status on.
	// The reason goes in the header's one scan (headerClean): most answers
	// hold no value anywhere there, and then no field is scanned alone.
	if code, reason, ok := strings.Cut(resp.Status, " "); !headerClean(sc, resp.Header, reason) {
		if nr, n := sc.apply([]byte(reason), hit); ok && n > 0 {
			resp.Status = code + " " + string(nr)
		}
		scrubFields(sc, resp.Header, hit)
	}
	scrubHeader(sc, resp.Trailer, hit) // the names a site announced in Trailer
	if method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
		return resp, nil // no body: the headers were all there was to scrub
	}
	coding := strings.Join(resp.Header.Values("Content-Encoding"), ",")
	if resp.ContentLength >= 0 && resp.ContentLength <= smallBody {
		raw := make([]byte, resp.ContentLength)
		_, err := io.ReadFull(resp.Body, raw)
		if err == nil {
			// Read on to the end, where an h2 site's trailers arrive.
			err = readPastEnd(resp.Body)
		}
		resp.Body.Close()
		if agentvault.ErrorCode(err) == agentvault.CodeEgressLost {
			return nil, err // the upstream proxy dropped it, not the site
		}
		if err != nil {
			return nil, agentvault.Wrap(agentvault.CodeUpstream, err, "the site's response was cut short")
		}
		scrubHeader(sc, resp.Trailer, hit)
		plain, err := rewrite.Decode(coding, raw, s.cfg.MaxBodyBytes)
		if err != nil {
			return nil, err
		}
		out, n := sc.body(resp.Header.Get("Content-Type"), plain, s.cfg.MaxBodyBytes, hit)
		if n == 0 {
			resp.Body = nopBody(raw)
			return resp, nil
		}
		resp.Body = nopBody(out)
		resp.Header.Del("Content-Encoding")
		resp.ContentLength = int64(len(out))
		resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
		return resp, nil
	}
	dec, err := rewrite.NewDecoder(coding, resp.Body, s.cfg.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	scrubbed := sc.reader(dec, hit)
	atEnd := &onEOF{r: scrubbed, fn: func() { scrubHeader(sc, resp.Trailer, hit) }}
	resp.Body = &readCloser{Reader: atEnd, closers: []io.Closer{scrubbed, dec, resp.Body}}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	return resp, nil
}

// scrubHeader scrubs a header (or trailer) map in place (scrubFields), after
// one scan of the whole map finds a value in it (headerClean).
func scrubHeader(sc *scrubber, h http.Header, hit func(vault.Kind)) {
	if len(h) == 0 || headerClean(sc, h, "") {
		return
	}
	scrubFields(sc, h, hit)
}

// scrubFields scrubs a header (or trailer) map in place: each value as
// text, and each name. A field name is case-insensitive (RFC 9110 section
// 5.1) and Go hands it on canonicalised, so a name is also scanned
// upper-cased, against the upper-cased form every value has among its
// variants (rewrite.ScrubVariants). A renamed field keeps its values under
// the canonical form of the new name; one whose new name is not a valid
// field name, or still holds a value, is dropped.
func scrubFields(sc *scrubber, h http.Header, hit func(vault.Kind)) {
	type rename struct{ from, to string }
	var renames []rename
	for k, vs := range h {
		for i, v := range vs {
			if nv, n := sc.apply([]byte(v), hit); n > 0 {
				vs[i] = string(nv)
			}
		}
		name, n := sc.apply([]byte(k), hit)
		if up, m := sc.apply(bytes.ToUpper(name), hit); m > 0 {
			name, n = up, n+m
		}
		if n > 0 {
			renames = append(renames, rename{k, http.CanonicalHeaderKey(string(name))})
		}
	}
	for _, r := range renames {
		vs := h[r.from]
		delete(h, r.from)
		if !httpguts.ValidHeaderFieldName(r.to) || sc.m.Contains(bytes.ToUpper([]byte(r.to))) || sc.m.Contains([]byte(r.to)) {
			continue
		}
		h[r.to] = append(h[r.to], vs...)
	}
}

// headerClean reports whether scrubFields would find nothing in h, nor
// sc.apply in extra: one scan of one buffer holding extra, then each name,
// the name upper-cased and each value, a line each, instead of a scan per
// field. A line break bounds a short value's match as the edge of a field
// does (tokens: it is a delimiter and not a word byte), so whatever
// scrubFields would find in a field is found here too. No field holds a
// line break (HTTP/1.1 and h2 both refuse one), so no value is found across
// two of them unless it holds one itself, and then the false alarm only
// costs the per-field scan, which finds it in no single field, as before.
func headerClean(sc *scrubber, h http.Header, extra string) bool {
	bp := headerBufs.Get().(*[]byte)
	b := append((*bp)[:0], extra...)
	for k, vs := range h {
		b = append(append(b, '\n'), k...)
		b = appendUpper(append(b, '\n'), k)
		for _, v := range vs {
			b = append(append(b, '\n'), v...)
		}
	}
	clean := !sc.m.Contains(b)
	clear(b) // it may hold a real value: that is what it was scanned for
	if cap(b) <= maxHeaderBytes {
		*bp = b[:0]
		headerBufs.Put(bp)
	}
	return clean
}

var headerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// appendUpper appends bytes.ToUpper(s) to b, without a copy for the usual
// ASCII name.
func appendUpper(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return append(b, bytes.ToUpper([]byte(s))...)
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

// readPastEnd reads r up to one byte more, which it drops, or to its end:
// io.Copy(io.Discard, io.LimitReader(r, 1)) without the allocations.
func readPastEnd(r io.Reader) error {
	var b [1]byte
	for {
		n, err := r.Read(b[:])
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		case n > 0:
			return nil
		}
	}
}

// onEOF calls fn once, when r first reports io.EOF.
type onEOF struct {
	r    io.Reader
	fn   func()
	done bool
}

func (o *onEOF) Read(p []byte) (int, error) {
	n, err := o.r.Read(p)
	if err == io.EOF && !o.done {
		o.done = true
		o.fn()
	}
	return n, err
}

// WriteTo lets a streamed answer's scrubber write straight to the
// client's writer (scrubReader.WriteTo); fn runs once the stream has ended.
func (o *onEOF) WriteTo(w io.Writer) (int64, error) {
	wt, ok := o.r.(io.WriterTo)
	if !ok {
		return copyRead(w, o) // Read calls fn at the end
	}
	n, err := wt.WriteTo(w)
	if err == nil && !o.done {
		o.done = true
		o.fn()
	}
	return n, err
}

// copyBody copies r to w, through r's WriteTo when it has one; otherwise
// with a pooled buffer (io.Copy would make one for each answer).
func copyBody(w io.Writer, r io.Reader) (int64, error) {
	if wt, ok := r.(io.WriterTo); ok {
		return wt.WriteTo(w)
	}
	return copyRead(w, r)
}

// copyRead copies r to w by r's Read, with a pooled buffer.
func copyRead(w io.Writer, r io.Reader) (int64, error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	return io.CopyBuffer(w, struct{ io.Reader }{r}, *bp)
}

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// smallBody is the size under which a response is scrubbed in one piece.
const smallBody = 256 << 10

type readCloser struct {
	io.Reader
	closers []io.Closer
}

func (r *readCloser) WriteTo(w io.Writer) (int64, error) { return copyBody(w, r.Reader) }

func (r *readCloser) Close() error {
	var first error
	for _, c := range r.closers {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
