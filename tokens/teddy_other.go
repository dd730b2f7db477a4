//go:build !amd64 || purego

package tokens

const haveTeddy = false

func teddyFind(t *teddyTab, s []byte) (int, uint32) { return -1, 0 }
