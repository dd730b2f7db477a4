package intercept

import (
	"bytes"
	"io"
	"regexp"
	"sync"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/intercept/rewrite"
	"github.com/agentvault/agentvault/tokens"
	"github.com/agentvault/agentvault/vault"
)

// scrubber replaces the real values released in a session by their
// stand-ins on the way back to the browser (P10): response headers, bodies
// and server WebSocket frames. The forms a value can take on the wire come
// from rewrite.ScrubVariants and the matching from package tokens; this
// type only ties the two to the session's values and token kinds.
// Immutable once built, safe for concurrent use.
type scrubber struct {
	m     *tokens.Matcher
	to    [][]byte     // by pattern ID: the stand-in in the same encoding
	kinds []vault.Kind // by pattern ID, for the scrub metric
}

// scrubWholeField is the length under which a real value (a CVV) is
// scrubbed only as a word: "737" must not be replaced inside "17375", but
// "CVV 737." is replaced (tokens.Pattern.WordBounded).
const scrubWholeField = 6

// newScrubber builds the scrubber for a session's released values; nil
// when there is nothing to scrub.
func newScrubber(rel []released) *scrubber {
	sc := &scrubber{}
	var pats []tokens.Pattern
	for _, r := range rel {
		for _, v := range rewrite.ScrubVariants(r.real.InsecureRawBytes(), []byte(r.standIn)) {
			pats = append(pats, tokens.Pattern{Value: v[0], ID: len(sc.to), WholeField: len(v[0]) < scrubWholeField, WordBounded: true})
			sc.to = append(sc.to, v[1])
			sc.kinds = append(sc.kinds, r.kind)
		}
	}
	if len(pats) == 0 {
		return nil
	}
	sc.m = tokens.NewMatcher(pats)
	for _, p := range pats {
		clear(p.Value) // the matcher keeps its own copy
	}
	return sc
}

// replacer returns the scrubbing rewrite.Replacer; hit (optional) sees the
// token kind of each replacement. Every field is scanned as free text: a
// real value inside a longer JSON string or header is still a leak.
func (sc *scrubber) replacer(hit func(vault.Kind)) scrubReplacer {
	return scrubReplacer{tokens.NewReplacer(sc.m, func(id int) ([]byte, error) {
		if hit != nil {
			hit(sc.kinds[id])
		}
		return sc.to[id], nil
	})}
}

type scrubReplacer struct{ *tokens.Replacer }

func (s scrubReplacer) ReplaceField(dst, src []byte) ([]byte, int, error) {
	return s.ReplaceText(dst, src)
}

var _ rewrite.Replacer = scrubReplacer{}

// apply scrubs b as free text and reports how many values it replaced. It
// returns b itself when nothing matched.
func (sc *scrubber) apply(b []byte, hit func(vault.Kind)) ([]byte, int) {
	if sc == nil || len(b) == 0 {
		return b, 0
	}
	out, n, _ := sc.replacer(hit).Rewrite(b) // b itself, uncopied, when nothing matched
	if n == 0 {
		return b, 0
	}
	return out, n
}

// body scrubs a whole (decoded) body: first by its media type, so a value
// behind an escape the variants do not list (a JSON \u form, a multipart
// part in base64) is seen decoded, then as free text, which catches every
// listed form wherever it sits. A body the structured pass cannot parse is
// only scanned as text. It returns b itself when nothing matched.
func (sc *scrubber) body(contentType string, b []byte, limit int64, hit func(vault.Kind)) ([]byte, int) {
	if sc == nil || len(b) == 0 {
		return b, 0
	}
	n := 0
	if rewrite.MayWalk(contentType, b) {
		if out, k, err := rewrite.ScrubBody(contentType, "", b, sc.replacer(hit), limit); err == nil && k > 0 {
			b, n = out, k
		}
	}
	out, k := sc.apply(b, hit)
	return out, n + k
}

// reader scrubs src as a stream through the tokens writer, which holds back
// just enough bytes that a value split across reads is still found. hit
// (optional) observes each replacement. Close releases (and wipes) the
// buffers; it does not close src.
func (sc *scrubber) reader(src io.Reader, hit func(vault.Kind)) io.ReadCloser {
	if sc == nil {
		return io.NopCloser(src)
	}
	b := scrubBufPool.Get().(*scrubBufs)
	r := &scrubReader{src: src, bufs: b, held: b.held[:0]}
	r.w = sc.replacer(hit).NewWriter((*scrubSink)(r))
	return r
}

// scrubReader reads src through w, whose scrubbed output (scrubSink) goes
// straight into the buffer the caller handed Read while it has room; what
// does not fit is held for the next Read.
type scrubReader struct {
	src  io.Reader
	w    io.WriteCloser
	to   io.Writer  // during WriteTo: where the scrubbed output goes
	bufs *scrubBufs // nil once closed
	held []byte     // held[off:] is scrubbed and not yet read
	off  int
	p    []byte // the buffer of the Read under way, p[:n] filled
	n    int
	err  error // sticky: io.EOF once the tail is flushed
}

// scrubBufs are a scrubReader's buffers, pooled across responses: in takes
// what src returns, held what the caller's buffer had no room for. Both
// hold response bytes, real values included before the scrub: wiped
// before they go back.
type scrubBufs struct{ in, held []byte }

var scrubBufPool = sync.Pool{New: func() any { return &scrubBufs{in: make([]byte, readChunk)} }}

// readChunk is how much is read from upstream at a time.
const readChunk = 32 << 10

// scrubSink is the scrubReader as the tokens writer's output.
type scrubSink scrubReader

func (s *scrubSink) Write(b []byte) (int, error) {
	r, total := (*scrubReader)(s), len(b)
	if r.to != nil {
		return r.to.Write(b)
	}
	if r.off == len(r.held) {
		k := copy(r.p[r.n:], b)
		r.n += k
		b = b[k:]
	}
	r.held = append(r.held, b...)
	return total, nil
}

func (r *scrubReader) Read(p []byte) (int, error) {
	if r.off < len(r.held) {
		n := copy(p, r.held[r.off:])
		if r.off += n; r.off == len(r.held) {
			clear(r.held)
			r.held, r.off = r.held[:0], 0
		}
		return n, nil
	}
	if len(p) == 0 {
		return 0, nil
	}
	r.p, r.n = p, 0
	defer func() { r.p, r.n = nil, 0 }()
	for r.n == 0 && r.err == nil {
		in := r.bufs.in
		n, err := r.src.Read(in)
		if n > 0 {
			if _, werr := r.w.Write(in[:n]); werr != nil {
				r.fail(werr)
				continue
			}
		}
		switch {
		case err == io.EOF:
			r.fail(r.w.Close())
		case err != nil:
			r.fail(err)
		}
	}
	if r.n > 0 {
		return r.n, nil
	}
	return 0, r.err
}

// WriteTo scrubs the rest of src into w: the tokens writer's output goes
// to w as it is decided, not through the caller's copy buffer (for an
// HTTP/1.1 answer, Response.Write's; a chunk per write of it).
func (r *scrubReader) WriteTo(w io.Writer) (int64, error) {
	var total int64
	if r.off < len(r.held) {
		n, err := w.Write(r.held[r.off:])
		total += int64(n)
		if err != nil {
			return total, err
		}
		clear(r.held)
		r.held, r.off = r.held[:0], 0
	}
	cw := &countWriter{w: w}
	r.to = cw
	defer func() { r.to = nil }()
	for r.err == nil {
		in := r.bufs.in
		n, err := r.src.Read(in)
		if n > 0 {
			if _, werr := r.w.Write(in[:n]); werr != nil {
				r.fail(werr)
				break
			}
		}
		switch {
		case err == io.EOF:
			r.fail(r.w.Close())
		case err != nil:
			r.fail(err)
		}
	}
	total += cw.n
	if r.err == io.EOF {
		return total, nil
	}
	return total, r.err
}

// fail ends the stream with err (io.EOF when err is nil) and wipes the
// upstream bytes held.
func (r *scrubReader) fail(err error) {
	if err == nil {
		err = io.EOF
	}
	r.err = err
	_ = r.w.Close()
	if r.bufs != nil {
		clear(r.bufs.in)
	}
}

func (r *scrubReader) Close() error {
	if r.err == nil {
		r.fail(agentvault.Errorf(agentvault.CodeUpstream, "response body closed"))
	}
	if b := r.bufs; b != nil {
		clear(r.held[:cap(r.held)])
		b.held, r.held, r.off, r.bufs = r.held[:0], nil, 0, nil
		if cap(b.held) <= maxHeldPooled {
			scrubBufPool.Put(b)
		}
	}
	return nil
}

// maxHeldPooled is the largest held buffer kept for reuse.
const maxHeldPooled = 256 << 10

// tokenShape finds anything that looks like a mock token. Any left in a
// request after substitution is refused: a mock token never goes upstream.
var tokenShape = regexp.MustCompile(`(?i)av_(card|login|identity|address)_[a-z0-9._-]{1,64}?_(number|cvv|holder|email|username|password|totp|name|phone|line1|line2|city|region|postal_code|country)_[a-z0-9]{5}`)

// containsTokenShape reports whether b holds a token-shaped string. One
// sweep for '_' with a look at the two bytes before it ("av" in any case)
// keeps the regexp off bodies that cannot match.
func containsTokenShape(b []byte) bool {
	for i := 2; i < len(b); i++ {
		j := bytes.IndexByte(b[i:], '_')
		if j < 0 {
			return false
		}
		i += j
		if b[i-2]|0x20 == 'a' && b[i-1]|0x20 == 'v' {
			return tokenShape.Match(b)
		}
	}
	return false
}

func errTokenNotAllowed() error {
	return agentvault.Errorf(agentvault.CodeTokenNotAllowed, "the request carries a token this session has not authorized")
}
