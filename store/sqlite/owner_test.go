package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/store/sqlite"

	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/owner/ownertest"
)

// TestOwnerConformance runs the owner side's store contract (API keys,
// policies, approvals, accounts, the spending ledger incl. the P18
// concurrency test) against a real SQLite file.
func TestOwnerConformance(t *testing.T) {
	ownertest.Run(t, func(t *testing.T) owner.Store { return openTemp(t) })
}

// TestP18_SQLiteLedgerTwoHandlesOneCap opens the same database file twice
// and races reservations through both: the daily cap holds across handles,
// and exactly as many purchases win as fit. (Within one process the two
// Stores share one handle (P22); the race runs over its several pooled
// connections, each taking SQLite's write lock as another process would.)
func TestP18_SQLiteLedgerTwoHandlesOneCap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vault.db")
	var handles []*sqlite.Store
	for range 2 {
		s, err := sqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		handles = append(handles, s)
	}
	ctx := context.Background()
	daily := policy.MustAmount("50.00 EUR")
	var wins atomic.Int64
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := handles[i%2].Reserve(ctx, policy.Reservation{
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
	today, _, err := handles[0].Spent(ctx, "itm_card", "2026-11-30", "2026-11", "EUR")
	if err != nil {
		t.Fatal(err)
	}
	if wins.Load() != 5 || today != daily {
		t.Fatalf("%d purchases won, %s spent; want 5 and %s", wins.Load(), today, daily)
	}
}
