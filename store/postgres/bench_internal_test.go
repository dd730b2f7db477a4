package postgres

import (
	"context"
	"testing"

	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/policy/ledgertest"
	"github.com/agentvault/agentvault/store/postgres/pgtest"
	"github.com/agentvault/agentvault/vault"
	"github.com/agentvault/agentvault/vault/storetest"
)

func benchOpen(noGroupCommit bool) func(b *testing.B) vault.Store {
	return func(b *testing.B) vault.Store {
		s, err := Open(context.Background(), pgtest.DSN(b))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		s.noGroupCommit = noGroupCommit
		return s
	}
}

// BenchmarkAuditRelease: releases per second with a durable audit record
// each (fsync on, synchronous_commit on), audit group commit on.
func BenchmarkAuditRelease(b *testing.B) { storetest.BenchmarkAuditRelease(b, benchOpen(false)) }

// BenchmarkAuditReleaseNoGroupCommit is the baseline: one transaction per
// audit record, concurrent commits sharing WAL flushes as Postgres does on
// its own.
func BenchmarkAuditReleaseNoGroupCommit(b *testing.B) {
	storetest.BenchmarkAuditRelease(b, benchOpen(true))
}

func benchLedger(noGroupCommit bool) func(b *testing.B) policy.Ledger {
	return func(b *testing.B) policy.Ledger {
		s, err := Open(context.Background(), pgtest.DSN(b))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		s.noGroupCommit = noGroupCommit
		return s
	}
}

// BenchmarkLedgerReserve: reservations per second, each committed
// durably, ledger group commit on.
func BenchmarkLedgerReserve(b *testing.B) { ledgertest.BenchmarkReserve(b, benchLedger(false)) }

// BenchmarkLedgerReserveNoGroupCommit is the baseline: one transaction
// per reservation (each waiting for the card's advisory lock in turn).
func BenchmarkLedgerReserveNoGroupCommit(b *testing.B) {
	ledgertest.BenchmarkReserve(b, benchLedger(true))
}
