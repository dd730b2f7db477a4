package tokens

import (
	"encoding/binary"
	"slices"
)

// vecKind names a vector prefilter.
type vecKind uint8

const (
	vecNone vecKind = iota // portable path only
	vecAVX2                // 4-byte nibble fingerprint, 32 positions per step
	vecVBMI                // 4-byte fingerprint, 6-bit byte tables, 64 positions per step
)

// teddyMin is the shortest pattern the vector prefilter takes; shorter
// ones go to the portable path.
const teddyMin = 3

// teddyTab holds, for each of the four fingerprint bytes of the AVX2
// path, two 16-entry tables (low and high nibble → bucket bits), each
// repeated for both 128-bit lanes, then the 0x0f mask. Layout is read by
// teddy_amd64.s.
type teddyTab struct {
	t    [2 * 4][32]byte
	mask [32]byte
}

// vbmiTab holds, for each of the four fingerprint bytes of the AVX-512
// VBMI path, a 64-entry table from the byte's low 6 bits to bucket bits,
// one VPERMB each. Bytes that differ only in bits 6-7 share an entry ('4',
// 't', 'T' and 0xb4): more candidates, never fewer. A 128-entry table
// (VPERMI2B, low 7 bits) was tried: its loop took a third longer on the
// Xeon the benchmarks ran on and, on their bodies, ruled out no more
// positions. Layout is read by teddy_amd64.s.
type vbmiTab struct {
	t [4][64]byte
}

// teddy is the vector prefilter (Langdale's Teddy): patterns of at least
// teddyMin bytes are put in 8 buckets by their fingerprint, their first fp
// (four) bytes. A position is a candidate when each fingerprint byte hits a
// common bucket. A 3-byte pattern's fourth fingerprint byte stands for what
// may follow it: any byte, or for a WholeField pattern a bounding byte (a
// 3-digit CVV then rarely stops the loop inside longer numbers). Past the
// input's end every byte matches; the verifier decides.
type teddy struct {
	kind    vecKind
	fp      int // fingerprint length
	block   int // positions tested per vector step
	tab     teddyTab
	vtab    vbmiTab
	buckets [8][]bucketPat // longest first
}

// bucketPat is a pattern in a bucket, with its first 16 bytes at hand (head
// as in pattern; mid is bytes 8-15, midMask 0 for a pattern of 8 bytes or
// fewer) so most false candidates are rejected without touching the
// pattern.
type bucketPat struct {
	head, headMask uint64
	mid, midMask   uint64
	pi, n          int32 // pattern index and length
}

func newBucketPat(p *pattern, pi int32) bucketPat {
	c := bucketPat{head: p.head, headMask: p.headMask, pi: pi, n: int32(len(p.val))}
	if len(p.val) > 8 {
		var w [8]byte
		k := copy(w[:], p.val[8:])
		c.mid, c.midMask = binary.LittleEndian.Uint64(w[:]), ^uint64(0)>>(64-8*k)
	}
	return c
}

func newTeddy(m *Matcher, pis []int32, kind vecKind) *teddy {
	t := &teddy{kind: kind, fp: 4, block: 32}
	if kind == vecVBMI {
		t.block = 64
	}
	for i := range t.tab.mask {
		t.tab.mask[i] = 0x0f
	}
	// The bucket key: the fingerprint bytes, and for a pattern shorter than
	// the fingerprint what may follow it.
	key := func(pi int32) string {
		p := &m.pats[pi]
		k := string(p.val[:min(t.fp, len(p.val))])
		if len(p.val) < t.fp {
			switch {
			case !p.whole:
				k += "\x00any"
			case p.bounds == &isNonWord:
				k += "\x00word"
			default:
				k += "\x00delim"
			}
		}
		return k
	}
	var keys []string
	for _, pi := range pis {
		if k := key(pi); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	// Sorted, so fingerprints sharing leading bytes share a bucket and add
	// fewer false combinations.
	slices.Sort(keys)
	for _, pi := range pis {
		p := &m.pats[pi]
		b := slices.Index(keys, key(pi)) * 8 / len(keys)
		bit := byte(1) << b
		t.buckets[b] = append(t.buckets[b], newBucketPat(p, pi))
		for j := range t.fp {
			for c := range 256 {
				if j < len(p.val) && c == int(p.val[j]) || j >= len(p.val) && (!p.whole || p.bounds[c]) {
					t.set(j, byte(c), bit)
				}
			}
		}
	}
	for b := range t.buckets {
		slices.SortStableFunc(t.buckets[b], func(x, y bucketPat) int { return int(y.n - x.n) })
	}
	return t
}

// set makes byte c at fingerprint position j hit bucket bit. The nibble
// tables of the AVX2 path can only hold a product of nibble sets per
// bucket, so a set of several bytes widens to that product: more
// candidates, never fewer.
func (t *teddy) set(j int, c, bit byte) {
	if t.kind == vecVBMI {
		t.vtab.t[j][c&0x3f] |= bit
		return
	}
	for lane := range 2 {
		t.tab.t[2*j][16*lane+int(c&0x0f)] |= bit
		t.tab.t[2*j+1][16*lane+int(c>>4)] |= bit
	}
}

// find runs the vector loop over s: the first block with candidates, their
// bitmask (bit k: position i+k) and in out[k] the bucket bits of position
// i+k; or ^done and 0, where done is the number of leading positions it
// ruled out. s must hold at least block+fp-1 bytes.
func (t *teddy) find(s []byte, out *[64]byte) (int, uint64) {
	if t.kind == vecVBMI {
		return teddy4VBMI(&t.vtab, s, out)
	}
	i, mask := teddy4AVX2(&t.tab, s, out)
	return i, uint64(mask)
}

// bits is the scalar form of the vector test at position s; fingerprint
// bytes past the end of src match anything.
func (t *teddy) bits(src []byte, s int) byte {
	r := byte(0xff)
	if t.kind == vecVBMI {
		for j, c := range src[s:min(s+4, len(src))] {
			r &= t.vtab.t[j][c&0x3f]
		}
		return r
	}
	for j, c := range src[s:min(s+4, len(src))] {
		r &= t.tab.t[2*j][c&0x0f] & t.tab.t[2*j+1][c>>4]
	}
	return r
}
