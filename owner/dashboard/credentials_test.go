package dashboard_test

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/credentials"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/owner/dashboard"
	"github.com/agentvault/agentvault/vault"

	"github.com/agentvault/agentvault/internal/leakcheck"
)

func credEnv(t *testing.T) (*env, *credentials.Service) {
	t.Helper()
	var creds *credentials.Service
	e := newEnv(t, func(cfg *dashboard.Config) {
		var err error
		creds, err = credentials.New(credentials.Config{Store: cfg.Service.Store().(credentials.Store), Values: cfg.Vault.(*vault.Vault),
			Now: cfg.Now, Accounts: func(ctx context.Context, o string) ([]string, error) {
				all, err := cfg.Service.Store().ListAccounts(ctx)
				var out []string
				for _, a := range all {
					if a.Org == o {
						out = append(out, a.Email)
					}
				}
				return out, err
			}})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Credentials = creds
	})
	return e, creds
}

func principal(t *testing.T, creds *credentials.Service, user string) credentials.Principal {
	t.Helper()
	p, err := creds.PrincipalFor(context.Background(), org, user)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Seed 003 on the dashboard: the link opens the form once, only for the
// requester; the values typed are saved and never shown back.
func TestCredentials_DashboardEntryFormOnceForRequester(t *testing.T) {
	ctx := context.Background()
	e, creds := credEnv(t)
	op := principal(t, creds, ownerEmail)
	if err := creds.PutMember(ctx, op, credentials.Member{Org: org, User: "ana@example.com", Role: credentials.RoleMember}); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.signIn(ownerPW); st != http.StatusOK {
		t.Fatalf("sign in: %d", st)
	}
	// A link ana asked for does not open for the owner, and is not spent.
	anaIss, err := creds.Request(ctx, principal(t, creds, "ana@example.com"), credentials.RequestArgs{Name: "erp", Fields: []string{"password"}})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := e.get("/credentials/enter/" + anaIss.Token); st != http.StatusForbidden {
		t.Fatalf("owner opening ana's link: %d", st)
	}
	if _, _, err := creds.OpenEntry(ctx, principal(t, creds, "ana@example.com"), anaIss.Token); err != nil {
		t.Fatalf("ana's link was spent by someone else's open: %v", err)
	}
	iss, err := creds.Request(ctx, op, credentials.RequestArgs{Name: "sankhya", Fields: []string{"username", "password"}})
	if err != nil {
		t.Fatal(err)
	}
	st, body := e.get("/credentials/enter/" + iss.Token)
	if st != http.StatusOK || !strings.Contains(body, `name="value_password"`) || !strings.Contains(body, `type="password"`) {
		t.Fatalf("entry form: %d", st)
	}
	if st, _ := e.get("/credentials/enter/" + iss.Token); st != http.StatusGone {
		t.Fatalf("second open: %d, want 410", st)
	}
	const pw = "dash-entry-canary-Pw1"
	st, body = e.do(http.MethodPost, "/credentials/enter", url.Values{"csrf": {csrfOf(t, body)}, "token": {iss.Token},
		"value_username": {"ops"}, "value_password": {pw}})
	typed := leakcheck.New(leakcheck.Value("typed password", pw))
	if st != http.StatusOK || !strings.Contains(body, "Saved the values of sankhya") {
		t.Fatalf("submit: %d", st)
	}
	typed.Text(t, "the page after the submit", []byte(body))
	use, err := creds.Use(ctx, op, "sankhya")
	if err != nil {
		t.Fatal(err)
	}
	r, err := creds.Redeem(ctx, use.Token)
	if err != nil || len(r.Values) != 2 || string(r.Values[1].Value.InsecureRawBytes()) != pw {
		t.Fatalf("redeem: %v", err)
	}
	typed.Logs(t, "the dashboard's log", []byte(e.logs.String()))
}

// Seed 003 on the dashboard: owners and admins see members' personal
// credentials (name, owner, fields, whether set) and delete them; the page
// never shows a value and offers no way to use them.
func TestCredentials_DashboardAdminSeesAndDeletesMemberCredential(t *testing.T) {
	ctx := context.Background()
	e, creds := credEnv(t)
	op := principal(t, creds, ownerEmail)
	if err := creds.PutMember(ctx, op, credentials.Member{Org: org, User: "ana@example.com", Role: credentials.RoleMember}); err != nil {
		t.Fatal(err)
	}
	ap := principal(t, creds, "ana@example.com")
	iss, err := creds.Request(ctx, ap, credentials.RequestArgs{Name: "erp", Fields: []string{"password"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := creds.OpenEntry(ctx, ap, iss.Token); err != nil {
		t.Fatal(err)
	}
	const pw = "ana-dash-canary-Pw2"
	if _, err := creds.SubmitEntry(ctx, ap, iss.Token, map[string]vault.Secret{"password": vault.NewSecret([]byte(pw))}); err != nil {
		t.Fatal(err)
	}
	e.signIn(ownerPW)
	st, body := e.get("/credentials")
	if st != http.StatusOK || !strings.Contains(body, "ana@example.com") || !strings.Contains(body, iss.Credential.ID) || strings.Contains(body, pw) {
		t.Fatalf("credentials page: %d", st)
	}
	if _, err := creds.Use(ctx, op, "erp"); agentvault.ErrorCode(err) != agentvault.CodeNotFound {
		t.Fatalf("the owner used ana's credential: %v", err)
	}
	st, body = e.post("/credentials", "/credentials/"+iss.Credential.ID+"/delete", url.Values{})
	if st != http.StatusOK || !strings.Contains(body, "deleted") {
		t.Fatalf("delete: %d", st)
	}
	if _, err := creds.Use(ctx, ap, "erp"); agentvault.ErrorCode(err) != agentvault.CodeNotFound {
		t.Fatalf("ana's credential survived: %v", err)
	}
	// Members and key bindings are managed on the same page.
	st, _ = e.post("/credentials", "/credentials/members", url.Values{"user": {"bia@example.com"}, "role": {"admin"}, "teams": {"finance, ops"}})
	if st != http.StatusOK {
		t.Fatalf("add member: %d", st)
	}
	if p := principal(t, creds, "bia@example.com"); p.Role != credentials.RoleAdmin || len(p.Teams) != 2 {
		t.Fatalf("bia = %+v", p)
	}
}

// signInAs gives email a dashboard account and a client of its own,
// signed in as them.
func signInAs(t *testing.T, e *env, email, pw string) *env {
	t.Helper()
	if err := e.svc.SetOwnerPassword(context.Background(), email, pw); err != nil {
		t.Fatal(err)
	}
	other := *e
	other.client = e.srv.Client()
	other.client.Jar, _ = cookiejar.New(nil)
	_, body := other.get("/signin")
	if st, _ := other.do(http.MethodPost, "/signin", url.Values{"csrf": {csrfOf(t, body)}, "email": {email}, "password": {pw}}); st != http.StatusOK {
		t.Fatalf("sign in as %s: %d", email, st)
	}
	return &other
}

// P24 on the dashboard: an owner's "bind key" for someone else is an
// offer; the member sees it on their own Credentials page and accepts it
// there, and only then does the key act for them.
func TestP24_DashboardMemberAcceptsOfferedKey(t *testing.T) {
	ctx := context.Background()
	e, creds := credEnv(t)
	op := principal(t, creds, ownerEmail)
	if err := creds.PutMember(ctx, op, credentials.Member{Org: org, User: "ana@example.com", Role: credentials.RoleMember}); err != nil {
		t.Fatal(err)
	}
	k, _, err := e.svc.CreateAPIKey(ctx, "ana's agent", owner.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	e.signIn(ownerPW)
	st, body := e.post("/credentials", "/credentials/keys", url.Values{"key": {k.ID}, "user": {"ana@example.com"}})
	if st != http.StatusOK || !strings.Contains(body, "Offered the API key to ana@example.com") || !strings.Contains(body, "offered to ana@example.com, not accepted yet") {
		t.Fatalf("offer: %d", st)
	}
	if kp, err := creds.KeyPrincipal(ctx, k.ID); err != nil || kp.Consented {
		t.Fatalf("the key acts for ana before she accepted: %+v, %v", kp, err)
	}
	// The owner's page offers no Accept for ana's key.
	if strings.Contains(body, "/credentials/keys/"+k.ID+"/accept") {
		t.Fatal("the owner's page offers to accept ana's key")
	}
	// Nor may the owner accept it for her.
	if st, _ := e.post("/credentials", "/credentials/keys/"+k.ID+"/accept", url.Values{}); st == http.StatusOK {
		if kp, _ := creds.KeyPrincipal(ctx, k.ID); kp.Consented {
			t.Fatal("the owner accepted the key for ana")
		}
	}

	ana := signInAs(t, e, "ana@example.com", "ana's long dashboard passphrase")
	st, body = ana.get("/credentials")
	if st != http.StatusOK || !strings.Contains(body, `action="/credentials/keys/`+k.ID+`/accept"`) || !strings.Contains(body, ownerEmail) {
		t.Fatalf("ana's page: %d, no offer to accept", st)
	}
	st, body = ana.post("/credentials", "/credentials/keys/"+k.ID+"/accept", url.Values{})
	if st != http.StatusOK || !strings.Contains(body, "now acts for you") || !strings.Contains(body, "accepted: acts for you") {
		t.Fatalf("accept: %d", st)
	}
	if kp, err := creds.KeyPrincipal(ctx, k.ID); err != nil || !kp.Consented || kp.User != "ana@example.com" {
		t.Fatalf("after acceptance: %+v, %v", kp, err)
	}
}

// P24 on the dashboard, the finding "an admin demotes the owner": the
// admin's form post is refused with a message saying to ask an owner, and
// the owner stays the owner. The role list offers the admin only the
// roles below his own.
func TestP24_DashboardAdminCannotDemoteOwner(t *testing.T) {
	ctx := context.Background()
	e, creds := credEnv(t)
	op := principal(t, creds, ownerEmail)
	if err := creds.PutMember(ctx, op, credentials.Member{Org: org, User: "adm@example.com", Role: credentials.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	adm := signInAs(t, e, "adm@example.com", "the admin's long dashboard passphrase")
	st, body := adm.get("/credentials")
	if st != http.StatusOK || !strings.Contains(body, "<option>member</option>") || strings.Contains(body, "<option>owner</option>") || strings.Contains(body, "<option>admin</option>") {
		t.Fatalf("the admin's role list: %d", st)
	}
	st, body = adm.post("/credentials", "/credentials/members", url.Values{"user": {ownerEmail}, "role": {"member"}})
	if st != http.StatusOK || !strings.Contains(body, "ask an owner") && !strings.Contains(body, "only owner") {
		t.Fatalf("demote: %d", st)
	}
	if p := principal(t, creds, ownerEmail); p.Role != credentials.RoleOwner {
		t.Fatalf("the owner is now %s", p.Role)
	}
}
