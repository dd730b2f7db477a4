package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault/internal/leakcheck"
	"github.com/agentvault/agentvault/internal/managedtest"
)

// Browsers anywhere (issue 28): the built mcpd drives a Chromium it did not
// launch, through proxyd, on the test merchant. Each browser runs as a
// process of its own, as it would on another machine: Playwright's browser
// server, a plain CDP endpoint, and the managed providers' browsers behind
// a local double of their session APIs (internal/managedtest; their
// services are not reachable from here).

// proxydSPKI is the SPKI hash of proxyd's CA, which a browser mcpd does not
// launch is started trusting (the operator's step in docs/browsers.md).
func proxydSPKI(t *testing.T, ap *appliance) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ap.dataDir, "ca.pem"))
	if err != nil {
		t.Fatalf("proxyd's ca.pem: %v", err)
	}
	return spkiOfPEM(t, b)
}

// TestRemoteBrowser_PlaywrightServerCheckout: mcpd connects to Playwright's
// browser server (`launch-server`, the driver's own version) and completes
// the whole merchant checkout of TestP11_MCPCheckoutCanary through proxyd,
// with its canary sweep.
func TestRemoteBrowser_PlaywrightServerCheckout(t *testing.T) {
	requireE2E(t, true)
	ap := startAppliance(t)
	srv := managedtest.StartPlaywrightServer(t, managedtest.PlaywrightServerOptions{DriverDir: driverDir(),
		Chromium: managedtest.ChromiumOptions{Path: chromiumPath(), TrustSPKI: []string{proxydSPKI(t, ap)}}})
	mcpCheckout(t, ap, "--browser", "playwright", "--browser-endpoint", srv.WSEndpoint)
}

// TestRemoteBrowser_CDPCheckout: the same checkout through a Chromium
// started on its own with --remote-debugging-port=0, reached at the HTTP
// endpoint it announced (as Browserless serves one).
func TestRemoteBrowser_CDPCheckout(t *testing.T) {
	requireE2E(t, true)
	ap := startAppliance(t)
	c := managedtest.StartChromium(t, managedtest.ChromiumOptions{Path: chromiumPath(), TrustSPKI: []string{proxydSPKI(t, ap)}})
	mcpCheckout(t, ap, "--browser", "cdp", "--browser-endpoint", c.HTTPURL)
}

// keyFile writes a managed provider's API key where --browser-api-key-file
// reads it.
func keyFile(t *testing.T, key string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "browser-api-key")
	if err := os.WriteFile(p, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRemoteBrowser_ManagedCheckout: with browserbase, every open_page run
// gets a provider session created with its proxy set to proxyd (the
// session's own proxy credential) and proxyd's CA handed over, the checkout
// completes in it, and close_session releases it.
func TestRemoteBrowser_ManagedCheckout(t *testing.T) {
	requireE2E(t, true)
	ap := startAppliance(t)
	const key = "bb_live_e2e_key"
	api := managedtest.Start(t, managedtest.Options{Kind: managedtest.Browserbase, APIKey: key, Chromium: managedtest.ChromiumOptions{Path: chromiumPath()}})
	mcpCheckout(t, ap, "--browser", "browserbase", "--browser-endpoint", api.URL, "--browser-api-key-file", keyFile(t, key))
	recs := api.Records()
	if len(recs) != 1 {
		t.Fatalf("%d provider sessions, want 1: %+v", len(recs), recs)
	}
	r := recs[0]
	if host := strings.TrimPrefix(ap.proxyAddr, "http://"); r.ProxyHost != host || !r.ProxyCredential {
		t.Errorf("the provider session's proxy is %q (credential %v), want proxyd's %s with the session's credential", r.ProxyHost, r.ProxyCredential, host)
	}
	if r.TrustedSPKI != proxydSPKI(t, ap) || !r.Released || !r.SolveCaptcha {
		t.Errorf("provider session: CA %q released %v solver %v", r.TrustedSPKI, r.Released, r.SolveCaptcha)
	}
}

// merchantSolve is the double's solver on the merchant's test challenge:
// it types the answer the site hands a solver and presses Verify.
func merchantSolve(ap *appliance) func(ctx context.Context, p *managedtest.Page) error {
	return func(ctx context.Context, p *managedtest.Page) error {
		ans, ok := ap.m.OpenCaptchaAnswer()
		if !ok {
			return errors.New("no open challenge")
		}
		q, _ := json.Marshal(ans)
		_, err := p.Eval(ctx, `(() => { document.getElementById("captcha-answer").value = `+string(q)+`; document.getElementById("captcha-verify").click(); return true; })()`)
		return err
	}
}

// TestSeed000_ManagedSolverWaits: seed 000's captcha waits on the real
// providers' signals, Steel's captcha status API and Browserbase's console
// messages, each from the provider double's solver working in the managed
// browser. browser_login waits for the solver before the submit (the site
// refuses a submit without the challenge's pass) and after it (the site
// starts the session only once the post-credential challenge is cleared),
// and answers signed_in with one submit; a solver that never finishes ends
// in browser.captcha_pending inside the budget (shortened to 40 s here;
// 120 s by default) with nothing submitted and a masked capture of the
// managed browser's page for the owner. Steel with its solver off is never
// asked. The password is in no answer, log or capture (P11).
func TestSeed000_ManagedSolverWaits(t *testing.T) {
	requireE2E(t, true)
	ap := startAppliance(t)
	email := ap.login.email
	bin := buildCmd(t, "mcpd")
	l := leakcheck.New(leakcheck.Value("password", ap.login.password))

	for _, kind := range []managedtest.Kind{managedtest.Steel, managedtest.Browserbase} {
		t.Run(string(kind), func(t *testing.T) {
			key := "key-" + randomHex(8)
			// The solver works 8 s before it solves: longer than
			// browser_login takes to type and submit, so an answer that
			// did not wait for it is refused (before) or comes before the
			// site started the session (after).
			api := managedtest.Start(t, managedtest.Options{Kind: kind, APIKey: key, Chromium: managedtest.ChromiumOptions{Path: chromiumPath()},
				CaptchaSelector: "#captcha", Solve: merchantSolve(ap), SolveAfter: 8 * time.Second})
			artifacts := filepath.Join(t.TempDir(), "artifacts")
			args, env := ap.mcpdArgs()
			args = append(args, "--browser", string(kind), "--browser-endpoint", api.URL, "--browser-api-key-file", keyFile(t, key),
				"--login-budget", "40s", "--artifact-dir", artifacts)
			if kind == managedtest.Steel {
				args = append(args, "--browser-solve-captcha")
			}
			agent := startAgent(t, bin, args, env)
			label := loginLabel(t, agent, ap)

			signIn := func(t *testing.T, captcha string) {
				t.Helper()
				solved, attempts, sessions := ap.m.CaptchasSolved(), ap.m.SignInAttempts(email), ap.m.SessionsStarted(email)
				agent.must("open_page", map[string]any{"url": ap.m.Login.URL + "/login?captcha=" + captcha})
				got := agent.must("browser_login", map[string]any{"credentialId": label}).json(t)
				if got["outcome"] != "signed_in" {
					t.Fatalf("browser_login behind a challenge %s the submit: %v", captcha, got)
				}
				recs := api.Records()
				sig := recs[len(recs)-1].Signals
				if ap.m.CaptchasSolved() != solved+1 || ap.m.SignInAttempts(email) != attempts+1 ||
					ap.m.SessionsStarted(email) != sessions+1 || !slices.Equal(sig, []string{"started", "finished"}) {
					t.Fatalf("solved %d->%d, submits %d->%d, sessions %d->%d, solver signals %v", solved, ap.m.CaptchasSolved(),
						attempts, ap.m.SignInAttempts(email), sessions, ap.m.SessionsStarted(email), sig)
				}
				agent.must("close_session", map[string]any{})
				if recs := api.Records(); !recs[len(recs)-1].Released {
					t.Fatal("close_session did not release the provider session")
				}
			}
			t.Run("BeforeSubmit", func(t *testing.T) { signIn(t, "before") })
			t.Run("AfterSubmit", func(t *testing.T) { signIn(t, "after") })
			t.Run("NeverFinishesIsPending", func(t *testing.T) {
				api.Hold(true)
				defer api.Hold(false)
				attempts := ap.m.SignInAttempts(email)
				agent.must("open_page", map[string]any{"url": ap.m.Login.URL + "/login?captcha=before"})
				r := agent.call("browser_login", map[string]any{"credentialId": label})
				notConcluded(t, r, "browser.captcha_pending")
				recs := api.Records()
				sig := recs[len(recs)-1].Signals
				if !strings.Contains(r.text, "nothing was submitted") || ap.m.SignInAttempts(email) != attempts ||
					len(sig) == 0 || sig[len(sig)-1] != "started" {
					t.Fatalf("captcha pending: submits %d->%d, solver signals %v; %q", attempts, ap.m.SignInAttempts(email), sig, r.status())
				}
				ref := artifactRe.FindString(r.text)
				if ref == "" {
					t.Fatalf("browser.captcha_pending names no diagnostic capture: %q", leakcheck.Redact(r.text))
				}
				checkDiagnostic(t, artifacts, ref, l)
				agent.must("close_session", map[string]any{})
			})
			if kind == managedtest.Steel && api.StatusQueries() == 0 {
				t.Error("browser_login never asked Steel's captcha status")
			}
			agent.close()
			agent.transcript.sweep(t, l, "MCP results")
			l.Logs(t, "mcpd log", agent.logs.Bytes())
		})
	}

	t.Run("SteelSolverOffAsksNothing", func(t *testing.T) {
		key := "key-" + randomHex(8)
		api := managedtest.Start(t, managedtest.Options{Kind: managedtest.Steel, APIKey: key, Chromium: managedtest.ChromiumOptions{Path: chromiumPath()},
			CaptchaSelector: "#captcha", Solve: merchantSolve(ap)})
		args, env := ap.mcpdArgs()
		agent := startAgent(t, bin, append(args, "--browser", "steel_cloud", "--browser-endpoint", api.URL, "--browser-api-key-file", keyFile(t, key)), env)
		label := loginLabel(t, agent, ap)
		agent.must("open_page", map[string]any{"url": ap.m.Login.URL + "/login"})
		if got := agent.must("browser_login", map[string]any{"credentialId": label}).json(t); got["outcome"] != "signed_in" {
			t.Fatalf("browser_login: %v", got)
		}
		agent.must("close_session", map[string]any{})
		if recs := api.Records(); len(recs) != 1 || recs[0].SolveCaptcha || !recs[0].Released {
			t.Fatalf("provider sessions: %+v", recs)
		}
		if n := api.StatusQueries(); n != 0 {
			t.Fatalf("the solver is off, yet Steel's captcha status was asked %d times", n)
		}
		agent.close()
		agent.transcript.sweep(t, l, "MCP results")
		l.Logs(t, "mcpd log", agent.logs.Bytes())
	})
	l.Logs(t, "proxyd logs", ap.logs.Bytes())
}
