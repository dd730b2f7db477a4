package sqlite

import (
	"context"
	"path/filepath"
	"testing"
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
