package policy

import (
	"context"
	"testing"

	"github.com/agentvault/agentvault"
)

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
