package tokens

import "bytes"

// Span is one match Spans reports: src[Start:End] is the pattern with ID.
type Span struct{ Start, End, ID int }

// Spans appends to dst the matches ReplaceText would replace in src that
// start at or after from, in order (free-text rules: leftmost, then
// longest, never overlapping). src[:from] is context for the boundaries of
// WholeField patterns. A caller that must keep the places of its matches (a
// scrubber that spreads a stand-in over several WebSocket messages) uses it
// instead of a Replacer.
func (m *Matcher) Spans(dst []Span, src []byte, from int) []Span {
	if len(m.pats) == 0 || from >= len(src) {
		return dst
	}
	sc := scratchPool.Get().(*scratch)
	last := from
	for w := from; w < len(src); w += window {
		sc.ms = m.collect(src, w, min(w+window, len(src)), false, sc.ms[:0])
		for _, x := range sc.ms {
			if x.s < last {
				continue // overlaps the match just taken
			}
			dst = append(dst, Span{Start: x.s, End: x.s + x.l, ID: m.pats[x.pi].id})
			last = x.s + x.l
		}
	}
	sc.ms = sc.ms[:0]
	scratchPool.Put(sc)
	return dst
}

// OpenPrefixes calls fn, in no particular order, for each place at or after
// from where src ends with a proper, non-empty prefix of a pattern: the
// start of that prefix in src and the pattern's ID. These are the matches
// that more input could still complete. A WholeField pattern counts only
// where its left boundary holds; src[:from] is context for it, and the
// start of src counts as a boundary.
func (m *Matcher) OpenPrefixes(src []byte, from int, fn func(start, id int)) {
	n := len(src)
	for i := range m.pats {
		p := &m.pats[i]
		for s := max(from, n-len(p.val)+1); s < n; s++ {
			if src[s] != p.val[0] || !bytes.Equal(src[s:], p.val[:n-s]) {
				continue
			}
			if p.whole && s > 0 && !p.bounds[src[s-1]] {
				continue
			}
			fn(s, p.id)
		}
	}
}
