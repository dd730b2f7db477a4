package vault_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/store/sqlite"
	"github.com/agentvault/agentvault/vault"
)

var testNow = func() time.Time { return time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC) }

func newKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

type env struct {
	path  string
	store *sqlite.Store
	v     *vault.Vault
}

func openEnv(t *testing.T, path string, key []byte, prev ...[]byte) (*env, error) {
	t.Helper()
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	v, err := vault.Open(context.Background(), vault.Config{Store: st, MasterKey: key, PreviousKeys: prev, Now: testNow})
	return &env{path: path, store: st, v: v}, err
}

func mustEnv(t *testing.T) (*env, []byte) {
	t.Helper()
	key := newKey(t)
	e, err := openEnv(t, filepath.Join(t.TempDir(), "vault.db"), key)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return e, key
}

func card(number, cvv string) vault.CardInput {
	return vault.CardInput{Number: vault.NewSecret([]byte(number)), CVV: vault.NewSecret([]byte(cvv)),
		ExpiryMonth: 12, ExpiryYear: 2030, Holder: "Ada Lovelace", Sites: []string{"shop.example.com"}}
}

func login(site, email, password string) vault.LoginInput {
	return vault.LoginInput{Site: site, Email: email, Password: vault.NewSecret([]byte(password))}
}

func release(t *testing.T, v *vault.Vault, it vault.Item, f vault.Field) vault.Secret {
	t.Helper()
	s, err := v.Release(context.Background(), vault.ReleaseArgs{Org: it.Org, ItemID: it.ID, Field: f,
		Destination: "shop.example.com", Session: "s_1", Actor: "test", Purpose: "substitution"})
	if err != nil {
		t.Fatalf("Release(%s): %v", f, err)
	}
	return s
}

func TestAddListGetRemove(t *testing.T) {
	e, _ := mustEnv(t)
	ctx := context.Background()
	c1, err := e.v.AddCard(ctx, "org1", "owner", card("4242424242424242", "123"))
	if err != nil {
		t.Fatal(err)
	}
	c2, err := e.v.AddCard(ctx, "org1", "owner", card("5555555555554444", "321"))
	if err != nil {
		t.Fatal(err)
	}
	l1, err := e.v.AddLogin(ctx, "org1", "owner", login("https://www.github.com/login", "ada@example.com", "pw-1"))
	if err != nil {
		t.Fatal(err)
	}
	l2, err := e.v.AddLogin(ctx, "org1", "owner", login("github.com", "ada2@example.com", "pw-2"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := e.v.AddIdentity(ctx, "org1", "owner", vault.IdentityMeta{Name: "Ada", Email: "ada@example.com", Phone: "+44 20 7946 0000"})
	if err != nil {
		t.Fatal(err)
	}
	ad, err := e.v.AddAddress(ctx, "org1", "owner", vault.AddressMeta{Line1: "1 Main St", City: "London", PostalCode: "N1", Country: "GB"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.v.AddCard(ctx, "org2", "owner", card("4242424242424242", "123"))
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{c1.ID: "1", c2.ID: "2", l1.ID: "github", l2.ID: "github-2", id.ID: "1", ad.ID: "1", other.ID: "1"}
	for _, it := range []vault.Item{c1, c2, l1, l2, id, ad, other} {
		if it.Label != labels[it.ID] {
			t.Errorf("%s %s: label %q, want %q", it.Kind, it.ID, it.Label, labels[it.ID])
		}
	}
	if c1.Card.Brand != "visa" || c1.Card.Last4 != "4242" || c1.Card.NumberLen != 16 || c1.Card.CVVLen != 3 || c2.Card.Brand != "mastercard" {
		t.Errorf("derived card metadata wrong: %+v", c1.Card)
	}
	if l1.Login.Site != "github.com" || l1.Login.PasswordLen != 4 || !l1.Has(vault.FieldPassword) || l1.Has(vault.FieldTOTP) {
		t.Errorf("login metadata wrong: %+v", l1.Login)
	}
	list, err := e.v.List(ctx, "org1")
	if err != nil || len(list) != 6 {
		t.Fatalf("List = %d, %v", len(list), err)
	}
	got, err := e.v.GetByLabel(ctx, "org1", vault.KindCard, "2")
	if err != nil || got.ID != c2.ID || got.Card.Last4 != "4444" || got.Card.HolderName != "Ada Lovelace" {
		t.Fatalf("GetByLabel: %v", err)
	}
	if _, err := e.v.Get(ctx, "org2", c1.ID); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("Get across orgs: %v", err)
	}
	if s := release(t, e.v, l2, vault.FieldPassword); string(s.InsecureRawBytes()) != "pw-2" {
		t.Fatal("released the wrong password")
	}
	if err := e.v.Remove(ctx, "org1", c1.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.v.Get(ctx, "org1", c1.ID); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("Get after Remove: %v", err)
	}
	c3, err := e.v.AddCard(ctx, "org1", "owner", card("4242424242424242", "123"))
	if err != nil || c3.Label != "3" {
		t.Fatalf("labels are not reused after removal: %q, %v", c3.Label, err)
	}
}

func TestAddRejectsBadInputAndWritesNothing(t *testing.T) {
	e, _ := mustEnv(t)
	ctx := context.Background()
	bad := []struct {
		name string
		add  func() error
	}{
		{"luhn", func() error { _, err := e.v.AddCard(ctx, "o", "w", card("4242424242424241", "123")); return err }},
		{"expired", func() error {
			c := card("4242424242424242", "123")
			c.ExpiryYear = 2026
			c.ExpiryMonth = 10
			_, err := e.v.AddCard(ctx, "o", "w", c)
			return err
		}},
		{"public suffix site", func() error {
			c := card("4242424242424242", "123")
			c.Sites = []string{"co.uk"}
			_, err := e.v.AddCard(ctx, "o", "w", c)
			return err
		}},
		{"login on com", func() error { _, err := e.v.AddLogin(ctx, "o", "w", login("com", "a@b.com", "pw")); return err }},
		{"login on co.uk", func() error { _, err := e.v.AddLogin(ctx, "o", "w", login("co.uk", "a@b.com", "pw")); return err }},
		{"login bad email", func() error { _, err := e.v.AddLogin(ctx, "o", "w", login("a.com", "not-an-email", "pw")); return err }},
		{"login no password", func() error { _, err := e.v.AddLogin(ctx, "o", "w", login("a.com", "a@b.com", "")); return err }},
		{"identity no name", func() error {
			_, err := e.v.AddIdentity(ctx, "o", "w", vault.IdentityMeta{Email: "a@b.com"})
			return err
		}},
		{"address bad country", func() error {
			_, err := e.v.AddAddress(ctx, "o", "w", vault.AddressMeta{Line1: "x", City: "y", PostalCode: "1", Country: "Germany"})
			return err
		}},
		{"no org", func() error { _, err := e.v.AddCard(ctx, "", "w", card("4242424242424242", "123")); return err }},
	}
	for _, b := range bad {
		err := b.add()
		if agentvault.ErrorCode(err) != agentvault.CodeInvalidInput {
			t.Errorf("%s: code %q (%v), want invalid_input", b.name, agentvault.ErrorCode(err), err)
		}
	}
	if list, _ := e.v.List(ctx, "o"); len(list) != 0 {
		t.Fatalf("refused input wrote %d items", len(list))
	}
}

func TestP13_WrongKeyIsSealed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vault.db")
	key := newKey(t)
	e, err := openEnv(t, path, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.v.AddCard(context.Background(), "o", "w", card("4242424242424242", "123")); err != nil {
		t.Fatal(err)
	}
	e.store.Close()
	_, err = openEnv(t, path, newKey(t))
	if !errors.Is(err, vault.ErrSealed) || agentvault.ErrorCode(err) != agentvault.CodeSealed {
		t.Fatalf("wrong key: %v, want ErrSealed", err)
	}
	// The right key with a forged key id is sealed too.
	st, _ := sqlite.Open(path)
	defer st.Close()
	_, err = vault.Open(context.Background(), vault.Config{Store: st, MasterKey: key, KeyID: "kforged", Now: testNow})
	if !errors.Is(err, vault.ErrSealed) {
		t.Fatalf("right key, wrong id: %v, want ErrSealed", err)
	}
	if _, err := openEnv(t, path, key); err != nil {
		t.Fatalf("right key refused: %v", err)
	}
}

// TestP13_CiphertextMovedFails copies ciphertexts between records, fields
// and orgs through the store and checks that none of them opens.
func TestP13_CiphertextMovedFails(t *testing.T) {
	e, _ := mustEnv(t)
	ctx := context.Background()
	a, _ := e.v.AddCard(ctx, "org1", "w", card("4242424242424242", "123"))
	b, _ := e.v.AddCard(ctx, "org1", "w", card("5555555555554444", "321"))
	recA, _ := e.store.GetItem(ctx, "org1", a.ID)
	fresh := func() vault.ItemRecord { r, _ := e.store.GetItem(ctx, "org1", b.ID); return r }
	orig := fresh()
	cases := []struct {
		name  string
		edit  func(r *vault.ItemRecord)
		field vault.Field
	}{
		{"number from another item", func(r *vault.ItemRecord) { r.Values[vault.FieldNumber] = recA.Values[vault.FieldNumber] }, vault.FieldNumber},
		{"cvv into number", func(r *vault.ItemRecord) { r.Values[vault.FieldNumber] = r.Values[vault.FieldCVV] }, vault.FieldNumber},
		{"wrapped key from another item", func(r *vault.ItemRecord) { r.WrappedKey = recA.WrappedKey }, vault.FieldCVV},
		{"whole values and key from another item", func(r *vault.ItemRecord) {
			r.WrappedKey, r.Values = recA.WrappedKey, recA.Values
		}, vault.FieldNumber},
		{"truncated value", func(r *vault.ItemRecord) {
			r.Values[vault.FieldCVV] = r.Values[vault.FieldCVV][:len(r.Values[vault.FieldCVV])-3]
		}, vault.FieldCVV},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := fresh()
			c.edit(&r)
			if err := e.store.PutItem(ctx, r); err != nil {
				t.Fatal(err)
			}
			s, err := e.v.Release(ctx, vault.ReleaseArgs{Org: "org1", ItemID: b.ID, Field: c.field, Destination: "x.com"})
			if err == nil || !s.IsZero() {
				t.Fatal("a moved ciphertext opened")
			}
			if strings.Contains(err.Error(), "4242424242424242") || strings.Contains(err.Error(), "5555555555554444") {
				t.Fatal("error names a value")
			}
			if err := e.store.PutItem(ctx, orig); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("meta from another item", func(t *testing.T) {
		r := fresh()
		r.Meta = recA.Meta
		e.store.PutItem(ctx, r)
		if _, err := e.v.Get(ctx, "org1", b.ID); err == nil {
			t.Fatal("moved metadata opened")
		}
		e.store.PutItem(ctx, orig)
	})
	t.Run("record moved to another org", func(t *testing.T) {
		r := recA
		if err := e.store.DeleteItem(ctx, "org1", a.ID); err != nil {
			t.Fatal(err)
		}
		r.Org = "org2"
		if err := e.store.PutItem(ctx, r); err != nil {
			t.Fatal(err)
		}
		if _, err := e.v.Get(ctx, "org2", a.ID); err == nil {
			t.Fatal("record moved to another org opened")
		}
		if s, err := e.v.Release(ctx, vault.ReleaseArgs{Org: "org2", ItemID: a.ID, Field: vault.FieldNumber}); err == nil || !s.IsZero() {
			t.Fatal("value of a record moved to another org released")
		}
	})
	if s := release(t, e.v, b, vault.FieldNumber); string(s.InsecureRawBytes()) != "5555555555554444" {
		t.Fatal("restored record does not open")
	}
}

func TestP13_RotationKeepsDataReadable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vault.db")
	oldKey, newK := newKey(t), newKey(t)
	e, err := openEnv(t, path, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, _ := e.v.AddCard(ctx, "o", "w", card("4242424242424242", "123"))
	l, _ := e.v.AddLogin(ctx, "o", "w", login("github.com", "a@example.com", "hunter2"))
	if err := e.v.SealBlob(ctx, "ca-key", []byte("PRIVATE KEY")); err != nil {
		t.Fatal(err)
	}
	dep, err := e.v.DeploymentSecret(ctx)
	if err != nil || len(dep) != 32 {
		t.Fatalf("DeploymentSecret: %d bytes, %v", len(dep), err)
	}
	hmacBefore := e.v.AuditHMAC(vault.NewSecret([]byte("hunter2")))
	recBefore, _ := e.store.GetItem(ctx, "o", c.ID)

	// Readers run while the rotation runs; every read must succeed.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	readErrs := make(chan error, 4)
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				s, err := e.v.Release(ctx, vault.ReleaseArgs{Org: "o", ItemID: c.ID, Field: vault.FieldNumber, Destination: "shop.example.com"})
				if err != nil || string(s.InsecureRawBytes()) != "4242424242424242" {
					readErrs <- errors.New("read during rotation failed")
					return
				}
			}
		}()
	}
	if err := e.v.RotateKey(ctx, newK, ""); err != nil {
		t.Fatalf("RotateKey: %v", err)
	}
	close(stop)
	wg.Wait()
	close(readErrs)
	for err := range readErrs {
		t.Fatal(err)
	}
	if e.v.ActiveKeyID() != vault.KeyIDFor(newK) {
		t.Fatal("active key not switched")
	}
	recAfter, _ := e.store.GetItem(ctx, "o", c.ID)
	if !bytes.Equal(recBefore.Values[vault.FieldNumber], recAfter.Values[vault.FieldNumber]) || bytes.Equal(recBefore.WrappedKey, recAfter.WrappedKey) {
		t.Fatal("rotation must re-wrap the data key and leave value ciphertexts alone")
	}
	e.store.Close()

	// Reopen with the new key only: everything is there.
	e2, err := openEnv(t, path, newK)
	if err != nil {
		t.Fatalf("reopen with new key: %v", err)
	}
	if s := release(t, e2.v, c, vault.FieldCVV); string(s.InsecureRawBytes()) != "123" {
		t.Fatal("cvv lost in rotation")
	}
	if s := release(t, e2.v, l, vault.FieldPassword); string(s.InsecureRawBytes()) != "hunter2" {
		t.Fatal("password lost in rotation")
	}
	if b, err := e2.v.OpenBlob(ctx, "ca-key"); err != nil || string(b) != "PRIVATE KEY" {
		t.Fatalf("blob lost in rotation: %v", err)
	}
	if d, _ := e2.v.DeploymentSecret(ctx); !bytes.Equal(d, dep) {
		t.Fatal("deployment secret changed across rotation")
	}
	if !bytes.Equal(e2.v.AuditHMAC(vault.NewSecret([]byte("hunter2"))), hmacBefore) {
		t.Fatal("audit HMAC key changed across rotation")
	}
	e2.store.Close()

	// The old key is retired: sealed.
	if _, err := openEnv(t, path, oldKey); !errors.Is(err, vault.ErrSealed) {
		t.Fatalf("retired key: %v, want ErrSealed", err)
	}
}

// TestP13_InterruptedRotationFinishes: the key file already holds the new
// key but the store is still wrapped under the old one (a crash between
// the two steps). Given the old key as a previous key, Open finishes.
func TestP13_InterruptedRotationFinishes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vault.db")
	oldKey, newK := newKey(t), newKey(t)
	e, err := openEnv(t, path, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := e.v.AddCard(context.Background(), "o", "w", card("4242424242424242", "123"))
	e.store.Close()
	if _, err := openEnv(t, path, newK); !errors.Is(err, vault.ErrSealed) {
		t.Fatalf("new key alone before rotation: %v, want ErrSealed", err)
	}
	e2, err := openEnv(t, path, newK, oldKey)
	if err != nil {
		t.Fatalf("open with previous key: %v", err)
	}
	if e2.v.ActiveKeyID() != vault.KeyIDFor(newK) {
		t.Fatal("rotation not finished")
	}
	e2.store.Close()
	e3, err := openEnv(t, path, newK)
	if err != nil {
		t.Fatal(err)
	}
	if s := release(t, e3.v, c, vault.FieldNumber); string(s.InsecureRawBytes()) != "4242424242424242" {
		t.Fatal("value lost")
	}
}

func TestP12_ReleaseWritesAuditWithHMACNotValue(t *testing.T) {
	e, _ := mustEnv(t)
	ctx := context.Background()
	l, _ := e.v.AddLogin(ctx, "org1", "owner", login("github.com", "a@example.com", "correct-horse"))
	s, err := e.v.Release(ctx, vault.ReleaseArgs{Org: "org1", ItemID: l.ID, Field: vault.FieldPassword,
		Destination: "github.com", Session: "s_42", Actor: "avk_1", Purpose: "substitution"})
	if err != nil || string(s.InsecureRawBytes()) != "correct-horse" {
		t.Fatalf("Release: %v", err)
	}
	recs, err := e.v.Audit(ctx, vault.AuditFilter{Org: "org1", Action: vault.AuditRelease})
	if err != nil || len(recs) != 1 {
		t.Fatalf("Audit = %d records, %v; want 1", len(recs), err)
	}
	r := recs[0]
	if r.ItemID != l.ID || r.Kind != vault.KindLogin || r.Field != vault.FieldPassword || r.Destination != "github.com" ||
		r.Session != "s_42" || r.Actor != "avk_1" || r.Purpose != "substitution" || !r.Time.Equal(testNow()) {
		t.Fatalf("audit record incomplete: %+v", r)
	}
	if !bytes.Equal(r.ValueHMAC, e.v.AuditHMAC(vault.NewSecret([]byte("correct-horse")))) || len(r.ValueHMAC) != 32 {
		t.Fatal("audit HMAC does not match the released value")
	}
	if bytes.Contains(r.ValueHMAC, []byte("correct-horse")) {
		t.Fatal("audit holds the value")
	}
	// Released values of the same field in another deployment differ: the
	// HMAC is keyed, not a bare hash.
	e2, _ := mustEnv(t)
	if bytes.Equal(e2.v.AuditHMAC(vault.NewSecret([]byte("correct-horse"))), r.ValueHMAC) {
		t.Fatal("two deployments share an audit key")
	}
}

// failingAudit is a real store whose audit appends fail, as when the audit
// table's disk is full or the database is gone.
type failingAudit struct {
	vault.Store
	mu   sync.Mutex
	fail bool
}

func (f *failingAudit) AppendAudit(ctx context.Context, r vault.AuditRecord) (int64, error) {
	f.mu.Lock()
	fail := f.fail
	f.mu.Unlock()
	if fail {
		return 0, errors.New("disk I/O error")
	}
	return f.Store.AppendAudit(ctx, r)
}

func TestP12_AuditFailureWithholdsValue(t *testing.T) {
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
	c, err := v.AddCard(ctx, "o", "w", card("4242424242424242", "123"))
	if err != nil {
		t.Fatal(err)
	}
	fs.mu.Lock()
	fs.fail = true
	fs.mu.Unlock()
	for _, f := range []vault.Field{vault.FieldNumber, vault.FieldCVV, vault.FieldHolder} {
		s, err := v.Release(ctx, vault.ReleaseArgs{Org: "o", ItemID: c.ID, Field: f, Destination: "shop.example.com"})
		if agentvault.ErrorCode(err) != agentvault.CodeAuditUnavailable {
			t.Fatalf("%s: code %q, want audit_unavailable", f, agentvault.ErrorCode(err))
		}
		if !s.IsZero() {
			t.Fatalf("%s: a value came back without its audit record", f)
		}
		if strings.Contains(err.Error(), "4242") || strings.Contains(err.Error(), "123") {
			t.Fatal("error names the value")
		}
	}
	recs, _ := st.QueryAudit(ctx, vault.AuditFilter{Action: vault.AuditRelease})
	if len(recs) != 0 {
		t.Fatalf("%d release records despite failure", len(recs))
	}
}

func TestBlobsAndDeploymentSecret(t *testing.T) {
	e, key := mustEnv(t)
	ctx := context.Background()
	if err := e.v.SealBlob(ctx, "ca-key", []byte("k1")); err != nil {
		t.Fatal(err)
	}
	if err := e.v.SealBlob(ctx, "ca-key", []byte("k2")); err != nil {
		t.Fatal(err)
	}
	if b, err := e.v.OpenBlob(ctx, "ca-key"); err != nil || string(b) != "k2" {
		t.Fatalf("OpenBlob: %v", err)
	}
	if _, err := e.v.OpenBlob(ctx, "missing"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("missing blob: %v", err)
	}
	for _, name := range []string{"", "vault/audit-key", "a\nb"} {
		if err := e.v.SealBlob(ctx, name, []byte("x")); err == nil {
			t.Errorf("blob name %q accepted", name)
		}
	}
	if _, err := e.v.OpenBlob(ctx, "vault/audit-key"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatal("the vault's own blobs are readable through OpenBlob")
	}
	rec, _ := e.store.GetBlob(ctx, "ca-key")
	if bytes.Contains(rec.Data, []byte("k2")) {
		t.Fatal("blob stored in clear")
	}
	// Two vaults on one store (two replicas) agree on the deployment secret.
	v2, err := vault.Open(ctx, vault.Config{Store: e.store, MasterKey: key, Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var d1, d2 []byte
	wg.Add(2)
	go func() { defer wg.Done(); d1, _ = e.v.DeploymentSecret(ctx) }()
	go func() { defer wg.Done(); d2, _ = v2.DeploymentSecret(ctx) }()
	wg.Wait()
	if len(d1) != 32 || !bytes.Equal(d1, d2) {
		t.Fatal("replicas disagree on the deployment secret")
	}
}

// TestP13_StoreHoldsNoPlaintext greps the raw database files for every
// value and personal detail added.
func TestP13_StoreHoldsNoPlaintext(t *testing.T) {
	e, _ := mustEnv(t)
	ctx := context.Background()
	c := card("4000056655665556", "987")
	c.Holder = "Grace Hopper"
	c.Billing = &vault.AddressMeta{Line1: "77 Unique Street", City: "Arlington", PostalCode: "22201", Country: "US"}
	if _, err := e.v.AddCard(ctx, "o", "w", c); err != nil {
		t.Fatal(err)
	}
	if _, err := e.v.AddLogin(ctx, "o", "w", vault.LoginInput{Site: "example.org", Email: "grace@navy.example", Username: "ghopper",
		Password: vault.NewSecret([]byte("Cobol-1959!")), TOTP: vault.NewSecret([]byte("JBSWY3DPEHPK3PXP"))}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.v.AddIdentity(ctx, "o", "w", vault.IdentityMeta{Name: "Rear Admiral Hopper", Phone: "+1 555 0100 999"}); err != nil {
		t.Fatal(err)
	}
	// Needles are long enough not to occur by chance in random bytes.
	needles := []string{"4000056655665556", "Grace Hopper", "77 Unique Street", "grace@navy.example", "ghopper",
		"Cobol-1959!", "JBSWY3DPEHPK3PXP", "Rear Admiral", "0100 999"}
	grepFiles(t, e.path, needles)
}

func grepFiles(t *testing.T, dbPath string, needles []string) {
	t.Helper()
	matches, _ := filepath.Glob(dbPath + "*")
	if len(matches) == 0 {
		t.Fatal("no database files")
	}
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range needles {
			if bytes.Contains(b, []byte(n)) {
				t.Errorf("%s holds needle #%d (len %d) in clear", filepath.Base(m), i, len(n))
			}
		}
	}
}

// BenchmarkRelease measures one audited release against a real SQLite file:
// read the item, unwrap its data key, open the value, append the audit row.
func BenchmarkRelease(b *testing.B) {
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "vault.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	key := make([]byte, 32)
	rand.Read(key)
	v, err := vault.Open(ctx, vault.Config{Store: st, MasterKey: key, Now: testNow})
	if err != nil {
		b.Fatal(err)
	}
	c, err := v.AddCard(ctx, "o", "w", card("4242424242424242", "123"))
	if err != nil {
		b.Fatal(err)
	}
	args := vault.ReleaseArgs{Org: "o", ItemID: c.ID, Field: vault.FieldNumber, Destination: "shop.example.com", Session: "s", Actor: "a"}
	for b.Loop() {
		if _, err := v.Release(ctx, args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGet is the same path without the audit write, as a baseline.
func BenchmarkGet(b *testing.B) {
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "vault.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	key := make([]byte, 32)
	rand.Read(key)
	v, _ := vault.Open(ctx, vault.Config{Store: st, MasterKey: key, Now: testNow})
	c, _ := v.AddCard(ctx, "o", "w", card("4242424242424242", "123"))
	for b.Loop() {
		if _, err := v.Get(ctx, "o", c.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// TestP13_RotationByAnotherProcess: the owner CLI rotates the key while a
// proxyd process holds the vault open on the same database. With a
// KeyLoader (re-reading the key file) proxyd keeps reading and writing;
// without one it fails closed (sealed), never silently.
func TestP13_RotationByAnotherProcess(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "vault.db")
	oldKey, newK := newKey(t), newKey(t)
	var mu sync.Mutex
	keyFile := oldKey // what the key file holds
	loader := func(id string) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		if vault.KeyIDFor(keyFile) == id {
			return keyFile, nil
		}
		return nil, errors.New("no such key")
	}
	open := func(withLoader bool) *vault.Vault {
		st, err := sqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		cfg := vault.Config{Store: st, MasterKey: oldKey, Now: testNow}
		if withLoader {
			cfg.KeyLoader = loader
		}
		v, err := vault.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cli := open(false)
	proxyd := open(true)
	stale := open(false)
	c, err := cli.AddCard(ctx, "o", "w", card("4242424242424242", "123"))
	if err != nil {
		t.Fatal(err)
	}
	if err := proxyd.SealBlob(ctx, "mitm-ca", []byte("CA")); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	keyFile = newK
	mu.Unlock()
	if err := cli.RotateKey(ctx, newK, ""); err != nil {
		t.Fatal(err)
	}

	if s := release(t, proxyd, c, vault.FieldNumber); string(s.InsecureRawBytes()) != "4242424242424242" {
		t.Fatal("wrong value after rotation by another process")
	}
	if b, err := proxyd.OpenBlob(ctx, "mitm-ca"); err != nil || string(b) != "CA" {
		t.Fatalf("blob after rotation by another process: %v", err)
	}
	c2, err := proxyd.AddCard(ctx, "o", "w", card("5555555555554444", "321"))
	if err != nil {
		t.Fatalf("write after rotation by another process: %v", err)
	}
	if proxyd.ActiveKeyID() != vault.KeyIDFor(newK) {
		t.Fatal("proxyd did not adopt the new active key")
	}
	if err := proxyd.SealBlob(ctx, "mitm-ca", []byte("CA2")); err != nil {
		t.Fatal(err)
	}
	if s := release(t, cli, c2, vault.FieldNumber); string(s.InsecureRawBytes()) != "5555555555554444" {
		t.Fatal("item written by proxyd after rotation is unreadable")
	}

	_, err = stale.Release(ctx, vault.ReleaseArgs{Org: "o", ItemID: c.ID, Field: vault.FieldNumber})
	if !errors.Is(err, vault.ErrSealed) {
		t.Fatalf("process without the new key: %v, want ErrSealed", err)
	}
	if _, err := stale.AddCard(ctx, "o", "w", card("4242424242424242", "123")); !errors.Is(err, vault.ErrSealed) {
		t.Fatalf("write by a process without the new key: %v, want ErrSealed", err)
	}
}

// BenchmarkRotate1000 re-wraps the data keys of 1000 items in one
// transaction per iteration.
func BenchmarkRotate1000(b *testing.B) {
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "vault.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	key := make([]byte, 32)
	rand.Read(key)
	v, _ := vault.Open(ctx, vault.Config{Store: st, MasterKey: key, Now: testNow})
	for i := 0; i < 1000; i++ {
		if _, err := v.AddIdentity(ctx, "o", "w", vault.IdentityMeta{Name: "n"}); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		k := make([]byte, 32)
		rand.Read(k)
		if err := v.RotateKey(ctx, k, ""); err != nil {
			b.Fatal(err)
		}
	}
}
