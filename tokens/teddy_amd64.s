//go:build !purego

#include "textflag.h"

// func teddy4AVX2(t *teddyTab, s []byte, out *[64]byte) (i int, mask uint32)
//
// Scans s in 32-byte blocks for positions p whose bytes s[p] to s[p+3]
// all hit one bucket in the nibble tables (Langdale's Teddy, as in
// Hyperscan and Rust's aho-corasick, here with unaligned loads at +0 to +3
// instead of lane shifts). The first pass looks up both nibbles of the
// first byte and only the low nibbles of the other three, which rules out
// almost every block at half the shuffles; the high nibbles of bytes 1-3
// are looked up only in blocks the first pass keeps. Only blocks whose
// last load stays inside s are scanned. It returns the first block i with
// candidates and their bitmask (bit k: position i+k), with each position's
// bucket bits in out[k], or ^done and 0 where done is the number of
// leading positions it ruled out.
TEXT ·teddy4AVX2(SB), NOSPLIT, $0-52
	MOVQ t+0(FP), AX
	MOVQ s_base+8(FP), SI
	MOVQ s_len+16(FP), DX
	VMOVDQU 0(AX), Y8
	VMOVDQU 32(AX), Y9
	VMOVDQU 64(AX), Y10
	VMOVDQU 96(AX), Y11
	VMOVDQU 128(AX), Y12
	VMOVDQU 160(AX), Y13
	VMOVDQU 192(AX), Y14
	VMOVDQU 224(AX), Y15
	VMOVDQU 256(AX), Y7
	XORQ CX, CX
	SUBQ $35, DX
	JL   tail

loop:
	CMPQ CX, DX
	JG   tail
	VMOVDQU (SI)(CX*1), Y0
	VPSRLW  $4, Y0, Y1
	VPAND   Y7, Y0, Y0
	VPAND   Y7, Y1, Y1
	VPSHUFB Y0, Y8, Y2
	VPSHUFB Y1, Y9, Y4
	VPAND   Y2, Y4, Y4
	VPAND   1(SI)(CX*1), Y7, Y0
	VPSHUFB Y0, Y10, Y2
	VPAND   Y2, Y4, Y4
	VPAND   2(SI)(CX*1), Y7, Y0
	VPSHUFB Y0, Y12, Y2
	VPAND   Y2, Y4, Y4
	VPAND   3(SI)(CX*1), Y7, Y0
	VPSHUFB Y0, Y14, Y2
	VPAND   Y2, Y4, Y4
	VPTEST  Y4, Y4
	JNZ  high

next:
	ADDQ $32, CX
	JMP  loop

	// Kept by the first pass: the high nibbles of bytes 1-3 decide.
high:
	VMOVDQU 1(SI)(CX*1), Y0
	VPSRLW  $4, Y0, Y1
	VPAND   Y7, Y1, Y1
	VPSHUFB Y1, Y11, Y3
	VPAND   Y3, Y4, Y4
	VMOVDQU 2(SI)(CX*1), Y0
	VPSRLW  $4, Y0, Y1
	VPAND   Y7, Y1, Y1
	VPSHUFB Y1, Y13, Y3
	VPAND   Y3, Y4, Y4
	VMOVDQU 3(SI)(CX*1), Y0
	VPSRLW  $4, Y0, Y1
	VPAND   Y7, Y1, Y1
	VPSHUFB Y1, Y15, Y3
	VPAND   Y3, Y4, Y4
	VPTEST  Y4, Y4
	JZ   next

found:
	VPXOR    Y6, Y6, Y6
	VPCMPEQB Y6, Y4, Y5
	VPMOVMSKB Y5, BX
	NOTL BX
	MOVQ out+32(FP), DI
	VMOVDQU Y4, (DI)
	MOVQ CX, i+40(FP)
	MOVL BX, mask+48(FP)
	VZEROUPPER
	RET

tail:
	NOTQ CX
	MOVQ CX, i+40(FP)
	MOVL $0, mask+48(FP)
	VZEROUPPER
	RET

// func teddy4VBMI(t *vbmiTab, s []byte, out *[64]byte) (i int, mask uint64)
//
// The same search with AVX-512 VBMI: four 64-entry byte tables looked up
// with VPERMB (it reads the low 6 bits of each byte), so a step tests 64
// positions on four bytes with one lookup per byte. Only blocks whose last
// load stays inside s are scanned. Results as for teddy4AVX2, with a
// 64-bit mask.
TEXT ·teddy4VBMI(SB), NOSPLIT, $0-56
	MOVQ t+0(FP), AX
	MOVQ s_base+8(FP), SI
	MOVQ s_len+16(FP), DX
	VMOVDQU64 0(AX), Z16
	VMOVDQU64 64(AX), Z17
	VMOVDQU64 128(AX), Z18
	VMOVDQU64 192(AX), Z19
	XORQ CX, CX
	SUBQ $67, DX
	JL   vtail

vloop:
	CMPQ CX, DX
	JG   vtail
	VMOVDQU64 (SI)(CX*1), Z0
	VMOVDQU64 1(SI)(CX*1), Z1
	VMOVDQU64 2(SI)(CX*1), Z2
	VMOVDQU64 3(SI)(CX*1), Z3
	VPERMB    Z16, Z0, Z0
	VPERMB    Z17, Z1, Z1
	VPERMB    Z18, Z2, Z2
	VPERMB    Z19, Z3, Z3
	VPTERNLOGD $0x80, Z2, Z1, Z0
	VPTESTMB  Z3, Z0, K1
	KORTESTQ  K1, K1
	JNZ  vfound
	ADDQ $64, CX
	JMP  vloop

vfound:
	KMOVQ K1, BX
	VPANDD Z3, Z0, Z0
	MOVQ out+32(FP), DI
	VMOVDQU64 Z0, (DI)
	MOVQ CX, i+40(FP)
	MOVQ BX, mask+48(FP)
	VZEROUPPER
	RET

vtail:
	NOTQ CX
	MOVQ CX, i+40(FP)
	MOVQ $0, mask+48(FP)
	VZEROUPPER
	RET
