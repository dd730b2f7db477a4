package rewrite

// The reference: eachBase64Piece as it was before it found runs while
// decoding and stopped copying the unshifted piece (issue 12), kept
// verbatim (renamed) so the tests can check that the new code hands fn
// exactly the same pieces.

import (
	"encoding/binary"
	"slices"
	"sync"
)

// refEachEncodedView is EachEncodedView over the reference base64 pieces.
func refEachEncodedView(b []byte, fn func([]byte) bool) bool {
	views := textViews(b)
	for _, v := range views {
		if !fn(v) {
			return false
		}
	}
	if !refEachBase64Piece(b, 4, fn) {
		return false
	}
	for _, v := range views {
		if !refEachBase64Piece(v, 1, fn) {
			return false
		}
	}
	return true
}

// refPieceBufs are refEachBase64Piece's scratch buffers.
type refPieceBufs struct{ bits, piece []byte }

var refPiecePool = sync.Pool{New: func() any { return new(refPieceBufs) }}

// refEachBase64Piece calls fn with appendBase64Views's views of b in pieces:
// for each offset k below shifts, each run's decoding from its k-th
// character (see EachEncodedView).
func refEachBase64Piece(b []byte, shifts int, fn func([]byte) bool) bool {
	var stack [16][2]int
	runs := refBase64Runs(stack[:0], b)
	if len(runs) == 0 {
		return true
	}
	pb := refPiecePool.Get().(*refPieceBufs)
	used := 0
	defer func() {
		// Wipe what this call wrote (the rest was wiped by the call that
		// wrote it): a decoded piece of a rewritten body may hold a real
		// value.
		clear(pb.bits)
		clear(pb.piece[:used])
		refPiecePool.Put(pb)
	}()
	// Every run's bits, once; each piece is then read off them.
	var offs [16]int
	bitOff := offs[:0]
	bits := pb.bits[:0]
	longest := 0
	for _, r := range runs {
		bitOff = append(bitOff, len(bits))
		bits = refDecodeBase64Bits(bits, b[r[0]:r[1]])
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
			refShiftedBytes(piece, bits[bitOff[i]:], 6*k)
			if !fn(piece) {
				return false
			}
		}
	}
	return true
}

// refDecodeBase64Bits appends run's 6-bit values packed as a bit string,
// most significant bit first, to dst: refDecodeBase64Run's bytes plus, when
// the run's bits do not fill whole bytes, one more byte with the rest,
// zero-padded.
func refDecodeBase64Bits(dst, run []byte) []byte {
	dst = refDecodeBase64Run(dst, run[:len(run)/4*4])
	rest := run[len(run)/4*4:]
	var v uint32
	for _, c := range rest {
		v = v<<6 | uint32(refB64Value[c])
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

// refShiftedBytes fills dst with the bytes of the bit string bits read from
// bit off on (bits must hold them all).
func refShiftedBytes(dst, bits []byte, off int) {
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

// refBase64Runs appends the spans of b's runs of at least minBase64Run
// base64 characters to runs.
func refBase64Runs(runs [][2]int, b []byte) [][2]int {
	for i := 0; i < len(b); {
		if refB64Value[b[i]] < 0 {
			i++
			continue
		}
		j := i + 1
		for j < len(b) && refB64Value[b[j]] >= 0 {
			j++
		}
		if j-i >= minBase64Run {
			runs = append(runs, [2]int{i, j})
		}
		i = j
	}
	return runs
}

// refB64Value maps a character of either base64 alphabet to its value, and
// anything else (padding included: it only ends a run) to -1.
var refB64Value = func() (t [256]int8) {
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

// refB64Bits is refB64Value for characters known to be base64 (a run's).
var refB64Bits = func() (t [256]uint8) {
	for i, v := range refB64Value {
		t[i] = uint8(v) & 63
	}
	return t
}()

// refDecodeBase64Run appends the bytes of run (base64 characters only, no
// padding) to dst; a trailing partial group yields its whole bytes.
func refDecodeBase64Run(dst, run []byte) []byte {
	o := len(dst)
	dst = slices.Grow(dst, len(run)*3/4)[:o+len(run)*3/4]
	i := 0
	// Eight characters make six bytes, written as one word (two bytes of
	// it overwritten by the next step or trimmed below).
	for ; i+8 <= len(run) && o+8 <= len(dst); i += 8 {
		c := run[i : i+8 : i+8]
		v := uint64(refB64Bits[c[0]])<<58 | uint64(refB64Bits[c[1]])<<52 | uint64(refB64Bits[c[2]])<<46 | uint64(refB64Bits[c[3]])<<40 |
			uint64(refB64Bits[c[4]])<<34 | uint64(refB64Bits[c[5]])<<28 | uint64(refB64Bits[c[6]])<<22 | uint64(refB64Bits[c[7]])<<16
		binary.BigEndian.PutUint64(dst[o:o+8:o+8], v)
		o += 6
	}
	for ; i+4 <= len(run); i += 4 {
		v := uint32(refB64Value[run[i]])<<18 | uint32(refB64Value[run[i+1]])<<12 | uint32(refB64Value[run[i+2]])<<6 | uint32(refB64Value[run[i+3]])
		dst[o], dst[o+1], dst[o+2] = byte(v>>16), byte(v>>8), byte(v)
		o += 3
	}
	switch len(run) - i {
	case 2:
		dst[o] = byte(refB64Value[run[i]])<<2 | byte(refB64Value[run[i+1]])>>4
	case 3:
		v := uint32(refB64Value[run[i]])<<12 | uint32(refB64Value[run[i+1]])<<6 | uint32(refB64Value[run[i+2]])
		dst[o], dst[o+1] = byte(v>>10), byte(v>>2)
	}
	return dst
}
