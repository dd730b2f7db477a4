package browser

import (
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strings"

	"github.com/agentvault/agentvault"
)

// Where Chromium runs (issue 28). A Browser hands out sessions the same way
// whatever its provider: a browser context proxied through proxyd with the
// session's credential, trusting proxyd's CA, driven through the local
// playwright driver. Only where that context comes from differs:
//
//   - local: Debian's Chromium, launched here (the default);
//   - playwright: a Playwright browser server (BrowserType.launchServer, or
//     `playwright launch-server`) reached at its ws:// endpoint; each session
//     is a new context with its own proxy credential;
//   - cdp: any Chromium answering the DevTools protocol (Browserless,
//     --remote-debugging-port), the same way;
//   - steel_cloud, browserbase: a managed browser per session, created
//     through the provider's session API with its proxy set to proxyd and
//     proxyd's CA trusted, reached over CDP, released when the session
//     closes (managed.go).
//
// A browser mcpd did not launch must trust proxyd's CA itself: the
// operator starts a playwright or cdp browser with
// --ignore-certificate-errors-spki-list set to the CA's SPKI hash (logged at
// connect), and the managed providers are handed the CA certificate.

// Provider names where a Browser's Chromium runs.
type Provider string

const (
	ProviderLocal       Provider = "local"
	ProviderPlaywright  Provider = "playwright"
	ProviderCDP         Provider = "cdp"
	ProviderSteel       Provider = "steel_cloud"
	ProviderBrowserbase Provider = "browserbase"
)

// Providers lists every provider, the default first.
var Providers = []Provider{ProviderLocal, ProviderPlaywright, ProviderCDP, ProviderSteel, ProviderBrowserbase}

// Remote says where Chromium runs when mcpd does not launch it. The zero
// value is the local Chromium.
type Remote struct {
	Provider Provider
	// Endpoint is the browser's address (playwright: ws:// or wss://; cdp:
	// http(s):// or ws(s)://) or, for a managed provider, its session API's
	// base URL (the provider's public API when empty).
	Endpoint string
	// APIKey authenticates mcpd to a managed provider's API.
	APIKey APIKey
	// Project is Browserbase's project id (optional: the API key implies
	// one).
	Project string
	// SolveCaptcha turns the managed browser's captcha solver on or off;
	// nil takes the provider's default (Steel off, Browserbase on).
	SolveCaptcha *bool
}

// APIKey is a managed provider's API key. It prints as REDACTED: it goes
// into a request header and nowhere else.
type APIKey string

func (APIKey) String() string               { return "REDACTED" }
func (APIKey) GoString() string             { return "REDACTED" }
func (APIKey) LogValue() slog.Value         { return slog.StringValue("REDACTED") }
func (APIKey) MarshalText() ([]byte, error) { return []byte("REDACTED"), nil }

// Kind is the provider, local when none was named.
func (r Remote) Kind() Provider {
	if r.Provider == "" {
		return ProviderLocal
	}
	return r.Provider
}

// Managed reports whether sessions come from a managed provider's API.
func (r Remote) Managed() bool {
	return r.Kind() == ProviderSteel || r.Kind() == ProviderBrowserbase
}

// SolverOn reports whether the managed browser's captcha solver is on
// (seed 000: steel_cloud with solveCaptcha, browserbase unless turned off).
// A browser that is not managed has none.
func (r Remote) SolverOn() bool {
	if !r.Managed() {
		return false
	}
	if r.SolveCaptcha != nil {
		return *r.SolveCaptcha
	}
	return r.Kind() == ProviderBrowserbase
}

// defaultAPI is each managed provider's public session API.
var defaultAPI = map[Provider]string{
	ProviderSteel:       "https://api.steel.dev",
	ProviderBrowserbase: "https://api.browserbase.com",
}

// Check refuses a remote configuration mcpd could not use or that would
// send a key or a page in clear beyond this machine. Its messages name the
// flags of cmd/mcpd.
func (r Remote) Check() error {
	k := r.Kind()
	known := false
	for _, p := range Providers {
		known = known || p == k
	}
	if !known {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "--browser %q is not a browser provider: use %s", string(k), providerList())
	}
	if k == ProviderLocal {
		if r.Endpoint != "" || r.APIKey != "" || r.Project != "" || r.SolveCaptcha != nil {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "--browser-endpoint, the API key, --browser-project and --browser-solve-captcha are for a remote or managed browser: set --browser too")
		}
		return nil
	}
	if !r.Managed() {
		if r.Endpoint == "" {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "--browser %s needs --browser-endpoint, the browser's address", k)
		}
		if r.APIKey != "" || r.Project != "" || r.SolveCaptcha != nil {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "the API key, --browser-project and --browser-solve-captcha are for steel_cloud and browserbase, not %s", k)
		}
	} else if r.APIKey == "" {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "--browser %s needs the provider's API key (%s, or --browser-api-key-file)", k, APIKeyEnv(k))
	}
	if r.Project != "" && k != ProviderBrowserbase {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "--browser-project is Browserbase's project id: not for %s", k)
	}
	if r.Endpoint == "" {
		return nil
	}
	u, err := url.Parse(r.Endpoint)
	if err != nil || u.Host == "" {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "--browser-endpoint is not an absolute URL")
	}
	var schemes []string
	switch k {
	case ProviderPlaywright:
		schemes = []string{"ws", "wss"}
	case ProviderCDP:
		schemes = []string{"http", "https", "ws", "wss"}
	default:
		schemes = []string{"http", "https"}
	}
	ok := false
	for _, s := range schemes {
		ok = ok || u.Scheme == s
	}
	if !ok {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "--browser-endpoint for %s must be %s://", k, strings.Join(schemes, ":// or "))
	}
	if (u.Scheme == "http" || u.Scheme == "ws") && !loopback(u.Hostname()) {
		// The DevTools stream carries every page the agent reads and every
		// stand-in it types; an API request carries the provider's key.
		return agentvault.Errorf(agentvault.CodeInvalidInput, "--browser-endpoint %s://%s would carry the browser's traffic or the API key in clear: use %ss:// beyond this machine", u.Scheme, u.Host, u.Scheme)
	}
	return nil
}

// APIKeyEnv is the environment variable that holds a managed provider's
// API key (the name the provider's own tools read).
func APIKeyEnv(p Provider) string {
	switch p {
	case ProviderSteel:
		return "STEEL_API_KEY"
	case ProviderBrowserbase:
		return "BROWSERBASE_API_KEY"
	}
	return ""
}

func providerList() string {
	var s []string
	for _, p := range Providers {
		s = append(s, string(p))
	}
	return strings.Join(s, ", ")
}

// loopback reports whether host (no port, no brackets) is this machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// hostOf is the host of a URL or host:port, "" when unreadable.
func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Hostname()
	}
	if h, _, err := net.SplitHostPort(raw); err == nil {
		return h
	}
	return ""
}
