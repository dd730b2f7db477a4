// Package tcplb is a plain layer-4 (TCP) load balancer for tests: it
// stands in front of proxyd replicas the way a deployment's balancer does
// (docs/DESIGN.md "Replicas"), copying bytes both ways and knowing nothing
// of HTTP, TLS or the proxy protocol.
//
// It is test support only: never imported by a production package. It
// holds no secret and logs nothing.
package tcplb

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Mode is how a new connection picks its backend.
type Mode int

const (
	// RoundRobin sends each new connection to the next backend in turn.
	RoundRobin Mode = iota
	// PrimaryBackup sends every new connection to the first backend, in
	// the listed order, that accepts the dial: all traffic is on the first
	// one until it stops accepting (it died), then on the next.
	PrimaryBackup
)

// dialTimeout bounds one dial to a backend; a refused dial on loopback
// answers at once.
const dialTimeout = 5 * time.Second

// Balancer is a running balancer. Close stops it.
type Balancer struct {
	ln   net.Listener
	mode Mode

	mu       sync.Mutex
	backends []string
	next     int
	conns    map[net.Conn]struct{}
	served   map[string]int // connections handed to each backend
	closed   bool
	wg       sync.WaitGroup
}

// Start listens on a free loopback port and balances over backends
// (SetBackends may set or change them later).
func Start(mode Mode, backends ...string) (*Balancer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Balancer{ln: ln, mode: mode, backends: backends, conns: map[net.Conn]struct{}{}, served: map[string]int{}}
	b.wg.Add(1)
	go b.serve()
	return b, nil
}

// Addr is the balancer's listening address (host:port).
func (b *Balancer) Addr() string { return b.ln.Addr().String() }

// SetBackends replaces the backends; open connections stay where they are.
func (b *Balancer) SetBackends(addrs ...string) {
	b.mu.Lock()
	b.backends = append([]string(nil), addrs...)
	b.mu.Unlock()
}

// Served is the number of connections handed to backend addr so far.
func (b *Balancer) Served(addr string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.served[addr]
}

// Close stops accepting, closes every open connection (both sides) and
// waits for the copying goroutines to end.
func (b *Balancer) Close() error {
	err := b.ln.Close()
	b.mu.Lock()
	b.closed = true
	for c := range b.conns {
		_ = c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
	return err
}

func (b *Balancer) serve() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		if !b.track(c) {
			_ = c.Close()
			return
		}
		b.wg.Add(1)
		go b.handle(c)
	}
}

// track records c so that Close can end it; false once closed.
func (b *Balancer) track(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

func (b *Balancer) untrack(c net.Conn) {
	b.mu.Lock()
	delete(b.conns, c)
	b.mu.Unlock()
	_ = c.Close()
}

// candidates is the order in which a new connection tries the backends.
func (b *Balancer) candidates() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.backends) == 0 {
		return nil
	}
	if b.mode == RoundRobin {
		addr := b.backends[b.next%len(b.backends)]
		b.next++
		return []string{addr}
	}
	return append([]string(nil), b.backends...)
}

func (b *Balancer) handle(c net.Conn) {
	defer b.wg.Done()
	defer b.untrack(c)
	var up net.Conn
	for _, addr := range b.candidates() {
		u, err := net.DialTimeout("tcp", addr, dialTimeout)
		if err == nil {
			up = u
			b.mu.Lock()
			b.served[addr]++
			b.mu.Unlock()
			break
		}
	}
	if up == nil {
		return
	}
	if !b.track(up) {
		_ = up.Close()
		return
	}
	defer b.untrack(up)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		if err != nil {
			// A reset or a failed write: the connection is gone both ways.
			_ = dst.Close()
			_ = src.Close()
		} else if tc, ok := dst.(*net.TCPConn); ok {
			// Pass the end of one direction on (a half close), as a
			// layer-4 balancer does.
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}
