package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/agentvault/agentvault/store/sqlite"
	"github.com/agentvault/agentvault/vault"
	"github.com/agentvault/agentvault/vault/storetest"
)

// TestP22_GroupCommitKill9LosesNoAudit: 32 concurrent releasers share
// audit commits in a child process killed with SIGKILL; every release that
// returned has its audit record in the file (P12, P22).
func TestP22_GroupCommitKill9LosesNoAudit(t *testing.T) {
	storetest.Kill9(t, func() string { return filepath.Join(t.TempDir(), "vault.db") },
		func(loc string) (vault.Store, error) { return sqlite.Open(loc) })
}
