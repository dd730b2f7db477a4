package mcpserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/browser"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/internal/deploy"
	"github.com/agentvault/agentvault/skills"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Main is mcpd's lifecycle: parse flags, Run until the MCP stream ends or
// the context is cancelled, Close. cmd/mcpd is a few lines over it, and e2e
// tests run the same type in-process.
type Main struct {
	// DataDir and ConfigFile pick the deployment (--data, --config) by
	// proxyd's own rule (package deploy): the data directory holds the
	// control token, the API key and ca.pem, and the config names the
	// control API's and mcpd's own addresses. What a flag or the
	// environment sets wins over what the deployment says.
	DataDir          string
	ConfigFile       string
	ControlURL       string
	ControlTokenFile string
	APIKeyFile       string
	ProxyURL         string
	ChromiumPath     string
	DriverDir        string
	LogLevel         string
	// HTTPAddr, when set, serves MCP over streamable HTTP on this loopback
	// address instead of stdio (--http; `make run` uses it). --http with
	// no address takes the config's listen.mcp (httpDefault).
	HTTPAddr    string
	httpDefault bool
	// ArtifactDir keeps browser_login's masked diagnostic captures and
	// get_session_outcome's receipt images for the owner (--artifact-dir;
	// default <data>/mcpd/login-diagnostics).
	ArtifactDir string
	// LoginBudget shortens browser_login's end-to-end budget
	// (--login-budget; 0: DefaultLoginBudget). It never lengthens it: the
	// seed promises an answer within 120 s.
	LoginBudget time.Duration
	// Browser is where Chromium runs (--browser, --browser-endpoint,
	// --browser-project, --browser-solve-captcha; browser.Remote): the
	// zero value launches Debian's Chromium here. A managed provider's API
	// key comes from its own variable (STEEL_API_KEY, BROWSERBASE_API_KEY)
	// or BrowserAPIKeyFile (--browser-api-key-file).
	Browser           browser.Remote
	BrowserAPIKeyFile string
	// Captcha is the captcha solver browser_login waits on; nil takes the
	// managed provider's own when its solver is on (solverFor), else none:
	// a self-hosted Chromium has no solver and pays no waits. In-process
	// tests set a test solver here.
	Captcha CaptchaProvider
	// Credentials turns on the portal credential tools (seed 003);
	// SkillsDir, when set, skill_find and file_write over that directory.
	Credentials bool
	SkillsDir   string
	// HandoffTimeout is how long request_challenge_handoff waits for the
	// owner (default 10 minutes; tests shorten it).
	HandoffTimeout time.Duration
	// NetworkLog turns on get_network_log (--network-log).
	NetworkLog bool

	// RequireKeys makes every HTTP request carry an API key as its bearer
	// token (--keys); each key is a connection of its own.
	RequireKeys bool
	// TLSLocal serves HTTP over TLS with a locally issued certificate
	// (--tls); TLSDomain with an ACME certificate for that domain
	// (--tls-domain, --tls-email, --tls-dir). TLSConfig builds the
	// configuration (cmd/mcpd sets it to the dashboard's helper).
	TLSLocal            bool
	TLSDomain, TLSEmail string
	TLSDir              string
	TLSConfig           func(ctx context.Context, o TLSOptions) (*tls.Config, error)
	// Hosted tunes the hosted server's limits (tests inject a clock).
	Hosted HostedConfig
	// MetricsAddr serves /metrics (loopback only); empty: the config's
	// listen.mcp_metrics with --http (off by default), off on stdio; "off"
	// turns it off.
	MetricsAddr string
	// ControlCA is a PEM file of the CA that https control URLs are
	// verified against (--control-ca: proxyd's ca.pem, which every replica
	// of a deployment shares); empty: the system roots.
	ControlCA string

	// Stderr receives the logs; stdout is the MCP stream and never sees a
	// log line. Defaults to os.Stderr.
	Stderr io.Writer

	server *Server
	ctl    *control.Client
	// deployment is what deploy.Resolve chose (applyDeployment).
	deployment *deploy.Choice
	// controlRoots is ControlCA loaded (nil: the system roots).
	controlRoots *x509.CertPool
}

// TLSOptions is what TLSConfig gets: an ACME domain, or the hosts a local
// certificate covers.
type TLSOptions struct {
	Domain, Email, DataDir string
	Hosts                  []string
}

// NewMain returns a Main with the documented defaults: the control URL,
// the token and key files and the driver come from the deployment
// (applyDeployment) unless set.
func NewMain() *Main {
	return &Main{LogLevel: "info", Stderr: os.Stderr}
}

// applyDeployment fills what flags, the environment and the caller left
// empty from the deployment proxyd runs (deploy.Resolve: --data,
// $AGENTVAULT_DATA, $DATA, the config's data_dir, ~/.agentvault; the
// config --config, else <data>/proxyd.yaml): the control token and API key
// files, the control URL (listen.control; https:// with <data>/ca.pem
// under listen.control_tls), --http's address (listen.mcp), the metrics
// listener of --http (listen.mcp_metrics) and the playwright driver
// (deploy.FindDriver). It resolves once.
func (m *Main) applyDeployment() error {
	if m.deployment == nil {
		ch, err := deploy.Resolve(m.DataDir, m.ConfigFile, nil)
		if err != nil {
			return err
		}
		m.deployment = &ch
	}
	ch := m.deployment
	dir, l := ch.Data.Dir, ch.Listen
	if m.ControlTokenFile == "" {
		m.ControlTokenFile = filepath.Join(dir, deploy.ControlTokenFile)
	}
	if m.APIKeyFile == "" {
		m.APIKeyFile = filepath.Join(dir, deploy.APIKeyFile)
	}
	if m.ControlURL == "" {
		m.ControlURL = "http://" + l.Control
		if l.ControlTLS {
			host, port, _ := net.SplitHostPort(l.Control)
			if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
				host = "127.0.0.1"
				if len(l.ControlNames) > 0 {
					host = l.ControlNames[0]
				}
			}
			m.ControlURL = "https://" + net.JoinHostPort(host, port)
			if m.ControlCA == "" {
				m.ControlCA = filepath.Join(dir, deploy.CAFile)
			}
		}
	}
	if m.httpDefault && l.MCP != "" {
		m.HTTPAddr, m.httpDefault = l.MCP, false
	}
	if m.HTTPAddr != "" && m.MetricsAddr == "" && l.MCPMetrics != "" {
		m.MetricsAddr = l.MCPMetrics
	}
	if m.DriverDir == "" {
		if d := deploy.FindDriver(nil); d.Found {
			m.DriverDir = d.Dir
		}
	}
	if m.TLSDir == "" {
		m.TLSDir = filepath.Join(dir, "mcpd")
	}
	if m.ArtifactDir == "" {
		m.ArtifactDir = filepath.Join(dir, "mcpd", DiagnosticsDir)
	}
	return nil
}

// DiagnosticsDir is where, under <data>/mcpd, browser_login keeps its
// masked diagnostic captures unless --artifact-dir names another place:
// seed 000 keeps one for every sign-in that does not succeed.
const DiagnosticsDir = "login-diagnostics"

// Deployment is the data directory and config mcpd follows (after
// ParseFlags or Open).
func (m *Main) Deployment() (deploy.Choice, error) {
	if err := m.applyDeployment(); err != nil {
		return deploy.Choice{}, err
	}
	return *m.deployment, nil
}

// FlagSet is mcpd's command line over m (cmd/mcpd/README.md lists every
// flag; a test compares the two).
func (m *Main) FlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("mcpd", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.StringVar(&m.DataDir, "data", m.DataDir, "proxyd's data directory (control-token, api-key, ca.pem, proxyd.yaml); default as proxyd: $AGENTVAULT_DATA, $DATA, the config's data_dir, ~/.agentvault")
	fs.StringVar(&m.ConfigFile, "config", m.ConfigFile, "proxyd's config file, read for data_dir and the listen addresses (default: <data>/proxyd.yaml when there is one)")
	fs.StringVar(&m.ArtifactDir, "artifact-dir", envOr("AGENTVAULT_ARTIFACT_DIR", ""), "where browser_login keeps the masked diagnostic capture of a sign-in that did not succeed, and get_session_outcome the masked receipt image of a checkout that filled no token, for the owner (default <data>/mcpd/"+DiagnosticsDir+")")
	fs.DurationVar(&m.LoginBudget, "login-budget", envDuration("AGENTVAULT_LOGIN_BUDGET", 0), "shorten browser_login's end-to-end budget (at most and by default 120s)")
	fs.StringVar(&m.ControlURL, "control-url", envOr("AGENTVAULT_CONTROL_URL", m.ControlURL), "proxyd control API base URL (http:// on loopback, https:// elsewhere); several replicas of one deployment separated by commas")
	fs.StringVar(&m.ControlCA, "control-ca", envOr("AGENTVAULT_CONTROL_CA", m.ControlCA), "PEM file of the CA to trust for https:// control URLs (proxyd's <data_dir>/ca.pem); default: the system roots")
	fs.StringVar(&m.ControlTokenFile, "control-token-file", envOr("AGENTVAULT_CONTROL_TOKEN_FILE", m.ControlTokenFile), "file holding the control API bearer token")
	fs.StringVar(&m.APIKeyFile, "api-key-file", envOr("AGENTVAULT_API_KEY_FILE", m.APIKeyFile), "file holding the agent API key (AGENTVAULT_API_KEY takes precedence)")
	fs.StringVar(&m.ProxyURL, "proxy", envOr("AGENTVAULT_PROXY_URL", m.ProxyURL), "proxy address override (default: what proxyd announces, http://127.0.0.1:7700)")
	fs.StringVar(&m.ChromiumPath, "chromium", envOr("CHROMIUM_PATH", "/usr/bin/chromium"), "Chromium binary")
	fs.StringVar(&m.DriverDir, "driver-dir", envOr("PLAYWRIGHT_DRIVER_PATH", m.DriverDir), "playwright-core driver directory (holds package/cli.js)")
	fs.StringVar(&m.LogLevel, "log-level", m.LogLevel, "debug, info, warn or error (logs go to stderr)")
	fs.Var(&httpFlag{&m.HTTPAddr, &m.httpDefault}, "http", "serve MCP over streamable HTTP instead of stdio; --http alone listens on the config's listen.mcp ("+DefaultHTTPAddr+"), --http=HOST:PORT elsewhere (beyond loopback only with --keys and TLS)")
	fs.BoolVar(&m.RequireKeys, "keys", m.RequireKeys, "HTTP: require an API key (Authorization: Bearer avk_...) on every request")
	fs.BoolVar(&m.TLSLocal, "tls", m.TLSLocal, "HTTP: serve over TLS with a locally issued certificate")
	fs.StringVar(&m.TLSDomain, "tls-domain", envOr("AGENTVAULT_MCP_DOMAIN", m.TLSDomain), "HTTP: serve over TLS with an ACME certificate for this domain")
	fs.StringVar(&m.TLSEmail, "tls-email", m.TLSEmail, "ACME account contact for --tls-domain")
	fs.StringVar(&m.TLSDir, "tls-dir", m.TLSDir, "where ACME certificates are kept (default <data>/mcpd)")
	fs.BoolVar(&m.Credentials, "credentials", envOr("AGENTVAULT_CREDENTIALS", "") == "1", "serve the portal credential tools (credential_request, credential_list, credential_use, credential_delete, grant_set)")
	fs.StringVar(&m.SkillsDir, "skills-dir", envOr("AGENTVAULT_SKILLS_DIR", ""), "skill directory (one folder per skill with its SKILL.md): serve skill_find and file_write over it")
	fs.StringVar(&m.MetricsAddr, "metrics-addr", envOr("AGENTVAULT_MCPD_METRICS_ADDR", ""), "serve Prometheus /metrics here, loopback only, e.g. "+DefaultMetricsAddr+" (default: the config's listen.mcp_metrics with --http, which is off unless set; off on stdio)")
	fs.BoolVar(&m.NetworkLog, "network-log", envOr("AGENTVAULT_NETWORK_LOG", "") == "1", "serve get_network_log, a diagnostic of the page's requests (staging)")
	fs.DurationVar(&m.HandoffTimeout, "handoff-timeout", envDuration("AGENTVAULT_HANDOFF_TIMEOUT", 0), "how long a challenge hand-off waits for the owner (default 10m)")
	fs.StringVar((*string)(&m.Browser.Provider), "browser", envOr("AGENTVAULT_BROWSER", string(m.Browser.Kind())), "where Chromium runs: local (launched here), playwright (a Playwright browser server), cdp (a DevTools endpoint such as Browserless), steel_cloud or browserbase (docs/browsers.md)")
	fs.StringVar(&m.Browser.Endpoint, "browser-endpoint", envOr("AGENTVAULT_BROWSER_ENDPOINT", m.Browser.Endpoint), "playwright: the browser server's ws:// endpoint; cdp: the DevTools endpoint (http:// or ws://); steel_cloud, browserbase: the session API's base URL (default the provider's)")
	fs.StringVar(&m.BrowserAPIKeyFile, "browser-api-key-file", envOr("AGENTVAULT_BROWSER_API_KEY_FILE", m.BrowserAPIKeyFile), "file holding the managed provider's API key (STEEL_API_KEY or BROWSERBASE_API_KEY holds the key itself and wins)")
	fs.StringVar(&m.Browser.Project, "browser-project", envOr("BROWSERBASE_PROJECT_ID", m.Browser.Project), "browserbase: the project id (default: the API key's project)")
	fs.Var(&optBool{&m.Browser.SolveCaptcha}, "browser-solve-captcha", "steel_cloud, browserbase: turn the provider's captcha solver on or off (default: Steel off, Browserbase on); env AGENTVAULT_BROWSER_SOLVE_CAPTCHA")
	return fs
}

// optBool is a boolean flag that remembers whether it was set: unset, the
// provider's default holds.
type optBool struct{ v **bool }

func (f *optBool) String() string {
	if f.v == nil || *f.v == nil {
		return ""
	}
	return strconv.FormatBool(**f.v)
}

func (f *optBool) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*f.v = &b
	return nil
}

func (f *optBool) IsBoolFlag() bool { return true }

// browserConfig completes Browser from the environment: the managed
// provider's API key, and AGENTVAULT_BROWSER_SOLVE_CAPTCHA when no flag set
// the solver. It refuses a configuration browser.Remote.Check refuses.
func (m *Main) browserConfig() error {
	if m.Browser.SolveCaptcha == nil {
		if v := os.Getenv("AGENTVAULT_BROWSER_SOLVE_CAPTCHA"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return agentvault.Errorf(agentvault.CodeInvalidInput, "AGENTVAULT_BROWSER_SOLVE_CAPTCHA must be true or false")
			}
			m.Browser.SolveCaptcha = &b
		}
	}
	if m.Browser.Managed() && m.Browser.APIKey == "" {
		if v := strings.TrimSpace(os.Getenv(browser.APIKeyEnv(m.Browser.Kind()))); v != "" {
			m.Browser.APIKey = browser.APIKey(v)
		} else if m.BrowserAPIKeyFile != "" {
			k, err := readSecretFile(m.BrowserAPIKeyFile, "browser API key")
			if err != nil {
				return err
			}
			m.Browser.APIKey = browser.APIKey(k)
		}
	} else if m.BrowserAPIKeyFile != "" && !m.Browser.Managed() {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "--browser-api-key-file is for --browser steel_cloud or browserbase")
	}
	return m.Browser.Check()
}

// ParseFlags reads the command line; environment variables supply the
// defaults a flag does not override, and the deployment (applyDeployment)
// what neither sets. -h prints the flags on stdout and returns
// flag.ErrHelp; an unknown flag or a stray argument is refused.
func (m *Main) ParseFlags(args []string) error {
	fs := m.FlagSet()
	fs.Usage = func() {
		fmt.Fprintf(os.Stdout, "usage: mcpd [flags]   (MCP on stdio; --http for streamable HTTP)\n\n")
		fs.SetOutput(os.Stdout)
		fs.PrintDefaults()
		fs.SetOutput(m.Stderr)
	}
	if err := fs.Parse(args); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(m.Stderr, "mcpd: run mcpd -h for the flags")
		}
		return err
	}
	if fs.NArg() > 0 {
		err := agentvault.Errorf(agentvault.CodeInvalidInput, "unexpected argument %q (mcpd takes only flags; mcpd -h lists them)", fs.Arg(0))
		fmt.Fprintln(m.Stderr, "mcpd:", agentvault.ErrorMessage(err))
		return err
	}
	if err := m.applyDeployment(); err != nil {
		fmt.Fprintln(m.Stderr, "mcpd:", agentvault.ErrorMessage(err))
		return err
	}
	if m.HTTPAddr != "" {
		if err := m.checkListen(); err != nil {
			fmt.Fprintln(m.Stderr, "mcpd:", agentvault.ErrorMessage(err))
			return err
		}
	}
	if err := m.checkControl(); err != nil {
		fmt.Fprintln(m.Stderr, "mcpd:", agentvault.ErrorMessage(err))
		return err
	}
	if err := m.browserConfig(); err != nil {
		fmt.Fprintln(m.Stderr, "mcpd:", agentvault.ErrorMessage(err))
		return err
	}
	if m.LoginBudget < 0 || m.LoginBudget > DefaultLoginBudget {
		err := agentvault.Errorf(agentvault.CodeInvalidInput, "--login-budget must be between 0 (the default, %s) and %s", DefaultLoginBudget, DefaultLoginBudget)
		fmt.Fprintln(m.Stderr, "mcpd:", agentvault.ErrorMessage(err))
		return err
	}
	if m.MetricsAddr != "" && m.MetricsAddr != "off" {
		if err := checkMetricsAddr(m.MetricsAddr); err != nil {
			fmt.Fprintln(m.Stderr, "mcpd:", agentvault.ErrorMessage(err))
			return err
		}
	}
	return nil
}

// DefaultHTTPAddr is where --http listens when given no address and the
// config names no other listen.mcp.
const DefaultHTTPAddr = "127.0.0.1:7704"

// httpFlag is --http: a boolean flag that may also carry an address; alone
// it asks for the deployment's listen.mcp (deflt).
type httpFlag struct {
	addr  *string
	deflt *bool
}

func (f *httpFlag) String() string {
	if f.addr == nil {
		return ""
	}
	return *f.addr
}

func (f *httpFlag) Set(v string) error {
	switch v {
	case "true":
		*f.addr, *f.deflt = DefaultHTTPAddr, true
	case "false", "":
		*f.addr, *f.deflt = "", false
	default:
		*f.addr, *f.deflt = v, false
	}
	return nil
}

func (f *httpFlag) IsBoolFlag() bool { return true }

func (m *Main) tlsOn() bool { return m.TLSLocal || m.TLSDomain != "" }

// checkListen allows a listener beyond loopback only with API keys and TLS
// on: the MCP endpoint drives a browser that fills the owner's cards.
func (m *Main) checkListen() error {
	if m.RequireKeys && m.tlsOn() {
		if _, _, err := net.SplitHostPort(m.HTTPAddr); err != nil {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "--http wants host:port, e.g. %s", DefaultHTTPAddr)
		}
		return nil
	}
	if err := checkLoopback(m.HTTPAddr); err != nil {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "%s; beyond loopback, turn on --keys and TLS (--tls or --tls-domain)", agentvault.ErrorMessage(err))
	}
	return nil
}

// checkLoopback refuses an MCP listener anyone but this machine could
// reach.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "--http wants host:port, e.g. %s", DefaultHTTPAddr)
	}
	if host == "localhost" {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "--http listens on loopback only (127.0.0.1 or ::1)")
	}
	return nil
}

// checkControl refuses a control URL that would carry the bearer token in
// clear beyond this machine (http:// to a host other than loopback), and
// loads --control-ca.
func (m *Main) checkControl() error {
	for _, raw := range strings.Split(m.ControlURL, ",") {
		if raw = strings.TrimSpace(raw); raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || u.User != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "--control-url: each URL must be http://host:port or https://host:port without user info")
		}
		if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
			return agentvault.Errorf(agentvault.CodeInvalidInput,
				"--control-url: http://%s would send the control token in clear; use https:// (proxyd's listen.control_tls, with --control-ca) or a loopback address", u.Host)
		}
	}
	if m.ControlCA == "" {
		m.controlRoots = nil
		return nil
	}
	data, err := os.ReadFile(m.ControlCA)
	if err != nil {
		reason := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			reason = pe.Err.Error()
		}
		return agentvault.Wrap(agentvault.CodeInvalidInput, err, "cannot read the control CA file %s (--control-ca): %s", m.ControlCA, reason)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "the control CA file %s (--control-ca) holds no PEM certificate", m.ControlCA)
	}
	m.controlRoots = pool
	return nil
}

// controlHTTPClient is the control client's transport: no proxy from the
// environment (the control API is proxyd's, on loopback or reached
// directly), and for https:// URLs TLS 1.2+ verified against --control-ca
// or the system roots.
func (m *Main) controlHTTPClient() (*http.Client, error) {
	if err := m.checkControl(); err != nil {
		return nil, err
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4,
		TLSClientConfig: &tls.Config{RootCAs: m.controlRoots, MinVersion: tls.VersionTLS12}}}, nil
}

// loopbackHost reports whether host (no port, no brackets) is this
// machine: localhost or a loopback address.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func readSecretFile(path, what string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", agentvault.Wrap(agentvault.CodeInvalidInput, err, "cannot read the %s file %s", what, path)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", agentvault.Errorf(agentvault.CodeInvalidInput, "the %s file %s is empty", what, path)
	}
	return v, nil
}

// Open builds the server from the configuration without serving yet.
func (m *Main) Open() error {
	if m.Stderr == nil {
		m.Stderr = os.Stderr
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(m.LogLevel)); err != nil {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "log level must be debug, info, warn or error")
	}
	log := slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: lvl}))
	if err := m.applyDeployment(); err != nil {
		return err
	}
	token, err := readSecretFile(m.ControlTokenFile, "control token")
	if err != nil {
		return err
	}
	apiKey := os.Getenv("AGENTVAULT_API_KEY")
	if apiKey == "" && !(m.HTTPAddr != "" && m.RequireKeys) {
		// With --keys every connection brings its own key: the file is
		// not needed.
		if apiKey, err = readSecretFile(m.APIKeyFile, "API key"); err != nil {
			return err
		}
	}
	hc, err := m.controlHTTPClient()
	if err != nil {
		return err
	}
	m.ctl = control.NewClient(m.ControlURL, token, hc)
	ctl := m.ctl
	if apiKey == "" && m.RequireKeys {
		apiKey = os.Getenv("AGENTVAULT_API_KEY")
	}
	cfg := Config{
		Control:      ctl,
		APIKey:       apiKey,
		ProxyURL:     m.ProxyURL,
		DriverDir:    m.DriverDir,
		ChromiumPath: m.ChromiumPath,
		Logger:       log,
	}
	cfg.HandoffWait = m.HandoffTimeout
	cfg.ArtifactDir = m.ArtifactDir
	if err := m.browserConfig(); err != nil {
		return err
	}
	cfg.Browser = m.Browser
	cfg.LoginBudget, cfg.Captcha = m.LoginBudget, m.Captcha
	if cfg.Captcha == nil {
		cfg.Captcha = solverFor(m.Browser)
	}
	cfg.NetworkLog = m.NetworkLog
	if m.Credentials {
		cfg.Credentials = ctl
	}
	if m.SkillsDir != "" {
		if cfg.Skills, err = skills.Open(m.SkillsDir); err != nil {
			return err
		}
	}
	srv, err := New(cfg)
	if err != nil {
		return err
	}
	srv.metrics = srv.instrument()
	srv.Prewarm()
	m.server = srv
	return nil
}

// Run opens the server if needed and serves MCP on stdin/stdout, or on
// streamable HTTP when HTTPAddr is set.
func (m *Main) Run(ctx context.Context) error {
	if m.HTTPAddr != "" {
		if err := m.checkListen(); err != nil {
			return err
		}
		ln, err := net.Listen("tcp", m.HTTPAddr)
		if err != nil {
			return agentvault.Wrap(agentvault.CodeInternal, err, "cannot listen on %s", m.HTTPAddr)
		}
		return m.ServeHTTP(ctx, ln)
	}
	if m.server == nil {
		if err := m.Open(); err != nil {
			return err
		}
	}
	m.serveMetrics(ctx, m.MetricsAddr)
	return m.RunTransport(ctx, &mcp.StdioTransport{})
}

// ServeHTTP opens the server if needed and serves MCP over streamable HTTP
// at /mcp on ln (and / for clients that post to the root), with /healthz,
// until ctx ends.
func (m *Main) ServeHTTP(ctx context.Context, ln net.Listener) error {
	if m.server == nil {
		if err := m.Open(); err != nil {
			ln.Close()
			return err
		}
	}
	m.serveMetrics(ctx, m.MetricsAddr)
	m.server.EnableHosted(m.Hosted)
	var opts HTTPOptions
	if m.RequireKeys {
		opts.Keys = m.ctl
	}
	h := m.server.HTTPHandler(opts)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		// The pid lets scripts/run.sh tell its own mcpd from another one
		// already answering on the same port.
		fmt.Fprintf(w, "ok pid=%d\n", os.Getpid())
	})
	mux.Handle("/mcp", h)
	mux.Handle("/", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	scheme := "http"
	if m.tlsOn() {
		if m.TLSConfig == nil {
			ln.Close()
			return agentvault.Errorf(agentvault.CodeInvalidInput, "TLS was asked for but this build has no TLS helper")
		}
		dir := m.TLSDir
		host, _, _ := net.SplitHostPort(ln.Addr().String())
		tc, err := m.TLSConfig(ctx, TLSOptions{Domain: m.TLSDomain, Email: m.TLSEmail, DataDir: dir, Hosts: []string{"localhost", "127.0.0.1", "::1", host}})
		if err != nil {
			ln.Close()
			return err
		}
		ln = tls.NewListener(ln, tc)
		scheme = "https"
	}
	m.server.log.Info("mcpd serving MCP over HTTP", "url", scheme+"://"+ln.Addr().String()+"/mcp", "keys", m.RequireKeys)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// A tool call waiting on the owner holds its stream open: end those
	// waits first so that the shutdown does not sit on them.
	m.server.stop()
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}

// RunTransport serves MCP on t (an in-memory or command transport in
// tests).
func (m *Main) RunTransport(ctx context.Context, t mcp.Transport) error {
	if m.server == nil {
		if err := m.Open(); err != nil {
			return err
		}
	}
	err := m.server.Run(ctx, t)
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// Close ends every session and the browser.
func (m *Main) Close() error {
	if m.server == nil {
		return nil
	}
	return m.server.Close()
}

// envDuration reads a duration from the environment, def when unset or
// unreadable.
func envDuration(name string, def time.Duration) time.Duration {
	d, err := time.ParseDuration(os.Getenv(name))
	if err != nil {
		return def
	}
	return d
}
