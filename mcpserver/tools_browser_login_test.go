package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/browser"
	"github.com/agentvault/agentvault/browser/browsertest"
	"github.com/agentvault/agentvault/control"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// portalControl is standInControl with a stored portal login in the
// catalog.
type portalControl struct{ *standInControl }

func (c portalControl) Catalog(ctx context.Context, apiKey, pageURL string) (json.RawMessage, error) {
	return json.RawMessage(`{"identity":{"tokens":{}},"addresses":[],"cards":[],"logins":[{"label":"portal","site":"127.0.0.1","tokens":{"email":"av_login_portal_email_u7x2k","password":"av_login_portal_password_u7x2k"}}]}`), nil
}

// testSolver plays a managed browser's captcha solver: a challenge is
// pending while #captcha shows; a solving one clears it on its first poll.
type testSolver struct {
	solve bool
	polls atomic.Int32
}

func (p *testSolver) Pending(ctx context.Context, page *browser.Session) (bool, error) {
	if !page.Visible(browser.Target{Selector: "#captcha"}) {
		return false, nil
	}
	p.polls.Add(1)
	if p.solve {
		_, _ = page.Click(browser.Target{Selector: "#captcha-solve"}, 2*time.Second)
	}
	return true, nil
}

func loginHarness(t *testing.T, budget time.Duration, solver CaptchaProvider, artifacts string) *harness {
	t.Helper()
	browsertest.SkipIfNoBrowser(t)
	site := browsertest.Start(t)
	ctl := &standInControl{}
	logs := &syncBuffer{}
	srv, err := New(Config{
		Control: portalControl{ctl}, APIKey: "avk_test", DriverDir: browsertest.DriverDir(),
		ExtraTrustSPKI: []string{site.SPKI}, UnsafeDirectBrowser: true, WaitPoll: 50 * time.Millisecond,
		LoginBudget: budget, Captcha: solver, ArtifactDir: artifacts,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, ct := mcp.NewInMemoryTransports()
	go srv.Run(ctx, st)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); cancel(); srv.Close() })
	return &harness{t: t, site: site, ctl: ctl, cs: cs, srv: srv, logs: logs}
}

func loginAnswer(t *testing.T, txt string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(txt), &m); err != nil {
		t.Fatalf("browser_login answer is not JSON: %.200q", txt)
	}
	return m
}

// Seed 000: with no selectors the heuristics find the fields, on a
// one-form sign-in and on an email-first one; the answer is signed_in with
// the user masked (first letter and domain), and never a typed value.
func TestSeed000_BrowserLoginSignsInWithHeuristics(t *testing.T) {
	h := loginHarness(t, 0, nil, "")
	for _, path := range []string{"/portal/login", "/portal/email-first"} {
		h.ok("open_page", map[string]any{"url": h.site.Shop.URL + path})
		got := loginAnswer(t, h.ok("browser_login", map[string]any{"credentialId": "portal"}))
		// The identifier is masked, not erased: its first letter and
		// domain tell the agent which account signed in.
		if got["outcome"] != "signed_in" || got["user"] != "a***@example.com" {
			t.Fatalf("%s: %v", path, got)
		}
	}
	h.refused("browser_login", map[string]any{"credentialId": "nope"}, agentvault.CodeNotFound)
	// The typed values (the portal's account) came back in no answer and
	// reached no log.
	h.sweep(t)
}

// Seed 000: a portal refusal is a normal answer, refused, with a masked
// diagnostic capture kept as an artifact the owner can open; without an
// artifact directory the answer degrades cleanly, with none.
func TestSeed000_BrowserLoginRefusedKeepsMaskedDiagnostic(t *testing.T) {
	dir := t.TempDir()
	h := loginHarness(t, 0, nil, dir)
	h.ok("open_page", map[string]any{"url": h.site.Shop.URL + "/portal/login?mode=reject"})
	got := loginAnswer(t, h.ok("browser_login", map[string]any{"credentialId": "portal",
		"usernameSelector": "#u", "passwordSelector": "#p", "submitSelector": "#go"}))
	ref, _ := got["diagnosticArtifact"].(string)
	if got["outcome"] != "refused" || ref == "" || strings.ContainsAny(ref, "/\\") {
		t.Fatalf("refusal answer: %v", got)
	}
	st, err := os.Stat(filepath.Join(dir, ref))
	if err != nil || st.Size() == 0 || st.Mode().Perm() != 0o600 {
		t.Fatalf("artifact %s: %v %v", ref, st, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, ref))
	if !strings.HasPrefix(string(b), "\x89PNG") {
		t.Fatal("the artifact is not a PNG capture")
	}
	// The reference, and only it, reached proxyd as the session's event
	// (the owner's Activity page lists it) and mcpd's log.
	diag := diagnosticEvents(h)
	if len(diag) != 1 || diag[0].Artifact != ref || diag[0].Outcome != "refused" || diag[0].Login != "portal" || diag[0].Site != "127.0.0.1" {
		t.Fatalf("login_diagnostic events: %+v", diag)
	}
	if !logRecord(h.logs.String(), "login diagnostic kept", "artifact", ref) {
		t.Fatal("mcpd's log does not name the capture")
	}
	// P11: no typed value in the capture, the event, an answer or the log.
	l := standInLeaks()
	l.Binary(t, "diagnostic capture", b)
	evs, _ := json.Marshal(diag)
	l.Answer(t, "login_diagnostic event", evs)
	h.sweep(t)

	bare := loginHarness(t, 0, nil, "")
	bare.ok("open_page", map[string]any{"url": bare.site.Shop.URL + "/portal/login?mode=reject"})
	got = loginAnswer(t, bare.ok("browser_login", map[string]any{"credentialId": "portal"}))
	if got["outcome"] != "refused" || got["diagnosticArtifact"] != nil || len(diagnosticEvents(bare)) != 0 {
		t.Fatalf("without an artifact store: %v", got)
	}
}

// logRecord reports whether a JSON log line with message msg has key
// equal to want (a record the code must write, read as a record: what is
// looked for here is no canary).
func logRecord(logs, msg, key, want string) bool {
	for _, line := range strings.Split(logs, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == msg && rec[key] == want {
			return true
		}
	}
	return false
}

// diagnosticEvents are the login_diagnostic events mcpd reported.
func diagnosticEvents(h *harness) []control.EventRequest {
	h.ctl.mu.Lock()
	defer h.ctl.mu.Unlock()
	var out []control.EventRequest
	for _, e := range h.ctl.events {
		if e.Type == control.EventLoginDiagnostic {
			out = append(out, e)
		}
	}
	return out
}

// TestSeed000_BrowserLoginKeepsDiagnosticsByDefault: mcpd keeps the
// captures without being told where (seed 000: a capture is kept for
// every sign-in that does not succeed), under the deployment's data
// directory; --artifact-dir moves them.
func TestSeed000_BrowserLoginKeepsDiagnosticsByDefault(t *testing.T) {
	for _, env := range []string{"AGENTVAULT_DATA", "DATA", "AGENTVAULT_ARTIFACT_DIR", "AGENTVAULT_CONTROL_URL"} {
		t.Setenv(env, "")
	}
	data := t.TempDir()
	m := NewMain()
	m.Stderr = io.Discard
	if err := m.ParseFlags([]string{"--data", data}); err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(data, "mcpd", "login-diagnostics"); m.ArtifactDir != want {
		t.Fatalf("default artifact directory %q, want %q", m.ArtifactDir, want)
	}
	other := filepath.Join(t.TempDir(), "captures")
	m = NewMain()
	m.Stderr = io.Discard
	if err := m.ParseFlags([]string{"--data", data, "--artifact-dir", other}); err != nil || m.ArtifactDir != other {
		t.Fatalf("--artifact-dir: %q %v", m.ArtifactDir, err)
	}
}

// Seed 000: a portal that never answers ends in browser.login_timeout
// within the budget, of category unprocessable (no automatic retry).
func TestSeed000_BrowserLoginTimeoutIsUnprocessable(t *testing.T) {
	h := loginHarness(t, 9*time.Second, nil, "")
	h.ok("open_page", map[string]any{"url": h.site.Shop.URL + "/portal/login?mode=hang"})
	txt := h.refused("browser_login", map[string]any{"credentialId": "portal"}, agentvault.CodeBrowserLoginTimeout)
	if !strings.Contains(strings.SplitN(txt, "\n", 2)[0], "category=unprocessable") || !strings.Contains(txt, "do not retry automatically") {
		t.Fatalf("status: %q", txt)
	}
}

// Seed 000: the login waits on the captcha provider before the submit and
// after it; a challenge the solver does not clear in time is
// browser.captcha_pending and nothing is submitted.
func TestSeed000_BrowserLoginWaitsForCaptcha(t *testing.T) {
	solver := &testSolver{solve: true}
	h := loginHarness(t, 0, solver, "")
	h.ok("open_page", map[string]any{"url": h.site.Shop.URL + "/portal/captcha"})
	if got := loginAnswer(t, h.ok("browser_login", map[string]any{"credentialId": "portal"})); got["outcome"] != "signed_in" || solver.polls.Load() == 0 {
		t.Fatalf("before submit: %v, solver polled %d times", got, solver.polls.Load())
	}
	before := solver.polls.Load()
	h.ok("open_page", map[string]any{"url": h.site.Shop.URL + "/portal/login?mode=captcha-after"})
	if got := loginAnswer(t, h.ok("browser_login", map[string]any{"credentialId": "portal"})); got["outcome"] != "signed_in" || solver.polls.Load() == before {
		t.Fatalf("after submit: %v", got)
	}

	stuck := loginHarness(t, 8*time.Second, &testSolver{}, "")
	stuck.ok("open_page", map[string]any{"url": stuck.site.Shop.URL + "/portal/captcha"})
	posts := browsertest.PortalPosts()
	txt := stuck.refused("browser_login", map[string]any{"credentialId": "portal"}, agentvault.CodeBrowserCaptchaPending)
	if !strings.Contains(txt, "category=unprocessable") || browsertest.PortalPosts() != posts {
		t.Fatalf("captcha pending: %q; submits %d -> %d", txt, posts, browsertest.PortalPosts())
	}
}

// Seed 000: the budget is at most 120 s. --login-budget (or
// AGENTVAULT_LOGIN_BUDGET) shortens it for tests and impatient owners;
// a longer or negative one is refused before anything starts.
func TestSeed000_BrowserLoginBudgetFlagOnlyShortens(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want time.Duration
		ok   bool
	}{
		{nil, "", 0, true},
		{[]string{"--login-budget", "20s"}, "", 20 * time.Second, true},
		{nil, "15s", 15 * time.Second, true},
		{[]string{"--login-budget", "120s"}, "", DefaultLoginBudget, true},
		{[]string{"--login-budget", "121s"}, "", 0, false},
		{nil, "3m", 0, false},
		{[]string{"--login-budget", "-1s"}, "", 0, false},
	} {
		t.Setenv("AGENTVAULT_LOGIN_BUDGET", tc.env)
		m := NewMain()
		m.Stderr = &syncBuffer{}
		err := m.ParseFlags(tc.args)
		if (err == nil) != tc.ok || tc.ok && m.LoginBudget != tc.want {
			t.Errorf("%v env %q: budget %s, err %v", tc.args, tc.env, m.LoginBudget, err)
		}
	}
}

// Seed 000: browser_login always answers within 2 minutes, end to end: the
// budget counts the wait behind another call on the same session, so a
// call that holds the session past the budget makes the login answer
// browser.login_timeout at the budget, having typed nothing.
func TestSeed000_BrowserLoginBudgetCountsWaitBehindAnotherCall(t *testing.T) {
	const budget = 6 * time.Second
	h := loginHarness(t, budget, nil, "")
	h.ok("open_page", map[string]any{"url": h.site.Shop.URL + "/portal/login"})
	h.srv.mu.Lock()
	var ss *Session
	for _, x := range h.srv.sessions {
		ss = x
	}
	h.srv.mu.Unlock()
	if ss == nil {
		t.Fatal("no session after open_page")
	}
	// Another call holds the session well past the budget.
	held := make(chan struct{})
	go func() {
		defer close(held)
		_, _ = h.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "wait_for_selector",
			Arguments: map[string]any{"selector": "#never", "timeout": 15000}})
	}()
	for deadline := time.Now().Add(20 * time.Second); ss.mu.TryLock(); {
		ss.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("the other call never took the session")
		}
		time.Sleep(10 * time.Millisecond)
	}
	posts := browsertest.PortalPosts()
	start := time.Now()
	txt := h.refused("browser_login", map[string]any{"credentialId": "portal"}, agentvault.CodeBrowserLoginTimeout)
	if took := time.Since(start); took > budget+3*time.Second {
		t.Fatalf("answered after %s, budget %s", took, budget)
	}
	if !strings.Contains(txt, "another call on this session") || !strings.Contains(txt, "category=unprocessable") {
		t.Fatalf("timeout answer: %q", txt)
	}
	if browsertest.PortalPosts() != posts {
		t.Fatal("the login submitted while waiting for the session")
	}
	<-held
	// The session is free again: the login no longer waits for it. (On a
	// loaded machine a 6 s budget may still run out in the page itself; it
	// must not run out waiting for the session.)
	txt, isErr := h.call("browser_login", map[string]any{"credentialId": "portal"})
	if strings.Contains(txt, "another call on this session") {
		t.Fatalf("after the other call ended, the login still waited for the session: %q", txt)
	}
	if !isErr {
		if got := loginAnswer(t, txt); got["outcome"] != "signed_in" {
			t.Fatalf("after the other call: %v", got)
		}
	}
}
