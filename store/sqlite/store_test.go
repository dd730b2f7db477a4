package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/agentvault/agentvault/store/sqlite"
	"github.com/agentvault/agentvault/vault"
	"github.com/agentvault/agentvault/vault/storetest"
)

func openTemp(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "vault.db"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) vault.Store { return openTemp(t) })
}

func TestMigrationsIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vault.db")
	for i := 0; i < 2; i++ {
		s, err := sqlite.Open(path)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		v, err := s.SchemaVersion(context.Background())
		if err != nil || v != sqlite.LatestSchemaVersion() {
			t.Fatalf("open %d: schema version %d, %v; want %d", i, v, err, sqlite.LatestSchemaVersion())
		}
		s.Close()
	}
}

func TestNotFoundIsSentinel(t *testing.T) {
	s := openTemp(t)
	_, err := s.GetItem(context.Background(), "org", "itm_x")
	if !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("got %v", err)
	}
}

// TestPutItemRollsBackOnFailure injects a failure after the item row and
// some values are written (a trigger refusing one field) and checks that
// nothing of the failed put is visible, and a previous version survives.
func TestPutItemRollsBackOnFailure(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "vault.db")
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.AddKey(ctx, vault.KeyRecord{ID: "k1", State: vault.KeyActive, Check: []byte("c")}); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`CREATE TRIGGER fail_totp BEFORE INSERT ON item_values WHEN NEW.field = 'totp'
BEGIN SELECT RAISE(ABORT, 'injected failure'); END`); err != nil {
		t.Fatal(err)
	}
	rec := func(id string, withTOTP bool) vault.ItemRecord {
		r := vault.ItemRecord{ID: id, Org: "o", Owner: "owner", Kind: vault.KindLogin, Label: id, KeyID: "k1",
			WrappedKey: []byte("w"), Meta: []byte("m"),
			Fields: []vault.Field{vault.FieldPassword},
			Values: map[vault.Field][]byte{vault.FieldPassword: []byte("p")}}
		if withTOTP {
			r.Fields = append(r.Fields, vault.FieldTOTP)
			r.Values[vault.FieldTOTP] = []byte("t")
			r.Meta = []byte("m2")
		}
		return r
	}
	if err := s.PutItem(ctx, rec("itm_new", true)); err == nil {
		t.Fatal("put with an injected failure succeeded")
	}
	if _, err := s.GetItem(ctx, "o", "itm_new"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("failed put left a partial item: %v", err)
	}
	var n int
	if err := raw.QueryRow(`SELECT count(*) FROM item_values WHERE item_id = 'itm_new'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("failed put left %d value rows (%v)", n, err)
	}
	if err := s.PutItem(ctx, rec("itm_old", false)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutItem(ctx, rec("itm_old", true)); err == nil {
		t.Fatal("replace with an injected failure succeeded")
	}
	got, err := s.GetItem(ctx, "o", "itm_old")
	if err != nil || string(got.Meta) != "m" || len(got.Values) != 1 || string(got.Values[vault.FieldPassword]) != "p" {
		t.Fatalf("failed replace damaged the previous version (%d values, %v)", len(got.Values), err)
	}
}
