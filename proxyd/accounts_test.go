package proxyd_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/vault"
)

// TestAccountSignupThroughControlAPI: create_login over the control API,
// the owner approves, the agent reads the login's tokens; the signup form's
// password and confirm-password fields take the same stand-in and the
// site receives the generated password in both, which no answer, log or
// report ever held (P11); the run report lists the writes.
func TestAccountSignupThroughControlAPI(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var form url.Values
	up, roots := tlsUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		form = r.PostForm
		mu.Unlock()
		_, _ = w.Write([]byte("welcome"))
	})
	m, logs := startMain(t, roots, func(c *proxyd.Config) {
		c.UnsafeTestHosts = map[string]string{"shop.test": "127.0.0.1"}
	})
	if err := m.Owner.AuthorizeSite(ctx, "shop.test", "test"); err != nil {
		t.Fatal(err)
	}
	c := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	s, err := c.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	// Off by default per key.
	if _, err := c.CreateLogin(ctx, control.CreateLoginIn{APIKey: m.APIKey, Website: "shop.test", Email: "inbox@example.com"}); agentvault.ErrorCode(err) != agentvault.CodeSignupNotEnabled {
		t.Fatalf("default key: %v", err)
	}
	if err := m.Owner.SetScope(ctx, proxyd.DefaultKeyID, owner.Scope{AllCards: true, AllLogins: true, CanCreateLogins: true}); err != nil {
		t.Fatal(err)
	}
	// The owner already holds a login for the site: the new one is
	// "shop-2", and the report must name it, not the owner's "shop".
	if _, err := m.Vault.AddLogin(ctx, proxyd.DefaultOrg, "owner", vault.LoginInput{Site: "shop.test", Email: "owner@example.com",
		Password: vault.NewSecret([]byte("Owner-pw-" + strings.Repeat("x", 4)))}); err != nil {
		t.Fatal(err)
	}
	r, err := c.CreateLogin(ctx, control.CreateLoginIn{APIKey: m.APIKey, Session: s.ID, Website: "shop.test", Email: "inbox@example.com",
		PasswordRules: control.PasswordRules{MaxLength: 20, AllowedSymbols: "!_"}})
	if err != nil || r.Status != "pending" {
		t.Fatalf("create: %+v %v", r, err)
	}
	pend, _ := m.Owner.Pending(ctx)
	if len(pend) != 1 || pend[0].Kind != owner.KindSignup {
		t.Fatalf("queue: %+v", pend)
	}
	if got, err := c.SignupRequest(ctx, control.SignupRequestIn{APIKey: m.APIKey, RequestID: r.RequestID}); err != nil || got.Status != "pending" {
		t.Fatalf("read: %+v %v", got, err)
	}
	if _, err := m.Owner.Decide(ctx, pend[0].ID, true, "owner:o@example.com"); err != nil {
		t.Fatal(err)
	}
	got, err := c.WaitSignup(ctx, control.SignupRequestIn{APIKey: m.APIKey, Session: s.ID, RequestID: r.RequestID, TimeoutMs: 1000})
	if err != nil || got.Status != "approved" || got.PasswordPolicy == nil || got.PasswordPolicy.Length != 20 || got.PasswordPolicy.Symbols != "!_" {
		t.Fatalf("wait: %+v %v", got, err)
	}
	var login struct {
		Label  string            `json:"label"`
		Site   string            `json:"site"`
		Tokens map[string]string `json:"tokens"`
	}
	if err := json.Unmarshal(got.Login, &login); err != nil || login.Tokens["password"] == "" || login.Tokens["email"] == "" || login.Site != "shop.test" {
		t.Fatalf("login: %s %v", got.Login, err)
	}
	if login.Label != "shop-2" {
		t.Fatalf("the new login's label is %q, want shop-2 beside the owner's shop", login.Label)
	}
	// The catalog lists the same entry.
	cat, _ := c.Catalog(ctx, m.APIKey, "")
	if !strings.Contains(string(cat), login.Tokens["password"]) {
		t.Fatal("the catalog does not list the new login's password token")
	}

	page := "https://shop.test" + up.URL[strings.LastIndexByte(up.URL, ':'):] + "/signup"
	a, err := c.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: login.Tokens["password"], PageURL: page})
	if err != nil || !a.StandIn {
		t.Fatalf("authorize: %+v %v", a, err)
	}
	hc := proxyClient(m, s)
	resp, err := hc.PostForm(page, url.Values{"password": {a.Value}, "confirm": {a.Value}})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	it, err := m.Vault.GetByLabel(ctx, proxyd.DefaultOrg, vault.KindLogin, login.Label)
	if err != nil {
		t.Fatal(err)
	}
	real, err := m.Vault.Release(ctx, vault.ReleaseArgs{Org: proxyd.DefaultOrg, ItemID: it.ID, Field: vault.FieldPassword, Destination: "shop.test", Session: "test", Actor: "test", Purpose: "test"})
	if err != nil {
		t.Fatal(err)
	}
	pw := string(real.InsecureRawBytes())
	mu.Lock()
	sent := form
	mu.Unlock()
	if sent.Get("password") != pw || sent.Get("confirm") != pw || a.Value == pw {
		t.Fatal("the site did not receive the generated password in both fields")
	}

	if _, err := c.SetLoginUsername(ctx, control.LoginUsernameIn{APIKey: m.APIKey, Session: s.ID, Label: login.Label, Username: "agent_42"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RotateLoginPassword(ctx, control.LoginRotateIn{APIKey: m.APIKey, Session: s.ID, Label: login.Label}); err != nil {
		t.Fatal(err)
	}
	rep, err := c.Report(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{login.Label + ":signup_requested", login.Label + ":created", login.Label + ":username_set", login.Label + ":password_rotated"}
	if strings.Join(rep.CredentialWrites, ",") != strings.Join(want, ",") {
		t.Fatalf("credentialWrites = %v, want %v", rep.CredentialWrites, want)
	}
	// P11: the generated password is in no log line and no answer.
	for name, text := range map[string]string{"logs": logs.String(), "login": string(got.Login), "catalog": string(cat)} {
		if strings.Contains(text, pw) {
			t.Fatalf("the generated password is in %s", name)
		}
	}
}
