package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/credentials"
	"github.com/agentvault/agentvault/owner/dashboard"
	"github.com/agentvault/agentvault/vault"
)

func credEnv(t *testing.T) (*env, *credentials.Service) {
	t.Helper()
	var creds *credentials.Service
	e := newEnv(t, func(cfg *dashboard.Config) {
		var err error
		creds, err = credentials.New(credentials.Config{Store: cfg.Service.Store().(credentials.Store), Values: cfg.Vault.(*vault.Vault),
			Now: cfg.Now, Accounts: func(ctx context.Context, o string) ([]string, error) {
				if o != org {
					return nil, nil
				}
				return []string{ownerEmail}, nil
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
	if st != http.StatusOK || !strings.Contains(body, "Saved the values of sankhya") || strings.Contains(body, pw) {
		t.Fatalf("submit: %d", st)
	}
	use, err := creds.Use(ctx, op, "sankhya")
	if err != nil {
		t.Fatal(err)
	}
	r, err := creds.Redeem(ctx, use.Token)
	if err != nil || len(r.Values) != 2 || string(r.Values[1].Value.InsecureRawBytes()) != pw {
		t.Fatalf("redeem: %v", err)
	}
	if strings.Contains(e.logs.String(), pw) {
		t.Fatal("a value reached the log")
	}
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
