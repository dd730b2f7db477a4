//go:build !amd64 || purego

package tokens

const bestVec = vecNone

func teddy4AVX2(t *teddyTab, s []byte, out *[64]byte) (int, uint32) { return -1, 0 }

func teddy4VBMI(t *vbmiTab, s []byte, out *[64]byte) (int, uint64) { return -1, 0 }
