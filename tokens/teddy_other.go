//go:build !amd64 || purego

package tokens

const haveTeddy = false

func teddyFind(t *teddyTab, s []byte) int { return -1 }
