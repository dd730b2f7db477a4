package browser

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/agentvault/agentvault"
	"github.com/mxschmitt/playwright-go"
)

// Config says where the driver and Chromium live and which CA to trust.
type Config struct {
	// DriverDir holds package/cli.js of playwright-core (PLAYWRIGHT_DRIVER_PATH
	// when empty).
	DriverDir string
	// ChromiumPath is the browser binary (CHROMIUM_PATH, then
	// /usr/bin/chromium when empty).
	ChromiumPath string
	// TrustSPKI lists base64 SHA-256 hashes of CA public keys whose
	// certificates Chromium accepts in addition to the system roots: proxyd's
	// MITM CA, or a test server's certificate.
	TrustSPKI []string
	// TrustPEM is proxyd's CA certificate, for a managed provider, which
	// is handed the certificate rather than its hash.
	TrustPEM string
	// Remote, when set, is a browser mcpd does not launch (provider.go).
	Remote Remote
	Logger *slog.Logger
}

// chromiumArgs keep Chromium from phoning home on a machine with no network
// but loopback, and from speaking QUIC past the proxy.
var chromiumArgs = []string{
	"--no-sandbox",
	"--disable-gpu",
	"--disable-quic",
	"--no-first-run",
	"--disable-background-networking",
	"--disable-component-update",
	"--disable-sync",
	"--disable-default-apps",
	"--disable-features=AutofillServerCommunication,OptimizationHints,MediaRouter,Translate",
	"--metrics-recording-only",
	"--no-default-browser-check",
}

// Browser is where sessions come from: one Chromium shared by every
// session (launched here, or a remote one mcpd connected to), or a managed
// provider that starts a browser per session (managed is set, b is nil).
type Browser struct {
	cfg Config
	log *slog.Logger
	pw  *playwright.Playwright
	b   playwright.Browser
	// managed is the provider's session API (steel_cloud, browserbase).
	managed *managedAPI
	// ownsDriver is true when Close must stop the driver too.
	ownsDriver bool

	mu     sync.Mutex
	closed bool
}

// Driver is a running playwright driver (a node process). Starting it is
// the slow half of a launch, so mcpd starts it before the first page is
// asked for; Chromium itself needs proxyd's CA and is launched later.
type Driver struct {
	cfg Config
	pw  *playwright.Playwright
}

func (cfg *Config) defaults() {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DriverDir == "" {
		cfg.DriverDir = os.Getenv("PLAYWRIGHT_DRIVER_PATH")
	}
	if cfg.ChromiumPath == "" {
		cfg.ChromiumPath = os.Getenv("CHROMIUM_PATH")
	}
	if cfg.ChromiumPath == "" {
		cfg.ChromiumPath = "/usr/bin/chromium"
	}
}

// StartDriver starts the playwright driver. It never downloads anything: a
// missing driver is an error.
func StartDriver(cfg Config) (*Driver, error) {
	cfg.defaults()
	if cfg.DriverDir == "" {
		return nil, agentvault.Errorf(agentvault.CodeInternal, "playwright driver directory not set (PLAYWRIGHT_DRIVER_PATH)")
	}
	if _, err := os.Stat(filepath.Join(cfg.DriverDir, "package", "cli.js")); err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "playwright driver not found under %s (run make driver)", cfg.DriverDir)
	}
	if os.Getenv("PLAYWRIGHT_NODEJS_PATH") == "" {
		if _, err := os.Stat("/usr/bin/node"); err == nil {
			os.Setenv("PLAYWRIGHT_NODEJS_PATH", "/usr/bin/node")
		}
	}
	pw, err := runDriver(cfg.DriverDir)
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "start playwright driver")
	}
	return &Driver{cfg: cfg, pw: pw}, nil
}

// runMu serialises runDriver: PLAYWRIGHT_CLI_PATH is read from the
// process environment.
var runMu sync.Mutex

// runDriver starts the driver through a small launcher script. playwright-go
// first runs `cli.js --version` to check the driver's version, a full boot
// of the driver's bundles (a third of a second or more, on the way to the
// first page); the launcher answers that probe from the driver's own
// package.json, which is where the real answer comes from too, and runs the
// real cli.js for everything else.
func runDriver(dir string) (*playwright.Playwright, error) {
	opts := &playwright.RunOptions{SkipInstallBrowsers: true, DriverDirectory: dir, Verbose: false, Stdout: os.Stderr, Stderr: os.Stderr}
	cli, err := filepath.Abs(filepath.Join(dir, "package", "cli.js"))
	if err != nil || os.Getenv("PLAYWRIGHT_CLI_PATH") != "" {
		return playwright.Run(opts)
	}
	tmp, err := os.MkdirTemp("", "agentvault-driver-")
	if err != nil {
		return playwright.Run(opts)
	}
	// Node has read the launcher once the driver answers: it can go then.
	defer os.RemoveAll(tmp)
	q := func(v string) string { b, _ := json.Marshal(v); return string(b) }
	launcher := filepath.Join(tmp, "cli.js")
	src := "'use strict';\n" +
		"if (process.argv.length === 3 && process.argv[2] === '--version') {\n" +
		"  process.stdout.write('Version ' + require(" + q(filepath.Join(filepath.Dir(cli), "package.json")) + ").version + '\\n');\n" +
		"} else {\n" +
		"  process.argv[1] = " + q(cli) + ";\n" +
		"  require(" + q(cli) + ");\n" +
		"}\n"
	if err := os.WriteFile(launcher, []byte(src), 0o600); err != nil {
		return playwright.Run(opts)
	}
	runMu.Lock()
	defer runMu.Unlock()
	os.Setenv("PLAYWRIGHT_CLI_PATH", launcher)
	defer os.Unsetenv("PLAYWRIGHT_CLI_PATH")
	return playwright.Run(opts)
}

// Stop ends the driver (and any Chromium it still runs). A driver that
// has already exited is stopped: a Ctrl-C in mcpd's terminal, or systemd
// stopping the unit, signals the driver and Chromium together with mcpd,
// and that is a clean stop, not a failure.
func (d *Driver) Stop() error {
	err := d.pw.Stop()
	if _, exited := errors.AsType[*exec.ExitError](err); exited {
		return nil
	}
	return err
}

// driverGone reports whether err says the driver's connection was already
// lost: what closing a browser answers once the driver has exited.
// playwright-go wraps ErrTargetClosed for a connection it closed itself
// and reports one the driver dropped as a plain "Connection closed".
func driverGone(err error) bool {
	return errors.Is(err, playwright.ErrTargetClosed) || strings.HasSuffix(err.Error(), "Connection closed")
}

// Launch starts the driver and a headless Chromium; Close stops both.
func Launch(cfg Config) (*Browser, error) {
	d, err := StartDriver(cfg)
	if err != nil {
		return nil, err
	}
	b, err := d.Launch(cfg)
	if err != nil {
		_ = d.Stop()
		return nil, err
	}
	b.ownsDriver = true
	return b, nil
}

// Launch starts a headless Chromium on this driver, trusting cfg.TrustSPKI,
// or reaches the browser cfg.Remote names (provider.go). Closing the
// Browser leaves the driver running, and a remote browser too.
func (d *Driver) Launch(cfg Config) (*Browser, error) {
	cfg.DriverDir = d.cfg.DriverDir
	cfg.defaults()
	switch k := cfg.Remote.Kind(); {
	case k == ProviderPlaywright || k == ProviderCDP:
		return d.connect(cfg)
	case cfg.Remote.Managed():
		api, err := newManagedAPI(cfg.Remote)
		if err != nil {
			return nil, err
		}
		return &Browser{cfg: cfg, log: cfg.Logger, pw: d.pw, managed: api}, nil
	case k != ProviderLocal:
		return nil, cfg.Remote.Check()
	}
	args := append([]string(nil), chromiumArgs...)
	if len(cfg.TrustSPKI) > 0 {
		args = append(args, "--ignore-certificate-errors-spki-list="+strings.Join(cfg.TrustSPKI, ","))
	}
	b, err := d.pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String(cfg.ChromiumPath),
		Headless:       playwright.Bool(true),
		Args:           args,
		// Proxy variables in mcpd's environment must not steer Chromium.
		Env: map[string]string{"HTTP_PROXY": "", "HTTPS_PROXY": "", "http_proxy": "", "https_proxy": "", "NO_PROXY": "", "no_proxy": ""},
	})
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "launch chromium")
	}
	return &Browser{cfg: cfg, log: cfg.Logger, pw: d.pw, b: b}, nil
}

// connect reaches a browser that runs elsewhere: a Playwright browser
// server (its own protocol, so the driver versions must match) or any
// Chromium answering CDP. The endpoint may carry a token: no error or log
// line quotes it.
func (d *Driver) connect(cfg Config) (*Browser, error) {
	if err := cfg.Remote.Check(); err != nil {
		return nil, err
	}
	timeout := float64(managedTimeout.Milliseconds())
	var b playwright.Browser
	var err error
	if cfg.Remote.Kind() == ProviderPlaywright {
		b, err = d.pw.Chromium.Connect(cfg.Remote.Endpoint, playwright.BrowserTypeConnectOptions{Timeout: &timeout})
	} else {
		b, err = d.pw.Chromium.ConnectOverCDP(cfg.Remote.Endpoint, playwright.BrowserTypeConnectOverCDPOptions{Timeout: &timeout})
	}
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeUpstream, errors.New("playwright connect error (text withheld: it quotes the endpoint)"),
			"could not reach the %s browser at %s: check that it runs and --browser-endpoint (the same Playwright version as mcpd's driver, %s, for a browser server)",
			cfg.Remote.Kind(), hostOf(cfg.Remote.Endpoint), driverVersion(cfg.DriverDir))
	}
	// The SPKI hash is public: it is what the operator passes to the
	// remote Chromium so that it accepts proxyd's certificates.
	cfg.Logger.Info("remote browser connected; it must trust proxyd's CA (--ignore-certificate-errors-spki-list)",
		"provider", string(cfg.Remote.Kind()), "host", hostOf(cfg.Remote.Endpoint), "spki", strings.Join(cfg.TrustSPKI, ","))
	return &Browser{cfg: cfg, log: cfg.Logger, pw: d.pw, b: b}, nil
}

// driverVersion is the playwright-core version of the driver directory.
func driverVersion(dir string) string {
	raw, err := os.ReadFile(filepath.Join(dir, "package", "package.json"))
	if err != nil {
		return "unknown"
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(raw, &pkg) != nil || pkg.Version == "" {
		return "unknown"
	}
	return pkg.Version
}

// Connected reports whether the browser can still open sessions: false
// once a launched Chromium died or a remote one went away. A managed
// provider starts a browser per session and is always ready.
func (b *Browser) Connected() bool {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return false
	}
	return b.b == nil || b.b.IsConnected()
}

// Trusts reports whether the browser was launched trusting exactly spki.
func (b *Browser) Trusts(spki string) bool {
	for _, s := range b.cfg.TrustSPKI {
		if s == spki {
			return true
		}
	}
	return false
}

// Close ends Chromium, and the driver when Launch started it.
func (b *Browser) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	var err error
	if b.b != nil {
		// A remote browser is only disconnected from: the contexts mcpd
		// opened in it close, the browser goes on.
		if err = b.b.Close(); err != nil && driverGone(err) {
			err = nil // the driver went first and took Chromium with it
		}
	}
	if b.ownsDriver {
		err = errors.Join(err, b.pw.Stop())
	}
	return err
}

// Proxy is the proxyd endpoint and the session's proxy credential.
type Proxy struct {
	Server   string // http://127.0.0.1:7700
	Username string
	Password string
}

// SessionOptions configures one browser context.
type SessionOptions struct {
	// Proxy routes every request of the context, loopback included. Nil means
	// a direct connection (tests without proxyd only).
	Proxy *Proxy
	// ViewportWidth and ViewportHeight default to 1280x900.
	ViewportWidth, ViewportHeight int
}

// NewSession opens a fresh browser context (own cookies, own proxy
// credential) with one blank page. On a managed provider it is the default
// context of a new provider session, created with that proxy.
func (b *Browser) NewSession(opts SessionOptions) (*Session, error) {
	w, h := opts.ViewportWidth, opts.ViewportHeight
	if w == 0 || h == 0 {
		w, h = 1280, 900
	}
	if b.managed != nil {
		return b.newManagedSession(opts, w, h)
	}
	co := playwright.BrowserNewContextOptions{
		Viewport:          &playwright.Size{Width: w, Height: h},
		AcceptDownloads:   playwright.Bool(false),
		ServiceWorkers:    playwright.ServiceWorkerPolicyBlock,
		BypassCSP:         playwright.Bool(false),
		JavaScriptEnabled: playwright.Bool(true),
	}
	var auth *proxyAuth
	if opts.Proxy != nil {
		// The credential is not Playwright's to hold (proxyauth.go).
		co.Proxy = &playwright.Proxy{
			Server: opts.Proxy.Server,
			// An empty bypass list: Playwright would otherwise let Chromium
			// skip the proxy for loopback.
			Bypass: playwright.String("<-loopback>"),
		}
		auth = newProxyAuth(opts.Proxy)
	}
	bctx, err := b.b.NewContext(co)
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "open browser context")
	}
	p, err := bctx.NewPage()
	if err != nil {
		_ = bctx.Close()
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "open page")
	}
	if auth != nil {
		if err := auth.attach(bctx, p); err != nil {
			_ = bctx.Close()
			return nil, agentvault.Wrap(agentvault.CodeInternal, err, "answer the proxy's challenge")
		}
	}
	return b.session(bctx, p, auth), nil
}

// session wraps a context and its first page; auth, when not nil, is
// answering the proxy's challenge on that page.
func (b *Browser) session(bctx playwright.BrowserContext, p playwright.Page, auth *proxyAuth) *Session {
	s := &Session{b: b, ctx: bctx, popupArrived: make(chan struct{}, 1), watchKey: newWatchKey()}
	// Refusals proxyd answers inside the tunnel carry its code in a header
	// (read from the response's initial headers: no round trip, safe in an
	// event callback).
	bctx.OnResponse(func(r playwright.Response) {
		if auth != nil && strings.HasPrefix(r.URL(), "https://") {
			// Only a tunnel the proxy accepted the credential for
			// carries an https response.
			auth.end()
		}
		if code := r.Headers()[RefusalHeader]; code != "" {
			s.mu.Lock()
			s.refusals = append(s.refusals, Refusal{Code: code, ResourceType: r.Request().ResourceType()})
			s.mu.Unlock()
		}
	})
	s.watch(p, nil)
	s.stack = []playwright.Page{p}
	bctx.OnPage(s.adopt)
	return s
}

// newManagedSession creates a provider session proxied through proxyd and
// trusting its CA, reaches it over CDP and drives its default context (the
// provider's proxy and solver live there). Closing the session releases
// the provider's.
func (b *Browser) newManagedSession(opts SessionOptions, w, h int) (*Session, error) {
	ctx, cancel := context.WithTimeout(context.Background(), managedTimeout)
	defer cancel()
	ms, err := b.managed.create(ctx, createArgs{proxy: opts.Proxy, caPEM: b.cfg.TrustPEM, width: w, height: h})
	if err != nil {
		return nil, err
	}
	release := func() error {
		rctx, rcancel := context.WithTimeout(context.Background(), managedTimeout)
		defer rcancel()
		return b.managed.release(rctx, ms.id)
	}
	fail := func(err error) (*Session, error) {
		if rerr := release(); rerr != nil {
			b.log.Warn("managed browser session not released", "provider", string(b.managed.kind), "code", string(agentvault.ErrorCode(rerr)))
		}
		return nil, err
	}
	timeout := float64(managedTimeout.Milliseconds())
	rb, err := b.pw.Chromium.ConnectOverCDP(ms.connectURL, playwright.BrowserTypeConnectOverCDPOptions{Timeout: &timeout})
	if err != nil {
		return fail(agentvault.Wrap(agentvault.CodeUpstream, errors.New("playwright connect error (text withheld: the connect URL carries a key)"),
			"%s created a browser session but mcpd could not reach it over CDP: check the provider's status", b.managed.name()))
	}
	ctxs := rb.Contexts()
	if len(ctxs) == 0 {
		_ = rb.Close()
		return fail(agentvault.Errorf(agentvault.CodeUpstream, "the %s browser session has no browser context", b.managed.name()))
	}
	bctx := ctxs[0]
	var p playwright.Page
	if pages := bctx.Pages(); len(pages) > 0 {
		p = pages[0]
	} else if p, err = bctx.NewPage(); err != nil {
		_ = rb.Close()
		return fail(agentvault.Wrap(agentvault.CodeUpstream, err, "open a page in the %s browser session", b.managed.name()))
	}
	s := b.session(bctx, p, nil)
	s.release = func() error {
		return errors.Join(rb.Close(), release())
	}
	if b.managed.solver {
		st := &solverState{api: b.managed, id: ms.id}
		s.solver = st
		if b.managed.kind == ProviderBrowserbase {
			bctx.OnConsole(func(m playwright.ConsoleMessage) { st.console(m.Text()) })
		}
		watch := func(pg playwright.Page) {
			pg.OnFrameNavigated(func(f playwright.Frame) {
				if f.ParentFrame() == nil {
					st.navigated()
				}
			})
			pg.OnDOMContentLoaded(func(playwright.Page) { st.parsed() })
		}
		for _, pg := range bctx.Pages() {
			watch(pg)
		}
		bctx.OnPage(watch)
	}
	return s, nil
}
