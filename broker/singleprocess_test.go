package broker_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/store/sqlite"
	"github.com/agentvault/agentvault/vault"
)

// TestP21_SingleProcessKeepsUsesAcrossRestarts: a proxyd alone on its
// SQLite file holds card uses in memory (no store write per request). A
// clean stop writes which grants were spent, so after it an unused grant
// still works and a spent one stays spent; after a crash (no clean stop)
// every one-purchase grant counts as used, since one may have been at the
// site when the process died.
func TestP21_SingleProcessKeepsUsesAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "vault.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	start := func(usesLost bool) *broker.Broker {
		b, _ := brokerOnly(t, func(c *broker.Config) {
			c.Store, c.Notifier = st, &broker.LocalNotifier{}
			c.SingleProcess, c.UsesLost = true, usesLost
		})
		return b
	}
	b1 := start(false)
	spentS, _, err := b1.Create(ctx, "avk")
	if err != nil {
		t.Fatal(err)
	}
	unusedS, _, err := b1.Create(ctx, "avk")
	if err != nil {
		t.Fatal(err)
	}
	gSpent := grantFor(t, b1, spentS, "https://shop.test/pay")
	grantFor(t, b1, unusedS, "https://shop.test/pay")
	u := spentS.NewUse()
	raw, err := b1.Release(ctx, u, gSpent, origin(t, "shop.test"), nil)
	if err != nil {
		t.Fatal(err)
	}
	vault.NewSecret(raw).Wipe()
	u.Done(200)
	b1.CloseAll() // a clean stop

	useAfter := func(b *broker.Broker, id string) agentvault.Code {
		t.Helper()
		s, err := b.Get(id)
		if err != nil {
			t.Fatalf("session %s not loaded: %v", id, err)
		}
		_, gs := s.Grants()
		if len(gs) != 1 {
			t.Fatalf("%d grants after the restart", len(gs))
		}
		u := s.NewUse()
		raw, err := b.Release(ctx, u, gs[0], origin(t, "shop.test"), nil)
		if err == nil {
			vault.NewSecret(raw).Wipe()
			u.Done(200)
		}
		return agentvault.ErrorCode(err)
	}
	b2 := start(false)
	if c := useAfter(b2, spentS.ID); c != agentvault.CodeGrantUsed {
		t.Fatalf("a grant spent before a clean stop: %q after it, want grant_used", c)
	}
	// Authorized again after the clean stop, then the process crashes
	// before using it: after the crash it counts as used.
	s2, err := b2.Get(unusedS.ID)
	if err != nil {
		t.Fatal(err)
	}
	grantFor(t, b2, s2, "https://shop.test/pay")
	b3 := start(true) // b2 never ran CloseAll
	if c := useAfter(b3, unusedS.ID); c != agentvault.CodeGrantUsed {
		t.Fatalf("after a crash a one-purchase grant was usable: %q, want grant_used", c)
	}
}

// TestP21_SingleProcessCleanStopKeepsUnusedGrant: an authorized card that
// was not used before a clean stop is still usable once after it.
func TestP21_SingleProcessCleanStopKeepsUnusedGrant(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "vault.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b1, _ := brokerOnly(t, func(c *broker.Config) {
		c.Store, c.Notifier, c.SingleProcess = st, &broker.LocalNotifier{}, true
	})
	s, _, err := b1.Create(ctx, "avk")
	if err != nil {
		t.Fatal(err)
	}
	grantFor(t, b1, s, "https://shop.test/pay")
	b1.CloseAll()
	b2, _ := brokerOnly(t, func(c *broker.Config) {
		c.Store, c.Notifier, c.SingleProcess = st, &broker.LocalNotifier{}, true
	})
	s2, err := b2.Get(s.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, gs := s2.Grants()
	u := s2.NewUse()
	raw, err := b2.Release(ctx, u, gs[0], origin(t, "shop.test"), nil)
	if err != nil {
		t.Fatalf("an unused grant after a clean stop: %v", err)
	}
	vault.NewSecret(raw).Wipe()
	u.Done(200)
	u = s2.NewUse()
	if _, err := b2.Release(ctx, u, gs[0], origin(t, "shop.test"), nil); agentvault.ErrorCode(err) != agentvault.CodeGrantUsed {
		t.Fatalf("second use: %v, want grant_used", err)
	}
}

// countingStore counts the grant writes that reach a SessionStore.
type countingStore struct {
	*sqlite.Store
	puts, batches atomic.Int64
}

func (c *countingStore) PutGrant(ctx context.Context, g broker.GrantRecord) (broker.GrantRecord, error) {
	c.puts.Add(1)
	return c.Store.PutGrant(ctx, g)
}

func (c *countingStore) PutGrants(ctx context.Context, gs []broker.GrantRecord) error {
	c.batches.Add(1)
	return c.Store.PutGrants(ctx, gs)
}

// TestP21_SingleProcessWritesGrantsBehind: alone on its store, a broker
// answers an authorize without writing to the store; the grants wait and
// are written together (here held back until the clean stop), in one
// batch, as they are at that moment. The next process serves them.
func TestP21_SingleProcessWritesGrantsBehind(t *testing.T) {
	ctx := context.Background()
	sq, err := sqlite.Open(filepath.Join(t.TempDir(), "vault.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	st := &countingStore{Store: sq}
	b1, _ := brokerOnly(t, func(c *broker.Config) {
		c.Store, c.Notifier, c.SingleProcess = st, &broker.LocalNotifier{}, true
		c.GrantWriteBehind = time.Hour
	})
	s, _, err := b1.Create(ctx, "avk")
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		grantFor(t, b1, s, "https://shop.test/pay")
	}
	if n, m := st.puts.Load(), st.batches.Load(); n != 0 || m != 0 {
		t.Fatalf("authorizes wrote to the store: %d grant writes, %d batches", n, m)
	}
	if _, gs, err := sq.GetSession(ctx, s.ID); err != nil || len(gs) != 0 {
		t.Fatalf("store before the flush: %d grants, %v", len(gs), err)
	}
	b1.CloseAll()
	if n, m := st.puts.Load(), st.batches.Load(); n != 0 || m != 1 {
		t.Fatalf("the clean stop wrote %d single grants and %d batches, want one batch", n, m)
	}
	b2, _ := brokerOnly(t, func(c *broker.Config) {
		c.Store, c.Notifier, c.SingleProcess = sq, &broker.LocalNotifier{}, true
	})
	s2, err := b2.Get(s.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, gs := s2.Grants()
	if len(gs) != 1 {
		t.Fatalf("%d grants after the restart, want 1", len(gs))
	}
	u := s2.NewUse()
	raw, err := b2.Release(ctx, u, gs[0], origin(t, "shop.test"), nil)
	if err != nil {
		t.Fatalf("the grant written behind, after a clean stop: %v", err)
	}
	vault.NewSecret(raw).Wipe()
	u.Done(200)
}

// TestP21_SweepPurgesEndedSessionsFromTheStore: the Store does not keep
// every session ever opened. An hour after a session ended (or went idle
// past its limit) a sweep drops it; a session in use stays, and the
// purged one is still refused.
func TestP21_SweepPurgesEndedSessionsFromTheStore(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "vault.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, now := brokerOnly(t, func(c *broker.Config) {
		c.Store, c.Notifier, c.SingleProcess = st, &broker.LocalNotifier{}, true
	})
	ended, _, err := b.Create(ctx, "avk")
	if err != nil {
		t.Fatal(err)
	}
	live, _, err := b.Create(ctx, "avk")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Close(ended.ID); err != nil {
		t.Fatal(err)
	}
	b.Sweep() // the session ended a moment ago: it is kept
	*now = now.Add(2 * time.Hour)
	b.Touch(live)
	b.Sweep() // stores the live session's use, then purges
	// The purge runs behind the sweep: wait for it.
	for deadline := time.Now().Add(30 * time.Second); b.Purged() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("waited 30s for the sweep's purge to run")
		}
	}
	if _, _, err := st.GetSession(ctx, ended.ID); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("the ended session after the purge: %v, want not found", err)
	}
	if r, _, err := st.GetSession(ctx, live.ID); err != nil || !r.Ended.IsZero() {
		t.Fatalf("the session in use after the purge: %+v, %v", r, err)
	}
	if _, err := b.Get(ended.ID); err == nil {
		t.Fatal("a purged session is served")
	}
	if n := b.Purged(); n != 1 {
		t.Fatalf("%d sessions purged, want 1", n)
	}
}
