package policy

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentvault/agentvault"
)

func TestP18_LedgerCapsNeverExceededUnderConcurrency(t *testing.T) {
	l := NewMemLedger()
	ctx := context.Background()
	caps := Caps{PerPurchase: amt("10.00 EUR"), Daily: amt("100.00 EUR"), Monthly: amt("150.00 EUR")}
	const workers = 64
	var ok, daily, monthly atomic.Int64
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
				err := l.Reserve(ctx, Reservation{
					ID: fmt.Sprintf("auth-%d-%d", i, j), CardID: "card1",
					Amount: MustAmount("7.00 EUR"), Day: day, Month: "2026-11", Caps: caps,
				})
				switch agentvault.ErrorCode(err) {
				case "":
					ok.Add(1)
				case agentvault.CodeDailyLimit:
					daily.Add(1)
				case agentvault.CodeMonthlyLimit:
					monthly.Add(1)
				default:
					t.Errorf("unexpected error %v", err)
				}
			}
		}()
	}
	wg.Wait()
	today, month, _ := l.Spent(ctx, "card1", "2026-11-30", "2026-11", "EUR")
	yesterday, _, _ := l.Spent(ctx, "card1", "2026-11-29", "2026-11", "EUR")
	if today.Minor > 10000 || yesterday.Minor > 10000 || month.Minor > 15000 {
		t.Fatalf("caps exceeded: today %s, yesterday %s, month %s", today, yesterday, month)
	}
	if month.Minor != today.Minor+yesterday.Minor || month.Minor != ok.Load()*700 {
		t.Fatalf("ledger inconsistent: month %s, days %s + %s, %d successes", month, today, yesterday, ok.Load())
	}
	// 150.00 / 7.00 = 21 purchases fit the month; exactly that many win.
	if ok.Load() != 21 {
		t.Fatalf("%d reservations succeeded, want 21 (daily refusals %d, monthly %d)", ok.Load(), daily.Load(), monthly.Load())
	}
}

func TestP18_LedgerReserveOncePerAuthorization(t *testing.T) {
	l := NewMemLedger()
	ctx := context.Background()
	r := Reservation{ID: "auth-1", CardID: "card1", Amount: MustAmount("60.00 EUR"), Day: "d", Month: "m",
		Caps: Caps{Daily: amt("100.00 EUR")}}
	for range 3 {
		if err := l.Reserve(ctx, r); err != nil {
			t.Fatalf("reserve retried: %v", err)
		}
	}
	today, _, _ := l.Spent(ctx, "card1", "d", "m", "EUR")
	if today != MustAmount("60.00 EUR") {
		t.Fatalf("spent %s after a retried reservation, want 60.00 EUR", today)
	}
	r2 := r
	r2.Amount = MustAmount("61.00 EUR")
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
	if err := l.Cancel(ctx, "nope"); err != nil {
		t.Fatalf("cancel of unknown id: %v", err)
	}
}

func TestLedgerRefusesIncompleteAndCancelled(t *testing.T) {
	l := NewMemLedger()
	if err := l.Reserve(context.Background(), Reservation{ID: "x"}); agentvault.ErrorCode(err) != agentvault.CodeInvalidInput {
		t.Fatalf("incomplete: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := Reservation{ID: "x", CardID: "c", Amount: MustAmount("1.00 EUR"), Day: "d", Month: "m"}
	if err := l.Reserve(ctx, r); agentvault.ErrorCode(err) != agentvault.CodeTimeout {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestP18_CheckCaps(t *testing.T) {
	for _, tc := range []struct {
		name               string
		amount, today, mon string
		caps               Caps
		code               agentvault.Code
	}{
		{"no caps", "5.00 EUR", "0 EUR", "0 EUR", Caps{}, ""},
		{"per purchase", "5.01 EUR", "0 EUR", "0 EUR", Caps{PerPurchase: amt("5.00 EUR")}, agentvault.CodeLimitReached},
		{"daily", "5.00 EUR", "95.01 EUR", "0 EUR", Caps{Daily: amt("100.00 EUR")}, agentvault.CodeDailyLimit},
		{"monthly", "5.00 EUR", "0 EUR", "995.01 EUR", Caps{Monthly: amt("1000.00 EUR")}, agentvault.CodeMonthlyLimit},
		{"cap in another currency", "5.00 EUR", "0 EUR", "0 EUR", Caps{Daily: amt("100.00 USD")}, agentvault.CodeAmountUnconvertible},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckCaps(MustAmount(tc.amount), MustAmount(tc.today), MustAmount(tc.mon), tc.caps)
			if agentvault.ErrorCode(err) != tc.code {
				t.Fatalf("code %q, want %q", agentvault.ErrorCode(err), tc.code)
			}
		})
	}
}
