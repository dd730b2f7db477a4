package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/owner/ownertest"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/store/postgres"
	"github.com/agentvault/agentvault/store/postgres/pgtest"
	"github.com/agentvault/agentvault/vault"
	"github.com/agentvault/agentvault/vault/storetest"
)

func openTemp(t testing.TB) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), pgtest.DSN(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestConformance runs the vault store contract against a real Postgres.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) vault.Store { return openTemp(t) })
}

// TestOwnerConformance runs the owner side's store contract (incl. the
// ledger suite, policy/ledgertest, with the P18 concurrency test) against
// a real Postgres.
func TestOwnerConformance(t *testing.T) {
	ownertest.Run(t, func(t *testing.T) owner.Store { return openTemp(t) })
}

func TestMigrationsIdempotent(t *testing.T) {
	dsn := pgtest.DSN(t)
	for i := 0; i < 2; i++ {
		s, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		v, err := s.SchemaVersion(context.Background())
		if err != nil || v != postgres.LatestSchemaVersion() {
			t.Fatalf("open %d: schema version %d, %v; want %d", i, v, err, postgres.LatestSchemaVersion())
		}
		s.Close()
	}
}

func TestNotFoundIsSentinel(t *testing.T) {
	s := openTemp(t)
	_, err := s.GetItem(context.Background(), "org", "itm_x")
	if !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("got %v", err)
	}
}

// TestP18_TwoReplicasOneCap opens the same database through two stores
// (two pools: two replicas) and races reservations through both: the
// daily cap holds across them, and exactly as many purchases win as fit.
func TestP18_TwoReplicasOneCap(t *testing.T) {
	dsn := pgtest.DSN(t)
	var replicas []*postgres.Store
	for range 2 {
		s, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		replicas = append(replicas, s)
	}
	ctx := context.Background()
	daily := policy.MustAmount("50.00 EUR")
	var wins atomic.Int64
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := replicas[i%2].Reserve(ctx, policy.Reservation{
				ID: fmt.Sprintf("s_%d:av_card_1_number", i), CardID: "itm_card", Amount: policy.MustAmount("10.00 EUR"),
				Day: "2026-11-30", Month: "2026-11", Caps: policy.Caps{Daily: &daily},
			})
			switch agentvault.ErrorCode(err) {
			case "":
				wins.Add(1)
			case agentvault.CodeDailyLimit:
			default:
				t.Errorf("reserve: %v", err)
			}
		}()
	}
	wg.Wait()
	today, _, err := replicas[1].Spent(ctx, "itm_card", "2026-11-30", "2026-11", "EUR")
	if err != nil {
		t.Fatal(err)
	}
	if wins.Load() != 5 || today != daily {
		t.Fatalf("%d purchases won, %s spent; want 5 and %s", wins.Load(), today, daily)
	}
}

// TestP22_RefusesNonDurableServer: a connection on which commits would be
// acknowledged before they are on disk (synchronous_commit=off) is
// refused, so the store never runs with weaker guarantees than it states.
func TestP22_RefusesNonDurableServer(t *testing.T) {
	dsn := pgtest.DSN(t) + "&synchronous_commit=off"
	s, err := postgres.Open(context.Background(), dsn)
	if err == nil {
		s.Close()
		t.Fatal("Open accepted a server with synchronous_commit=off")
	}
	if !strings.Contains(agentvault.ErrorMessage(err), "Postgres") {
		t.Fatalf("unexpected error: %v", err)
	}
}

// TestDSNNeverInErrors: a DSN that does not parse, or names a server that
// is not there, is refused without repeating the DSN (it may hold a
// password).
func TestDSNNeverInErrors(t *testing.T) {
	for _, dsn := range []string{
		"postgres://u:hunter2secret@[::1/db",
		"postgres://u:hunter2secret@127.0.0.1:1/db?connect_timeout=2",
	} {
		_, err := postgres.Open(context.Background(), dsn)
		if err == nil {
			t.Fatalf("Open(%q) succeeded", dsn)
		}
		if strings.Contains(err.Error(), "hunter2secret") || strings.Contains(fmt.Sprintf("%+v", err), "hunter2secret") {
			t.Fatalf("error repeats the password: %v", err)
		}
	}
}
