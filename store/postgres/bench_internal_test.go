package postgres

import (
	"context"
	"testing"

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
