// Package pgtest gives tests a Postgres database of their own: a fresh
// schema in the database AGENTVAULT_TEST_POSTGRES names, dropped when the
// test ends, so tests (and packages run in parallel) never collide. When
// the variable is not set the test is skipped with a message saying how
// to run it (scripts/test-postgres.sh, which `make test` runs, sets it).
//
// It is test support only: never imported by a production package.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// EnvVar names the admin DSN of the test cluster.
const EnvVar = "AGENTVAULT_TEST_POSTGRES"

// DSN creates a schema for t and returns a DSN whose connections work in
// it (search_path). It skips t when EnvVar is not set.
func DSN(t testing.TB) string {
	t.Helper()
	admin := os.Getenv(EnvVar)
	if admin == "" {
		t.Skip(EnvVar + " is not set: the Postgres tests need a server (scripts/test-postgres.sh or make test starts one)")
	}
	b := make([]byte, 8)
	rand.Read(b)
	schema := "t_" + hex.EncodeToString(b)
	ctx := context.Background()
	exec := func(sql string) {
		t.Helper()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Fatalf("pgtest: cannot connect to %s: %v", EnvVar, err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatalf("pgtest: %s: %v", sql, err)
		}
	}
	exec(`CREATE SCHEMA ` + schema)
	t.Cleanup(func() { exec(`DROP SCHEMA ` + schema + ` CASCADE`) })
	return WithSearchPath(admin, schema)
}

// WithSearchPath returns dsn with its connections' search_path set to
// schema (URL or key=value form).
func WithSearchPath(dsn, schema string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err == nil {
			q := u.Query()
			q.Set("search_path", schema)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dsn + " search_path=" + schema
}
