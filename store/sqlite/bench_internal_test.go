package sqlite

import (
	"path/filepath"
	"testing"

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
