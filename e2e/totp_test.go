package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/internal/leakcheck"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/vault"
)

// signInTrailhead signs in on the email-first site with the login's
// tokens; with an authenticator on, the code step follows.
func signInTrailhead(t *testing.T, agent *mcpAgent, loginURL, emailTok, pwTok string) {
	t.Helper()
	agent.must("open_page", map[string]any{"url": loginURL})
	agent.must("fill_login", map[string]any{"usernameSelector": "input[type='email']", "usernameToken": emailTok})
	agent.must("click", map[string]any{"selector": "#continue"})
	agent.must("fill_login", map[string]any{"passwordSelector": "input[type='password']", "passwordToken": pwTok})
	agent.must("click", map[string]any{"selector": "#sign-in"})
}

// TestSeed004_TOTPEnrolledThroughTheHint: signed in over the proxy, the
// agent points declare_page_hint login.totp_secret at the enrolment
// page's key; proxyd reads the secret from the page's response, masks it
// in what the browser gets and stores it on the login. The agent confirms
// with tokens.totp (the site checks a current code), then signs in again
// through the site's authenticator step. No secret the site issued is in
// any transcript, log or metric (P11), and the run report lists
// label:totp_enrolled.
func TestSeed004_TOTPEnrolledThroughTheHint(t *testing.T) {
	requireE2E(t, true)
	ap := startWiredAppliance(t)
	bin := buildCmd(t, "mcpd")
	args, env := ap.mcpdArgs()
	agent := startAgent(t, bin, args, env)

	loginURL := ap.m.Login.URL + "/login"
	cat := agent.must("get_token_catalog", map[string]any{"url": loginURL})
	emailTok := findToken(cat.text, "login", "email")
	pwTok := findToken(cat.text, "login", "password")
	if emailTok == "" || pwTok == "" || findToken(cat.text, "login", "totp") != "" {
		t.Fatalf("catalog: email %q password %q, or a totp token before enrolment", emailTok, pwTok)
	}
	label := strings.TrimSuffix(strings.TrimPrefix(emailTok, "av_login_"), emailTok[strings.LastIndex(emailTok, "_email_"):])

	// Another login of the same site, which this session never signs in as.
	loginHost, _, _ := net.SplitHostPort(ap.m.Login.Host)
	other, err := ap.vault.AddLogin(context.Background(), org, "owner", vault.LoginInput{Site: loginHost, Website: loginURL,
		Email: "hopper@example.org", Password: vault.NewSecret([]byte("Pw-" + randomHex(12) + "!y"))})
	if err != nil {
		t.Fatal(err)
	}
	// notSignedIn declares the hint for a label and wants the precondition's
	// refusal: one answer whether the login exists or not (no oracle).
	var refusal string
	notSignedIn := func(label string) {
		t.Helper()
		got := agent.refused("declare_page_hint", map[string]any{"kind": "login.totp_secret", "selector": "body", "label": label}, "sensitive_data_blocked").text
		if !strings.Contains(got, "sign in with fill_login") || strings.Contains(got, "A token was filled") {
			t.Errorf("the refusal for %q does not name signing in as the remedy: %q", label, got)
		}
		if refusal == "" {
			refusal = got
		} else if got != refusal {
			t.Errorf("the refusal for %q differs: %q, then %q", label, refusal, got)
		}
	}

	// Before signing in: the precondition refuses, nothing is armed.
	agent.must("open_page", map[string]any{"url": ap.m.Login.URL + "/login"})
	notSignedIn(label)
	notSignedIn("no-such-login")

	signInTrailhead(t, agent, loginURL, emailTok, pwTok)
	agent.must("wait_for_selector", map[string]any{"selector": "#account", "timeout": 30000})
	agent.must("open_page", map[string]any{"url": ap.m.Login.URL + "/account/2fa"})
	// Signed in as one login, not as the other: its hint is refused alike.
	notSignedIn(other.Label)
	notSignedIn("no-such-login")
	got := agent.must("declare_page_hint", map[string]any{"kind": "login.totp_secret", "selector": "#totp-secret", "label": label}).json(t)
	if got["stored"] != true || got["digits"] != float64(6) || got["period"] != float64(30) {
		t.Fatalf("declare_page_hint login.totp_secret answered %v", got)
	}
	// What the agent may look at on the enrolment page: snapshot_page stays
	// closed after the sign-in's fill (P19) and observe_page is value-free;
	// the transcript sweep below holds both answers.
	agent.refused("snapshot_page", map[string]any{}, "sensitive_data_blocked")
	agent.must("observe_page", map[string]any{})
	cat = agent.must("get_token_catalog", map[string]any{"url": loginURL})
	totpTok := findToken(cat.text, "login", "totp")
	if totpTok == "" {
		t.Fatal("no tokens.totp for the login after enrolment")
	}
	agent.must("fill_checkout", map[string]any{"fields": []map[string]any{{"selector": "#totp-code", "value": totpTok}}})
	agent.must("click", map[string]any{"selector": "#totp-confirm"})
	out := agent.must("get_session_outcome", map[string]any{"successSelector": "#totp-enabled", "failureSelector": "#totp-error", "timeout": 30000}).json(t)
	if out["outcome"] != "success" || !ap.m.TOTPEnrolled(ap.login.email) {
		t.Fatalf("the site did not accept the vault's code: outcome %v", out["outcome"])
	}
	rep := agent.must("get_run_report", map[string]any{})
	if !strings.Contains(rep.text, label+":totp_enrolled") {
		t.Errorf("credentialWrites lacks %s:totp_enrolled: %.400s", label, rep.text)
	}
	agent.must("close_session", map[string]any{})

	// A new session signs in again: password, then the authenticator step.
	cat = agent.must("get_token_catalog", map[string]any{"url": loginURL})
	totpTok = findToken(cat.text, "login", "totp")
	signInTrailhead(t, agent, loginURL, emailTok, pwTok)
	agent.must("wait_for_selector", map[string]any{"selector": "#otp", "timeout": 30000})
	agent.must("fill_checkout", map[string]any{"fields": []map[string]any{{"selector": "#otp", "value": totpTok}}})
	agent.must("click", map[string]any{"selector": "#otp-submit"})
	out = agent.must("get_session_outcome", map[string]any{"successSelector": "#account", "failureSelector": "#otp-error", "timeout": 30000}).json(t)
	if out["outcome"] != "success" {
		t.Fatalf("sign-in with the authenticator step: outcome %v", out["outcome"])
	}
	agent.must("close_session", map[string]any{})
	agent.close()

	issued := ap.m.IssuedTOTPSecrets()
	if len(issued) < 2 {
		t.Fatalf("the site issued %d secrets; the hint reloads the page once", len(issued))
	}
	var cs []leakcheck.Canary
	for _, s := range issued {
		cs = append(cs, leakcheck.Value("totp seed", s))
	}
	cs = append(cs, leakcheck.Value("password", ap.login.password))
	l := leakcheck.New(cs...)
	agent.transcript.sweep(t, l, "MCP results")
	l.Logs(t, "mcpd log", agent.logs.Bytes())
	l.Logs(t, "proxyd logs", ap.logs.Bytes())
	l.Metrics(t, "proxyd metrics", ap.metrics(t))
}

// TestBrowserLogin_MerchantEmailFirst: browser_login with only the
// credential id on the merchant's email-first sign-in, over proxyd: the
// heuristics find the identifier, continue, the password and the submit;
// the site gets the real password, the agent only signed_in; a wrong
// credential id is refused before anything is typed.
func TestBrowserLogin_MerchantEmailFirst(t *testing.T) {
	requireE2E(t, true)
	ap := startWiredAppliance(t)
	bin := buildCmd(t, "mcpd")
	args, env := ap.mcpdArgs()
	agent := startAgent(t, bin, args, env)

	loginURL := ap.m.Login.URL + "/login"
	cat := agent.must("get_token_catalog", map[string]any{"url": loginURL})
	emailTok := findToken(cat.text, "login", "email")
	label := strings.TrimSuffix(strings.TrimPrefix(emailTok, "av_login_"), emailTok[strings.LastIndex(emailTok, "_email_"):])
	agent.must("open_page", map[string]any{"url": loginURL})
	kinds := agent.must("list_page_hint_kinds", map[string]any{})
	if !strings.Contains(kinds.text, "login.totp_secret") {
		t.Errorf("list_page_hint_kinds from proxyd lacks login.totp_secret")
	}
	agent.refused("browser_login", map[string]any{"credentialId": "no-such-login"}, "not_found")
	got := agent.must("browser_login", map[string]any{"credentialId": label}).json(t)
	if got["outcome"] != "signed_in" {
		t.Fatalf("browser_login: %v (failed sign-ins at the site: %d)", got, ap.m.FailedSignIns())
	}
	if !ap.m.Login.Saw(ap.login.password) {
		t.Error("the site did not receive the real password")
	}
	agent.must("close_session", map[string]any{})
	agent.close()
	l := leakcheck.New(leakcheck.Value("password", ap.login.password))
	agent.transcript.sweep(t, l, "MCP results")
	l.Logs(t, "mcpd log", agent.logs.Bytes())
	l.Logs(t, "proxyd logs", ap.logs.Bytes())
}

// randomBase32 is a fresh 160-bit authenticator key, as sites issue them.
func randomBase32(t *testing.T) string {
	t.Helper()
	var raw [20]byte
	if _, err := rand.Read(raw[:]); err != nil {
		t.Fatal(err)
	}
	return base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(raw[:])
}

// ownerSeed gives the seeded login an authenticator the owner set up
// before: the site has it on, and the vault holds the same seed.
func ownerSeed(t *testing.T, ap *appliance) string {
	t.Helper()
	ctx := context.Background()
	seed := randomBase32(t)
	items, err := ap.vault.List(ctx, org)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if it.Kind == vault.KindLogin {
			if _, err := ap.vault.UpdateLogin(ctx, org, it.ID, vault.LoginUpdate{TOTP: vault.NewSecret([]byte(seed)), Actor: "owner"}); err != nil {
				t.Fatal(err)
			}
			ap.m.EnrollTOTPSecret(ap.login.email, seed)
			return seed
		}
	}
	t.Fatal("no login to give an authenticator")
	return ""
}

// loginTokens reads the seeded login's tokens and label from the catalog.
func loginTokens(t *testing.T, agent *mcpAgent, loginURL string) (label, emailTok, pwTok, totpTok string) {
	t.Helper()
	cat := agent.must("get_token_catalog", map[string]any{"url": loginURL})
	emailTok, pwTok, totpTok = findToken(cat.text, "login", "email"), findToken(cat.text, "login", "password"), findToken(cat.text, "login", "totp")
	if emailTok == "" || pwTok == "" || totpTok == "" {
		t.Fatalf("catalog: email %q password %q totp %q", emailTok, pwTok, totpTok)
	}
	label = strings.TrimSuffix(strings.TrimPrefix(emailTok, "av_login_"), emailTok[strings.LastIndex(emailTok, "_email_"):])
	return label, emailTok, pwTok, totpTok
}

// signInWithCode signs in through the site's authenticator step with
// tokens.totp: the site accepts only a current code of the seed it has on.
func signInWithCode(t *testing.T, ap *appliance, agent *mcpAgent, loginURL, emailTok, pwTok, totpTok string) {
	t.Helper()
	signInTrailhead(t, agent, loginURL, emailTok, pwTok)
	agent.must("wait_for_selector", map[string]any{"selector": "#otp", "timeout": 15000})
	agent.must("fill_checkout", map[string]any{"fields": []map[string]any{{"selector": "#otp", "value": totpTok}}})
	agent.must("click", map[string]any{"selector": "#otp-submit"})
	out := agent.must("get_session_outcome", map[string]any{"successSelector": "#account", "failureSelector": "#otp-error", "timeout": 15000}).json(t)
	if out["outcome"] != "success" {
		t.Fatalf("the site's authenticator step refused the vault's code: outcome %v (failed: %d)", out["outcome"], ap.m.FailedSignIns())
	}
}

// TestP24_TOTPReflectedSeedIsNotStored is issue 22's attack: the agent,
// signed in as a login whose authenticator the owner set up, declares
// login.totp_secret on a page of the site that shows its query back (a
// search for the agent's own base32 key). Nothing is stored
// (totp_seed_untrusted), and the next sign-in's authenticator step gets a
// code of the owner's seed, which the site accepts.
func TestP24_TOTPReflectedSeedIsNotStored(t *testing.T) {
	requireE2E(t, true)
	ap := startWiredAppliance(t)
	seed := ownerSeed(t, ap)
	bin := buildCmd(t, "mcpd")
	args, env := ap.mcpdArgs()
	agent := startAgent(t, bin, args, env)
	loginURL := ap.m.Login.URL + "/login"
	label, emailTok, pwTok, totpTok := loginTokens(t, agent, loginURL)

	signInWithCode(t, ap, agent, loginURL, emailTok, pwTok, totpTok)
	agentSeed := randomBase32(t)
	agent.must("open_page", map[string]any{"url": ap.m.Login.URL + "/search?q=" + agentSeed})
	agent.refused("declare_page_hint", map[string]any{"kind": "login.totp_secret", "selector": "#query", "label": label}, "totp_seed_untrusted")
	rep := agent.must("get_run_report", map[string]any{})
	if strings.Contains(rep.text, label+":totp_enrolled") {
		t.Errorf("the run report lists a TOTP write: %.400s", rep.text)
	}
	agent.must("close_session", map[string]any{})

	// The next fill of tokens.totp sends the owner's code.
	signInWithCode(t, ap, agent, loginURL, emailTok, pwTok, totpTok)
	agent.must("close_session", map[string]any{})
	agent.close()
	if got := ap.m.EnrolledTOTPSecret(ap.login.email); got != seed {
		t.Error("the site's authenticator changed")
	}
	l := leakcheck.New(leakcheck.Value("owner's totp seed", seed))
	agent.transcript.sweep(t, l, "MCP results")
	l.Logs(t, "mcpd log", agent.logs.Bytes())
	l.Logs(t, "proxyd logs", ap.logs.Bytes())
}

// TestP24_TOTPReplacementWaitsForTheOwner: the agent enrols a new
// authenticator on the site's real enrolment page for a login that has
// one. The vault keeps the stored seed and asks the owner on the dashboard
// over TLS, naming the login and the site; the tool call waits. Denied:
// the call answers approval_denied and the next sign-in still works with
// the old seed. Approved: the call answers stored, tokens.totp then fills
// a code of the new seed, which the site accepts to turn the new
// authenticator on. No seed is in any MCP result, log or dashboard page.
func TestP24_TOTPReplacementWaitsForTheOwner(t *testing.T) {
	requireE2E(t, true)
	ap := startAppliance(t, func(c *proxyd.Config) { c.Listen.Dashboard = "127.0.0.1:0" })
	ctx := context.Background()
	pm := ap.pm
	oa := &ownerAppliance{appliance: ap, pm: pm, ownerEmail: "owner@example.org", ownerPassword: "Owner-" + randomHex(8)}
	if err := pm.Owner.SetOwnerPassword(ctx, oa.ownerEmail, oa.ownerPassword); err != nil {
		t.Fatal(err)
	}
	oa.dashURL = "https://" + pm.DashboardAddr.String()
	oa.dashSPKI = dashboardSPKI(t, pm.DashboardAddr.String())
	ob := oa.signInOwner(t)
	seed := ownerSeed(t, ap)
	bin := buildCmd(t, "mcpd")
	args, env := ap.mcpdArgs()
	agent, progress := startAgentWithProgress(t, bin, args, env)
	loginURL := ap.m.Login.URL + "/login"
	label, emailTok, pwTok, totpTok := loginTokens(t, agent, loginURL)
	hint := map[string]any{"kind": "login.totp_secret", "selector": "#totp-secret", "label": label}
	asked := "approve replacing the authenticator secret of login " + label + " on login.test"

	declare := func(decision string) answer {
		t.Helper()
		signInWithCode(t, ap, agent, loginURL, emailTok, pwTok, totpTok)
		agent.must("open_page", map[string]any{"url": ap.m.Login.URL + "/account/2fa"})
		progress.drain()
		call := agent.callAsync("declare_page_hint", hint, "totp-"+decision)
		if msg := progress.next(t, 60*time.Second); !strings.Contains(msg, asked) {
			t.Fatalf("the wait does not say which login and site: %q", leakcheck.Redact(msg))
		}
		before := len(ob.seen.Bytes())
		banner := ob.decideNext(t, decision)
		shown := string(ob.seen.Bytes()[before:])
		for _, want := range []string{"New authenticator secret", "login.test login " + label, "/account/2fa"} {
			if !strings.Contains(shown, want) {
				t.Errorf("the owner's approval does not show %q", want)
			}
		}
		if !strings.Contains(banner, "New authenticator secret") {
			t.Errorf("the banner does not name the request: %q", leakcheck.Redact(banner))
		}
		return call.wait(t)
	}

	// Denied: the stored seed stays.
	if r := declare("deny"); !r.isErr || r.code() != "approval_denied" {
		t.Fatalf("declare_page_hint after a no: %q", r.status())
	}
	agent.must("close_session", map[string]any{})

	// Approved: the next sign-in still uses the old seed, then the new one
	// goes in.
	r := declare("approve")
	if r.isErr {
		t.Fatalf("declare_page_hint after a yes: %q", r.status())
	}
	if got := r.json(t); got["stored"] != true {
		t.Fatalf("declare_page_hint after a yes answered %v", got)
	}
	agent.must("fill_checkout", map[string]any{"fields": []map[string]any{{"selector": "#totp-code", "value": totpTok}}})
	agent.must("click", map[string]any{"selector": "#totp-confirm"})
	out := agent.must("get_session_outcome", map[string]any{"successSelector": "#totp-enabled", "failureSelector": "#totp-error", "timeout": 15000}).json(t)
	newSeed := ap.m.EnrolledTOTPSecret(ap.login.email)
	if out["outcome"] != "success" || newSeed == seed || newSeed == "" {
		t.Fatalf("the site did not take a code of the new seed: outcome %v, authenticator changed %v", out["outcome"], newSeed != seed)
	}
	if rep := agent.must("get_run_report", map[string]any{}); !strings.Contains(rep.text, label+":totp_enrolled") {
		t.Errorf("credentialWrites lacks %s:totp_enrolled", label)
	}
	agent.must("close_session", map[string]any{})
	agent.close()

	cs := []leakcheck.Canary{leakcheck.Value("owner's totp seed", seed)}
	for _, s := range ap.m.IssuedTOTPSecrets() {
		cs = append(cs, leakcheck.Value("issued totp seed", s))
	}
	l := leakcheck.New(cs...)
	agent.transcript.sweep(t, l, "MCP results")
	l.Logs(t, "mcpd log", agent.logs.Bytes())
	l.Logs(t, "proxyd logs", ap.logs.Bytes())
	l.Text(t, "owner's dashboard pages", ob.seen.Bytes())
}

// TestP24_TOTPCaptureReadsOnlyTheDeclaredPage: through proxyd over TLS
// (Go's client with the session's proxy credential, the control API as
// mcpd speaks it), a session signed in as a login with an authenticator
// arms a capture on the enrolment page, then loads the site's search page
// for its own key. The search page comes back as the site sent it and is
// not read; the capture stays armed and reads the enrolment page, which
// asks the owner (the login has a seed) instead of storing anything.
func TestP24_TOTPCaptureReadsOnlyTheDeclaredPage(t *testing.T) {
	requireE2E(t, false)
	ap := startAppliance(t)
	seed := ownerSeed(t, ap)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	loginURL := ap.m.Login.URL + "/login"
	cat, err := ap.ctl.Catalog(ctx, ap.apiKey, loginURL)
	if err != nil {
		t.Fatal(err)
	}
	emailTok, pwTok, totpTok := findToken(string(cat), "login", "email"), findToken(string(cat), "login", "password"), findToken(string(cat), "login", "totp")
	label := strings.TrimSuffix(strings.TrimPrefix(emailTok, "av_login_"), emailTok[strings.LastIndex(emailTok, "_email_"):])
	s, err := ap.ctl.CreateSession(ctx, ap.apiKey)
	if err != nil {
		t.Fatal(err)
	}
	defer ap.ctl.CloseSession(context.Background(), s.ID)
	c := proxySession{s: s}.goClient(t)
	c.Jar, _ = cookiejar.New(nil)
	standIn := func(tok string) string {
		a, err := ap.ctl.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: tok, PageURL: loginURL})
		if err != nil {
			t.Fatalf("authorize: %v", err)
		}
		return a.Value
	}
	post := func(path string, form url.Values, wantLocation string) {
		t.Helper()
		res, err := c.PostForm(ap.m.Login.URL+path, form)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther || !strings.HasSuffix(res.Header.Get("Location"), wantLocation) {
			t.Fatalf("POST %s: %d to %q (%s)", path, res.StatusCode, res.Header.Get("Location"), res.Header.Get("X-Agentvault-Code"))
		}
	}
	get := func(path string) string {
		t.Helper()
		res, err := c.Get(ap.m.Login.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, res.StatusCode)
		}
		return string(b)
	}
	post("/session", url.Values{"email": {standIn(emailTok)}, "password": {standIn(pwTok)}}, "/login/otp")
	post("/login/otp", url.Values{"otp": {standIn(totpTok)}}, "/account")

	armed, err := ap.ctl.ArmTOTPCapture(ctx, control.TOTPArmIn{Session: s.ID, Label: label, PageURL: ap.m.Login.URL + "/account/2fa",
		Locator: control.TOTPLocator{Tag: "code", Index: 0}})
	if err != nil {
		t.Fatalf("arm: %v", err)
	}
	agentSeed := randomBase32(t)
	if page := get("/search?q=" + agentSeed); !strings.Contains(page, agentSeed) || strings.Contains(page, totpMask) {
		t.Fatal("the search page was read by the capture armed on the enrolment page")
	}
	if page := get("/account/2fa"); !strings.Contains(page, totpMask) {
		t.Fatal("the enrolment page was not read after the search page")
	}
	_, err = ap.ctl.TakeTOTPCapture(ctx, control.TOTPTakeIn{Session: s.ID, CaptureID: armed.CaptureID, TimeoutMs: 10000})
	p, ok := control.PendingOf(err)
	if !ok || p.Kind != "totp_replace" || p.Login != label || p.Site != "login.test" {
		t.Fatalf("take on a login with a seed: %v (pending %+v)", err, p)
	}
	if _, err := ap.pm.Owner.Decide(ctx, p.WaitID, false, "owner:e2e"); err != nil {
		t.Fatal(err)
	}
	_, err = ap.ctl.TakeTOTPCapture(ctx, control.TOTPTakeIn{Session: s.ID, CaptureID: armed.CaptureID, WaitID: p.WaitID})
	if agentvault.ErrorCode(err) != agentvault.CodeApprovalDenied {
		t.Fatalf("take after the owner's no: %v", err)
	}
	if got := ap.m.EnrolledTOTPSecret(ap.login.email); got != seed {
		t.Error("the site's authenticator changed")
	}
	l := leakcheck.New(leakcheck.Value("owner's totp seed", seed))
	l.Logs(t, "proxyd logs", ap.logs.Bytes())
}
