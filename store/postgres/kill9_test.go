package postgres_test

import (
	"context"
	"testing"

	"github.com/agentvault/agentvault/store/postgres"
	"github.com/agentvault/agentvault/store/postgres/pgtest"
	"github.com/agentvault/agentvault/vault"
	"github.com/agentvault/agentvault/vault/storetest"
)

// TestP22_GroupCommitKill9LosesNoAudit: 32 concurrent releasers share
// audit commits in a child process (a replica) killed with SIGKILL; every
// release that returned has its audit record in the database (P12, P22).
func TestP22_GroupCommitKill9LosesNoAudit(t *testing.T) {
	storetest.Kill9(t, func() string { return pgtest.DSN(t) },
		func(loc string) (vault.Store, error) { return postgres.Open(context.Background(), loc) })
}
