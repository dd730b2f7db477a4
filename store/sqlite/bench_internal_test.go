package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/policy/ledgertest"
	"github.com/agentvault/agentvault/vault"
	"github.com/agentvault/agentvault/vault/storetest"
)

func benchOpen(noGroupCommit bool) func(b *testing.B) vault.Store {
	return func(b *testing.B) vault.Store {
		s, err := Open(filepath.Join(b.TempDir(), "vault.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		s.noGroupCommit = noGroupCommit
		return s
	}
}

// BenchmarkAuditRelease: releases per second with a durable audit record
// each (WAL, synchronous=FULL), audit group commit on.
func BenchmarkAuditRelease(b *testing.B) { storetest.BenchmarkAuditRelease(b, benchOpen(false)) }

// BenchmarkAuditReleaseNoGroupCommit is the baseline: one transaction and
// one fsync per audit record.
func BenchmarkAuditReleaseNoGroupCommit(b *testing.B) {
	storetest.BenchmarkAuditRelease(b, benchOpen(true))
}

func benchLedger(noGroupCommit bool) func(b *testing.B) policy.Ledger {
	return func(b *testing.B) policy.Ledger {
		s, err := Open(filepath.Join(b.TempDir(), "vault.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		s.noGroupCommit = noGroupCommit
		return s
	}
}

// BenchmarkLedgerReserve: reservations per second, each in a durable
// commit (synchronous=FULL), ledger group commit on.
func BenchmarkLedgerReserve(b *testing.B) { ledgertest.BenchmarkReserve(b, benchLedger(false)) }

// BenchmarkLedgerReserveNoGroupCommit is the baseline: one transaction
// and one fsync per reservation.
func BenchmarkLedgerReserveNoGroupCommit(b *testing.B) {
	ledgertest.BenchmarkReserve(b, benchLedger(true))
}
