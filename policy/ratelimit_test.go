package policy

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestRateLimiterTokenBucket(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)}
	l := NewRateLimiter(3, 2*time.Second, clk.now)
	for i := range 3 {
		if err := l.Allow("k1"); err != nil {
			t.Fatalf("call %d within burst refused: %v", i, err)
		}
	}
	err := l.Allow("k1")
	if agentvault.ErrorCode(err) != agentvault.CodeRateLimited {
		t.Fatalf("4th call: %v", err)
	}
	var rl *RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter != 2*time.Second {
		t.Fatalf("retry after: %+v", rl)
	}
	// Another key has its own bucket.
	if err := l.Allow("k2"); err != nil {
		t.Fatalf("other key: %v", err)
	}
	clk.advance(1500 * time.Millisecond)
	if ok, wait := l.Take("k1"); ok || wait != 500*time.Millisecond {
		t.Fatalf("after 1.5s: ok=%v wait=%v", ok, wait)
	}
	clk.advance(500 * time.Millisecond)
	if err := l.Allow("k1"); err != nil {
		t.Fatalf("token refilled after 2s: %v", err)
	}
	if err := l.Allow("k1"); err == nil {
		t.Fatal("only one token refilled")
	}
	// A long pause refills to the burst, not beyond.
	clk.advance(time.Hour)
	for i := range 3 {
		if err := l.Allow("k1"); err != nil {
			t.Fatalf("after an hour, call %d: %v", i, err)
		}
	}
	if err := l.Allow("k1"); err == nil {
		t.Fatal("burst exceeded after a long pause")
	}
	// A clock that jumps back does not mint tokens.
	clk.advance(-time.Hour)
	if err := l.Allow("k1"); err == nil {
		t.Fatal("clock going back minted a token")
	}
}

func TestRateLimiterBoundedMemory(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	l := NewRateLimiter(2, time.Second, clk.now)
	for i := range maxBuckets + 10 {
		if i == maxBuckets {
			clk.advance(time.Minute) // all earlier buckets are full again
		}
		l.Allow(fmt.Sprintf("key-%d", i))
	}
	if n := len(l.buckets); n > maxBuckets {
		t.Fatalf("%d buckets kept", n)
	}
}

func TestRateLimiterZeroConfigRefuses(t *testing.T) {
	var l RateLimiter
	if err := l.Allow("k"); err == nil {
		t.Fatal("an unconfigured limiter allowed a call")
	}
}
