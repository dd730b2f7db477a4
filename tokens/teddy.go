package tokens

import "slices"

// teddyLen is the fingerprint length: the first three bytes of a pattern.
const teddyLen = 3

// teddyTab holds, for each fingerprint byte j, two 16-entry tables (low and
// high nibble → bucket bits), each repeated for both 128-bit lanes, then
// the 0x0f mask. Layout is read by teddy_amd64.s.
type teddyTab struct {
	t    [2 * teddyLen][32]byte
	mask [32]byte
}

// teddy is the vector prefilter: patterns of at least teddyLen bytes are
// put in 8 buckets by their prefix. A position is a candidate when each of
// its first three bytes, split into nibbles, hits a common bucket; with at
// most 8 distinct prefixes a candidate is an exact prefix match.
type teddy struct {
	tab     teddyTab
	buckets [8][]int32 // pattern indices, longest first
}

func newTeddy(m *Matcher, pis []int32) *teddy {
	t := &teddy{}
	for i := range t.tab.mask {
		t.tab.mask[i] = 0x0f
	}
	var prefixes []string
	for _, pi := range pis {
		p := string(m.pats[pi].val[:teddyLen])
		if !slices.Contains(prefixes, p) {
			prefixes = append(prefixes, p)
		}
	}
	// Sorted, so prefixes sharing leading bytes share a bucket and add
	// fewer false combinations of nibbles.
	slices.Sort(prefixes)
	bucketOf := func(p string) int { return slices.Index(prefixes, p) * 8 / len(prefixes) }
	for _, pi := range pis {
		v := m.pats[pi].val
		b := bucketOf(string(v[:teddyLen]))
		t.buckets[b] = append(t.buckets[b], pi)
		for j := range teddyLen {
			lo, hi := v[j]&0x0f, v[j]>>4
			for lane := range 2 {
				t.tab.t[2*j][16*lane+int(lo)] |= 1 << b
				t.tab.t[2*j+1][16*lane+int(hi)] |= 1 << b
			}
		}
	}
	for b := range t.buckets {
		slices.SortStableFunc(t.buckets[b], func(x, y int32) int { return len(m.pats[y].val) - len(m.pats[x].val) })
	}
	return t
}

// bits is the scalar form of the vector test at position s (s+2 < len).
func (t *teddy) bits(src []byte, s int) byte {
	r := byte(0xff)
	for j := range teddyLen {
		c := src[s+j]
		r &= t.tab.t[2*j][c&0x0f] & t.tab.t[2*j+1][c>>4]
	}
	return r
}
