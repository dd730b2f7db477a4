package e2e

import (
	"strings"
	"testing"
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

	// Before signing in: the precondition refuses, nothing is armed.
	agent.must("open_page", map[string]any{"url": ap.m.Login.URL + "/login"})
	agent.refused("declare_page_hint", map[string]any{"kind": "login.totp_secret", "selector": "body", "label": label}, "sensitive_data_blocked")

	signInTrailhead(t, agent, loginURL, emailTok, pwTok)
	agent.must("wait_for_selector", map[string]any{"selector": "#account", "timeout": 15000})
	agent.must("open_page", map[string]any{"url": ap.m.Login.URL + "/account/2fa"})
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
	out := agent.must("get_session_outcome", map[string]any{"successSelector": "#totp-enabled", "failureSelector": "#totp-error", "timeout": 15000}).json(t)
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
	agent.must("wait_for_selector", map[string]any{"selector": "#otp", "timeout": 15000})
	agent.must("fill_checkout", map[string]any{"fields": []map[string]any{{"selector": "#otp", "value": totpTok}}})
	agent.must("click", map[string]any{"selector": "#otp-submit"})
	out = agent.must("get_session_outcome", map[string]any{"successSelector": "#account", "failureSelector": "#otp-error", "timeout": 15000}).json(t)
	if out["outcome"] != "success" {
		t.Fatalf("sign-in with the authenticator step: outcome %v", out["outcome"])
	}
	agent.must("close_session", map[string]any{})
	agent.close()

	issued := ap.m.IssuedTOTPSecrets()
	if len(issued) < 2 {
		t.Fatalf("the site issued %d secrets; the hint reloads the page once", len(issued))
	}
	var cs []canary
	for _, s := range issued {
		cs = append(cs, newCanary("totp seed", s))
	}
	cs = append(cs, newCanary("password", ap.login.password))
	l := newLeaks(cs...)
	l.check(t, "MCP results", agent.transcript.Bytes())
	l.check(t, "mcpd stderr", agent.stderr.Bytes())
	l.check(t, "proxyd logs", ap.logs.Bytes())
	l.check(t, "proxyd metrics", ap.metrics(t))
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
	l := newLeaks(newCanary("password", ap.login.password))
	l.check(t, "MCP results", agent.transcript.Bytes())
	l.check(t, "mcpd stderr", agent.stderr.Bytes())
	l.check(t, "proxyd logs", ap.logs.Bytes())
}
