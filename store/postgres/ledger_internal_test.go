package postgres

import (
	"context"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/store/postgres/pgtest"
)

// TestP18_LedgerGroupCommitRefusesOneNotAll: in one group commit, a
// reservation over a cap is refused on its own, the ones before and after
// it are written, and each is checked against the ones before it in the
// batch (two that fit alone do not both fit together), across two cards.
func TestP18_LedgerGroupCommitRefusesOneNotAll(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	daily := policy.MustAmount("10.00 EUR")
	r := func(id, card string, minor int64) policy.Reservation {
		return policy.Reservation{ID: id, CardID: card, Amount: policy.Amount{Minor: minor, Currency: "EUR"},
			Day: "2026-11-30", Month: "2026-11", Caps: policy.Caps{Daily: &daily}}
	}
	batch := []policy.Reservation{r("a", "c2", 600), r("b", "c2", 600), r("c", "c2", 400), r("a", "c2", 600), r("d", "c2", 1), r("e", "c1", 900)}
	refusals, err := s.commitReservations(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	want := []agentvault.Code{"", agentvault.CodeDailyLimit, "", "", agentvault.CodeDailyLimit, ""}
	for i, w := range want {
		if got := agentvault.ErrorCode(refusals[i]); got != w {
			t.Errorf("reservation %d (%s): code %q, want %q", i, batch[i].ID, got, w)
		}
	}
	for card, minor := range map[string]int64{"c2": 1000, "c1": 900} {
		today, _, err := s.Spent(ctx, card, "2026-11-30", "2026-11", "EUR")
		if err != nil {
			t.Fatal(err)
		}
		if today.Minor != minor {
			t.Fatalf("%s spent %d, want %d", card, today.Minor, minor)
		}
	}
}
