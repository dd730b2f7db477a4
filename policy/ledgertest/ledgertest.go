// Package ledgertest is the conformance suite every policy.Ledger must pass:
// the in-memory ledger in package policy and the store's SQLite ledger run
// the same tests. It must never depend on a particular implementation; it
// only speaks the policy.Ledger interface.
package ledgertest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/policy"
)

// Run runs the suite. open returns a fresh, empty ledger for each subtest.
func Run(t *testing.T, open func(t *testing.T) policy.Ledger) {
	t.Run("TestP18_CapsNeverExceededUnderConcurrency", func(t *testing.T) { capsUnderConcurrency(t, open(t)) })
	t.Run("TestP18_ReserveOncePerAuthorization", func(t *testing.T) { oncePerAuthorization(t, open(t)) })
	t.Run("CardsAndCurrenciesApart", func(t *testing.T) { apart(t, open(t)) })
	t.Run("RefusesIncomplete", func(t *testing.T) { incomplete(t, open(t)) })
}

func amt(s string) *policy.Amount { a := policy.MustAmount(s); return &a }

func capsUnderConcurrency(t *testing.T, l policy.Ledger) {
	ctx := context.Background()
	caps := policy.Caps{PerPurchase: amt("10.00 EUR"), Daily: amt("100.00 EUR"), Monthly: amt("150.00 EUR")}
	const workers = 32
	var ok atomic.Int64
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 10 {
				day := "2026-11-30"
				if j%2 == 1 {
					day = "2026-11-29"
				}
				err := l.Reserve(ctx, policy.Reservation{
					ID: fmt.Sprintf("auth-%d-%d", i, j), CardID: "card1",
					Amount: policy.MustAmount("7.00 EUR"), Day: day, Month: "2026-11", Caps: caps,
				})
				switch agentvault.ErrorCode(err) {
				case "":
					ok.Add(1)
				case agentvault.CodeDailyLimit, agentvault.CodeMonthlyLimit:
				default:
					t.Errorf("unexpected error code %q", agentvault.ErrorCode(err))
				}
			}
		}()
	}
	wg.Wait()
	today, month, err := l.Spent(ctx, "card1", "2026-11-30", "2026-11", "EUR")
	if err != nil {
		t.Fatal(err)
	}
	yesterday, _, err := l.Spent(ctx, "card1", "2026-11-29", "2026-11", "EUR")
	if err != nil {
		t.Fatal(err)
	}
	if today.Minor > 10000 || yesterday.Minor > 10000 || month.Minor > 15000 {
		t.Fatalf("caps exceeded: today %s, yesterday %s, month %s", today, yesterday, month)
	}
	if month.Minor != today.Minor+yesterday.Minor || month.Minor != ok.Load()*700 {
		t.Fatalf("ledger inconsistent: month %s, days %s + %s, %d successes", month, today, yesterday, ok.Load())
	}
	// 150.00 / 7.00: 21 purchases fit the month, and exactly that many win.
	if ok.Load() != 21 {
		t.Fatalf("%d reservations succeeded, want 21", ok.Load())
	}
}

func oncePerAuthorization(t *testing.T, l policy.Ledger) {
	ctx := context.Background()
	r := policy.Reservation{ID: "auth-1", CardID: "card1", Amount: policy.MustAmount("60.00 EUR"), Day: "d", Month: "m",
		Caps: policy.Caps{Daily: amt("100.00 EUR")}}
	for range 3 {
		if err := l.Reserve(ctx, r); err != nil {
			t.Fatalf("reserve retried: %v", err)
		}
	}
	today, _, _ := l.Spent(ctx, "card1", "d", "m", "EUR")
	if today != policy.MustAmount("60.00 EUR") {
		t.Fatalf("spent %s after a retried reservation, want 60.00 EUR", today)
	}
	r2 := r
	r2.Amount = policy.MustAmount("61.00 EUR")
	if err := l.Reserve(ctx, r2); agentvault.ErrorCode(err) != agentvault.CodeConflict {
		t.Fatalf("reused id for another amount: %v", err)
	}
	r3 := r
	r3.ID = "auth-2"
	if err := l.Reserve(ctx, r3); agentvault.ErrorCode(err) != agentvault.CodeDailyLimit {
		t.Fatalf("second purchase over the daily cap: %v", err)
	}
	if err := l.Cancel(ctx, "auth-1"); err != nil {
		t.Fatal(err)
	}
	if err := l.Reserve(ctx, r3); err != nil {
		t.Fatalf("after cancel the cap has room again: %v", err)
	}
	if err := l.Cancel(ctx, "unknown"); err != nil {
		t.Fatalf("cancel of an unknown id: %v", err)
	}
}

func apart(t *testing.T, l policy.Ledger) {
	ctx := context.Background()
	caps := policy.Caps{Daily: amt("10.00 EUR")}
	for i, cardID := range []string{"card1", "card2"} {
		r := policy.Reservation{ID: fmt.Sprint("a", i), CardID: cardID, Amount: policy.MustAmount("10.00 EUR"), Day: "d", Month: "m", Caps: caps}
		if err := l.Reserve(ctx, r); err != nil {
			t.Fatalf("%s: %v", cardID, err)
		}
	}
	today, _, _ := l.Spent(ctx, "card1", "d", "m", "EUR")
	if today.Minor != 1000 {
		t.Fatalf("card1 spent %s", today)
	}
	other, _, _ := l.Spent(ctx, "card1", "d2", "m", "EUR")
	if other.Minor != 0 {
		t.Fatalf("another day spent %s", other)
	}
}

func incomplete(t *testing.T, l policy.Ledger) {
	if err := l.Reserve(context.Background(), policy.Reservation{ID: "x"}); agentvault.ErrorCode(err) != agentvault.CodeInvalidInput {
		t.Fatalf("incomplete reservation: %v", err)
	}
}
