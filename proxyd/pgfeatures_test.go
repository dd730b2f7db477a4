package proxyd_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/store/postgres/pgtest"
	"github.com/agentvault/agentvault/vault"

	"github.com/agentvault/agentvault/internal/leakcheck"
)

// pgPair starts two proxyd replicas on one Postgres schema (the
// deployment's master.key and api-key copied to both), each with a
// dashboard and a credential-use listener.
func pgPair(t *testing.T) (a, b *proxyd.Main, logs []*syncBuf) {
	t.Helper()
	dsn := pgtest.DSN(t)
	dirs := []string{t.TempDir(), t.TempDir()}
	if _, _, _, err := vault.LoadOrCreateKeyFile(filepath.Join(dirs[0], "master.key")); err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(dirs[0], "master.key"))
	if err != nil {
		t.Fatal(err)
	}
	apiKey := "avk_" + hex.EncodeToString(randBytes(32)) + "\n"
	var mains []*proxyd.Main
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "master.key"), mk, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, proxyd.APIKeyFile), []byte(apiKey), 0o600); err != nil {
			t.Fatal(err)
		}
		c := proxyd.DefaultConfig()
		c.DataDir = d
		c.Listen = proxyd.ListenConfig{Proxy: "127.0.0.1:0", Control: "127.0.0.1:0", Admin: "127.0.0.1:0",
			Dashboard: "127.0.0.1:0", Credentials: "127.0.0.1:0"}
		c.UnsafeAllowPrivateRanges = true
		c.Store = proxyd.StoreConfig{Driver: "postgres", DSN: dsn}
		m, l, err := startReplica(t, c)
		if err != nil {
			t.Fatal(err)
		}
		mains, logs = append(mains, m), append(logs, l)
	}
	return mains[0], mains[1], logs
}

// TestP20_StoreFeaturesOnPostgresReplicas: the features whose records
// only SQLite held before (the recipe registry, agents' signup requests,
// portal credentials) work on Postgres, across two replicas, and each
// one-time step happens once however many replicas race for it: a signup
// request read on both replicas at once makes one login (P20), a
// credential-use token POSTed to both replicas' listeners at once is spent
// once, and the value and the generated password reach no log (P11).
func TestP20_StoreFeaturesOnPostgresReplicas(t *testing.T) {
	ctx := context.Background()
	a, b, logs := pgPair(t)
	ca := control.NewClient("http://"+a.ControlAddr.String(), a.ControlToken, nil)
	cb := control.NewClient("http://"+b.ControlAddr.String(), b.ControlToken, nil)
	for i, l := range logs {
		// The warning a feature off on Postgres used to log.
		if strings.Contains(l.String(), "the configured store does not hold") {
			t.Fatalf("replica %d switched a feature off on Postgres", i)
		}
	}

	t.Run("recipes", func(t *testing.T) {
		recipe := json.RawMessage(`{"id":"shop.example.com","kind":"merchant","platform":"shopify","status":"partial","overrides":{"submit":{"selector":"#pay"}}}`)
		s, err := ca.SubmitRecipe(ctx, control.SubmitRecipeRequest{APIKey: a.APIKey, Recipe: recipe, Note: "Reached the card form."})
		if err != nil || s.Status != "needs_human" {
			t.Fatalf("submission on replica a: %+v %v", s, err)
		}
		if got, err := cb.RecipeSubmission(ctx, b.APIKey, s.ID, 0); err != nil || got.Status != "needs_human" {
			t.Fatalf("the submission polled on replica b: %+v %v", got, err)
		}
		if _, err := b.Recipes.Accept(ctx, recipesAccept(s.ID)); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Recipes.Accept(ctx, recipesAccept(s.ID)); agentvault.ErrorCode(err) != agentvault.CodeConflict {
			t.Fatalf("a second acceptance on the other replica: %v, want conflict", err)
		}
		raw, err := ca.Recipes(ctx, "https://shop.example.com/")
		var l struct{ Merchant *struct{ ID string } }
		if err != nil || json.Unmarshal(raw, &l) != nil || l.Merchant == nil || l.Merchant.ID != "shop.example.com" {
			t.Fatalf("lookup on replica a after acceptance on b: %s %v", raw, err)
		}
	})

	t.Run("signups", func(t *testing.T) {
		if err := a.Owner.AuthorizeSite(ctx, "shop.test", "test"); err != nil {
			t.Fatal(err)
		}
		if err := a.Owner.SetScope(ctx, proxyd.DefaultKeyID, owner.Scope{AllCards: true, AllLogins: true, CanCreateLogins: true}); err != nil {
			t.Fatal(err)
		}
		r, err := ca.CreateLogin(ctx, control.CreateLoginIn{APIKey: a.APIKey, Website: "shop.test", Email: "inbox@example.com"})
		if err != nil || r.Status != "pending" {
			t.Fatalf("create_login on replica a: %+v %v", r, err)
		}
		pend, err := b.Owner.Pending(ctx)
		if err != nil || len(pend) != 1 || pend[0].Kind != owner.KindSignup {
			t.Fatalf("replica b's queue: %+v %v", pend, err)
		}
		if _, err := b.Owner.Decide(ctx, pend[0].ID, true, "owner:o@example.com"); err != nil {
			t.Fatal(err)
		}
		// Both replicas read the approved request at once: each may make
		// a login, one records it, the other drops its own.
		var wg sync.WaitGroup
		answers := make([]control.SignupRequestOut, 2)
		for i, c := range []*control.Client{ca, cb} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				if answers[i], err = c.SignupRequest(ctx, control.SignupRequestIn{APIKey: a.APIKey, RequestID: r.RequestID}); err != nil {
					t.Errorf("read on replica %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		if answers[0].Status != "approved" || answers[1].Status != "approved" || !bytes.Equal(answers[0].Login, answers[1].Login) {
			t.Fatalf("the replicas answer %s / %s and %s / %s", answers[0].Status, answers[0].Login, answers[1].Status, answers[1].Login)
		}
		items, err := b.Vault.List(ctx, proxyd.DefaultOrg)
		if err != nil {
			t.Fatal(err)
		}
		var made []vault.Item
		for _, it := range items {
			if it.Kind == vault.KindLogin && it.Login != nil && it.Login.CreatedBy == proxyd.DefaultKeyID {
				made = append(made, it)
			}
		}
		if len(made) != 1 {
			t.Fatalf("%d logins made for one approved request, want 1", len(made))
		}
		pw, err := a.Vault.Release(ctx, vault.ReleaseArgs{Org: proxyd.DefaultOrg, ItemID: made[0].ID, Field: vault.FieldPassword,
			Destination: "shop.test", Session: "test", Actor: "test", Purpose: "test"})
		if err != nil {
			t.Fatal(err)
		}
		gen := leakcheck.New(leakcheck.Value("generated password", string(pw.InsecureRawBytes())))
		for i, l := range logs {
			gen.Logs(t, fmt.Sprintf("replica %d's log", i), []byte(l.String()))
		}
	})

	t.Run("credentials", func(t *testing.T) {
		if err := a.Owner.SetOwnerPassword(ctx, "owner@example.org", "Owner-pass-123"); err != nil {
			t.Fatal(err)
		}
		op, err := a.Credentials.PrincipalFor(ctx, a.Owner.Org(), "owner@example.org")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Credentials.BindKey(ctx, op, proxyd.DefaultKeyID, "owner@example.org"); err != nil {
			t.Fatal(err)
		}
		req, err := ca.CredentialRequest(ctx, control.CredentialRequestIn{APIKey: a.APIKey, Name: "erp", Fields: []string{"apiKey"}})
		if err != nil {
			t.Fatal(err)
		}
		tok := req.URL[strings.LastIndex(req.URL, "/")+1:]
		opB, err := b.Credentials.PrincipalFor(ctx, b.Owner.Org(), "owner@example.org")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.Credentials.OpenEntry(ctx, opB, tok); err != nil {
			t.Fatalf("the entry link made on replica a, opened on b: %v", err)
		}
		if _, _, err := a.Credentials.OpenEntry(ctx, op, tok); agentvault.ErrorCode(err) != agentvault.CodeLinkUsed {
			t.Fatalf("the entry link opened again on replica a: %v, want link_used", err)
		}
		canary := "erp-key-canary-" + hex.EncodeToString(randBytes(6))
		if _, err := b.Credentials.SubmitEntry(ctx, opB, tok, map[string]vault.Secret{"apiKey": vault.NewSecret([]byte(canary))}); err != nil {
			t.Fatal(err)
		}
		list, err := ca.CredentialList(ctx, a.APIKey)
		if err != nil || len(list.Credentials) != 1 || !list.Credentials[0].HasValues {
			t.Fatalf("list on replica a = %+v, %v", list, err)
		}
		use, err := cb.CredentialUse(ctx, control.CredentialUseIn{APIKey: b.APIKey, Name: "erp"})
		if err != nil {
			t.Fatal(err)
		}
		base, token, _ := strings.Cut(use.URL, "#")
		if base != "http://"+b.CredentialsAddr.String()+control.CredentialUsePath {
			t.Fatalf("use URL %q is not replica b's listener", base)
		}
		body, _ := json.Marshal(control.CredentialUseRequest{Token: token})
		// The token POSTed to both replicas' listeners at once: one
		// answers the value, the other link_used.
		var wg sync.WaitGroup
		codes, values := make([]string, 2), make([]string, 2)
		for i, m := range []*proxyd.Main{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := http.Post("http://"+m.CredentialsAddr.String()+control.CredentialUsePath, "application/json", bytes.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				var ans control.CredentialUseAnswer
				_ = json.NewDecoder(resp.Body).Decode(&ans)
				codes[i], values[i] = resp.Header.Get("X-Agentvault-Code"), ans.Values["apiKey"]
			}()
		}
		wg.Wait()
		wins := 0
		for i := range codes {
			switch {
			case codes[i] == "" && values[i] == canary:
				wins++
			case codes[i] != string(agentvault.CodeLinkUsed):
				t.Errorf("replica %d answered code %q", i, codes[i])
			}
		}
		if wins != 1 {
			t.Fatalf("the one-time token was spent %d times across two replicas", wins)
		}
		cred := leakcheck.New(leakcheck.Value("credential value", canary))
		for i, l := range logs {
			cred.Logs(t, fmt.Sprintf("replica %d's log", i), []byte(l.String()))
		}
	})
}
