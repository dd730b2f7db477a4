package tcplb

import (
	"math/rand/v2"
	"net"
	"strconv"
	"testing"
)

// FreeAddr returns a loopback address a child process can listen on. The
// port is picked below Linux's ephemeral range (32768-60999): a ":0" port
// freed for the child to bind can be taken meanwhile by an outgoing
// connection or a ":0" listener of the tests running in parallel.
func FreeAddr(t testing.TB) string {
	t.Helper()
	for range 200 {
		addr := "127.0.0.1:" + strconv.Itoa(20000+rand.IntN(12000))
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr
		}
	}
	t.Fatal("no free port between 20000 and 32000")
	return ""
}
