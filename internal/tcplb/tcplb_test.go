package tcplb

import (
	"bufio"
	"net"
	"testing"
)

// echoName is a backend that answers every line with its name.
func echoName(t *testing.T, name string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					if _, err := r.ReadString('\n'); err != nil {
						return
					}
					if _, err := c.Write([]byte(name + "\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln
}

func ask(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("who\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "" // no backend took the connection
	}
	return line[:len(line)-1]
}

func TestModes(t *testing.T) {
	a, b := echoName(t, "a"), echoName(t, "b")
	t.Run("RoundRobin", func(t *testing.T) {
		lb, err := Start(RoundRobin, a.Addr().String(), b.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer lb.Close()
		got := ask(t, lb.Addr()) + ask(t, lb.Addr()) + ask(t, lb.Addr())
		if got != "aba" {
			t.Errorf("round robin answered %q, want aba", got)
		}
	})
	t.Run("PrimaryBackup", func(t *testing.T) {
		dead := echoName(t, "dead")
		deadAddr := dead.Addr().String()
		dead.Close()
		primary := echoName(t, "p")
		lb, err := Start(PrimaryBackup, primary.Addr().String(), b.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer lb.Close()
		if got := ask(t, lb.Addr()) + ask(t, lb.Addr()); got != "pp" {
			t.Errorf("primary/backup with the primary up answered %q, want pp", got)
		}
		primary.Close()
		if got := ask(t, lb.Addr()); got != "b" {
			t.Errorf("primary/backup with the primary down answered %q, want b", got)
		}
		if p, s := lb.Served(primary.Addr().String()), lb.Served(b.Addr().String()); p != 2 || s != 1 {
			t.Errorf("served primary %d, backup %d; want 2 and 1", p, s)
		}
		lb.SetBackends(deadAddr)
		if got := ask(t, lb.Addr()); got != "" {
			t.Errorf("no backend accepting: answered %q, want the connection closed", got)
		}
	})
}
