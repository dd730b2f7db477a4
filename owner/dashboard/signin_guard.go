package dashboard

import (
	"time"

	"github.com/agentvault/agentvault/internal/failguard"
)

// signInGuard slows down password guessing without handing anyone a way to
// keep the owner out (P24): it counts failed sign-ins only, never the
// successful ones, and counts them per client address and per (client
// address, email). A stranger who fails with the owner's email from their
// own address slows only themselves; the owner signing in from another
// address is never refused. The waits are failguard's; a success clears the
// (address, email) count.
type signInGuard struct {
	g *failguard.Guard
	// free failures per (address, email) before a wait; per address alone
	// the allowance is freePerAddr (several people may share an address).
	free, freePerAddr int
}

func newSignInGuard(free int, first time.Duration, now func() time.Time) *signInGuard {
	return &signInGuard{g: failguard.New(failguard.Config{First: first, Max: 15 * time.Minute, Forget: time.Hour, Now: now}),
		free: free, freePerAddr: 4 * free}
}

func addrKey(addr string) string        { return "a\x00" + addr }
func pairKey(addr, email string) string { return "p\x00" + addr + "\x00" + email }

// wait is how long a sign-in from addr for email must still wait (0: go
// ahead). It does not count anything.
func (g *signInGuard) wait(addr, email string) time.Duration {
	return g.g.Wait(addrKey(addr), pairKey(addr, email))
}

// failed counts a refused password.
func (g *signInGuard) failed(addr, email string) {
	g.g.Failed(addrKey(addr), g.freePerAddr)
	g.g.Failed(pairKey(addr, email), g.free)
}

// succeeded clears the (address, email) count: the person got in.
func (g *signInGuard) succeeded(addr, email string) { g.g.Forget(pairKey(addr, email)) }
