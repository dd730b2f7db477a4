package vault_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/store/sqlite"
	"github.com/agentvault/agentvault/vault"

	"github.com/agentvault/agentvault/internal/leakcheck"
)

func credValues(pairs ...string) []vault.CredentialValue {
	var out []vault.CredentialValue
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, vault.CredentialValue{Field: vault.Field(pairs[i]), Value: vault.NewSecret([]byte(pairs[i+1]))})
	}
	return out
}

// TestP13_CredentialSealedBoundToOrg: a portal credential is sealed like any
// item (org, item and field in the AAD), survives key rotation, is audited
// with an HMAC on release, and is never listed as a fillable item.
func TestP13_CredentialSealedBoundToOrg(t *testing.T) {
	ctx := context.Background()
	e, _ := mustEnv(t)
	it, err := e.v.PutCredential(ctx, "org1", "ana@example.com", "", credValues("username", "ana", "password", "canary-pw-7781"))
	if err != nil {
		t.Fatal(err)
	}
	items, err := e.v.List(ctx, "org1")
	if err != nil || len(items) != 0 {
		t.Fatalf("List = %v, %v; want no fillable items", items, err)
	}
	rec, err := e.store.GetItem(ctx, "org1", it.ID)
	if err != nil {
		t.Fatal(err)
	}
	for f, ct := range rec.Values {
		leakcheck.New(leakcheck.Value("password", "canary-pw-7781")).Binary(t, "the ciphertext of field "+string(f), ct)
	}
	// Moved to another org, the record does not open.
	moved := rec
	moved.Org, moved.Label = "org2", rec.Label
	if err := e.store.PutItem(ctx, moved); err == nil {
		if _, err := e.v.ReleaseCredential(ctx, vault.ReleaseArgs{Org: "org2", ItemID: rec.ID, Actor: "x"}); err == nil {
			t.Fatal("a credential moved to another org opened")
		}
		_ = e.store.PutItem(ctx, rec)
	}
	if err := e.v.RotateKey(ctx, newKey(t), ""); err != nil {
		t.Fatal(err)
	}
	vals, err := e.v.ReleaseCredential(ctx, vault.ReleaseArgs{Org: "org1", ItemID: it.ID, Actor: "ana@example.com", Purpose: "credential_use"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vals) != 2 || string(vals[1].Value.InsecureRawBytes()) != "canary-pw-7781" {
		t.Fatalf("values = %v", vals)
	}
	recs, err := e.v.Audit(ctx, vault.AuditFilter{ItemID: it.ID, Action: vault.AuditCredentialUse})
	if err != nil || len(recs) != 2 {
		t.Fatalf("audit = %v, %v; want one record per field", recs, err)
	}
	if !bytes.Equal(recs[1].ValueHMAC, e.v.AuditHMAC(vault.NewSecret([]byte("canary-pw-7781")))) {
		t.Fatal("audit HMAC is not the value's")
	}
	// Replacing keeps the id and drops the old fields.
	if _, err := e.v.PutCredential(ctx, "org1", "ana@example.com", it.ID, credValues("token", "t2")); err != nil {
		t.Fatal(err)
	}
	got, err := e.v.GetCredential(ctx, "org1", it.ID)
	if err != nil || len(got.Fields) != 1 || got.Fields[0] != "token" {
		t.Fatalf("after replace: %+v, %v", got, err)
	}
	if err := e.v.RemoveCredential(ctx, "org1", it.ID, "admin"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.v.ReleaseCredential(ctx, vault.ReleaseArgs{Org: "org1", ItemID: it.ID}); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("release after remove: %v", err)
	}
}

// TestP12_CredentialReleaseRefusedWithoutAudit: no value leaves when the
// audit log cannot be written.
func TestP12_CredentialReleaseRefusedWithoutAudit(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "vault.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fs := &failingAudit{Store: st}
	ctx := context.Background()
	v, err := vault.Open(ctx, vault.Config{Store: fs, MasterKey: newKey(t), Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	it, err := v.PutCredential(ctx, "org1", "ana@example.com", "", credValues("password", "pw"))
	if err != nil {
		t.Fatal(err)
	}
	fs.mu.Lock()
	fs.fail = true
	fs.mu.Unlock()
	vals, err := v.ReleaseCredential(ctx, vault.ReleaseArgs{Org: "org1", ItemID: it.ID})
	if agentvault.ErrorCode(err) != agentvault.CodeAuditUnavailable || vals != nil {
		t.Fatalf("release without audit: %v, %d values", err, len(vals))
	}
}
