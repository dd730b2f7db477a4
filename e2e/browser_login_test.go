package e2e

import (
	"bytes"
	"context"
	"image/png"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentvault/agentvault/browser"
	"github.com/agentvault/agentvault/e2e/merchant"
	"github.com/agentvault/agentvault/internal/leakcheck"
	"github.com/agentvault/agentvault/mcpserver"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/vault"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// browser_login (seed 000) on the test merchant's sign-in site, in real
// Chromium, through proxyd: the three outcomes (signed in, refused, not
// concluded), the budget, and the captcha waits before and after the
// submit. The signed-in outcome on the plain site is
// TestBrowserLogin_MerchantEmailFirst (totp_test.go).
//
// The captcha cases here run mcpd's own Main in-process with Main.Captcha
// set to a test solver registered under a seed provider name, over the
// self-hosted Chromium; the built mcpd waiting on a managed provider's own
// solver signals is TestSeed000_ManagedSolverWaits (remote_browser_test.go).
// The other cases run the built binary; its --login-budget flag shortens
// the 120 s budget.

// loginLabel is the catalog label of the appliance's own login.
func loginLabel(t *testing.T, agent *mcpAgent, ap *appliance) string {
	t.Helper()
	cat := agent.must("get_token_catalog", map[string]any{"url": ap.m.Login.URL + "/login"})
	emailTok := findToken(cat.text, "login", "email")
	if emailTok == "" {
		t.Fatal("no login in the catalog for the sign-in site")
	}
	return strings.TrimSuffix(strings.TrimPrefix(emailTok, "av_login_"), emailTok[strings.LastIndex(emailTok, "_email_"):])
}

// addSiteLogin stores a second login for the sign-in site with vaultPw and
// opens its account at the site with sitePw; the two differ for a
// password the site no longer takes. It returns the login's label.
func addSiteLogin(t *testing.T, ap *appliance, email, vaultPw, sitePw string) string {
	t.Helper()
	host, _, _ := net.SplitHostPort(ap.m.Login.Host)
	it, err := ap.vault.AddLogin(context.Background(), org, "owner", vault.LoginInput{
		Site: host, Website: ap.m.Login.URL + "/login", Email: email,
		Password: vault.NewSecret([]byte(vaultPw)),
	})
	if err != nil {
		t.Fatalf("add login: %v", err)
	}
	ap.m.AddAccount(email, sitePw, "Second")
	return it.Label
}

// notConcluded checks an error answer of browser_login: its code, the
// category a client reads before retrying, and the message that leaves
// the retry to the model.
func notConcluded(t *testing.T, r answer, code string) {
	t.Helper()
	line, _, _ := strings.Cut(r.text, "\n")
	if !r.isErr || !strings.Contains(line, "code="+code) || !strings.Contains(line, "category=unprocessable") {
		t.Fatalf("want %s of category unprocessable, got isError=%v status %q", code, r.isErr, r.status())
	}
	for _, want := range []string{"Nothing was learned about the credential", "do not retry automatically", "observe_page"} {
		if !strings.Contains(r.text, want) {
			t.Errorf("the %s message lacks %q: %q", code, want, leakcheck.Redact(r.text))
		}
	}
}

var artifactRe = regexp.MustCompile(`login-[0-9a-f]{16}\.png`)

// checkDiagnostic opens the capture the owner finds in dir under ref: a
// PNG, readable by the owner only, holding none of the canaries.
func checkDiagnostic(t *testing.T, dir, ref string, l *leakcheck.Checker) {
	t.Helper()
	if !artifactRe.MatchString(ref) || filepath.Base(ref) != ref {
		t.Fatalf("diagnostic reference %q is not a bare artifact name", ref)
	}
	p := filepath.Join(dir, ref)
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the owner's artifact %s: %v (mode %v)", ref, err, st)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(b)); err != nil || cfg.Width == 0 || cfg.Height == 0 {
		t.Fatalf("the artifact is no PNG capture: %v", err)
	}
	l.Binary(t, "diagnostic artifact", b)
}

// TestSeed000_BrowserLoginRefusedKeepsMaskedDiagnostic: a stored login
// whose password the site no longer takes. The real password reaches the
// site (proxyd swaps it in), the site refuses it once, and browser_login
// answers refused as a normal result, naming a masked diagnostic capture
// the owner finds in mcpd's artifact directory, which is under the data
// directory when nothing names another (<data>/mcpd/login-diagnostics);
// the reference reaches proxyd as the session's event, where the owner's
// Activity page lists it. The password is in no MCP result, mcpd stderr,
// proxyd log, the event or the capture (P11).
func TestSeed000_BrowserLoginRefusedKeepsMaskedDiagnostic(t *testing.T) {
	requireE2E(t, true)
	ap := startWiredAppliance(t)
	const email = "ada.stale@example.org"
	stalePw, currentPw := "Pw-stale-"+randomHex(10)+"!q", "Pw-current-"+randomHex(10)+"!q"
	label := addSiteLogin(t, ap, email, stalePw, currentPw)
	artifacts := filepath.Join(ap.dataDir, "mcpd", mcpserver.DiagnosticsDir)
	bin := buildCmd(t, "mcpd")
	args, env := ap.mcpdArgs()
	agent := startAgent(t, bin, append(args, "--data", ap.dataDir), env)

	agent.must("open_page", map[string]any{"url": ap.m.Login.URL + "/login"})
	got := agent.must("browser_login", map[string]any{"credentialId": label}).json(t)
	ref, _ := got["diagnosticArtifact"].(string)
	if got["outcome"] != "refused" || ref == "" {
		t.Fatalf("browser_login with a stale password: %v", got)
	}
	if !ap.m.Login.Saw(stalePw) || ap.m.SignInAttempts(email) != 1 || ap.m.FailedSignIns() != 1 || ap.m.SessionsStarted(email) != 0 {
		t.Fatalf("the site saw the real password %v, %d submits, %d refused, %d sessions",
			ap.m.Login.Saw(stalePw), ap.m.SignInAttempts(email), ap.m.FailedSignIns(), ap.m.SessionsStarted(email))
	}
	agent.must("close_session", map[string]any{})
	agent.close()

	l := leakcheck.New(leakcheck.Value("password", stalePw), leakcheck.Value("site's password", currentPw), leakcheck.Value("password", ap.login.password))
	checkDiagnostic(t, artifacts, ref, l)
	var seen []owner.LoginDiagnostic
	for _, d := range ap.pm.Owner.LoginDiagnostics() {
		if d.Artifact == ref {
			seen = append(seen, d)
		}
	}
	if len(seen) != 1 || seen[0].Outcome != "refused" || seen[0].Login != label || seen[0].Site != "login.test" {
		t.Fatalf("the owner's record of the capture: %+v", seen)
	}
	agent.transcript.sweep(t, l, "MCP results")
	l.Logs(t, "mcpd log", agent.logs.Bytes())
	l.Logs(t, "proxyd logs", ap.logs.Bytes())
}

// TestSeed000_BrowserLoginTimeoutIsUnprocessable: a sign-in the site never
// answers. With the budget shortened (--login-budget; the default is
// 120 s), browser_login ends in browser.login_timeout, an error of
// category unprocessable whose message leaves any retry to the model; the
// site got exactly one submit, so nothing resubmitted the password. A
// capture, when one was kept, holds no password (P11); today Chromium
// takes none while the submit's navigation hangs, and the answer degrades
// without it, as the seed allows.
func TestSeed000_BrowserLoginTimeoutIsUnprocessable(t *testing.T) {
	requireE2E(t, true)
	ap := startWiredAppliance(t)
	const email = "slow@example.org"
	pw := "Pw-slow-" + randomHex(10) + "!q"
	label := addSiteLogin(t, ap, email, pw, pw)
	ap.m.HangSignIns(email)
	artifacts := filepath.Join(ap.dataDir, "artifacts")
	bin := buildCmd(t, "mcpd")
	args, env := ap.mcpdArgs()
	agent := startAgent(t, bin, append(args, "--login-budget", "25s"), append(env, "AGENTVAULT_ARTIFACT_DIR="+artifacts))

	agent.must("open_page", map[string]any{"url": ap.m.Login.URL + "/login"})
	r := agent.call("browser_login", map[string]any{"credentialId": label})
	notConcluded(t, r, "browser.login_timeout")
	if !strings.Contains(r.text, "did not finish within the 25s budget") {
		t.Errorf("the timeout does not name its budget: %q", r.status())
	}
	ref := artifactRe.FindString(r.text)
	agent.must("close_session", map[string]any{})
	agent.close()
	if n := ap.m.SignInAttempts(email); n != 1 || ap.m.SessionsStarted(email) != 0 {
		t.Fatalf("the hung site got %d submits (want exactly 1: submitted once, not retried)", n)
	}

	l := leakcheck.New(leakcheck.Value("password", pw), leakcheck.Value("password", ap.login.password))
	if ref != "" {
		checkDiagnostic(t, artifacts, ref, l)
	} else {
		t.Log("no diagnostic capture fit in the budget (the answer degrades without one)")
	}
	agent.transcript.sweep(t, l, "MCP results")
	l.Logs(t, "mcpd log", agent.logs.Bytes())
	l.Logs(t, "proxyd logs", ap.logs.Bytes())
}

// merchantSolver is the test captcha provider: it plays a managed
// browser's solver on the merchant's test challenge, answering with what
// the site hands a solver (the answer is never on the page). While the
// challenge shows it reports pending; with solve off it never clears it.
type merchantSolver struct {
	m     *merchant.Merchant
	solve atomic.Bool
	polls atomic.Int32
}

func (s *merchantSolver) Pending(ctx context.Context, page *browser.Session) (bool, error) {
	if !page.Visible(browser.Target{Selector: "#captcha"}) {
		return false, nil
	}
	s.polls.Add(1)
	if ans, ok := s.m.OpenCaptchaAnswer(); ok && s.solve.Load() {
		if err := page.Fill(browser.Target{Selector: "#captcha-answer"}, ans, 2*time.Second); err == nil {
			_, _ = page.Click(browser.Target{Selector: "#captcha-verify"}, 2*time.Second)
		}
	}
	return true, nil
}

var _ mcpserver.CaptchaProvider = (*merchantSolver)(nil)

// startMainAgent runs mcpd's Main in-process with extra flags and a
// captcha provider, reached by a real MCP client over an in-memory
// transport; its logs go to the agent's stderr buffer.
func startMainAgent(t *testing.T, ap *appliance, extra []string, captcha mcpserver.CaptchaProvider) *mcpAgent {
	t.Helper()
	a := &mcpAgent{t: t, logs: &syncBuffer{}, latency: map[string][]time.Duration{}}
	m := mcpserver.NewMain()
	m.Stderr = a.logs
	args, _ := ap.mcpdArgs()
	if err := m.ParseFlags(append(args, extra...)); err != nil {
		t.Fatalf("mcpd flags: %v", err)
	}
	m.Captcha = captcha
	if err := m.Open(); err != nil {
		t.Fatalf("mcpd Open: %v", err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.RunTransport(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agentvault-e2e-agent", Version: "1.0.0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	a.cs = cs
	t.Cleanup(func() {
		_ = cs.Close()
		cancel()
		<-done
		_ = m.Close()
	})
	return a
}

// TestSeed000_BrowserLoginWaitsForTheCaptchaProvider: with a managed
// browser's solver (the test provider, under the seed's "steel_cloud"
// with solveCaptcha), browser_login waits on it before the submit (the
// site refuses a submit without the challenge's pass) and after it (the
// site starts the session only once the post-credential challenge is
// cleared), and answers signed_in. A challenge the solver does not clear
// ends in browser.captcha_pending, category unprocessable, with nothing
// submitted and a masked capture for the owner. The password is in no MCP
// result, log or capture (P11).
func TestSeed000_BrowserLoginWaitsForTheCaptchaProvider(t *testing.T) {
	requireE2E(t, true)
	ap := startWiredAppliance(t)
	solver := &merchantSolver{m: ap.m}
	solver.solve.Store(true)
	registered := map[string]mcpserver.CaptchaProvider{"steel_cloud": solver}
	if mcpserver.CaptchaProviderFor("steel_cloud", false, registered) != nil {
		t.Fatal("steel_cloud without solveCaptcha must not wait on a solver")
	}
	provider := mcpserver.CaptchaProviderFor("steel_cloud", true, registered)
	if provider == nil {
		t.Fatal("steel_cloud with solveCaptcha maps to no solver")
	}
	artifacts := filepath.Join(ap.dataDir, "artifacts")
	agent := startMainAgent(t, ap, []string{"--login-budget", "30s", "--artifact-dir", artifacts}, provider)
	label := loginLabel(t, agent, ap)
	email := ap.login.email

	signIn := func(t *testing.T, captcha string) {
		t.Helper()
		polls, solved, attempts, sessions := solver.polls.Load(), ap.m.CaptchasSolved(), ap.m.SignInAttempts(email), ap.m.SessionsStarted(email)
		agent.must("open_page", map[string]any{"url": ap.m.Login.URL + "/login?captcha=" + captcha})
		got := agent.must("browser_login", map[string]any{"credentialId": label}).json(t)
		// The account is masked, never erased (seed 000): its first letter
		// and its domain.
		if got["outcome"] != "signed_in" || got["user"] != email[:1]+"***"+email[strings.LastIndexByte(email, '@'):] {
			t.Fatalf("browser_login behind a challenge %s the submit: %v", captcha, got)
		}
		// One submit: a submit before the challenge was cleared would have
		// been refused and counted. A session: an answer read on the
		// post-credential challenge would come before the site started one.
		if solver.polls.Load() == polls || ap.m.CaptchasSolved() != solved+1 ||
			ap.m.SignInAttempts(email) != attempts+1 || ap.m.SessionsStarted(email) != sessions+1 {
			t.Fatalf("polls %d->%d, solved %d->%d, submits %d->%d, sessions %d->%d", polls, solver.polls.Load(),
				solved, ap.m.CaptchasSolved(), attempts, ap.m.SignInAttempts(email), sessions, ap.m.SessionsStarted(email))
		}
		agent.must("close_session", map[string]any{})
	}
	t.Run("BeforeSubmit", func(t *testing.T) { signIn(t, "before") })
	t.Run("AfterSubmit", func(t *testing.T) { signIn(t, "after") })
	var pendingRef string
	t.Run("NotClearedIsPending", func(t *testing.T) {
		solver.solve.Store(false)
		polls, attempts := solver.polls.Load(), ap.m.SignInAttempts(email)
		agent.must("open_page", map[string]any{"url": ap.m.Login.URL + "/login?captcha=before"})
		r := agent.call("browser_login", map[string]any{"credentialId": label})
		notConcluded(t, r, "browser.captcha_pending")
		if !strings.Contains(r.text, "nothing was submitted") || ap.m.SignInAttempts(email) != attempts || solver.polls.Load() == polls {
			t.Fatalf("captcha pending: submits %d->%d, polls %d->%d; %q", attempts, ap.m.SignInAttempts(email), polls, solver.polls.Load(), r.status())
		}
		// The error keeps a capture of the challenge for the owner too.
		if pendingRef = artifactRe.FindString(r.text); pendingRef == "" {
			t.Errorf("browser.captcha_pending names no diagnostic capture: %q", leakcheck.Redact(r.text))
		}
		agent.must("close_session", map[string]any{})
	})
	agent.close()

	l := leakcheck.New(leakcheck.Value("password", ap.login.password))
	if pendingRef != "" {
		checkDiagnostic(t, artifacts, pendingRef, l)
	}
	agent.transcript.sweep(t, l, "MCP results")
	l.Logs(t, "mcpd log", agent.logs.Bytes())
	l.Logs(t, "proxyd logs", ap.logs.Bytes())
}
