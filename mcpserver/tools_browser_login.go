package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/browser"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/tokens"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// browser_login (seed 000): sign the current page in with a stored login,
// named by id (the login's catalog label). The identifier and password are
// typed as stand-ins that proxyd swaps on the wire: neither comes back to
// the model, a log or an event. Three outcomes: signed in and refused are
// normal answers; not concluded is an error, browser.captcha_pending or
// browser.login_timeout, of category unprocessable, that a client must not
// retry on its own (a retry would submit the password again). The whole
// call, captcha waits and the diagnostic capture included, ends within the
// budget (120 s).

// DefaultLoginBudget is browser_login's end-to-end budget.
const DefaultLoginBudget = 120 * time.Second

// CaptchaProvider is a managed browser's captcha solver (seed 000:
// browser.provider "steel_cloud" with solveCaptcha, or "browserbase", map
// to one). Pending reports whether the solver is still working on a
// challenge on the page; browser_login waits on it before and after the
// submit. A nil provider means a self-hosted browser or no solver: no
// waits, no queries.
type CaptchaProvider interface {
	Pending(ctx context.Context, page *browser.Session) (bool, error)
}

// CaptchaProviderFor maps the seed's provider names to the solver a
// deployment registered: steel_cloud and browserbase when their solver is
// on (solveCaptcha is the setting in effect: browserbase's is on unless
// turned off, steel_cloud's off unless turned on), anything else none.
func CaptchaProviderFor(name string, solveCaptcha bool, registered map[string]CaptchaProvider) CaptchaProvider {
	switch name {
	case string(browser.ProviderSteel), string(browser.ProviderBrowserbase):
		if !solveCaptcha {
			return nil
		}
	default:
		return nil
	}
	return registered[name]
}

// ProviderSolver waits on the solver of the managed browser a session runs
// in: Browserbase's solver signals in the page's console, Steel's captcha
// status API (package browser reads both).
type ProviderSolver struct{}

// Pending asks the session's managed browser.
func (ProviderSolver) Pending(ctx context.Context, page *browser.Session) (bool, error) {
	return page.CaptchaPending(ctx)
}

var _ CaptchaProvider = ProviderSolver{}

// solverFor is the solver browser_login waits on for a browser
// configuration: the managed provider's own when its solver is on.
func solverFor(r browser.Remote) CaptchaProvider {
	return CaptchaProviderFor(string(r.Kind()), r.SolverOn(), map[string]CaptchaProvider{
		string(browser.ProviderSteel): ProviderSolver{}, string(browser.ProviderBrowserbase): ProviderSolver{},
	})
}

// diagnosticReserve is the part of the budget kept for the capture.
const diagnosticReserve = 5 * time.Second

type browserLoginIn struct {
	SessionArg
	CredentialID     string `json:"credentialId" jsonschema:"The stored login to sign in with: its label in get_token_catalog's logins."`
	UsernameSelector string `json:"usernameSelector,omitempty" jsonschema:"CSS of the username or email field; found by heuristics when absent."`
	PasswordSelector string `json:"passwordSelector,omitempty" jsonschema:"CSS of the password field; found by heuristics when absent."`
	SubmitSelector   string `json:"submitSelector,omitempty" jsonschema:"CSS of the submit button; found by heuristics when absent."`
}

func (s *Server) registerBrowserLogin() {
	addTool(s, "browser_login", "Sign the current page in with a stored login (navigate to the sign-in page first). credentialId is the login's label from get_token_catalog; selectors are optional. Answers JSON {outcome: signed_in|refused, ...}: refused means the portal rejected the credential (a masked diagnostic capture is kept for the owner). Errors browser.captcha_pending and browser.login_timeout mean nothing was learned about the credential: take a snapshot or observe_page and call browser_login again only if you decide to; never retry automatically. Always answers within 120 s.", false, s.browserLogin)
}

// loginOutcome is what the page showed after the submit.
type loginOutcome int

const (
	outcomeUnknown loginOutcome = iota
	outcomeSignedIn
	outcomeRefused
)

func (s *Server) browserLogin(ctx context.Context, in browserLoginIn) (*mcp.CallToolResult, error) {
	budget := s.loginBudget
	if budget <= 0 {
		budget = DefaultLoginBudget
	}
	start := time.Now()
	deadline := start.Add(budget)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if in.CredentialID == "" {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "credentialId is required: a login label from get_token_catalog")
	}
	ss, err := s.pageSession("browser_login", in.Session)
	if err != nil {
		return nil, err
	}
	// The budget counts the wait behind another call on this session:
	// the answer comes within it even when that call does not end.
	if !lockBy(ctx, &ss.mu) {
		return nil, agentvault.Errorf(agentvault.CodeBrowserLoginTimeout,
			"The sign-in did not start within the %s budget: another call on this session was still running, and nothing was typed or submitted. Nothing was learned about the credential. Call browser_login again once that call has answered, if you decide to; do not retry automatically.", budget)
	}
	defer ss.mu.Unlock()
	left := func() time.Duration { return time.Until(deadline) }
	// The work leaves diagnosticReserve for the capture; the capture
	// itself is dropped when even that is gone.
	workLeft := func() time.Duration { return left() - diagnosticReserve }
	notConcluded := func(code agentvault.Code, msg string) (*mcp.CallToolResult, error) {
		ref := s.loginDiagnostic(ctx, ss, in, deadline, string(code))
		if ref != "" {
			msg += " A masked diagnostic capture was kept for the owner (artifact " + ref + ")."
		}
		return nil, agentvault.Errorf(code, "%s Nothing was learned about the credential. Take a snapshot (observe_page) and call browser_login again if you decide to; do not retry automatically.", msg)
	}
	timedOut := func() (*mcp.CallToolResult, error) {
		return notConcluded(agentvault.CodeBrowserLoginTimeout, fmt.Sprintf("The sign-in did not finish within the %s budget (slow portal, or still loading).", budget))
	}

	emailTok, userTok, pwTok, err := s.loginTokens(ctx, in.CredentialID, ss.page.URL())
	if err != nil {
		if ctx.Err() != nil {
			return timedOut()
		}
		return nil, err
	}
	named := browser.LoginFields{Username: in.UsernameSelector, Password: in.PasswordSelector, Submit: in.SubmitSelector}

	// Before the submit: a challenge still up means nothing is submitted.
	if ok, err := s.waitCaptcha(ctx, ss, workLeft); err != nil || !ok {
		if err != nil && ctx.Err() == nil {
			return nil, err
		}
		return notConcluded(agentvault.CodeBrowserCaptchaPending, "The managed browser was still solving a captcha: nothing was submitted.")
	}
	f, err := ss.page.FindLoginFields(named)
	if err != nil {
		return nil, err
	}
	if f.Username == "" && f.Password == "" {
		return nil, agentvault.Errorf(agentvault.CodeFieldNotFound, "no sign-in field on this page: navigate to the sign-in page, or pass usernameSelector and passwordSelector")
	}
	ss.action()
	ss.gate.MarkFilled()
	user := "" // the identifier typed, masked
	typeToken := func(sel, tok string, identifier bool) error {
		cls, err := classify(tok)
		if err != nil {
			return err
		}
		v, err := s.authorize(ctx, ss, tok, cls, "")
		if err != nil {
			return err
		}
		ss.filled = append(ss.filled, v)
		if identifier {
			user = maskIdentifier(v)
		}
		return ss.page.Fill(browser.Target{Selector: sel}, v, min(loginFieldWait, max(workLeft(), time.Millisecond)))
	}
	if f.Username != "" && ss.page.Visible(browser.Target{Selector: f.Username}) {
		tok := cmpOr(emailTok, userTok)
		if tok == "" {
			return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "this login has no identifier token")
		}
		if err := typeToken(f.Username, tok, true); err != nil {
			if ctx.Err() != nil {
				return timedOut()
			}
			return nil, err
		}
	}
	// An email-first form shows the password after the identifier step.
	if f.Password == "" || !ss.page.Visible(browser.Target{Selector: f.Password}) {
		if f.Submit == "" {
			return nil, agentvault.Errorf(agentvault.CodeFieldNotFound, "no password field and no button to continue: pass passwordSelector and submitSelector")
		}
		if _, err := ss.page.Click(browser.Target{Selector: f.Submit}, max(min(loginFieldWait, workLeft()), time.Millisecond)); err != nil {
			return nil, err
		}
		pwSel := cmpOr(in.PasswordSelector, "input[type=password]")
		if err := ss.page.WaitFor(browser.Target{Selector: pwSel}, "visible", max(min(15*time.Second, workLeft()), time.Millisecond)); err != nil {
			if workLeft() <= 0 {
				return timedOut()
			}
			return nil, agentvault.Errorf(agentvault.CodeFieldNotFound, "the password field did not appear after the identifier step")
		}
		if f, err = ss.page.FindLoginFields(browser.LoginFields{Username: "-", Password: in.PasswordSelector, Submit: in.SubmitSelector}); err != nil {
			return nil, err
		}
	}
	if err := typeToken(f.Password, pwTok, false); err != nil {
		if ctx.Err() != nil {
			return timedOut()
		}
		return nil, err
	}
	ss.loginPassword = true
	if ok, err := s.waitCaptcha(ctx, ss, workLeft); err != nil || !ok {
		if err != nil && ctx.Err() == nil {
			return nil, err
		}
		return notConcluded(agentvault.CodeBrowserCaptchaPending, "The managed browser was still solving a captcha: nothing was submitted.")
	}
	var submitErr error
	if f.Submit != "" {
		_, submitErr = ss.page.Click(browser.Target{Selector: f.Submit}, max(min(loginFieldWait, workLeft()), time.Millisecond))
	} else {
		_, submitErr = ss.page.Press(browser.Target{Selector: f.Password}, "Enter", max(min(loginFieldWait, workLeft()), time.Millisecond))
	}
	// A click that timed out waiting on the navigation it started may have
	// submitted: the outcome is read from the page, and a portal that never
	// answers ends as login_timeout, never as a refusal.
	if submitErr != nil && agentvault.ErrorCode(submitErr) != agentvault.CodeTimeout {
		return nil, submitErr
	}
	// After the submit: a challenge after the credential is the common
	// case; the outcome is read only once it is down.
	for {
		if ok, err := s.waitCaptcha(ctx, ss, workLeft); err != nil || !ok {
			if err != nil && ctx.Err() == nil {
				return nil, err
			}
			return notConcluded(agentvault.CodeBrowserCaptchaPending, "The managed browser was still solving a captcha after the submit.")
		}
		out := s.readLoginOutcome(ss, f.Password)
		if out != outcomeUnknown && s.captcha != nil {
			// A challenge the solver has not announced yet looks like any
			// page: the read counts only if the solver is still quiet
			// after it (its pickup window covers a document that arrived
			// while the page was read).
			if pending, err := s.captcha.Pending(ctx, ss.page); err == nil && pending {
				out = outcomeUnknown
			}
		}
		switch out {
		case outcomeSignedIn:
			// No identifier typed (the portal kept it from an earlier
			// step): the answer says so rather than inventing one.
			return jsonAnswer(okStatus(), map[string]any{"outcome": "signed_in", "credentialId": in.CredentialID, "user": cmpOr(user, "***")})
		case outcomeRefused:
			ans := map[string]any{"outcome": "refused", "credentialId": in.CredentialID,
				"note": "The portal rejected the credential: give up or try another credential."}
			if ref := s.loginDiagnostic(ctx, ss, in, deadline, "refused"); ref != "" {
				ans["diagnosticArtifact"] = ref
			} else {
				ans["diagnosticArtifact"] = nil
			}
			return jsonAnswer(okStatus(), ans)
		}
		if workLeft() <= 0 {
			return timedOut()
		}
		select {
		case <-ctx.Done():
			return timedOut()
		case <-time.After(s.loginPoll()):
		}
	}
}

// maskIdentifier masks the account a sign-in used so the agent can tell
// which one it was without reading it (seed 000, "usuário mascarado"): the
// first character, and an email's domain, j***@example.com or j***.
func maskIdentifier(v string) string {
	r := []rune(strings.TrimSpace(v))
	if len(r) == 0 {
		return "***"
	}
	first := string(r[0])
	if at := strings.LastIndexByte(string(r), '@'); at > 0 && at < len(string(r))-1 {
		return first + "***" + string(r)[at:]
	}
	return first + "***"
}

// lockBy locks mu, or gives up when ctx ends first (then mu is unlocked
// as soon as the lock comes, by the goroutine that waited for it).
func lockBy(ctx context.Context, mu *sync.Mutex) bool {
	if mu.TryLock() {
		return true
	}
	got := make(chan struct{})
	go func() {
		mu.Lock()
		close(got)
	}()
	select {
	case <-got:
		return true
	case <-ctx.Done():
		go func() {
			<-got
			mu.Unlock()
		}()
		return false
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (s *Server) loginPoll() time.Duration {
	if s.waitPoll > 0 && s.waitPoll < 250*time.Millisecond {
		return s.waitPoll
	}
	return 250 * time.Millisecond
}

// loginTokens finds the login's tokens in the catalog for the page.
func (s *Server) loginTokens(ctx context.Context, label, pageURL string) (email, username, password string, err error) {
	raw, err := s.cfg.Control.Catalog(ctx, s.apiKeyOf(ctx), pageURL)
	if err != nil {
		return "", "", "", err
	}
	var cat struct {
		Logins []struct {
			Label  string            `json:"label"`
			Tokens map[string]string `json:"tokens"`
		} `json:"logins"`
	}
	if err := json.Unmarshal(raw, &cat); err != nil {
		return "", "", "", agentvault.Wrap(agentvault.CodeInternal, err, "the catalog could not be read")
	}
	for _, l := range cat.Logins {
		if l.Label == label && l.Tokens["password"] != "" {
			return l.Tokens["email"], l.Tokens["username"], l.Tokens["password"], nil
		}
	}
	return "", "", "", agentvault.Errorf(agentvault.CodeNotFound, "no stored login with this credentialId for this page: read get_token_catalog for the page")
}

// waitCaptcha waits while the provider says a challenge is being solved:
// true once none is, false when the time ran out. No provider: true at
// once, nothing asked.
func (s *Server) waitCaptcha(ctx context.Context, ss *Session, left func() time.Duration) (bool, error) {
	p := s.captcha
	if p == nil {
		return true, nil
	}
	for {
		pending, err := p.Pending(ctx, ss.page)
		if err != nil {
			return false, err
		}
		if !pending {
			return true, nil
		}
		if left() <= 0 {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(s.loginPoll()):
		}
	}
}

// readLoginOutcome reads the page once: refused when a sign-in step shows
// an error or the portal refuses attempts; signed in when no password
// field, sign-in step, code step or error is left and the page loaded.
func (s *Server) readLoginOutcome(ss *Session, pwSel string) loginOutcome {
	sig, err := ss.page.Observe()
	if err != nil || sig.Incomplete {
		return outcomeUnknown
	}
	if sig.RefusingAttempts || sig.Error && (sig.PasswordField || sig.SignIn || sig.IdentifierField) {
		return outcomeRefused
	}
	if sig.PasswordField || sig.SignIn || sig.CodeSent || sig.Error {
		return outcomeUnknown
	}
	if pwSel != "" && ss.page.Visible(browser.Target{Selector: pwSel}) {
		return outcomeUnknown
	}
	if ch, err := ss.page.DetectChallenge(); err == nil && (len(ch.Types) > 0 && !ch.OTPWeak || ch.Incomplete) {
		return outcomeUnknown
	}
	return outcomeSignedIn
}

// loginDiagnostic keeps a masked screenshot (every password and sensitive
// field painted over inside Chromium, the identifier field too) of a
// sign-in that did not succeed, as an artifact the owner can open, and
// returns its reference (seed 000, Diagnóstico). The reference, and only
// it, goes into the session's events on proxyd, where the owner sees it
// on the dashboard's Activity page, and into mcpd's log. It degrades to ""
// with no artifact directory, a failed capture or too little budget left:
// the answer never waits on it past the budget.
func (s *Server) loginDiagnostic(ctx context.Context, ss *Session, in browserLoginIn, deadline time.Time, outcome string) string {
	dir := s.cfg.ArtifactDir
	if dir == "" || time.Until(deadline) < time.Second {
		return ""
	}
	extra := []string{"[data-av-login]", "input[type=email]", "input[autocomplete~=username]"}
	if in.UsernameSelector != "" {
		extra = append(extra, in.UsernameSelector)
	}
	type shot struct {
		b   []byte
		err error
	}
	ch := make(chan shot, 1)
	go func() {
		b, err := ss.page.Screenshot(extra)
		ch <- shot{b, err}
	}()
	var got shot
	select {
	case got = <-ch:
	case <-time.After(time.Until(deadline) - 200*time.Millisecond):
		return ""
	}
	if got.err != nil || len(got.b) == 0 {
		return ""
	}
	name := control.NewLoginArtifact()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		s.log.Warn("login diagnostic not kept", "err_kind", errors.Unwrap(err) != nil)
		return ""
	}
	if err := os.WriteFile(filepath.Join(dir, name), got.b, 0o600); err != nil {
		s.log.Warn("login diagnostic not kept", "err_kind", errors.Unwrap(err) != nil)
		return ""
	}
	// The label only when it is one (the agent typed it); the page's host,
	// never its path or query.
	ev := control.EventRequest{Type: control.EventLoginDiagnostic, Outcome: outcome, Artifact: name}
	if tokens.ValidLabel(in.CredentialID) {
		ev.Login = in.CredentialID
	}
	if u, err := url.Parse(ss.page.URL()); err == nil {
		ev.Site = u.Hostname()
	}
	s.log.Info("login diagnostic kept", "artifact", name, "outcome", outcome, "login", ev.Login, "site", ev.Site)
	ectx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline.Add(-100*time.Millisecond))
	defer cancel()
	if err := s.cfg.Control.Event(ectx, ss.ctl.ID, ev); err != nil {
		s.log.Warn("login diagnostic not reported to proxyd", "artifact", name, "code", string(agentvault.ErrorCode(err)))
	}
	return name
}
