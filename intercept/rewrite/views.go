package rewrite

import (
	"bytes"
	"encoding/binary"
	"html"
	"slices"
	"sync"
)

// EncodedViews returns b decoded in the ways a value can hide in text that
// Body treats as opaque: percent-decoded (with '+' as a space),
// JSON-unescaped (\uXXXX and friends), HTML-unescaped, percent- then
// JSON-decoded (JSON inside a form value), and base64-decoded (see
// base64Views). Only views that differ from b are returned.
//
// The proxy runs its token matcher over these views of a rewritten body: a
// token still found there sat in an encoding Body could not rewrite in place
// (an XML entity, JSON inside a text/plain field, ...), and the request must
// be refused rather than forward a mock token. Use a matcher of the long
// tokens only: decoding adds spaces and quotes, so a short whole-field value
// could seem to stand alone where it did not.
func EncodedViews(b []byte) [][]byte {
	views := textViews(b)
	// Base64 inside b itself at every character offset, and inside the
	// decoded views from their runs' starts: a form value carries a blob
	// percent-encoded, a JSON string may write "/" as "\/".
	n := len(views)
	views = appendBase64Views(views, b, 4)
	for _, v := range views[:n] {
		views = appendBase64Views(views, v, 1)
	}
	return views
}

// EachEncodedView calls fn with what EncodedViews returns, in the same
// order, one call a view. The base64 views are built one at a time in
// reused buffers (wiped after), so a large body costs no view-sized
// allocations; a slice passed to fn is valid only during that call and
// must not be written to. fn returns false to stop, and EachEncodedView
// then returns false.
func EachEncodedView(b []byte, fn func([]byte) bool) bool {
	return EachEncodedViewIf(b, nil, fn)
}

// EachEncodedViewIf is EachEncodedView, less the base64 views of a text
// (b, or one of its decoded views) that mayHide says false for. mayHide
// must say true whenever a base64 view of its argument could hold what fn
// looks for; a caller looking for known values answers with a scan of the
// text for their Base64Fragments, which costs one pass where the views
// cost a decode and four. A nil mayHide builds every view.
func EachEncodedViewIf(b []byte, mayHide func([]byte) bool, fn func([]byte) bool) bool {
	views := textViews(b)
	for _, v := range views {
		if !fn(v) {
			return false
		}
	}
	if len(b) >= minBase64Run && (mayHide == nil || mayHide(b)) && !eachBase64View(b, 4, fn) {
		return false
	}
	for _, v := range views {
		if len(v) >= minBase64Run && (mayHide == nil || mayHide(v)) && !eachBase64View(v, 1, fn) {
			return false
		}
	}
	return true
}

// Base64Fragments returns strings of which a text holds at least one
// whenever a base64 view of it (EachEncodedView) holds needle: for each of
// the three byte offsets needle can sit at in a decoded run, the
// characters that encode only needle's bits, in each mix of the two
// alphabets a run may use ('+' or '-' for 62, '/' or '_' for 63, at most
// eight mixes: a fragment with more such characters is cut to the longest
// piece with three). A needle shorter than three bytes gets none (nil):
// the caller cannot rule it out this way.
func Base64Fragments(needle []byte) [][]byte {
	const std = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	if len(needle) < 3 {
		return nil
	}
	var out [][]byte
	for off := 0; off < 3; off++ {
		// The characters of the needle's run: character j holds bits
		// [6j, 6j+6) of the decoded bytes, the needle bits [8off, 8(off+n)).
		lo := (8*off + 5) / 6
		hi := 8 * (off + len(needle)) / 6 // exclusive
		frag := make([]byte, 0, hi-lo)
		for j := lo; j < hi; j++ {
			var v byte
			for bit := 6 * j; bit < 6*j+6; bit++ {
				v <<= 1
				if p := bit - 8*off; needle[p/8]&(0x80>>(p%8)) != 0 {
					v |= 1
				}
			}
			frag = append(frag, std[v])
		}
		frag = fewAlphabetChars(frag, 3)
		out = appendAlphabetMixes(out, frag, 0)
	}
	return out
}

// fewAlphabetChars returns the longest piece of frag holding at most max
// characters of value 62 or 63.
func fewAlphabetChars(frag []byte, max int) []byte {
	best, start, n := frag[:0], 0, 0
	for end, c := range frag {
		if c == '+' || c == '/' {
			n++
		}
		for n > max {
			if frag[start] == '+' || frag[start] == '/' {
				n--
			}
			start++
		}
		if end+1-start > len(best) {
			best = frag[start : end+1]
		}
	}
	return best
}

// appendAlphabetMixes appends frag with each of its characters of value
// 62 or 63 from index i on written in either alphabet.
func appendAlphabetMixes(out [][]byte, frag []byte, i int) [][]byte {
	for ; i < len(frag); i++ {
		if alt := map[byte]byte{'+': '-', '/': '_'}[frag[i]]; alt != 0 {
			f := bytes.Clone(frag)
			f[i] = alt
			out = appendAlphabetMixes(out, f, i+1)
		}
	}
	return append(out, bytes.Clone(frag))
}

// textViews are b percent-, JSON-, HTML- and percent-then-JSON-decoded,
// each only when it differs from b.
func textViews(b []byte) [][]byte {
	var views [][]byte
	add := func(v []byte) []byte {
		if !bytes.Equal(v, b) {
			views = append(views, v)
		}
		return v
	}
	var p []byte
	if bytes.IndexByte(b, '%') >= 0 || bytes.IndexByte(b, '+') >= 0 {
		p = add(percentDecode(b, true))
	}
	if bytes.IndexByte(b, '\\') >= 0 {
		add(jsonUnescape(b))
	}
	if bytes.IndexByte(b, '&') >= 0 {
		add([]byte(html.UnescapeString(string(b))))
	}
	if p != nil && bytes.IndexByte(p, '\\') >= 0 {
		add(jsonUnescape(p))
	}
	return views
}

// viewBufs are eachBase64View's scratch buffers: the runs' bits, the
// views read off them, and the runs.
type viewBufs struct {
	bits, view []byte
	runs       []b64Run
}

// b64Run is a run of base64 characters: how many, and where its bits
// start in viewBufs.bits.
type b64Run struct{ chars, off int }

var viewPool = sync.Pool{New: func() any { return new(viewBufs) }}

// eachBase64View calls fn with appendBase64Views's views of b, one call a
// view: for each offset k below shifts, every run decoded from its k-th
// character, the runs joined by a line break. One pass finds the runs and
// decodes them (decodeRuns); each view is then read off those bits, the
// first in place when b has one run (the bench harness's echo body: one
// long run of JSON padding), the others shifted into a reused buffer.
func eachBase64View(b []byte, shifts int, fn func([]byte) bool) bool {
	if len(b) < minBase64Run {
		return true
	}
	pb := viewPool.Get().(*viewBufs)
	used := 0
	defer func() {
		// Wipe what this call wrote (the rest was wiped by the call that
		// wrote it): a decoded view of a rewritten body may hold a real
		// value. The decoder's word stores reach at most 2 bytes past the
		// bits it keeps.
		clear(pb.bits[:min(len(pb.bits)+8, cap(pb.bits))])
		clear(pb.view[:used])
		pb.bits = pb.bits[:0]
		viewPool.Put(pb)
	}()
	pb.runs, pb.bits = decodeRuns(pb.runs[:0], pb.bits[:0], b)
	runs, bits := pb.runs, pb.bits
	if len(runs) == 0 {
		return true
	}
	size := len(runs) - 1 // of view 0, the largest
	for _, r := range runs {
		size += r.chars * 6 / 8
	}
	if len(pb.view) < size && (len(runs) > 1 || shifts > 1) {
		clear(pb.view)
		pb.view = make([]byte, size)
	}
	for k := 0; k < shifts; k++ {
		var view []byte
		if k == 0 && len(runs) == 1 {
			// The run's bits are its decoding from its first character.
			n := runs[0].chars * 6 / 8
			view = bits[:n:n]
		} else {
			buf, pos := pb.view, 0
			for i, r := range runs {
				if i > 0 {
					buf[pos] = '\n'
					pos++
				}
				n := (r.chars - k) * 6 / 8
				shiftedBytes(buf[pos:pos+n], bits[r.off:], 6*k)
				pos += n
			}
			used = max(used, pos)
			view = buf[:pos:pos]
		}
		if !fn(view) {
			return false
		}
	}
	return true
}

// decodeRuns appends b's runs of at least minBase64Run base64 characters
// to runs and their bits (decodeBase64Bits of each, one after the other)
// to bits, in one pass: a run is decoded eight characters at a time as it
// is found, and between runs most characters are never looked at (a run
// long enough must hold the character minBase64Run-1 ahead). A grown
// bits leaves its old array wiped.
func decodeRuns(runs []b64Run, bits, b []byte) ([]b64Run, []byte) {
	// b[i-1] is never a base64 character (or i is 0), and b[i:known] are
	// base64 characters already looked at.
	known := 0
	for i := 0; i+minBase64Run <= len(b); {
		p := i + minBase64Run - 1
		if b64Value[b[p]] < 0 {
			i = p + 1
			continue
		}
		lo, q := max(i, known), p-1
		for q >= lo && b64Value[b[q]] >= 0 {
			q--
		}
		if q >= lo {
			known, i = p+1, q+1
			continue
		}
		// b[i:p+1] are base64 characters: a run starts at i.
		off := len(bits)
		var end int
		end, bits = decodeRunAt(bits, b, i)
		runs = append(runs, b64Run{chars: end - i, off: off})
		i = end + 1 // b[end] is not base64
	}
	return runs, bits
}

// decodeRunAt appends the bits of the run of base64 characters starting at
// b[i] (decodeBase64Bits) to bits, and returns where the run ends.
func decodeRunAt(bits, b []byte, i int) (int, []byte) {
	o := len(bits)
	j := i
	// Eight characters make six bytes, stored as one word (its last two
	// bytes overwritten by the next step or by the tail), looked up two
	// characters at a time; a word holding anything but base64 characters
	// ends the fast part.
	for ; j+8 <= len(b); j += 8 {
		c := b[j : j+8 : j+8]
		p0, p1 := b64Pair[uint16(c[0])<<8|uint16(c[1])], b64Pair[uint16(c[2])<<8|uint16(c[3])]
		p2, p3 := b64Pair[uint16(c[4])<<8|uint16(c[5])], b64Pair[uint16(c[6])<<8|uint16(c[7])]
		if (p0|p1|p2|p3)&pairInvalid != 0 {
			break
		}
		if o+8 > cap(bits) {
			// A long run may take the rest of b: room for all of it at
			// once, rather than many copies of a large body's bits.
			n := 64
			if j-i >= 256 {
				n = (len(b)-j)*3/4 + 8
			}
			bits = growWiped(bits[:o], n)
		}
		binary.BigEndian.PutUint64(bits[o:o+8:o+8], uint64(p0)<<52|uint64(p1)<<40|uint64(p2)<<28|uint64(p3)<<16)
		o += 6
	}
	// The tail: fewer than eight characters, at most six bytes.
	t := j
	for j < len(b) && b64Value[b[j]] >= 0 {
		j++
	}
	bits = growWiped(bits[:o], 8)
	return j, decodeBase64Bits(bits, b[t:j])
}

// growWiped returns b with room for n more bytes, in a new array if need
// be, b's old array then wiped.
func growWiped(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), max(2*cap(b), len(b)+n))
	copy(nb, b)
	clear(b[:cap(b)])
	return nb
}

// minBase64Run is the shortest run of base64 characters decoded: the
// shortest token or stand-in matched anywhere (7 bytes) takes 10
// characters. Shorter runs are words, not blobs, and decoding them would
// only cost time.
const minBase64Run = 10

// appendBase64Views appends up to shifts views of b's base64: every run of
// at least minBase64Run characters of either alphabet (standard and URL
// mixed, padding optional) decoded, the runs of one view joined by a line
// break so no value can span two of them. View k decodes each run from
// its k-th character: a blob glued to other base64 characters ("x" +
// base64(token)) starts a run at the wrong place, and one of the four
// offsets is then the blob's own. Whatever a run holds, at any byte
// offset, is in one of the views. Each view is at most 3/4 of b, so a
// large body costs a few linear passes, never more.
func appendBase64Views(views [][]byte, b []byte, shifts int) [][]byte {
	var stack [16][2]int
	runs := base64Runs(stack[:0], b)
	if len(runs) == 0 {
		return views
	}
	// One allocation for all the views.
	chars := 0
	for _, r := range runs {
		chars += r[1] - r[0]
	}
	buf := make([]byte, 0, shifts*(chars*3/4+len(runs)))
	if shifts == 1 {
		for i, r := range runs {
			if i > 0 {
				buf = append(buf, '\n')
			}
			buf = decodeBase64Run(buf, b[r[0]:r[1]])
		}
		return append(views, buf[:len(buf):len(buf)])
	}
	// Decode each run once, its last bits included (bits), and read the
	// other offsets off those bits: k characters in is 6k bits in, so view
	// k is the same bit string read from bit 6k (see shiftedBytes). Table
	// decoding every offset cost four passes of the slow kind over a large
	// body.
	var bits []byte
	ends := make([]int, shifts) // where each view ends in buf
	starts := make([]int, shifts)
	total := 0
	for k := 0; k < shifts; k++ {
		starts[k] = total
		for i, r := range runs {
			if i > 0 {
				total++
			}
			total += (r[1] - r[0] - k) * 6 / 8
		}
		ends[k] = starts[k]
	}
	buf = buf[:total]
	for i, r := range runs {
		run := b[r[0]:r[1]]
		bits = decodeBase64Bits(bits[:0], run)
		for k := 0; k < shifts; k++ {
			if i > 0 {
				buf[ends[k]] = '\n'
				ends[k]++
			}
			n := (len(run) - k) * 6 / 8
			shiftedBytes(buf[ends[k]:ends[k]+n], bits, 6*k)
			ends[k] += n
		}
	}
	clear(bits)
	for k := 0; k < shifts; k++ {
		views = append(views, buf[starts[k]:ends[k]:ends[k]])
	}
	return views
}

// decodeBase64Bits appends run's 6-bit values packed as a bit string,
// most significant bit first, to dst: decodeBase64Run's bytes plus, when
// the run's bits do not fill whole bytes, one more byte with the rest,
// zero-padded.
func decodeBase64Bits(dst, run []byte) []byte {
	dst = decodeBase64Run(dst, run[:len(run)/4*4])
	rest := run[len(run)/4*4:]
	var v uint32
	for _, c := range rest {
		v = v<<6 | uint32(b64Value[c])
	}
	switch len(rest) {
	case 1:
		dst = append(dst, byte(v<<2))
	case 2:
		v <<= 12
		dst = append(dst, byte(v>>16), byte(v>>8))
	case 3:
		v <<= 6
		dst = append(dst, byte(v>>16), byte(v>>8), byte(v))
	}
	return dst
}

// shiftedBytes fills dst with the bytes of the bit string bits read from
// bit off on (bits must hold them all).
func shiftedBytes(dst, bits []byte, off int) {
	src := bits[off/8:]
	r := uint(off % 8)
	if r == 0 {
		copy(dst, src)
		return
	}
	// Two words a step: the second word's load serves both.
	i := 0
	for ; i+17 <= len(src) && i+16 <= len(dst); i += 16 {
		s, d := src[i:i+17:i+17], dst[i:i+16:i+16]
		a, b := binary.BigEndian.Uint64(s[0:8]), binary.BigEndian.Uint64(s[8:16])
		binary.BigEndian.PutUint64(d[0:8], a<<r|b>>(64-r))
		binary.BigEndian.PutUint64(d[8:16], b<<r|uint64(s[16])>>(8-r))
	}
	for ; i < len(dst); i++ {
		v := src[i] << r
		if i+1 < len(src) {
			v |= src[i+1] >> (8 - r)
		}
		dst[i] = v
	}
}

// base64Runs appends the spans of b's runs of at least minBase64Run
// base64 characters to runs.
func base64Runs(runs [][2]int, b []byte) [][2]int {
	for i := 0; i < len(b); {
		if b64Value[b[i]] < 0 {
			i++
			continue
		}
		j := i + 1
		for j < len(b) && b64Value[b[j]] >= 0 {
			j++
		}
		if j-i >= minBase64Run {
			runs = append(runs, [2]int{i, j})
		}
		i = j
	}
	return runs
}

// b64Value maps a character of either base64 alphabet to its value, and
// anything else (padding included: it only ends a run) to -1.
var b64Value = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789" {
		t[c] = int8(i)
	}
	t['+'], t['-'] = 62, 62
	t['/'], t['_'] = 63, 63
	return t
}()

// b64Bits is b64Value for characters known to be base64 (a run's).
var b64Bits = func() (t [256]uint8) {
	for i, v := range b64Value {
		t[i] = uint8(v) & 63
	}
	return t
}()

// b64Pair maps two characters (the first in the high byte) to their 12
// bits when both are base64 characters (b64Value), and to pairInvalid
// otherwise: half the lookups of b64Value when decoding a long run. Of its
// 128 KiB, the pairs of base64 characters fill a few hundred cache lines.
var b64Pair = func() *[1 << 16]uint16 {
	t := new([1 << 16]uint16)
	for i := range t {
		hi, lo := b64Value[i>>8], b64Value[i&0xff]
		if hi < 0 || lo < 0 {
			t[i] = pairInvalid
		} else {
			t[i] = uint16(hi)<<6 | uint16(lo)
		}
	}
	return t
}()

const pairInvalid = 1 << 15

// decodeBase64Run appends the bytes of run (base64 characters only, no
// padding) to dst; a trailing partial group yields its whole bytes.
func decodeBase64Run(dst, run []byte) []byte {
	o := len(dst)
	dst = slices.Grow(dst, len(run)*3/4)[:o+len(run)*3/4]
	i := 0
	// Eight characters make six bytes, written as one word (two bytes of
	// it overwritten by the next step or trimmed below).
	for ; i+8 <= len(run) && o+8 <= len(dst); i += 8 {
		c := run[i : i+8 : i+8]
		v := uint64(b64Bits[c[0]])<<58 | uint64(b64Bits[c[1]])<<52 | uint64(b64Bits[c[2]])<<46 | uint64(b64Bits[c[3]])<<40 |
			uint64(b64Bits[c[4]])<<34 | uint64(b64Bits[c[5]])<<28 | uint64(b64Bits[c[6]])<<22 | uint64(b64Bits[c[7]])<<16
		binary.BigEndian.PutUint64(dst[o:o+8:o+8], v)
		o += 6
	}
	for ; i+4 <= len(run); i += 4 {
		v := uint32(b64Value[run[i]])<<18 | uint32(b64Value[run[i+1]])<<12 | uint32(b64Value[run[i+2]])<<6 | uint32(b64Value[run[i+3]])
		dst[o], dst[o+1], dst[o+2] = byte(v>>16), byte(v>>8), byte(v)
		o += 3
	}
	switch len(run) - i {
	case 2:
		dst[o] = byte(b64Value[run[i]])<<2 | byte(b64Value[run[i+1]])>>4
	case 3:
		v := uint32(b64Value[run[i]])<<12 | uint32(b64Value[run[i+1]])<<6 | uint32(b64Value[run[i+2]])
		dst[o], dst[o+1] = byte(v>>10), byte(v>>2)
	}
	return dst
}
