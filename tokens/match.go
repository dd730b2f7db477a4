package tokens

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/bits"
	"slices"
	"sync"

	agentvault "github.com/agentvault/agentvault"
)

// Pattern is one value to find: a token, a stand-in, or a real value to
// scrub. ID is handed back to the replacement callback. WholeField marks a
// short value (a 3-4 digit CVV, a 6-digit TOTP) that would otherwise match
// inside unrelated numbers: it matches only as a whole field.
type Pattern struct {
	Value      []byte
	ID         int
	WholeField bool
	// WordBounded loosens WholeField in free text: any byte that is not an
	// ASCII letter or digit bounds the match ("CVV 737." matches). Scrub
	// patterns for real values use it, because there a missed match leaks a
	// secret while a spurious one only masks three digits; substitution keeps
	// the strict delimiters, where a spurious match would corrupt a request.
	WordBounded bool
}

// Matching rules, shared by every entry point and by the naive reference in
// the tests:
//
//   - A long pattern matches anywhere.
//   - A WholeField pattern matches in ReplaceField only when it is the entire
//     field, and in free text only when the byte before it and the byte
//     after it are each either the edge of the input or a field delimiter
//     (see isDelim). Boundaries are judged on the original input.
//   - Among all matches, the leftmost wins; at one position the longest
//     wins; scanning resumes after it (matches never overlap). Of two
//     patterns with equal values that both match, the first given wins.

// isDelim is the set of bytes that may bound a WholeField match in free
// text: quotes, the separators of forms, JSON, cookies and markup, and ASCII
// whitespace. A digit, a letter, '-', '.', '/', '%' or '+' next to a short
// value means it is part of something longer.
var isDelim = func() (t [256]bool) {
	for _, c := range []byte("\"'=&:,{}[]<>; \t\n\r\v\f") {
		t[c] = true
	}
	return t
}()

// isNonWord bounds a WordBounded match: anything but an ASCII letter or digit.
var isNonWord = func() (t [256]bool) {
	for i := range t {
		c := byte(i)
		t[i] = !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z')
	}
	return t
}()

// boundsOf is the table that bounds a whole-field pattern in free text.
func boundsOf(wordBounded bool) *[256]bool {
	if wordBounded {
		return &isNonWord
	}
	return &isDelim
}

// byteCost approximates how often a byte appears in web traffic (HTML, JSON,
// JS, form bodies); the matcher anchors each pattern on its cheapest byte so
// the prefilter (bytes.IndexByte, vectorised in the runtime) stops rarely.
var byteCost = func() (t [256]uint16) {
	for i := range t {
		switch {
		case i < 0x20:
			t[i] = 2
		case i >= 0x80:
			t[i] = 6
		case i >= 'a' && i <= 'z':
			t[i] = 45
		case i >= 'A' && i <= 'Z':
			t[i] = 14
		case i >= '0' && i <= '9':
			t[i] = 18
		default:
			t[i] = 4
		}
	}
	for _, c := range []byte("etaoinsrhldcu \"<>/=\n") {
		t[c] = 100
	}
	for _, c := range []byte("012.,:-") {
		t[c] = 40
	}
	for _, c := range []byte("qxzjk") {
		t[c] = 10
	}
	for _, c := range []byte("_{}();'#&\t\r") {
		t[c] = 12
	}
	return t
}()

// passCost is what one more anchor byte costs, in byteCost units: one more
// IndexByte sweep over every input.
const passCost = 30

type pattern struct {
	val      []byte
	id       int
	whole    bool
	bounds   *[256]bool // for whole: the bytes that may stand next to it in free text
	head     uint64     // first (up to) 8 bytes, little endian
	headMask uint64
}

// anchorGroup holds the patterns anchored on the same byte at the same
// offset, longest first.
type anchorGroup struct {
	off  int
	pats []int32
}

type anchor struct {
	b              byte
	minOff, maxOff int
	groups         []anchorGroup
	// prev and next hold the bytes that may sit just before and just after
	// the anchor byte in some match anchored here.
	prev, next       [256]bool
	prevAny, nextAny bool
}

// Matcher finds a fixed set of patterns in byte slices. It is immutable after
// NewMatcher and safe for concurrent use.
//
// Design: patterns of three bytes or more go to a Teddy-style vector
// prefilter on their first four bytes (teddy.go) where the CPU has one:
// AVX-512 VBMI, 64 positions per step, or AVX2, 32. It stops almost only
// at real prefix matches and reports every candidate of a step at once.
// Everything else (shorter patterns, other CPUs) uses the portable path:
// each pattern is anchored on its rarest byte (by byteCost), reusing bytes
// other patterns already anchor on. A window of input is swept once per
// distinct anchor byte with bytes.IndexByte; each hit is verified
// against the few patterns anchored there. Matches of a window are sorted and
// chosen greedily (leftmost, then longest), which equals the leftmost-longest
// rule because every occurrence of every pattern is found.
type Matcher struct {
	pats    []pattern
	ted     *teddy // patterns of teddyMin bytes or more, when the CPU has a prefilter
	anchors []anchor
	maxLen  int
}

// vecMode is the vector prefilter NewMatcher uses; tests lower it to run
// the other paths on the same machine.
var vecMode = bestVec

// NewMatcher compiles patterns. Empty values are ignored, and so is a
// repeat of an earlier pattern with the same value and WholeField. The
// values are copied.
func NewMatcher(patterns []Pattern) *Matcher {
	m := &Matcher{}
	type key struct {
		v           string
		whole, word bool
	}
	seen := make(map[key]bool, len(patterns))
	for _, p := range patterns {
		k := key{string(p.Value), p.WholeField, p.WholeField && p.WordBounded}
		if len(p.Value) == 0 || seen[k] {
			continue
		}
		seen[k] = true
		m.pats = append(m.pats, pattern{val: bytes.Clone(p.Value), id: p.ID, whole: p.WholeField, bounds: boundsOf(p.WordBounded)})
		m.maxLen = max(m.maxLen, len(p.Value))
	}
	m.setHeads()
	var vec, scalar []int32
	for pi := range m.pats {
		if vecMode != vecNone && len(m.pats[pi].val) >= teddyMin {
			vec = append(vec, int32(pi))
		} else {
			scalar = append(scalar, int32(pi))
		}
	}
	if len(vec) > 0 {
		m.ted = newTeddy(m, vec, vecMode)
	}
	m.placeAnchors(scalar)
	return m
}

// MaxLen is the length of the longest pattern.
func (m *Matcher) MaxLen() int { return m.maxLen }

// Len is the number of distinct patterns.
func (m *Matcher) Len() int { return len(m.pats) }

type match struct {
	s, l int
	pi   int32
}

// window is how many start positions are verified and sorted at a time; it
// bounds the scratch memory a hostile body full of overlapping candidates
// can cost.
// It is a variable so the fuzz test can shrink it to reach window borders.
var window = 16 << 10

// collect appends every valid match starting in [w0, w1) to ms, sorted
// leftmost then longest. src beyond w1 is lookahead, src before w0 context.
func (m *Matcher) collect(src []byte, w0, w1 int, field bool, ms []match) []match {
	n := len(src)
	if t := m.ted; t != nil {
		// seg reaches fp-1 bytes past w1 so every start position in the
		// window has its whole fingerprint (or the input's end).
		seg := src[w0:min(w1+t.fp-1, n)]
		last := min(w1-w0, len(seg))
		var hit [64]byte // bucket bits of a block's positions
		for off := 0; ; {
			i, mask := -1, uint64(0)
			if len(seg)-off >= t.block+t.fp-1 {
				i, mask = t.find(seg[off:], &hit)
			}
			if i < 0 {
				// The vector loop stops short of the end; finish in scalar.
				for s := off + ^i; s < last; s++ {
					if b := t.bits(seg, s); b != 0 {
						ms = m.verifyBuckets(src, w0+s, b, field, ms)
					}
				}
				break
			}
			for ; mask != 0; mask &= mask - 1 {
				k := bits.TrailingZeros64(mask)
				ms = m.verifyBuckets(src, w0+off+i+k, hit[k], field, ms)
			}
			off += i + t.block
		}
	}
	for ai := range m.anchors {
		a := &m.anchors[ai]
		q, qhi := w0+a.minOff, min(w1+a.maxOff, n)
		for q < qhi {
			i := bytes.IndexByte(src[q:qhi], a.b)
			if i < 0 {
				break
			}
			q += i
			if (q > 0 && !a.prev[src[q-1]]) || (q+1 < n && !a.next[src[q+1]]) {
				q++
				continue
			}
			for gi := range a.groups {
				g := &a.groups[gi]
				s := q - g.off
				if s < w0 || s >= w1 {
					continue
				}
				head := loadHead(src, s)
				for _, pi := range g.pats {
					if m.verify(src, s, head, pi, field) {
						ms = append(ms, match{s: s, l: len(m.pats[pi].val), pi: pi})
					}
				}
			}
			q++
		}
	}
	if len(ms) > 1 {
		slices.SortFunc(ms, func(x, y match) int {
			if x.s != y.s {
				return x.s - y.s
			}
			if x.l != y.l {
				return y.l - x.l
			}
			return int(x.pi - y.pi)
		})
	}
	return ms
}

func loadHead(src []byte, s int) uint64 {
	if s+8 <= len(src) {
		return binary.LittleEndian.Uint64(src[s:])
	}
	var w [8]byte
	copy(w[:], src[s:])
	return binary.LittleEndian.Uint64(w[:])
}

// verify reports whether pattern pi matches at s under the rules above.
func (m *Matcher) verify(src []byte, s int, head uint64, pi int32, field bool) bool {
	p := &m.pats[pi]
	n := len(src)
	e := s + len(p.val)
	if e > n || head&p.headMask != p.head || (len(p.val) > 8 && !bytes.Equal(src[s+8:e], p.val[8:])) {
		return false
	}
	if p.whole {
		if field {
			return s == 0 && e == n
		}
		return (s == 0 || p.bounds[src[s-1]]) && (e == n || p.bounds[src[e]])
	}
	return true
}

func (m *Matcher) verifyBuckets(src []byte, s int, bs byte, field bool, ms []match) []match {
	head := loadHead(src, s)
	for ; bs != 0; bs &= bs - 1 {
		for _, c := range m.ted.buckets[bits.TrailingZeros8(bs)] {
			if head&c.headMask != c.head {
				continue
			}
			// Tokens share long prefixes (av_card_1_): bytes 8-15 part
			// most of them before the full compare.
			if c.midMask != 0 && (s+int(c.n) > len(src) || loadHead(src, s+8)&c.midMask != c.mid) {
				continue
			}
			if m.verify(src, s, head, c.pi, field) {
				ms = append(ms, match{s: s, l: int(c.n), pi: c.pi})
			}
		}
	}
	return ms
}

type scratch struct{ ms []match }

var scratchPool = sync.Pool{New: func() any { return &scratch{ms: make([]match, 0, 64)} }}

// Replacer rewrites matches. repl is called for each match with the pattern
// ID; it may refuse (error aborts). A Replacer is safe for concurrent use if
// repl is.
type Replacer struct {
	m    *Matcher
	repl func(id int) ([]byte, error)
}

// NewReplacer binds a matcher to a replacement callback.
func NewReplacer(m *Matcher, repl func(id int) ([]byte, error)) *Replacer {
	return &Replacer{m: m, repl: repl}
}

// Matcher returns the matcher r uses.
func (r *Replacer) Matcher() *Matcher { return r.m }

// replace rewrites matches that start in [from, limit) of src, appending to
// dst everything from src[from] up to the end of the last match. It returns
// that end (>= from): the caller appends the rest.
func (r *Replacer) replace(dst, src []byte, from, limit int, field bool) ([]byte, int, int, error) {
	if len(r.m.pats) == 0 {
		return dst, from, 0, nil
	}
	// Short inputs (most form and JSON values) keep their matches on the
	// stack; long ones borrow a pooled slice.
	if limit-from <= smallInput {
		var local [16]match
		dst, last, n, _, err := r.replaceWith(local[:0], dst, src, from, limit, field)
		return dst, last, n, err
	}
	sc := scratchPool.Get().(*scratch)
	dst, last, n, ms, err := r.replaceWith(sc.ms[:0], dst, src, from, limit, field)
	sc.ms = ms[:0]
	scratchPool.Put(sc)
	return dst, last, n, err
}

func (r *Replacer) replaceWith(ms []match, dst, src []byte, from, limit int, field bool) ([]byte, int, int, []match, error) {
	last, count := from, 0
	for w := from; w < limit; w += window {
		ms = r.m.collect(src, w, min(w+window, limit), field, ms[:0])
		for _, x := range ms {
			if x.s < last {
				continue // overlaps the match just taken
			}
			v, err := r.repl(r.m.pats[x.pi].id)
			if err != nil {
				return dst, last, count, ms, err
			}
			if dst == nil {
				// One allocation for the usual case of few matches.
				dst = make([]byte, 0, len(src)-from+len(src)/16+len(v))
			}
			dst = append(dst, src[last:x.s]...)
			dst = append(dst, v...)
			last = x.s + x.l
			count++
		}
	}
	return dst, last, count, ms, nil
}

// smallInput is the size up to which replace keeps matches on the stack.
const smallInput = 256

// ReplaceField rewrites one whole field value (a decoded form value, JSON
// string or header value), appending the result to dst. WholeField patterns
// match only the entire field. It returns the number of replacements.
func (r *Replacer) ReplaceField(dst, src []byte) ([]byte, int, error) {
	dst, last, n, err := r.replace(dst, src, 0, len(src), true)
	if err != nil {
		return dst, n, err
	}
	return append(dst, src[last:]...), n, nil
}

// ReplaceText rewrites free text, appending the result to dst. WholeField
// patterns match only between delimiters.
func (r *Replacer) ReplaceText(dst, src []byte) ([]byte, int, error) {
	dst, last, n, err := r.replace(dst, src, 0, len(src), false)
	if err != nil {
		return dst, n, err
	}
	return append(dst, src[last:]...), n, nil
}

// Rewrite is ReplaceText for a caller that does not need a copy: when
// nothing matched it returns src itself, unchanged and without copying it;
// otherwise a new slice. A caller that only forwards the result should use
// it; one that may modify the result must not (it may be src).
func (r *Replacer) Rewrite(src []byte) ([]byte, int, error) {
	dst, last, n, err := r.replace(nil, src, 0, len(src), false)
	if err != nil {
		return nil, n, err
	}
	if n == 0 {
		return src, 0, nil
	}
	return append(dst, src[last:]...), n, nil
}

// Contains reports whether src holds any match under the free-text rules.
func (r *Replacer) Contains(src []byte) bool { return r.m.Contains(src) }

// Contains reports whether src holds any match under the free-text rules.
func (m *Matcher) Contains(src []byte) bool {
	if len(m.pats) == 0 {
		return false
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	for w := 0; w < len(src); w += window {
		sc.ms = m.collect(src, w, min(w+window, len(src)), false, sc.ms[:0])
		if len(sc.ms) > 0 {
			return true
		}
	}
	return false
}

// streamChunk bounds how much of one large Write is buffered before it is
// scanned.
const streamChunk = 32 << 10

// NewWriter returns a writer that rewrites free text across write
// boundaries and writes the result to w. It holds back the last MaxLen
// bytes (one more than the longest pattern, so a WholeField match ending at
// a chunk border waits for the byte that decides its boundary) plus one
// byte of context for the left boundary. Close flushes; it does not close w.
// After an error every call returns it: the stream is broken and the caller
// must fail closed.
func (r *Replacer) NewWriter(w io.Writer) io.WriteCloser {
	bufs := bufPool.Get().(*writerBufs)
	return &replaceWriter{r: r, w: w, bufs: bufs, buf: bufs.buf[:0], out: bufs.out[:0]}
}

// writerBufs are a writer's two buffers, pooled across streams. They hold
// body bytes (which may be real values being scrubbed), so Close wipes them
// before they go back.
type writerBufs struct{ buf, out []byte }

var bufPool = sync.Pool{New: func() any { return &writerBufs{} }}

type replaceWriter struct {
	r      *Replacer
	w      io.Writer
	bufs   *writerBufs
	buf    []byte // buf[:off] is context already written, buf[off:] pending
	off    int
	out    []byte
	err    error
	closed bool
}

var errWriterClosed = agentvault.Errorf(agentvault.CodeInternal, "write after close")

func (rw *replaceWriter) Write(p []byte) (int, error) {
	if rw.err != nil {
		return 0, rw.err
	}
	if rw.closed {
		return 0, errWriterClosed
	}
	total := len(p)
	for len(p) > 0 {
		n := min(len(p), streamChunk)
		rw.buf = append(rw.buf, p[:n]...)
		p = p[n:]
		// Emit whatever is decided at once: a streamed page or event
		// stream should not wait for more input than the carry.
		if len(rw.buf)-rw.off > rw.r.m.maxLen {
			if err := rw.flush(false); err != nil {
				return 0, err
			}
		}
	}
	return total, nil
}

func (rw *replaceWriter) flush(final bool) error {
	limit := len(rw.buf)
	if !final {
		limit -= rw.r.m.maxLen
	}
	if limit <= rw.off {
		if !final {
			return nil
		}
		limit = rw.off
	}
	out, last, _, err := rw.r.replace(rw.out[:0], rw.buf, rw.off, limit, false)
	if err != nil {
		rw.err = err
		return err
	}
	end := max(limit, last)
	if final {
		end = len(rw.buf)
	}
	// Nothing replaced (most of a stream): the bytes go to w from buf, not
	// through a copy in out.
	if len(out) > 0 {
		out = append(out, rw.buf[last:end]...)
		rw.out = out // kept for the next flush, and wiped by Close
	} else {
		out = rw.buf[last:end]
	}
	if len(out) > 0 {
		if _, err := rw.w.Write(out); err != nil {
			rw.err = err
			return err
		}
	}
	if end > 0 {
		n := copy(rw.buf, rw.buf[end-1:])
		rw.buf = rw.buf[:n]
		rw.off = 1
	}
	return nil
}

// Close flushes the held-back tail, then wipes and releases the buffers.
func (rw *replaceWriter) Close() error {
	if rw.closed {
		return rw.err
	}
	rw.closed = true
	if rw.err == nil {
		rw.err = rw.flush(true)
	}
	if b := rw.bufs; b != nil {
		b.buf, b.out = rw.buf[:cap(rw.buf)], rw.out[:cap(rw.out)]
		clear(b.buf)
		clear(b.out)
		rw.buf, rw.out, rw.bufs = nil, nil, nil
		bufPool.Put(b)
	}
	return rw.err
}

// placeAnchors picks the anchor bytes by greedy weighted set cover: the
// byte that anchors the most still-unplaced patterns per unit of cost
// (one sweep plus its expected hits) is taken first; then every pattern is
// anchored on the cheapest chosen byte it contains. Few sweeps matter more
// than slightly rarer bytes: each sweep reads the whole input.
func (m *Matcher) placeAnchors(pis []int32) {
	placed := make([]bool, len(m.pats))
	var chosen []byte
	var has [256]bool
	for left := len(pis); left > 0; {
		var count [256]int
		for _, pi := range pis {
			p := m.pats[pi]
			if placed[pi] {
				continue
			}
			var seen [256]bool
			for _, c := range p.val {
				if !seen[c] {
					seen[c] = true
					count[c]++
				}
			}
		}
		best, bestScore := -1, 0.0
		for c := range 256 {
			if count[c] == 0 || has[c] {
				continue
			}
			score := float64(count[c]) / float64(passCost+int(byteCost[c]))
			if best < 0 || score > bestScore {
				best, bestScore = c, score
			}
		}
		b := byte(best)
		chosen, has[b] = append(chosen, b), true
		for _, pi := range pis {
			if !placed[pi] && bytes.IndexByte(m.pats[pi].val, b) >= 0 {
				placed[pi] = true
				left--
			}
		}
	}
	idx := map[byte]int{}
	for _, pi := range pis {
		p := m.pats[pi]
		best, off := -1, 0
		for i, c := range p.val {
			if has[c] && (best < 0 || byteCost[c] < byteCost[best]) {
				best, off = int(c), i
			}
		}
		c := byte(best)
		ai, ok := idx[c]
		if !ok {
			ai = len(m.anchors)
			idx[c] = ai
			m.anchors = append(m.anchors, anchor{b: c, minOff: off, maxOff: off})
		}
		a := &m.anchors[ai]
		// Prefer an offset this byte already has a group for.
		for i, d := range p.val {
			if d == c && slices.ContainsFunc(a.groups, func(g anchorGroup) bool { return g.off == i }) {
				off = i
				break
			}
		}
		a.minOff, a.maxOff = min(a.minOff, off), max(a.maxOff, off)
		gi := slices.IndexFunc(a.groups, func(g anchorGroup) bool { return g.off == off })
		if gi < 0 {
			gi = len(a.groups)
			a.groups = append(a.groups, anchorGroup{off: off})
		}
		a.groups[gi].pats = append(a.groups[gi].pats, pi)
		// The neighbours of the anchor byte give a cheap first rejection.
		// Past either end of the pattern, a long pattern accepts any byte
		// and a WholeField one a delimiter (the input's edge is checked
		// separately).
		if off > 0 {
			a.prev[p.val[off-1]] = true
		} else if p.whole {
			for d := range 256 {
				a.prev[d] = a.prev[d] || p.bounds[d]
			}
		} else {
			a.prevAny = true
		}
		if off+1 < len(p.val) {
			a.next[p.val[off+1]] = true
		} else if p.whole {
			for d := range 256 {
				a.next[d] = a.next[d] || p.bounds[d]
			}
		} else {
			a.nextAny = true
		}
	}
	for ai := range m.anchors {
		a := &m.anchors[ai]
		for gi := range a.groups {
			g := &a.groups[gi]
			slices.SortStableFunc(g.pats, func(x, y int32) int { return len(m.pats[y].val) - len(m.pats[x].val) })
		}
		if a.prevAny {
			a.prev = [256]bool{}
			for d := range 256 {
				a.prev[d] = true
			}
		}
		if a.nextAny {
			for d := range 256 {
				a.next[d] = true
			}
		}
	}
}

func (m *Matcher) setHeads() {
	for pi := range m.pats {
		p := &m.pats[pi]
		var w [8]byte
		n := copy(w[:], p.val)
		p.head = binary.LittleEndian.Uint64(w[:])
		p.headMask = ^uint64(0) >> (64 - 8*n)
	}
}
