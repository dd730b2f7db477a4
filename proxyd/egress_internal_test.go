package proxyd

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
)

// TestEgressGate_BurstLooksOnce: a burst of new sessions while the required
// egress is down asks the upstream proxy once, every one refused; the
// answer stands for egressProbeFresh, then the next session looks again
// and starts once the proxy answers. Without egress.required nothing is
// asked.
func TestEgressGate_BurstLooksOnce(t *testing.T) {
	var looks atomic.Int32
	var down atomic.Bool
	down.Store(true)
	probe := func(ctx context.Context, d time.Duration) error {
		looks.Add(1)
		if d != egressProbeTimeout {
			t.Errorf("probe bound %v", d)
		}
		if down.Load() {
			return agentvault.Errorf(agentvault.CodeEgressUnavailable, "down")
		}
		return nil
	}
	var mu sync.Mutex
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	g := newEgressGate(true, probe, slog.New(slog.DiscardHandler))
	g.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	var wg sync.WaitGroup
	var refused atomic.Int32
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if agentvault.ErrorCode(g.check(context.Background())) == agentvault.CodeEgressUnavailable {
				refused.Add(1)
			}
		}()
	}
	wg.Wait()
	if looks.Load() != 1 || refused.Load() != 20 {
		t.Fatalf("a burst of 20: %d looks, %d refused; want 1 and 20", looks.Load(), refused.Load())
	}
	down.Store(false)
	if g.check(context.Background()) == nil {
		t.Fatal("a fresh refusal was not kept")
	}
	mu.Lock()
	now = now.Add(egressProbeFresh)
	mu.Unlock()
	if err := g.check(context.Background()); err != nil || looks.Load() != 2 {
		t.Fatalf("after the answer went stale: %v, %d looks", err, looks.Load())
	}
	g.setRequired(false)
	down.Store(true)
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	if err := g.check(context.Background()); err != nil || looks.Load() != 2 {
		t.Fatalf("not required: %v, %d looks", err, looks.Load())
	}
}
