package dashboard

import (
	"sync"
	"time"
)

// signInGuard slows down password guessing without handing anyone a way to
// keep the owner out (P24): it counts failed sign-ins only, never the
// successful ones, and counts them per client address and per (client
// address, email). A stranger who fails with the owner's email from their
// own address slows only themselves; the owner signing in from another
// address is never refused. Past the free failures, each further failure
// doubles the wait, up to maxWait. A success clears the (address, email)
// count. The map is bounded: at most maxKeys entries, the stalest dropped
// first, and an entry idle for forget is gone.
type signInGuard struct {
	mu  sync.Mutex
	now func() time.Time
	// free failures per (address, email) before a wait; per address alone
	// the allowance is freePerAddr (several people may share an address).
	free, freePerAddr int
	first, maxWait    time.Duration
	forget            time.Duration
	maxKeys           int
	m                 map[string]*failures
}

type failures struct {
	n     int
	until time.Time // no attempt from this key before then
	last  time.Time
}

func newSignInGuard(free int, first time.Duration, now func() time.Time) *signInGuard {
	return &signInGuard{now: now, free: free, freePerAddr: 4 * free, first: first, maxWait: 15 * time.Minute,
		forget: time.Hour, maxKeys: 10000, m: map[string]*failures{}}
}

func addrKey(addr string) string        { return "a\x00" + addr }
func pairKey(addr, email string) string { return "p\x00" + addr + "\x00" + email }

// wait is how long a sign-in from addr for email must still wait (0: go
// ahead). It does not count anything.
func (g *signInGuard) wait(addr, email string) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	var w time.Duration
	for _, k := range []string{addrKey(addr), pairKey(addr, email)} {
		if f := g.m[k]; f != nil && f.until.After(now) {
			w = max(w, f.until.Sub(now))
		}
	}
	return w
}

// failed counts a refused password.
func (g *signInGuard) failed(addr, email string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	g.sweep(now)
	g.count(addrKey(addr), g.freePerAddr, now)
	g.count(pairKey(addr, email), g.free, now)
}

func (g *signInGuard) count(k string, free int, now time.Time) {
	f := g.m[k]
	if f == nil || now.Sub(f.last) > g.forget {
		f = &failures{}
		g.m[k] = f
	}
	f.n++
	f.last = now
	if over := f.n - free + 1; over > 0 { // the free-th failure starts the waits
		w := g.first
		for i := 1; i < over && w < g.maxWait; i++ {
			w *= 2
		}
		f.until = now.Add(min(w, g.maxWait))
	}
}

// succeeded clears the (address, email) count: the person got in.
func (g *signInGuard) succeeded(addr, email string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.m, pairKey(addr, email))
}

// sweep drops forgotten entries, and the stalest ones past maxKeys.
func (g *signInGuard) sweep(now time.Time) {
	if len(g.m) < g.maxKeys {
		return
	}
	var stalest string
	var at time.Time
	for k, f := range g.m {
		if now.Sub(f.last) > g.forget && !f.until.After(now) {
			delete(g.m, k)
			continue
		}
		if stalest == "" || f.last.Before(at) {
			stalest, at = k, f.last
		}
	}
	if len(g.m) >= g.maxKeys {
		delete(g.m, stalest)
	}
}
