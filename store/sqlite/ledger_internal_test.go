package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

// sums reads what the ledger rows themselves add up to, the reference the
// running totals must equal.
func sums(t *testing.T, s *Store, card, day, month, cur string) (int64, int64) {
	t.Helper()
	var d, m int64
	q := `SELECT coalesce(sum(CASE WHEN day = ? THEN minor END), 0), coalesce(sum(CASE WHEN month = ? THEN minor END), 0) FROM ledger WHERE card_id = ? AND currency = ?`
	if err := s.db.QueryRow(q, day, month, card, cur).Scan(&d, &m); err != nil {
		t.Fatal(err)
	}
	return d, m
}

func checkTotals(t *testing.T, s *Store, card, day, month, cur string) {
	t.Helper()
	today, thisMonth, err := s.Spent(context.Background(), card, day, month, cur)
	if err != nil {
		t.Fatal(err)
	}
	d, m := sums(t, s, card, day, month, cur)
	if today.Minor != d || thisMonth.Minor != m {
		t.Fatalf("running totals %d/%d, ledger rows sum to %d/%d", today.Minor, thisMonth.Minor, d, m)
	}
}

// TestP18_LedgerTotalsFollowEveryWrite: the running totals the caps are
// checked against equal the sums of the ledger rows after reservations,
// cancellations, a row changed by hand and a migration that fills them
// from rows written before it existed.
func TestP18_LedgerTotalsFollowEveryWrite(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "vault.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, day := range []string{"2026-11-29", "2026-11-30", "2026-11-30", "2026-12-01"} {
		month := day[:7]
		if err := s.Reserve(ctx, policy.Reservation{ID: fmt.Sprintf("r%d", i), CardID: "c1",
			Amount: policy.Amount{Minor: int64(100 * (i + 1)), Currency: "EUR"}, Day: day, Month: month}); err != nil {
			t.Fatal(err)
		}
	}
	checkTotals(t, s, "c1", "2026-11-30", "2026-11", "EUR")
	if err := s.Cancel(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	checkTotals(t, s, "c1", "2026-11-30", "2026-11", "EUR")
	if _, err := s.db.Exec(`UPDATE ledger SET day = '2026-11-29', minor = 7 WHERE id = 'r2'`); err != nil {
		t.Fatal(err)
	}
	for _, day := range []string{"2026-11-29", "2026-11-30"} {
		checkTotals(t, s, "c1", day, "2026-11", "EUR")
	}
	checkTotals(t, s, "c1", "2026-12-01", "2026-12", "EUR")

	// A database from before migration 90: the totals are filled from its rows.
	if _, err := s.db.Exec(`DROP TRIGGER ledger_totals_insert; DROP TRIGGER ledger_totals_delete; DROP TRIGGER ledger_totals_update;
DROP TABLE ledger_totals; DELETE FROM schema_migrations WHERE version = 90;
INSERT INTO ledger (id, card_id, day, month, currency, minor, created) VALUES ('old', 'c1', '2026-11-29', '2026-11', 'EUR', 5000, 0)`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, day := range []string{"2026-11-29", "2026-11-30"} {
		checkTotals(t, s, "c1", day, "2026-11", "EUR")
	}
	if today, _, _ := s.Spent(ctx, "c1", "2026-11-29", "2026-11", "EUR"); today.Minor != 100+7+5000 {
		t.Fatalf("spent on 2026-11-29: %d, want %d", today.Minor, 100+7+5000)
	}
}

// TestP18_LedgerGroupCommitRefusesOneNotAll: in one group commit, a
// reservation over a cap is refused on its own, the ones before and after
// it are written, and each is checked against the ones before it in the
// batch (two that fit alone do not both fit together). Audit records in the
// same commit (the durable writer takes both kinds) are written whatever
// the reservations beside them get, each with its own seq.
func TestP18_LedgerGroupCommitRefusesOneNotAll(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "vault.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	daily := policy.MustAmount("10.00 EUR")
	r := func(id string, minor int64) durableOp {
		return durableOp{resv: &policy.Reservation{ID: id, CardID: "c1", Amount: policy.Amount{Minor: minor, Currency: "EUR"},
			Day: "2026-11-30", Month: "2026-11", Caps: policy.Caps{Daily: &daily}}}
	}
	a := func(session string) durableOp {
		return durableOp{audit: &vault.AuditRecord{Time: time.Now(), Action: vault.AuditRelease, Org: "o", ItemID: "c1",
			Kind: vault.KindCard, Field: vault.FieldNumber, Destination: "shop.example", Session: session, ValueHMAC: []byte{1}}}
	}
	batch := []durableOp{a("s1"), r("a", 600), r("b", 600), a("s2"), r("c", 400), r("a", 600), r("d", 1), a("s3")}
	res, err := s.commitDurable(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	want := []agentvault.Code{"", "", agentvault.CodeDailyLimit, "", "", "", agentvault.CodeDailyLimit, ""}
	for i, w := range want {
		if got := agentvault.ErrorCode(res[i].refusal); got != w {
			t.Errorf("record %d: code %q, want %q", i, got, w)
		}
	}
	if !(res[0].seq > 0 && res[3].seq > res[0].seq && res[7].seq > res[3].seq) {
		t.Errorf("audit seqs %d, %d, %d: want increasing, in batch order", res[0].seq, res[3].seq, res[7].seq)
	}
	recs, err := s.QueryAudit(ctx, vault.AuditFilter{Org: "o"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("%d audit records committed, want 3", len(recs))
	}
	today, _, err := s.Spent(ctx, "c1", "2026-11-30", "2026-11", "EUR")
	if err != nil {
		t.Fatal(err)
	}
	if today.Minor != 1000 {
		t.Fatalf("spent %d, want 1000 (a and c)", today.Minor)
	}
	checkTotals(t, s, "c1", "2026-11-30", "2026-11", "EUR")
}

// TestP18_WriterTotalsSeeOtherWriters: the durable writer keeps the totals
// its own reservations left, and a write to the ledger by any other
// connection (a cancel, a row added by another process) is seen by the
// next reservation's cap check.
func TestP18_WriterTotalsSeeOtherWriters(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "vault.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	daily := policy.MustAmount("25.00 EUR")
	reserve := func(id, amount string) error {
		return s.Reserve(ctx, policy.Reservation{ID: id, CardID: "c1", Amount: policy.MustAmount(amount),
			Day: "2026-11-30", Month: "2026-11", Caps: policy.Caps{Daily: &daily}})
	}
	for _, id := range []string{"r1", "r2"} {
		if err := reserve(id, "10.00 EUR"); err != nil {
			t.Fatal(err)
		}
	}
	if d, _, ok := s.h.ledger.get("c1", "EUR", "2026-11-30", "2026-11"); !ok || d != 2000 {
		t.Fatalf("the writer holds %d (%v), want 2000", d, ok)
	}
	if err := reserve("r3", "10.00 EUR"); agentvault.ErrorCode(err) != agentvault.CodeDailyLimit {
		t.Fatalf("30.00 against a 25.00 cap: %v", err)
	}
	// Another connection cancels r1: 10.00 fits again.
	if _, err := s.db.ExecContext(ctx, `DELETE FROM ledger WHERE id = 'r1'`); err != nil {
		t.Fatal(err)
	}
	if err := reserve("r4", "10.00 EUR"); err != nil {
		t.Fatalf("after a cancel elsewhere: %v", err)
	}
	// Another connection adds 5.00: 25.00 are spent, 0.01 more is refused.
	if _, err := s.db.ExecContext(ctx, `INSERT INTO ledger (id, card_id, day, month, currency, minor, created)
VALUES ('other', 'c1', '2026-11-30', '2026-11', 'EUR', 500, 0)`); err != nil {
		t.Fatal(err)
	}
	if err := reserve("r5", "0.01 EUR"); agentvault.ErrorCode(err) != agentvault.CodeDailyLimit {
		t.Fatalf("over the cap after a write elsewhere: %v", err)
	}
	checkTotals(t, s, "c1", "2026-11-30", "2026-11", "EUR")
}
