package postgres_test

import (
	"context"
	"strings"
	"testing"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/store/postgres"
	"github.com/agentvault/agentvault/store/postgres/pgtest"
)

// TestDescribeNeverShowsThePassword: the name an operator reads holds
// user, host, port and database, in both DSN forms, and never the
// password or other parameters.
func TestDescribeNeverShowsThePassword(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://av:hunter2pw@db.internal:6432/vault?sslmode=verify-full&pool_max_conns=8": "Postgres store av@db.internal:6432/vault",
		"host=db.internal port=5433 user=av password=hunter2pw dbname=vault sslmode=disable":  "Postgres store av@db.internal:5433/vault",
		"postgres://av:hunter2pw@[::1/vault":                                                  "Postgres store (store.dsn does not parse)",
	} {
		if got := postgres.Describe(dsn); got != want || strings.Contains(got, "hunter2pw") {
			t.Errorf("Describe(%q) = %q, want %q", dsn, got, want)
		}
	}
}

// TestInspectReadsWithoutMigrating: Inspect reports the server's
// durability settings and the schema version and applies nothing; Open
// then migrates. The durability rule is the one Open enforces.
func TestInspectReadsWithoutMigrating(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	h, err := postgres.Inspect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if h.SchemaVersion != 0 || h.Fsync != "on" || h.SynchronousCommit == "" || h.ServerVersion == "" || h.Durable() != nil {
		t.Fatalf("fresh schema: %+v, durable %v", h, h.Durable())
	}
	if h, err = postgres.Inspect(ctx, dsn); err != nil || h.SchemaVersion != 0 {
		t.Fatalf("a second Inspect found schema version %d (%v): the first migrated", h.SchemaVersion, err)
	}
	s, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if h, err = postgres.Inspect(ctx, dsn); err != nil || h.SchemaVersion != postgres.LatestSchemaVersion() {
		t.Fatalf("after Open: schema version %d (%v), want %d", h.SchemaVersion, err, postgres.LatestSchemaVersion())
	}
	for _, bad := range []postgres.Health{{Fsync: "off", SynchronousCommit: "on"}, {Fsync: "on", SynchronousCommit: "off"}} {
		if bad.Durable() == nil {
			t.Errorf("%+v passes the durability rule", bad)
		}
	}
	for _, ok := range []string{"on", "local", "remote_write", "remote_apply"} {
		if err := (postgres.Health{Fsync: "on", SynchronousCommit: ok}).Durable(); err != nil {
			t.Errorf("synchronous_commit %s refused: %v", ok, err)
		}
	}
}

// TestInspectUnreachableSaysWhy: a server that is not there fails with
// the network's reason and without the DSN's password.
func TestInspectUnreachableSaysWhy(t *testing.T) {
	_, err := postgres.Inspect(context.Background(), "postgres://av:hunter2pw@127.0.0.1:1/vault?sslmode=disable&connect_timeout=5")
	msg := agentvault.ErrorMessage(err)
	if err == nil || !strings.Contains(msg, "cannot connect") || !strings.Contains(msg, "connection refused") || strings.Contains(msg, "hunter2pw") {
		t.Fatalf("unreachable: %q (%v)", msg, err)
	}
}
