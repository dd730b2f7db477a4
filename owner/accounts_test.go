package owner_test

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/store/sqlite"
	"github.com/agentvault/agentvault/vault"
)

type accountsEnv struct {
	svc   *owner.Service
	acc   *owner.Accounts
	v     *vault.Vault
	st    *sqlite.Store
	clock *clock
	key   string // may create logins
	keyID string
	other string // another key that may create logins
	plain string // a key that may not
}

func newAccounts(t *testing.T, cfg owner.AccountsConfig) *accountsEnv {
	t.Helper()
	ctx := context.Background()
	c := newClock()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "vault.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := owner.New(owner.Config{Store: st, Org: "o", Now: c.Now, Password: fastPW, PollEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mk := make([]byte, 32)
	_, _ = rand.Read(mk)
	v, err := vault.Open(ctx, vault.Config{Store: st, MasterKey: mk, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Service, cfg.Store, cfg.Vault = svc, st, v
	acc, err := owner.NewAccounts(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &accountsEnv{svc: svc, acc: acc, v: v, st: st, clock: c}
	k, key, _ := svc.CreateAPIKey(ctx, "agent", owner.Scope{AllCards: true, AllLogins: true, CanCreateLogins: true})
	e.key, e.keyID = key, k.ID
	_, e.other, _ = svc.CreateAPIKey(ctx, "other agent", owner.Scope{AllLogins: true, CanCreateLogins: true})
	_, e.plain, _ = svc.CreateAPIKey(ctx, "reader", owner.Scope{AllLogins: true})
	return e
}

func code(err error) agentvault.Code { return agentvault.ErrorCode(err) }

func (e *accountsEnv) approve(t *testing.T, r owner.SignupRequest) {
	t.Helper()
	if _, err := e.svc.Decide(context.Background(), r.ApprovalID, true, "owner:o@example.com"); err != nil {
		t.Fatal(err)
	}
}

// Seed 004: without the owner's permission, every login write refuses
// with signup_not_enabled.
func TestSignupNotEnabled(t *testing.T) {
	e := newAccounts(t, owner.AccountsConfig{})
	ctx := context.Background()
	_, err := e.acc.CreateLogin(ctx, e.plain, owner.CreateLoginArgs{Website: "shop.example.com", Email: "a@example.com"})
	if code(err) != agentvault.CodeSignupNotEnabled {
		t.Fatalf("create_login: %v", err)
	}
	if _, err := e.acc.SetUsername(ctx, e.plain, "example", "x"); code(err) != agentvault.CodeSignupNotEnabled {
		t.Fatalf("set_login_username: %v", err)
	}
	if _, err := e.acc.RotatePassword(ctx, e.plain, "example", vault.PasswordRules{}); code(err) != agentvault.CodeSignupNotEnabled {
		t.Fatalf("rotate_login_password: %v", err)
	}
}

// Seed 004: website is the registrable domain; a bare suffix is refused;
// email is a mailbox; the policy rules refuse before any request exists.
func TestSignupInputChecks(t *testing.T) {
	e := newAccounts(t, owner.AccountsConfig{})
	ctx := context.Background()
	cases := []struct {
		name string
		in   owner.CreateLoginArgs
		want agentvault.Code
	}{
		{"bare public suffix com", owner.CreateLoginArgs{Website: "com", Email: "a@example.com"}, agentvault.CodeInvalidWebsite},
		{"bare public suffix co.uk", owner.CreateLoginArgs{Website: "co.uk", Email: "a@example.com"}, agentvault.CodeInvalidWebsite},
		{"an IP address", owner.CreateLoginArgs{Website: "192.0.2.1", Email: "a@example.com"}, agentvault.CodeInvalidWebsite},
		{"no email", owner.CreateLoginArgs{Website: "example.com"}, agentvault.CodeInvalidEmail},
		{"email with a display name", owner.CreateLoginArgs{Website: "example.com", Email: "Ada <a@example.com>"}, agentvault.CodeInvalidEmail},
		{"email without a dotted domain", owner.CreateLoginArgs{Website: "example.com", Email: "a@localhost"}, agentvault.CodeInvalidEmail},
		{"username on two lines", owner.CreateLoginArgs{Website: "example.com", Email: "a@example.com", Username: "a\nb"}, agentvault.CodeInvalidUsername},
		{"minLength over 64", owner.CreateLoginArgs{Website: "example.com", Email: "a@example.com", Rules: vault.PasswordRules{MinLength: 80}}, agentvault.CodeInvalidPolicy},
		{"maxLength under 12", owner.CreateLoginArgs{Website: "example.com", Email: "a@example.com", Rules: vault.PasswordRules{MaxLength: 10}}, agentvault.CodePasswordTooShort},
		{"min greater than max", owner.CreateLoginArgs{Website: "example.com", Email: "a@example.com", Rules: vault.PasswordRules{MinLength: 30, MaxLength: 20}}, agentvault.CodeInvalidPolicy},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := e.acc.CreateLogin(ctx, e.key, c.in); code(err) != c.want {
				t.Fatalf("err = %v, want %s", err, c.want)
			}
		})
	}
	r, err := e.acc.CreateLogin(ctx, e.key, owner.CreateLoginArgs{Website: "https://identity.shop.example.co.uk/signup", Email: "a@example.com"})
	if err != nil || r.Site != "example.co.uk" {
		t.Fatalf("registrable domain: %+v %v", r, err)
	}
}

// Seed 004: a request waits for the owner; approved, the login exists with
// a generated password, and only the key that filed it can read it.
func TestSignupApprovalFlow(t *testing.T) {
	e := newAccounts(t, owner.AccountsConfig{})
	ctx := context.Background()
	r, err := e.acc.CreateLogin(ctx, e.key, owner.CreateLoginArgs{Website: "shop.example.com", Email: "inbox@example.com", Rules: vault.PasswordRules{MaxLength: 20, NoSymbols: true}})
	if err != nil {
		t.Fatal(err)
	}
	if r.PreApproved || r.ApprovalID == "" {
		t.Fatalf("request = %+v", r)
	}
	pend, _ := e.svc.Pending(ctx)
	if len(pend) != 1 || pend[0].Kind != owner.KindSignup || pend[0].Site != "example.com" {
		t.Fatalf("owner's queue = %+v", pend)
	}
	a, err := e.acc.SignupRequest(ctx, e.key, r.ID)
	if err != nil || a.Status != owner.SignupPending || a.Login != nil {
		t.Fatalf("pending: %+v %v", a, err)
	}
	if _, err := e.acc.SignupRequest(ctx, e.other, r.ID); code(err) != agentvault.CodeRequestNotFound {
		t.Fatalf("another key read it: %v", err)
	}
	if _, err := e.acc.SignupRequest(ctx, e.key, "sr_nope"); code(err) != agentvault.CodeRequestNotFound {
		t.Fatalf("unknown id: %v", err)
	}
	e.approve(t, r)
	a, err = e.acc.WaitSignup(ctx, e.key, r.ID, time.Second)
	if err != nil || a.Status != owner.SignupApproved || a.Login == nil || a.Policy == nil {
		t.Fatalf("approved: %+v %v", a, err)
	}
	if a.Policy.Length != 20 || a.Policy.Symbols != "" || a.Login.Login.Email != "inbox@example.com" || a.Login.Label != "example" {
		t.Fatalf("login = %+v policy = %+v", a.Login.Login, a.Policy)
	}
	// A second read gives the same login: one login per request.
	b, _ := e.acc.SignupRequest(ctx, e.key, r.ID)
	if b.Login.ID != a.Login.ID {
		t.Fatal("a second login was made")
	}
	items, _ := e.v.List(ctx, "o")
	if len(items) != 1 {
		t.Fatalf("%d items", len(items))
	}
}

func TestSignupDeniedAndExpired(t *testing.T) {
	e := newAccounts(t, owner.AccountsConfig{})
	ctx := context.Background()
	r1, _ := e.acc.CreateLogin(ctx, e.key, owner.CreateLoginArgs{Website: "a.example", Email: "x@example.com"})
	r2, _ := e.acc.CreateLogin(ctx, e.key, owner.CreateLoginArgs{Website: "b.example", Email: "x@example.com"})
	if _, err := e.svc.Decide(ctx, r1.ApprovalID, false, "owner"); err != nil {
		t.Fatal(err)
	}
	if a, _ := e.acc.SignupRequest(ctx, e.key, r1.ID); a.Status != owner.SignupDenied {
		t.Fatalf("denied: %+v", a.Status)
	}
	e.clock.Add(time.Hour)
	if a, _ := e.acc.SignupRequest(ctx, e.key, r2.ID); a.Status != owner.SignupExpired {
		t.Fatalf("expired: %+v", a.Status)
	}
}

// Seed 004: a second create_login opens a second, unrelated request; five
// outstanding requests is the ceiling (too_many_pending).
func TestSignupTooManyPending(t *testing.T) {
	e := newAccounts(t, owner.AccountsConfig{})
	ctx := context.Background()
	ids := map[string]bool{}
	for range 5 {
		r, err := e.acc.CreateLogin(ctx, e.key, owner.CreateLoginArgs{Website: "shop.example.com", Email: "a@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		ids[r.ApprovalID] = true
	}
	if len(ids) != 5 {
		t.Fatalf("requests shared approvals: %d", len(ids))
	}
	if _, err := e.acc.CreateLogin(ctx, e.key, owner.CreateLoginArgs{Website: "shop.example.com", Email: "a@example.com"}); code(err) != agentvault.CodeTooManyPending {
		t.Fatalf("sixth: %v", err)
	}
}

// Seed 004: pre-approved site and exact email complete at once, at most 2
// per listed site and 60 per account in 24 hours; past that, pending.
func TestSignupPreApproved(t *testing.T) {
	e := newAccounts(t, owner.AccountsConfig{PreApprovedPerDay: 3})
	ctx := context.Background()
	for _, s := range []string{"shop.example.com", "other.example", "third.example"} {
		if err := e.svc.AddSignup(ctx, s, "inbox@example.com", "owner"); err != nil {
			t.Fatal(err)
		}
	}
	create := func(site, email string) owner.SignupRequest {
		t.Helper()
		r, err := e.acc.CreateLogin(ctx, e.key, owner.CreateLoginArgs{Website: site, Email: email})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := create("example.com", "other@example.com"); r.PreApproved {
		t.Fatal("another email was pre-approved")
	}
	r1 := create("example.com", "inbox@example.com")
	if !r1.PreApproved || r1.LoginID == "" {
		t.Fatalf("first: %+v", r1)
	}
	a, err := e.acc.SignupRequest(ctx, e.key, r1.ID)
	if err != nil || a.Status != owner.SignupApproved || a.Login == nil {
		t.Fatalf("read: %+v %v", a, err)
	}
	if r := create("example.com", "inbox@example.com"); !r.PreApproved {
		t.Fatal("second on the site")
	}
	if r := create("example.com", "inbox@example.com"); r.PreApproved {
		t.Fatal("third on one site was pre-approved (ceiling 2 per site)")
	}
	if r := create("other.example", "inbox@example.com"); !r.PreApproved {
		t.Fatal("third of the day")
	}
	if r := create("third.example", "inbox@example.com"); r.PreApproved {
		t.Fatal("fourth of the day was pre-approved (ceiling 3 in this test)")
	}
	e.clock.Add(25 * time.Hour)
	if r := create("third.example", "inbox@example.com"); !r.PreApproved {
		t.Fatal("the day's window did not roll")
	}
}

// Seed 004: the 500-login ceiling refuses with login_limit, pre-approved
// or not, and creates no request.
func TestSignupLoginLimit(t *testing.T) {
	e := newAccounts(t, owner.AccountsConfig{MaxLogins: 2})
	ctx := context.Background()
	for _, s := range []string{"a.example", "b.example"} {
		if _, err := e.v.AddLogin(ctx, "o", "owner", vault.LoginInput{Site: s, Email: "x@example.com", Password: vault.NewSecret([]byte("owner-typed-pw"))}); err != nil {
			t.Fatal(err)
		}
	}
	_ = e.svc.AddSignup(ctx, "c.example", "x@example.com", "owner")
	if _, err := e.acc.CreateLogin(ctx, e.key, owner.CreateLoginArgs{Website: "c.example", Email: "x@example.com"}); code(err) != agentvault.CodeLoginLimit {
		t.Fatalf("err = %v", err)
	}
	if p, _ := e.svc.Pending(ctx); len(p) != 0 {
		t.Fatal("a request was created")
	}
}

// Seed 004: over 20 credential writes a minute for a key is rate_limited.
func TestSignupRateLimited(t *testing.T) {
	e := newAccounts(t, owner.AccountsConfig{WritesPerMinute: 3, MaxPendingSignups: 100})
	ctx := context.Background()
	for range 3 {
		if _, err := e.acc.CreateLogin(ctx, e.key, owner.CreateLoginArgs{Website: "a.example", Email: "x@example.com"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.acc.CreateLogin(ctx, e.key, owner.CreateLoginArgs{Website: "a.example", Email: "x@example.com"}); code(err) != agentvault.CodeRateLimited {
		t.Fatalf("err = %v", err)
	}
	e.clock.Add(time.Minute)
	if _, err := e.acc.CreateLogin(ctx, e.key, owner.CreateLoginArgs{Website: "a.example", Email: "x@example.com"}); err != nil {
		t.Fatalf("after a minute: %v", err)
	}
}

func (e *accountsEnv) approvedLogin(t *testing.T, site string) vault.Item {
	t.Helper()
	ctx := context.Background()
	r, err := e.acc.CreateLogin(ctx, e.key, owner.CreateLoginArgs{Website: site, Email: "inbox@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	e.approve(t, r)
	a, err := e.acc.SignupRequest(ctx, e.key, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	return *a.Login
}

// Seed 004 set_login_username: once, idempotent for the same handle,
// username_already_set for another, only the creating key, within 7 days.
func TestSignupSetLoginUsername(t *testing.T) {
	e := newAccounts(t, owner.AccountsConfig{})
	ctx := context.Background()
	it := e.approvedLogin(t, "shop.example.com")
	if _, err := e.acc.SetUsername(ctx, e.other, it.Label, "agent_42"); code(err) != agentvault.CodeNotFound {
		t.Fatalf("another key: %v", err)
	}
	if _, err := e.acc.SetUsername(ctx, e.key, "nosuch", "agent_42"); code(err) != agentvault.CodeNotFound {
		t.Fatalf("unknown label: %v", err)
	}
	if _, err := e.acc.SetUsername(ctx, e.key, it.Label, "bad\nname"); code(err) != agentvault.CodeInvalidUsername {
		t.Fatalf("invalid: %v", err)
	}
	got, err := e.acc.SetUsername(ctx, e.key, it.Label, "agent_42")
	if err != nil || got.Login.Username != "agent_42" || !got.Has(vault.FieldUsername) {
		t.Fatalf("set: %+v %v", got.Login, err)
	}
	if _, err := e.acc.SetUsername(ctx, e.key, it.Label, "agent_42"); err != nil {
		t.Fatalf("same handle again: %v", err)
	}
	if _, err := e.acc.SetUsername(ctx, e.key, it.Label, "other"); code(err) != agentvault.CodeUsernameAlreadySet {
		t.Fatalf("another handle: %v", err)
	}
	e.clock.Add(8 * 24 * time.Hour)
	if _, err := e.acc.SetUsername(ctx, e.key, it.Label, "agent_42"); err != nil {
		t.Fatalf("same handle after the window: %v", err)
	}
	late := e.approvedLogin(t, "late.example")
	e.clock.Add(8 * 24 * time.Hour)
	if _, err := e.acc.SetUsername(ctx, e.key, late.Label, "agent_43"); code(err) != agentvault.CodeNotFound {
		t.Fatalf("after the window: %v", err)
	}
}

// Seed 004 rotate_login_password: only for a login the vault generated,
// that this key created, within 7 days, not once the owner replaced it;
// every refusal is the same not_rotatable.
func TestSignupRotateLoginPassword(t *testing.T) {
	e := newAccounts(t, owner.AccountsConfig{})
	ctx := context.Background()
	it := e.approvedLogin(t, "shop.example.com")
	before, _ := e.v.Release(ctx, vault.ReleaseArgs{Org: "o", ItemID: it.ID, Field: vault.FieldPassword, Destination: "example.com", Session: "s", Actor: "t", Purpose: "test"})
	got, err := e.acc.RotatePassword(ctx, e.key, it.Label, vault.PasswordRules{MaxLength: 14, NoSymbols: true})
	if err != nil || got.Login.Generated.Length != 14 {
		t.Fatalf("rotate: %v", err)
	}
	after, _ := e.v.Release(ctx, vault.ReleaseArgs{Org: "o", ItemID: it.ID, Field: vault.FieldPassword, Destination: "example.com", Session: "s", Actor: "t", Purpose: "test"})
	if before.Equal(after) || after.Len() != 14 {
		t.Fatal("the password did not change")
	}
	if _, err := e.acc.RotatePassword(ctx, e.key, it.Label, vault.PasswordRules{MinLength: 65}); code(err) != agentvault.CodeInvalidPolicy {
		t.Fatalf("bad policy: %v", err)
	}
	owned, _ := e.v.AddLogin(ctx, "o", "owner", vault.LoginInput{Site: "owned.example", Email: "x@example.com", Password: vault.NewSecret([]byte("owner-typed-pw"))})
	for name, label := range map[string]string{"owner's login": owned.Label, "unknown label": "nosuch"} {
		if _, err := e.acc.RotatePassword(ctx, e.key, label, vault.PasswordRules{}); code(err) != agentvault.CodeNotRotatable {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if _, err := e.acc.RotatePassword(ctx, e.other, it.Label, vault.PasswordRules{}); code(err) != agentvault.CodeNotRotatable {
		t.Fatalf("another key: %v", err)
	}
	if _, err := e.v.UpdateLogin(ctx, "o", it.ID, vault.LoginUpdate{Password: vault.NewSecret([]byte("owner replaced it")), Actor: "owner"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.acc.RotatePassword(ctx, e.key, it.Label, vault.PasswordRules{}); code(err) != agentvault.CodeNotRotatable {
		t.Fatalf("owner-managed: %v", err)
	}
	if a, _ := e.acc.SignupRequest(ctx, e.key, mustRequestOf(t, e, it)); !a.OwnerManaged {
		t.Fatal("passwordOwnerManaged is not reported")
	}
	late := e.approvedLogin(t, "late.example")
	e.clock.Add(8 * 24 * time.Hour)
	if _, err := e.acc.RotatePassword(ctx, e.key, late.Label, vault.PasswordRules{}); code(err) != agentvault.CodeNotRotatable {
		t.Fatalf("after the window: %v", err)
	}
}

func mustRequestOf(t *testing.T, e *accountsEnv, it vault.Item) string {
	t.Helper()
	st := e.svc.Store().(owner.SignupRequestStore)
	rs, err := st.ListSignupRequests(context.Background(), "o", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.LoginID == it.ID {
			return r.ID
		}
	}
	t.Fatal("no request for the login")
	return ""
}

// Seed 004: 25 changes per account in 24 hours (daily_limit).
func TestSignupDailyLimit(t *testing.T) {
	e := newAccounts(t, owner.AccountsConfig{LoginChangesPerDay: 2})
	ctx := context.Background()
	it := e.approvedLogin(t, "shop.example.com")
	for range 2 {
		if _, err := e.acc.RotatePassword(ctx, e.key, it.Label, vault.PasswordRules{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.acc.RotatePassword(ctx, e.key, it.Label, vault.PasswordRules{}); code(err) != agentvault.CodeDailyLimit {
		t.Fatalf("third: %v", err)
	}
	e.clock.Add(24*time.Hour + time.Second)
	if _, err := e.acc.RotatePassword(ctx, e.key, it.Label, vault.PasswordRules{}); err != nil {
		t.Fatalf("after 24 h: %v", err)
	}
}

// Seed 004 get_signup_request: scope_denied once the owner removed the
// approved login from the key's scope.
func TestSignupScopeDenied(t *testing.T) {
	e := newAccounts(t, owner.AccountsConfig{})
	ctx := context.Background()
	r, _ := e.acc.CreateLogin(ctx, e.key, owner.CreateLoginArgs{Website: "shop.example.com", Email: "a@example.com"})
	e.approve(t, r)
	if _, err := e.acc.SignupRequest(ctx, e.key, r.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.SetScope(ctx, e.keyID, owner.Scope{CanCreateLogins: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.acc.SignupRequest(ctx, e.key, r.ID); code(err) != agentvault.CodeScopeDenied {
		t.Fatalf("err = %v", err)
	}
}
