package failguard

import (
	"net"
	"net/netip"
	"sync"
	"time"
)

// Config sets a Guard's waits. Zero values take the defaults noted.
type Config struct {
	// First is the wait after the first failure past the free ones; each
	// further failure doubles it (default a minute).
	First time.Duration
	// Max caps a wait (default 15 minutes).
	Max time.Duration
	// Forget drops a key's count once it has been idle this long (default an
	// hour).
	Forget time.Duration
	// MaxKeys bounds the keys held (default 10000).
	MaxKeys int
	// Now is the clock (default time.Now), injected so tests never sleep.
	Now func() time.Time
}

// Guard counts failures per key. Its methods are safe for concurrent use.
type Guard struct {
	cfg Config

	mu sync.Mutex
	m  map[string]*failures
}

type failures struct {
	n     int
	until time.Time // no attempt from this key before then
	last  time.Time
}

// New builds a Guard.
func New(cfg Config) *Guard {
	if cfg.First <= 0 {
		cfg.First = time.Minute
	}
	if cfg.Max <= 0 {
		cfg.Max = 15 * time.Minute
	}
	if cfg.Forget <= 0 {
		cfg.Forget = time.Hour
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = 10000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Guard{cfg: cfg, m: map[string]*failures{}}
}

// Wait is how long an attempt under any of keys must still wait (0: go
// ahead): the longest wait among them. It counts nothing.
func (g *Guard) Wait(keys ...string) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.cfg.Now()
	var w time.Duration
	for _, k := range keys {
		if f := g.m[k]; f != nil && f.until.After(now) {
			w = max(w, f.until.Sub(now))
		}
	}
	return w
}

// Failed counts a failure under key, which may fail free times before the
// waits start: the free-th failure sets the first wait.
func (g *Guard) Failed(key string, free int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.cfg.Now()
	g.sweep(now)
	f := g.m[key]
	if f == nil || now.Sub(f.last) > g.cfg.Forget {
		f = &failures{}
		g.m[key] = f
	}
	f.n++
	f.last = now
	if over := f.n - free + 1; over > 0 {
		w := g.cfg.First
		for i := 1; i < over && w < g.cfg.Max; i++ {
			w *= 2
		}
		f.until = now.Add(min(w, g.cfg.Max))
	}
}

// Forget clears key's count (a person who got in).
func (g *Guard) Forget(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.m, key)
}

// sweep drops forgotten entries, and the stalest one past MaxKeys.
func (g *Guard) sweep(now time.Time) {
	if len(g.m) < g.cfg.MaxKeys {
		return
	}
	var stalest string
	var at time.Time
	for k, f := range g.m {
		if now.Sub(f.last) > g.cfg.Forget && !f.until.After(now) {
			delete(g.m, k)
			continue
		}
		if stalest == "" || f.last.Before(at) {
			stalest, at = k, f.last
		}
	}
	if len(g.m) >= g.cfg.MaxKeys {
		delete(g.m, stalest)
	}
}

// ClientKey is the key of the client at remoteAddr (host:port, or a bare
// address): an IPv4 address as it is, an IPv6 address by its /64, so one
// subscriber cannot reset its count by moving within its own block. An
// address that does not parse is its own key.
func ClientKey(remoteAddr string) string {
	host := remoteAddr
	if h, _, err := net.SplitHostPort(remoteAddr); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// Clients is a Guard keyed by client (ClientKey of a remote address), each
// client with the same free failures: the proxy listener's credentials.
type Clients struct {
	Guard *Guard
	Free  int
}

// Wait is how long the client at remoteAddr must still wait (0: go ahead).
func (c Clients) Wait(remoteAddr string) time.Duration { return c.Guard.Wait(ClientKey(remoteAddr)) }

// Failed counts a failure of the client at remoteAddr.
func (c Clients) Failed(remoteAddr string) { c.Guard.Failed(ClientKey(remoteAddr), c.Free) }
