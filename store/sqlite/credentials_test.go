package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/agentvault/agentvault/credentials"
	"github.com/agentvault/agentvault/credentials/credtest"
	"github.com/agentvault/agentvault/store/sqlite"
)

func TestCredentialsStoreConformance(t *testing.T) {
	credtest.Run(t, func(t *testing.T) credentials.Store {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "vault.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
