package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestPreparedNeverWaitsForAConnectionUnderTheLock: a statement prepared
// on a busy, bounded pool waits for a connection; a transaction holding
// the only connection must still get its statements from the cache and
// finish, which gives that connection back. With the cache's lock held
// while waiting, both wait forever.
func TestPreparedNeverWaitsForAConnectionUnderTheLock(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "vault.db"))
	if err != nil {
		t.Fatal(err)
	}
	stuck := false
	defer func() {
		if !stuck { // closing waits for the stuck connection forever
			s.Close()
		}
	}()
	s.db.SetMaxOpenConns(1)
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	const fresh = `SELECT count(*) FROM items WHERE kind = ?` // in no cache yet
	prepared := make(chan error, 1)
	waits := s.db.Stats().WaitCount
	go func() {
		_, err := s.prepared(ctx, fresh)
		prepared <- err
	}()
	// Until the pool says the preparer is waiting for the connection.
	for s.db.Stats().WaitCount == waits {
		time.Sleep(time.Millisecond)
	}
	done := make(chan error, 1)
	go func() {
		var n int
		if err := s.txQueryRow(ctx, tx, fresh, "card").Scan(&n); err != nil {
			done <- err
			return
		}
		done <- tx.Commit()
	}()
	for _, ch := range []chan error{done, prepared} {
		select {
		case err := <-ch:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(time.Minute):
			stuck = true
			t.Fatal("deadlock: the transaction waits for the statement cache, whose holder waits for the transaction's connection")
		}
	}
}
