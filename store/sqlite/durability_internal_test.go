package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

// TestP22_DurabilityOnEveryConnection: every pooled connection, not only
// the first, runs in WAL mode with synchronous=FULL and the busy timeout
// (the DSN applies the pragmas per connection).
func TestP22_DurabilityOnEveryConnection(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "vault.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 4 {
		c, err := s.db.Conn(ctx) // held open: the next one is a new connection
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var mode string
		var syncMode, busy int
		if err := c.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&syncMode); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" || syncMode != syncFull || busy != busyTimeoutMS {
			t.Fatalf("connection %d: journal_mode %s, synchronous %d, busy_timeout %d", i, mode, syncMode, busy)
		}
	}
}

// TestP12_AuditGroupCommitIsFull: the durable writer's connection commits
// a batch holding an audit record at synchronous=FULL (the record is on
// disk before the value it audits leaves), a batch of reservations alone
// at NORMAL, and never hands a connection at NORMAL back to the pool
// where another writer would find it.
func TestP12_AuditGroupCommitIsFull(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "vault.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writerSync := func() int {
		t.Helper()
		var v int
		if err := s.h.wconn.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	resv := func(id string) *policy.Reservation {
		return &policy.Reservation{ID: id, CardID: "c1", Day: "2026-12-02", Month: "2026-12",
			Amount: policy.Amount{Minor: 100, Currency: "USD"}}
	}
	rec := &vault.AuditRecord{Time: time.Now(), Action: vault.AuditRelease, Org: "o", ItemID: "c1",
		Kind: vault.KindCard, Field: vault.FieldNumber, ValueHMAC: []byte{1}}
	if err := s.Reserve(ctx, *resv("r1")); err != nil {
		t.Fatal(err)
	}
	if got := writerSync(); got != syncNormal {
		t.Fatalf("after a batch of reservations alone: synchronous %d, want NORMAL (%d)", got, syncNormal)
	}
	if _, err := s.AppendAudit(ctx, *rec); err != nil {
		t.Fatal(err)
	}
	if got := writerSync(); got != syncFull {
		t.Fatalf("after an audit record: synchronous %d, want FULL (%d)", got, syncFull)
	}
	if _, err := s.commitDurableOnWriter(ctx, []durableOp{{resv: resv("r2")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.commitDurableOnWriter(ctx, []durableOp{{resv: resv("r3")}, {audit: rec}}); err != nil {
		t.Fatal(err)
	}
	if got := writerSync(); got != syncFull {
		t.Fatalf("after reservations with an audit record: synchronous %d, want FULL (%d)", got, syncFull)
	}
	// A writer connection dropped at NORMAL is closed, not pooled.
	if _, err := s.commitDurableOnWriter(ctx, []durableOp{{resv: resv("r4")}}); err != nil {
		t.Fatal(err)
	}
	s.h.dropWriterConn()
	for i := range 4 {
		c, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var v int
		if err := c.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != syncFull {
			t.Fatalf("pooled connection %d: synchronous %d, want FULL", i, v)
		}
	}
}
