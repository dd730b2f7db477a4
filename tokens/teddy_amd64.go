//go:build !purego

package tokens

import "golang.org/x/sys/cpu"

// bestVec is the fastest vector prefilter this CPU runs.
var bestVec = func() vecKind {
	switch x := cpu.X86; {
	case x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VBMI:
		return vecVBMI
	case x.HasAVX2:
		return vecAVX2
	}
	return vecNone
}()

//go:noescape
func teddy4AVX2(t *teddyTab, s []byte, out *[64]byte) (i int, mask uint32)

//go:noescape
func teddy4VBMI(t *vbmiTab, s []byte, out *[64]byte) (i int, mask uint64)
