//go:build !purego

package tokens

import "golang.org/x/sys/cpu"

// haveTeddy reports whether the vector prefilter can run here.
var haveTeddy = cpu.X86.HasAVX2

//go:noescape
func teddy3AVX2(t *teddyTab, s []byte) (i int, mask uint32)

func teddyFind(t *teddyTab, s []byte) (int, uint32) { return teddy3AVX2(t, s) }
