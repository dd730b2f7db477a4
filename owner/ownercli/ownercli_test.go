package ownercli_test

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/internal/vaultcli"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/owner/ownercli"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/store/sqlite"
	"github.com/agentvault/agentvault/vault"
)

func env(t *testing.T, stdin string) (ownercli.Env, *bytes.Buffer, *bytes.Buffer, string) {
	path := filepath.Join(t.TempDir(), "vault.db")
	var out, errb bytes.Buffer
	return ownercli.Env{
		Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb,
		Open: func(context.Context) (*owner.Service, func() error, error) {
			st, err := sqlite.Open(path)
			if err != nil {
				return nil, nil, err
			}
			s, err := owner.New(owner.Config{Store: st, Org: "default", Password: owner.PasswordParams{Memory: 1024, Time: 1, Threads: 1}})
			return s, st.Close, err
		},
	}, &out, &errb, path
}

func TestSetPasswordFromStdin(t *testing.T) {
	e, out, errb, _ := env(t, "correct horse battery staple\n")
	if code := ownercli.Run(context.Background(), []string{"set-password", "--email", "Me@Example.com"}, e); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if !strings.Contains(out.String(), "me@example.com") || strings.Contains(out.String()+errb.String(), "horse") {
		t.Fatalf("output: %q", out)
	}
	s, closeFn, _ := e.Open(context.Background())
	defer closeFn()
	if _, err := s.CheckOwnerPassword(context.Background(), "me@example.com", "correct horse battery staple"); err != nil {
		t.Fatal(err)
	}
}

func TestRefusesPasswordArgument(t *testing.T) {
	e, _, errb, _ := env(t, "")
	if code := ownercli.Run(context.Background(), []string{"set-password", "--email", "a@b.c", "--password=hunter2hunter2"}, e); code != 2 || strings.Contains(errb.String(), "hunter2") {
		t.Fatalf("exit %d: %s", code, errb)
	}
}

func TestCreateKeyPrintsOnceAndRevokes(t *testing.T) {
	e, out, errb, _ := env(t, "")
	if code := ownercli.Run(context.Background(), []string{"create-key", "--name", "agent", "--all-cards"}, e); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	key := regexp.MustCompile(`avk_[0-9a-f]{16}_[0-9a-f]{64}`).FindString(out.String())
	if key == "" {
		t.Fatalf("no key printed")
	}
	out.Reset()
	if code := ownercli.Run(context.Background(), []string{"keys"}, e); code != 0 || strings.Contains(out.String(), key[21:]) || !strings.Contains(out.String(), key[:20]) {
		t.Fatalf("keys: exit %d", code)
	}
	if code := ownercli.Run(context.Background(), []string{"revoke", key[:20]}, e); code != 0 {
		t.Fatalf("revoke: %s", errb)
	}
	out.Reset()
	ownercli.Run(context.Background(), []string{"keys"}, e)
	if !strings.Contains(out.String(), "revoked") {
		t.Fatalf("keys after revoke: %s", out)
	}
}

func TestApproveFromCLI(t *testing.T) {
	e, out, errb, _ := env(t, "")
	s, closeFn, _ := e.Open(context.Background())
	a, err := s.RequestApproval(context.Background(), owner.ApprovalRequest{Kind: owner.KindNewDestination, Site: "shop.example"})
	closeFn()
	if err != nil {
		t.Fatal(err)
	}
	ownercli.Run(context.Background(), []string{"pending"}, e)
	if !strings.Contains(out.String(), a.ID) {
		t.Fatalf("pending: %s", out)
	}
	if code := ownercli.Run(context.Background(), []string{"approve", a.ID}, e); code != 0 {
		t.Fatalf("approve: %s", errb)
	}
	out.Reset()
	ownercli.Run(context.Background(), []string{"sites"}, e)
	if !strings.Contains(out.String(), "shop.example") {
		t.Fatalf("sites: %s", out)
	}
}

// TestDefaultKeyListedAndRevocable: proxyd's file key (key_default, kept in
// <datadir>/api-key) is registered in the owner store, so `owner keys`
// lists it and `owner revoke key_default` ends it.
func TestDefaultKeyListedAndRevocable(t *testing.T) {
	ctx := context.Background()
	e, out, errb, _ := env(t, "")
	const fileKey = "avk_00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	s, closeFn, err := e.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RegisterFileKey(ctx, "key_default", "default (api-key file)", fileKey, owner.Scope{AllCards: true, AllLogins: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AuthenticateFileKey(ctx, "key_default", fileKey); err != nil {
		t.Fatalf("registered key does not authenticate: %v", err)
	}
	closeFn()
	if code := ownercli.Run(ctx, []string{"keys"}, e); code != 0 {
		t.Fatalf("keys: exit %d: %s", code, errb)
	}
	if !regexp.MustCompile(`key_default\s+default \(api-key file\)\s+all\s+all`).MatchString(out.String()) || strings.Contains(out.String(), fileKey[4:]) {
		t.Fatalf("keys does not list key_default with all cards and logins (or shows its secret):\n%s", out)
	}
	if code := ownercli.Run(ctx, []string{"revoke", "key_default"}, e); code != 0 {
		t.Fatalf("revoke: %s", errb)
	}
	s, closeFn, err = e.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if _, err := s.AuthenticateFileKey(ctx, "key_default", fileKey); agentvault.ErrorCode(err) != agentvault.CodeKeyRevoked {
		t.Fatalf("after revoke: %v, want key_revoked", err)
	}
	// A restart registers again: the revocation stands.
	if k, err := s.RegisterFileKey(ctx, "key_default", "default (api-key file)", fileKey, owner.Scope{AllCards: true, AllLogins: true}); err != nil || !k.Revoked() {
		t.Fatalf("re-register after revoke: %+v %v", k, err)
	}
	if _, err := s.AuthenticateFileKey(ctx, "key_default", fileKey+"x"); agentvault.ErrorCode(err) != agentvault.CodeInvalidAPIKey {
		t.Fatalf("wrong key: %v", err)
	}
}

// TestPendingPrintsEachColumnOnceWithHeaders: a new site's reason is its
// kind and is printed once; an empty amount or card is "-", under a header.
func TestPendingPrintsEachColumnOnceWithHeaders(t *testing.T) {
	e, out, errb, _ := env(t, "")
	s, closeFn, _ := e.Open(context.Background())
	a, err := s.RequestApproval(context.Background(), owner.ApprovalRequest{Kind: owner.KindNewDestination, Site: "shop.example"})
	closeFn()
	if err != nil {
		t.Fatal(err)
	}
	if code := ownercli.Run(context.Background(), []string{"pending"}, e); code != 0 {
		t.Fatalf("pending: %s", errb)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "ID REQUEST SITE ITEM AMOUNT EXPIRES PAGE" {
		t.Fatalf("pending output:\n%s", out)
	}
	row := strings.Fields(lines[1])
	if len(row) != 7 || row[0] != a.ID || row[1] != "new_destination" || row[2] != "shop.example" || row[3] != "-" || row[4] != "-" || row[6] != "-" {
		t.Errorf("pending row %q", lines[1])
	}
	if strings.Count(lines[1], "new_destination") != 1 {
		t.Errorf("the kind is printed twice: %q", lines[1])
	}
}

// vaultEnv is an Env over a real SQLite store holding a vault (the owner
// service and the vault's items over one handle, as proxyd wires it) with
// one card.
func vaultEnv(t *testing.T) (ownercli.Env, *bytes.Buffer, *bytes.Buffer, vault.Item) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, vaultcli.DBFileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	v, err := vaultcli.OpenStore(ctx, dir, st)
	if err != nil {
		t.Fatal(err)
	}
	card, err := v.AddCard(ctx, "default", "owner", vault.CardInput{Number: vault.NewSecret([]byte("4242424242424242")),
		CVV: vault.NewSecret([]byte("737")), ExpiryMonth: 4, ExpiryYear: 2030, AnySite: true})
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	e := ownercli.DefaultEnv(func(context.Context) (*owner.Service, func() error, error) {
		s, err := owner.New(owner.Config{Store: st, Org: "default"})
		return s, func() error { return nil }, err
	}, func(ctx context.Context) ([]vault.Item, error) { return v.List(ctx, "default") }, &out, &errb)
	return e, &out, &errb, card
}

// TestP11_PendingNamesTheCardAndThePage: with the vault's items, `pending`
// names the card an approval is about (label, last 4, expiry) and the
// page, without the page's query or fragment.
func TestP11_PendingNamesTheCardAndThePage(t *testing.T) {
	ctx := context.Background()
	e, out, errb, card := vaultEnv(t)
	s, closeFn, err := e.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	amt := policy.MustAmount("19.99 EUR")
	_, err = s.RequestApproval(ctx, owner.ApprovalRequest{Kind: owner.KindPurchase, Reason: string(policy.ReasonEveryPurchase), Site: "shop.example",
		CardID: card.ID, ItemID: card.ID, Amount: &amt, Page: "https://pay.shop.example/checkout?email=ada%40example.com#step"})
	closeFn()
	if err != nil {
		t.Fatal(err)
	}
	if code := ownercli.Run(ctx, []string{"pending"}, e); code != 0 {
		t.Fatalf("pending: %s", errb.String())
	}
	got := out.String()
	for _, want := range []string{"ITEM", "PAGE", "card " + card.Label + ": visa •••• 4242, exp 04/30", "https://pay.shop.example/checkout\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("pending lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "ada") || strings.Contains(got, "step") || strings.Contains(got, card.ID) {
		t.Errorf("pending shows the query, the fragment or a bare id:\n%s", got)
	}
}

// TestPauseAndResumeCard: pause-card takes a card's label (or id), pauses
// it keeping its other rules, and resume-card undoes it; a reference that
// is no card changes nothing.
func TestPauseAndResumeCard(t *testing.T) {
	ctx := context.Background()
	e, out, errb, card := vaultEnv(t)
	s, _, err := e.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	limit := policy.MustAmount("50.00 EUR")
	if err := s.SetCardPolicy(ctx, owner.CardPolicy{CardID: card.ID, Rules: policy.CardPolicy{PerPurchaseCap: &limit}}, "test"); err != nil {
		t.Fatal(err)
	}
	rules := func() policy.CardPolicy {
		t.Helper()
		p, err := s.CardPolicy(ctx, card.ID)
		if err != nil {
			t.Fatal(err)
		}
		return p.Rules
	}
	if code := ownercli.Run(ctx, []string{"pause-card", card.Label}, e); code != 0 {
		t.Fatalf("pause-card: exit %d: %s", code, errb)
	}
	if r := rules(); !r.Paused || r.PerPurchaseCap == nil || r.PerPurchaseCap.String() != limit.String() {
		t.Fatalf("after pause-card: %+v", r)
	}
	if !strings.Contains(out.String(), "visa •••• 4242") || !strings.Contains(out.String(), "paused") {
		t.Errorf("pause-card says %q", out)
	}
	if code := ownercli.Run(ctx, []string{"resume-card", card.ID}, e); code != 0 {
		t.Fatalf("resume-card: exit %d: %s", code, errb)
	}
	if r := rules(); r.Paused || r.PerPurchaseCap == nil {
		t.Fatalf("after resume-card: %+v", r)
	}
	errb.Reset()
	if code := ownercli.Run(ctx, []string{"pause-card", "99"}, e); code == 0 || !strings.Contains(errb.String(), `no card "99"`) {
		t.Fatalf("pause-card of no card: exit %d: %s", code, errb)
	}
	if rules().Paused {
		t.Fatal("pausing no card paused one")
	}
}
