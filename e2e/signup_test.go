package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/e2e/merchant"
	"github.com/agentvault/agentvault/internal/leakcheck"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/vault"
)

// signupLogin is the login an approved signup request carries.
type signupLogin struct {
	Label  string            `json:"label"`
	Site   string            `json:"site"`
	Tokens map[string]string `json:"tokens"`
}

func approvedLogin(t *testing.T, a answer) signupLogin {
	t.Helper()
	var got struct {
		Status string      `json:"status"`
		Login  signupLogin `json:"login"`
		Policy struct {
			Length  int    `json:"length"`
			Symbols string `json:"symbols"`
		} `json:"passwordPolicy"`
	}
	if err := json.Unmarshal([]byte(a.text), &got); err != nil {
		t.Fatalf("signup answer is not JSON: %v (status %q)", err, a.status())
	}
	if got.Status != "approved" || got.Login.Label == "" || got.Login.Tokens["password"] == "" || got.Login.Tokens["email"] == "" {
		t.Fatalf("signup answer: status %q, login %q with %d tokens", got.Status, got.Login.Label, len(got.Login.Tokens))
	}
	// The site's stated rules, passed to create_login, shape what the vault
	// generates: 20 characters at most, its symbols from the site's set.
	r := merchant.SignupRules
	if got.Policy.Length < r.MinLength || got.Policy.Length > r.MaxLength || got.Policy.Symbols == "" || strings.Trim(got.Policy.Symbols, r.Symbols) != "" {
		t.Errorf("passwordPolicy length %d symbols %q does not follow the site's rules", got.Policy.Length, got.Policy.Symbols)
	}
	return got.Login
}

// signUp fills the shop's sign-up form with the login's tokens (the
// confirm field takes the same password token) and submits it.
func signUp(t *testing.T, agent *mcpAgent, signupURL string, l signupLogin) {
	t.Helper()
	agent.must("open_page", map[string]any{"url": signupURL})
	agent.must("fill_login", map[string]any{
		"usernameSelector": "#signup-email", "usernameToken": l.Tokens["email"],
		"passwordSelector": "#signup-password", "passwordToken": l.Tokens["password"],
		"confirmPasswordSelector": "#signup-confirm",
	})
	agent.must("click", map[string]any{"selector": "#create-account"})
	out := agent.must("get_session_outcome", map[string]any{"successSelector": "#account", "failureSelector": "#signup-error p", "timeout": 30000}).json(t)
	if out["outcome"] != "success" {
		t.Fatalf("the site did not accept the sign-up: outcome %v", out["outcome"])
	}
}

// generatedPassword reads the login's password from the vault, for
// comparisons inside the test only.
func generatedPassword(t *testing.T, ap *appliance, label string) string {
	t.Helper()
	ctx := context.Background()
	it, err := ap.vault.GetByLabel(ctx, proxyd.DefaultOrg, vault.KindLogin, label)
	if err != nil {
		t.Fatalf("the vault has no login %q: %v", label, err)
	}
	if it.Login == nil || it.Login.Generated == nil || it.Login.Email == "" {
		t.Fatalf("login %q is not a generated login with an email", label)
	}
	s, err := ap.vault.Release(ctx, vault.ReleaseArgs{Org: proxyd.DefaultOrg, ItemID: it.ID, Field: vault.FieldPassword,
		Destination: "login.test", Session: "e2e", Actor: "e2e", Purpose: "test comparison"})
	if err != nil {
		t.Fatal(err)
	}
	return string(s.InsecureRawBytes())
}

// checkAccount: the site stored the vault's password for email, it keeps
// the site's rules, and it reached the site as sent (the stand-in did not).
func checkAccount(t *testing.T, ap *appliance, email, pw string) {
	t.Helper()
	if !slices.Contains(ap.m.SignedUp(), email) {
		t.Fatalf("the site created no account for the signup's email")
	}
	if why := merchant.SignupRules.Check(pw); len(why) > 0 {
		t.Errorf("the vault's password breaks the site's rules: %v", why)
	}
	if !ap.m.AccountPasswordIs(email, pw) {
		t.Error("the site's account does not hold the vault's password")
	}
	if !ap.m.Login.Saw(pw) {
		t.Error("the site never received the vault's password")
	}
}

// TestP11_Seed004CreateLoginSignsUpThenSignsIn is issue 10's account proof
// in real Chromium over proxyd: create_login with the sign-up form's stated
// rules, the owner approving on the dashboard (and, second, a site and
// email the owner pre-approved there), the sign-up form filled with the
// returned tokens (the confirm field with the same stand-in), proxyd
// swapping the generated password in; the site's account holds the vault's
// password, and a fresh browser session signs in with the new tokens
// (fill_login, then browser_login). The run report lists
// label:signup_requested and label:created; the password is in no MCP
// result, mcpd's stderr, proxyd's log or its metrics (P11).
func TestP11_Seed004CreateLoginSignsUpThenSignsIn(t *testing.T) {
	requireE2E(t, true)
	ap := startAppliance(t, func(c *proxyd.Config) { c.Listen.Dashboard = "127.0.0.1:0" })
	ctx := context.Background()
	pm := ap.pm
	if err := pm.Owner.SetScope(ctx, proxyd.DefaultKeyID, owner.Scope{AllCards: true, AllLogins: true, CanCreateLogins: true}); err != nil {
		t.Fatal(err)
	}
	oa := &ownerAppliance{appliance: ap, pm: pm, ownerEmail: "owner@example.org", ownerPassword: "Owner-" + randomHex(8)}
	if err := pm.Owner.SetOwnerPassword(ctx, oa.ownerEmail, oa.ownerPassword); err != nil {
		t.Fatal(err)
	}
	oa.dashURL = "https://" + pm.DashboardAddr.String()
	oa.dashSPKI = dashboardSPKI(t, pm.DashboardAddr.String())
	ob := oa.signInOwner(t)

	bin := buildCmd(t, "mcpd")
	args, env := ap.mcpdArgs()
	agent := startAgent(t, bin, args, env)
	signupURL, loginURL := ap.m.Login.URL+"/signup", ap.m.Login.URL+"/login"
	rules := map[string]any{"maxLength": merchant.SignupRules.MaxLength, "allowedSymbols": merchant.SignupRules.Symbols, "noTripleRepeat": true}
	createArgs := func(email string) map[string]any {
		m := map[string]any{"website": "login.test", "email": email}
		for k, v := range rules {
			m[k] = v
		}
		return m
	}

	// 1. The owner approves on the dashboard while the agent waits.
	const email1 = "agent-inbox@example.org"
	created := agent.must("create_login", createArgs(email1)).json(t)
	reqID, _ := created["requestId"].(string)
	if created["status"] != "pending" || !strings.HasPrefix(reqID, "sr_") {
		t.Fatalf("create_login: status %v, requestId %q", created["status"], reqID)
	}
	if r := agent.must("get_signup_request", map[string]any{"requestId": reqID}).json(t); r["status"] != "pending" || r["login"] != nil {
		t.Fatalf("before the owner decides: status %v, login present %v", r["status"], r["login"] != nil)
	}
	waiting := agent.callAsync("wait_for_signup_approval", map[string]any{"requestId": reqID, "timeout": 45000}, "signup-1")
	banner := ob.decideNext(t, "approve")
	if !strings.Contains(strings.ToLower(banner), "login.test") {
		t.Errorf("the owner's banner does not name the site: %q", leakcheck.Redact(banner))
	}
	ans := waiting.wait(t)
	if ans.isErr {
		t.Fatalf("wait_for_signup_approval: %q", ans.status())
	}
	l1 := approvedLogin(t, ans)
	signUp(t, agent, signupURL, l1)
	pw1 := generatedPassword(t, ap, l1.Label)
	checkAccount(t, ap, email1, pw1)
	rep := agent.must("get_run_report", map[string]any{})
	for _, w := range []string{l1.Label + ":signup_requested", l1.Label + ":created"} {
		if !strings.Contains(rep.text, `"`+w+`"`) {
			t.Errorf("credentialWrites lacks %s", w)
		}
	}
	agent.must("close_session", map[string]any{})

	// A fresh browser session signs in with the new tokens.
	signInTrailhead(t, agent, loginURL, l1.Tokens["email"], l1.Tokens["password"])
	out := agent.must("get_session_outcome", map[string]any{"successSelector": "#account", "failureSelector": "#signin-error:not(:empty)", "timeout": 30000}).json(t)
	if out["outcome"] != "success" {
		t.Fatalf("signing in with the new login: outcome %v (failed sign-ins at the site: %d)", out["outcome"], ap.m.FailedSignIns())
	}
	agent.must("close_session", map[string]any{})

	// 2. A pre-approved signup: the owner lists the site and email on the
	// dashboard; create_login answers approved at once, get_signup_request
	// carries the tokens, and browser_login signs in with the label.
	const email2 = "agent-inbox+2@example.org"
	ob.open(t, "/signups")
	must(t, "site", ob.page.Locator("form[action='/signups'] input[name=site]").Fill("login.test"))
	must(t, "email", ob.page.Locator("form[action='/signups'] input[name=email]").Fill(email2))
	must(t, "pre-approve", ob.page.Locator("form[action='/signups'] button").Click())
	must(t, "after pre-approving", ob.page.WaitForLoadState())
	ob.keep(t)
	created = agent.must("create_login", createArgs(email2)).json(t)
	reqID2, _ := created["requestId"].(string)
	if created["status"] != "approved" {
		t.Fatalf("pre-approved create_login: status %v", created["status"])
	}
	l2 := approvedLogin(t, agent.must("get_signup_request", map[string]any{"requestId": reqID2}))
	if l2.Label == l1.Label {
		t.Fatal("the second signup reused the first login")
	}
	signUp(t, agent, signupURL, l2)
	pw2 := generatedPassword(t, ap, l2.Label)
	checkAccount(t, ap, email2, pw2)
	rep = agent.must("get_run_report", map[string]any{})
	for _, w := range []string{l2.Label + ":signup_requested", l2.Label + ":created"} {
		if !strings.Contains(rep.text, `"`+w+`"`) {
			t.Errorf("credentialWrites lacks %s", w)
		}
	}
	agent.must("close_session", map[string]any{})
	agent.must("open_page", map[string]any{"url": loginURL})
	got := agent.must("browser_login", map[string]any{"credentialId": l2.Label}).json(t)
	if got["outcome"] != "signed_in" {
		t.Fatalf("browser_login with the pre-approved login: %v (failed sign-ins at the site: %d)", got["outcome"], ap.m.FailedSignIns())
	}
	if n := agent.must("count", map[string]any{"selector": "#account"}).json(t); n["count"] != float64(1) {
		t.Errorf("browser_login did not land on the account page: count %v", n["count"])
	}
	agent.must("close_session", map[string]any{})
	agent.close()

	if ap.m.RefusedSignups() != 0 || ap.m.FailedSignIns() != 0 {
		t.Errorf("the site refused %d sign-ups and %d sign-ins", ap.m.RefusedSignups(), ap.m.FailedSignIns())
	}
	l := leakcheck.New(leakcheck.Value("generated password", pw1), leakcheck.Value("pre-approved generated password", pw2))
	agent.transcript.sweep(t, l, "MCP results")
	l.Logs(t, "mcpd log", agent.logs.Bytes())
	l.Logs(t, "proxyd logs", ap.logs.Bytes())
	l.Metrics(t, "proxyd metrics", ap.metrics(t))
	l.Text(t, "owner's dashboard pages", ob.seen.Bytes())
	t.Logf("leak sweep: %s", l.Summary())
}
