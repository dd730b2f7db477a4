//go:build !purego

#include "textflag.h"

// func teddy3AVX2(t *teddyTab, s []byte) (i int, mask uint32)
//
// Scans s in 32-byte blocks for positions p whose bytes s[p], s[p+1],
// s[p+2] all hit one bucket in the nibble tables (Langdale's Teddy, as in
// Hyperscan and Rust's aho-corasick, here with unaligned loads at +0, +1,
// +2 instead of lane shifts). Only blocks whose last load stays inside s
// are scanned. It returns the first block i with candidates and their
// bitmask (bit k: position i+k), or ^done and 0 where done is the number
// of leading positions it ruled out.
TEXT ·teddy3AVX2(SB), NOSPLIT, $0-44
	MOVQ t+0(FP), AX
	MOVQ s_base+8(FP), SI
	MOVQ s_len+16(FP), DX
	VMOVDQU 0(AX), Y10
	VMOVDQU 32(AX), Y11
	VMOVDQU 64(AX), Y12
	VMOVDQU 96(AX), Y13
	VMOVDQU 128(AX), Y14
	VMOVDQU 160(AX), Y15
	VMOVDQU 192(AX), Y9
	VPXOR Y8, Y8, Y8
	XORQ CX, CX
	SUBQ $34, DX
	JL   tail

loop:
	CMPQ CX, DX
	JG   tail
	VMOVDQU (SI)(CX*1), Y0
	VMOVDQU 1(SI)(CX*1), Y5
	VMOVDQU 2(SI)(CX*1), Y6
	VPSRLW  $4, Y0, Y1
	VPAND   Y9, Y0, Y0
	VPAND   Y9, Y1, Y1
	VPSHUFB Y0, Y10, Y2
	VPSHUFB Y1, Y11, Y3
	VPAND   Y2, Y3, Y4
	VPSRLW  $4, Y5, Y1
	VPAND   Y9, Y5, Y5
	VPAND   Y9, Y1, Y1
	VPSHUFB Y5, Y12, Y2
	VPSHUFB Y1, Y13, Y3
	VPAND   Y2, Y4, Y4
	VPAND   Y3, Y4, Y4
	VPSRLW  $4, Y6, Y1
	VPAND   Y9, Y6, Y6
	VPAND   Y9, Y1, Y1
	VPSHUFB Y6, Y14, Y2
	VPSHUFB Y1, Y15, Y3
	VPAND   Y2, Y4, Y4
	VPAND   Y3, Y4, Y4
	VPCMPEQB Y8, Y4, Y5
	VPMOVMSKB Y5, BX
	NOTL BX
	TESTL BX, BX
	JNZ  found
	ADDQ $32, CX
	JMP  loop

found:
	MOVQ CX, i+32(FP)
	MOVL BX, mask+40(FP)
	VZEROUPPER
	RET

tail:
	NOTQ CX
	MOVQ CX, i+32(FP)
	MOVL $0, mask+40(FP)
	VZEROUPPER
	RET
