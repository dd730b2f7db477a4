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
// order, except that a base64 view comes in pieces, one per run, where
// EncodedViews joins a view's runs with line breaks: a value holding no
// line break (no token or stand-in does) is in that view exactly when it
// is in one of its pieces. The pieces are built one at a time in reused
// buffers (wiped after), so a large body costs no view-sized allocations;
// a slice passed to fn is valid only during that call. fn returns false to
// stop, and EachEncodedView then returns false.
func EachEncodedView(b []byte, fn func([]byte) bool) bool {
	views := textViews(b)
	for _, v := range views {
		if !fn(v) {
			return false
		}
	}
	if !eachBase64Piece(b, 4, fn) {
		return false
	}
	for _, v := range views {
		if !eachBase64Piece(v, 1, fn) {
			return false
		}
	}
	return true
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

// pieceBufs are eachBase64Piece's scratch buffers.
type pieceBufs struct{ bits, piece []byte }

var piecePool = sync.Pool{New: func() any { return new(pieceBufs) }}

// eachBase64Piece calls fn with appendBase64Views's views of b in pieces:
// for each offset k below shifts, each run's decoding from its k-th
// character (see EachEncodedView).
func eachBase64Piece(b []byte, shifts int, fn func([]byte) bool) bool {
	var stack [16][2]int
	runs := base64Runs(stack[:0], b)
	if len(runs) == 0 {
		return true
	}
	pb := piecePool.Get().(*pieceBufs)
	used := 0
	defer func() {
		// Wipe what this call wrote (the rest was wiped by the call that
		// wrote it): a decoded piece of a rewritten body may hold a real
		// value.
		clear(pb.bits)
		clear(pb.piece[:used])
		piecePool.Put(pb)
	}()
	// Every run's bits, once; each piece is then read off them.
	var offs [16]int
	bitOff := offs[:0]
	bits := pb.bits[:0]
	longest := 0
	for _, r := range runs {
		bitOff = append(bitOff, len(bits))
		bits = decodeBase64Bits(bits, b[r[0]:r[1]])
		longest = max(longest, r[1]-r[0])
	}
	pb.bits = bits
	if len(pb.piece) < longest*6/8 {
		pb.piece = make([]byte, longest*6/8)
	}
	used = longest * 6 / 8
	for k := 0; k < shifts; k++ {
		for i, r := range runs {
			n := (r[1] - r[0] - k) * 6 / 8
			piece := pb.piece[:n]
			shiftedBytes(piece, bits[bitOff[i]:], 6*k)
			if !fn(piece) {
				return false
			}
		}
	}
	return true
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
	i := 0
	for ; i+9 <= len(src) && i+8 <= len(dst); i += 8 {
		s, d := src[i:i+9:i+9], dst[i:i+8:i+8]
		binary.BigEndian.PutUint64(d, binary.BigEndian.Uint64(s)<<r|uint64(s[8])>>(8-r))
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
