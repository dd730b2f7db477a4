package e2e

import (
	"testing"
	"time"
)

// waitUntil polls cond until it holds, and fails the test naming what it
// waited for when within runs out. Tests wait on the event they need, never
// a fixed time: the bound is generous because the machine may be busy.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
