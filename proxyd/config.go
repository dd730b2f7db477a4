package proxyd

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/mail"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/intercept"
	"github.com/agentvault/agentvault/internal/deploy"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/store/postgres"
	"gopkg.in/yaml.v3"
)

// Config is proxyd's configuration (configs/proxyd.yaml documents it).
type Config struct {
	DataDir string       `yaml:"data_dir"`
	Listen  ListenConfig `yaml:"listen"`
	// ProxyURL is what the control API tells browsers; default
	// http://<listen.proxy>.
	ProxyURL string       `yaml:"proxy_url"`
	Egress   EgressConfig `yaml:"egress"`
	Limits   LimitsConfig `yaml:"limits"`
	TLS      TLSConfig    `yaml:"tls"`
	// UnsafeAllowPrivateRanges lets the proxy reach loopback and private
	// addresses (P3). Only for tests and local development.
	UnsafeAllowPrivateRanges bool `yaml:"unsafe_allow_private_ranges"`
	// UnsafeTestHosts maps host names to IP addresses the proxy dials for
	// them instead of asking DNS (shop.test: 127.0.0.1). Only for tests that
	// need named sites on this machine (the vault refuses IPs as card and
	// login sites); refused unless UnsafeAllowPrivateRanges is on too.
	UnsafeTestHosts map[string]string `yaml:"unsafe_test_hosts"`
	Log             LogConfig         `yaml:"log"`
	Policy          PolicyConfig      `yaml:"policy"`
	Dashboard       DashConfig        `yaml:"dashboard"`
	Store           StoreConfig       `yaml:"store"`
	Notify          NotifyConfig      `yaml:"notify"`
	// BotAuth signs the agent's requests to the sites the owner chose
	// (botauth.go); off by default.
	BotAuth BotAuthConfig `yaml:"bot_auth"`
}

// NotifyConfig sets up the channels that tell the owner something waits for
// them outside the dashboard (owner/notify). Each is off until configured;
// the owner then turns configured channels on and off, and the hand-off
// switch, on the dashboard's Notifications page (notify.json in data_dir).
type NotifyConfig struct {
	Webhook WebhookConfig `yaml:"webhook"`
	SMTP    SMTPConfig    `yaml:"smtp"`
}

// WebhookConfig posts each event as signed JSON (X-Agentvault-Signature:
// sha256=HMAC of the body).
type WebhookConfig struct {
	// URL is https://, or http:// to a loopback address only; empty: off.
	URL string `yaml:"url"`
	// SecretFile holds the HMAC secret (at least 16 bytes); empty:
	// data_dir/webhook.secret, created on first start.
	SecretFile string `yaml:"secret_file"`
}

// SMTPConfig mails each event through a relay.
type SMTPConfig struct {
	Host string   `yaml:"host"` // empty: off
	Port int      `yaml:"port"`
	From string   `yaml:"from"`
	To   []string `yaml:"to"`
	// Username and PasswordFile are for relays that need PLAIN auth (only
	// over TLS: net/smtp refuses it in the clear). The password is read
	// from a file, never written in this config.
	Username     string `yaml:"username"`
	PasswordFile string `yaml:"password_file"`
}

// StoreConfig selects where proxyd keeps the vault, the owner's records,
// the ledger and the audit log. The default is SQLite in the data
// directory (vault.db); driver postgres shares one database between
// replicas (each still reads master.key from its own data directory).
type StoreConfig struct {
	Driver string `yaml:"driver"` // "sqlite" or "postgres"
	// DSN is the Postgres connection string (postgres://user@host/db?...
	// or key=value pairs); empty for sqlite. A password is better left to
	// PGPASSFILE or PGPASSWORD than written here.
	DSN string `yaml:"dsn"`
}

// ListenConfig holds the three listener addresses.
type ListenConfig struct {
	Proxy string `yaml:"proxy"`
	// ProxyNetwork lets listen.proxy face a network, for browsers on other
	// machines (docs/deploy.md says what to open); off, it must be a
	// loopback address. Every CONNECT needs a session's credentials either
	// way; facing a network, wrong ones are also limited per client address
	// (limits.proxy_auth_failures).
	ProxyNetwork bool `yaml:"proxy_network"`
	// ProxyTLS serves the proxy itself over TLS (an https:// proxy URL), so
	// the session's credentials and the CONNECT lines are encrypted on the
	// network. Its certificate is a leaf of the deployment's CA (ca.pem,
	// which a browser of the appliance trusts anyway) naming listen.proxy's
	// host and ProxyNames, or the owner's own (ProxyCertFile and
	// ProxyKeyFile, PEM, re-read when they change).
	ProxyTLS      bool     `yaml:"proxy_tls"`
	ProxyNames    []string `yaml:"proxy_names"`
	ProxyCertFile string   `yaml:"proxy_cert_file"`
	ProxyKeyFile  string   `yaml:"proxy_key_file"`
	Control       string   `yaml:"control"`
	// ControlTLS serves the control API over TLS (1.2 or later) with a
	// leaf of the deployment's CA (ca.pem in data_dir), so mcpd on another
	// machine can reach it: without it listen.control is loopback-only,
	// since the bearer token must not cross a network in clear.
	ControlTLS bool `yaml:"control_tls"`
	// ControlNames are the host names and addresses mcpd dials the control
	// API at, named by its certificate besides listen.control's host.
	ControlNames []string `yaml:"control_names"`
	Admin        string   `yaml:"admin"`
	// Dashboard is the owner's TLS dashboard; empty turns it off.
	Dashboard string `yaml:"dashboard"`
	// Credentials is the loopback listener a skill's runtime POSTs its
	// one-time credential-use token to (docs/portal-credentials.md); empty
	// turns credential_use off (the default: only portal credentials need
	// it).
	Credentials string `yaml:"credentials"`
	// MCP and MCPMetrics are mcpd's: its streamable HTTP endpoint (`mcpd
	// --http` with no address, `make run`) and its /metrics listener
	// (empty: off). proxyd only checks them; mcpd reads them through
	// package deploy, so one config moves every port of a deployment.
	MCP        string `yaml:"mcp"`
	MCPMetrics string `yaml:"mcp_metrics"`
}

// EgressConfig is the destination rule (P1).
type EgressConfig struct {
	Mode  string   `yaml:"mode"` // "open" or "strict"
	Allow []string `yaml:"allow"`
	// UpstreamProxy routes every upstream connection through the owner's
	// egress (a residential or corporate proxy): "http://host:port" (HTTP
	// CONNECT) or "socks5://host:port"; empty: direct. Destinations are
	// still classified (P3) before the proxy is asked for them. Needs a
	// restart.
	UpstreamProxy string `yaml:"upstream_proxy"`
	// UpstreamProxyCredentialsFile holds "user:password" for the upstream
	// proxy (one line, mode 0600); never in the config itself, never logged.
	UpstreamProxyCredentialsFile string `yaml:"upstream_proxy_credentials_file"`
	// Required makes residential egress a condition of every new session
	// (seed 004 egress_unavailable): with no upstream_proxy, or one that
	// does not answer, the control API refuses to create a session
	// (egress_unavailable, with a Retry-After) rather than let its traffic
	// leave from the appliance's own address. proxyd still starts.
	Required bool `yaml:"required"`
}

// upstreamProxy reads the egress proxy of the config (nil: direct). The
// credentials come from their file, which must be the owner's alone.
func (e EgressConfig) upstreamProxy() (*intercept.UpstreamProxy, error) {
	if e.UpstreamProxy == "" {
		return nil, nil
	}
	scheme, addr, err := parseUpstreamProxy(e.UpstreamProxy)
	if err != nil {
		return nil, err
	}
	up := &intercept.UpstreamProxy{Scheme: scheme, Addr: addr}
	if f := expandHome(e.UpstreamProxyCredentialsFile); f != "" {
		st, err := os.Stat(f)
		if err != nil {
			return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "config: egress.upstream_proxy_credentials_file: cannot read %s: create it with one line user:password, mode 0600", f)
		}
		if st.Mode().Perm()&0o077 != 0 {
			return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "config: egress.upstream_proxy_credentials_file: %s is readable by others (mode %o): chmod 600 it", f, st.Mode().Perm())
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "config: egress.upstream_proxy_credentials_file: cannot read %s", f)
		}
		user, pass, ok := strings.Cut(strings.TrimRight(string(b), "\r\n"), ":")
		if !ok || user == "" || strings.ContainsAny(user+pass, "\r\n") {
			return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "config: egress.upstream_proxy_credentials_file: %s must hold one line user:password", f)
		}
		up.Username, up.Password = user, pass
	}
	return up, nil
}

// parseUpstreamProxy checks an egress proxy URL: http or socks5, a host and
// a port, nothing else (credentials go in their own file).
func parseUpstreamProxy(raw string) (scheme, addr string, err error) {
	bad := func(why string) (string, string, error) {
		return "", "", agentvault.Errorf(agentvault.CodeInvalidInput, "config: egress.upstream_proxy: %s (want http://host:port or socks5://host:port)", why)
	}
	u, perr := url.Parse(raw)
	if perr != nil {
		return bad("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "socks5" {
		return bad("scheme " + strconv.Quote(u.Scheme) + " is not http or socks5")
	}
	if u.User != nil {
		return bad("credentials do not belong in the URL: put user:password in upstream_proxy_credentials_file")
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return bad("a path, query or fragment is not allowed")
	}
	host, port, serr := net.SplitHostPort(u.Host)
	if serr != nil || host == "" || port == "" {
		return bad("host and port are required")
	}
	if n, aerr := strconv.Atoi(port); aerr != nil || n < 1 || n > 65535 {
		return bad("port " + strconv.Quote(port) + " is not a port")
	}
	return u.Scheme, u.Host, nil
}

// LimitsConfig are the P14 limits.
type LimitsConfig struct {
	MaxBodyBytes      int64         `yaml:"max_body_bytes"`
	MaxTunnels        int           `yaml:"max_tunnels"`
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	IdleTimeout       time.Duration `yaml:"idle_timeout"`
	UpstreamTimeout   time.Duration `yaml:"upstream_timeout"`
	// AuthorizeBurst and AuthorizePerMinute bound authorize calls per API
	// key (a token bucket): beyond them a call is refused with rate_limited
	// and a retry time.
	AuthorizeBurst     int `yaml:"authorize_burst"`
	AuthorizePerMinute int `yaml:"authorize_per_minute"`
	// GrantTTL is how long an authorization may release its value (P21);
	// a card grant also ends at the first purchase the site accepts.
	GrantTTL time.Duration `yaml:"grant_ttl"`
	// SessionIdle and SessionMaxAge end a proxy session unused for that
	// long, or that old; MaxSessionsPerKey caps one key's open sessions.
	SessionIdle       time.Duration `yaml:"session_idle"`
	SessionMaxAge     time.Duration `yaml:"session_max_age"`
	MaxSessionsPerKey int           `yaml:"max_sessions_per_key"`
	// ProxyAuthFailures is how many wrong proxy credentials one client
	// address may send before it waits (10 s, doubling up to 15 minutes)
	// with every CONNECT refused unchecked; only with listen.proxy_network.
	ProxyAuthFailures int `yaml:"proxy_auth_failures"`
}

// TLSConfig adds upstream trust roots (P5).
type TLSConfig struct {
	ExtraRoots []string `yaml:"extra_roots"` // PEM files
}

// LogConfig selects the log level and format.
type LogConfig struct {
	Level  string `yaml:"level"`  // debug, info, warn, error
	Format string `yaml:"format"` // json or text
}

// DefaultConfig returns the embedded defaults.
func DefaultConfig() Config {
	c, err := parseConfig(bytes.NewReader(deploy.DefaultsYAML), Config{})
	if err != nil {
		panic("embedded defaults do not parse: " + err.Error())
	}
	return c
}

// LoadConfig reads a YAML file strictly over the defaults: an unknown key,
// a wrong type or a second document refuses it (P17). It validates too.
func LoadConfig(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, agentvault.Wrap(agentvault.CodeInvalidInput, err, "cannot read config file %s", filepath.Base(path))
	}
	defer f.Close()
	c, err := parseConfig(f, DefaultConfig())
	if err != nil {
		return Config{}, err
	}
	return c, c.Validate()
}

func parseConfig(r io.Reader, base Config) (Config, error) {
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	c := base
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, agentvault.Wrap(agentvault.CodeInvalidInput, err, "config: %s", yamlReason(err))
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return Config{}, agentvault.Errorf(agentvault.CodeInvalidInput, "config: only one YAML document is allowed")
	}
	return c, nil
}

// yamlReason keeps yaml's own message (line numbers and field names from
// the owner's file; a config holds no secret).
func yamlReason(err error) string {
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

// Validate checks everything before anything listens.
func (c *Config) Validate() error {
	bad := func(f string, a ...any) error {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "config: "+f, a...)
	}
	if strings.TrimSpace(c.DataDir) == "" {
		return bad("data_dir is empty")
	}
	for name, addr := range map[string]string{"listen.proxy": c.Listen.Proxy, "listen.control": c.Listen.Control, "listen.admin": c.Listen.Admin} {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return bad("%s: %q is not host:port", name, addr)
		}
		if name == "listen.proxy" && c.Listen.ProxyNetwork {
			continue // browsers elsewhere: credentials on every CONNECT, wrong ones limited
		}
		if name == "listen.control" && c.Listen.ControlTLS {
			continue // any address: the token travels inside TLS
		}
		// The control and admin APIs are loopback-only.
		ip, err := netip.ParseAddr(host)
		if host != "localhost" && (err != nil || !ip.IsLoopback()) {
			if name == "listen.control" {
				return bad("listen.control must be a loopback address unless listen.control_tls is true, got %q", addr)
			}
			if name == "listen.proxy" {
				return bad("listen.proxy must be a loopback address unless listen.proxy_network is true (docs/deploy.md: browsers on other machines), got %q", addr)
			}
			return bad("%s must be a loopback address, got %q", name, addr)
		}
	}
	if err := c.Listen.validateControlTLS(); err != nil {
		return err
	}
	if err := c.validateProxyListener(); err != nil {
		return err
	}
	if c.Listen.Credentials != "" {
		host, _, err := net.SplitHostPort(c.Listen.Credentials)
		ip, perr := netip.ParseAddr(host)
		if err != nil || (host != "localhost" && (perr != nil || !ip.IsLoopback())) {
			return bad("listen.credentials must be a loopback host:port, got %q", c.Listen.Credentials)
		}
	}
	for name, addr := range map[string]string{"listen.dashboard": c.Listen.Dashboard, "listen.mcp": c.Listen.MCP} {
		if addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return bad("%s: %q is not host:port", name, addr)
		}
	}
	if c.Listen.MCPMetrics != "" {
		host, _, err := net.SplitHostPort(c.Listen.MCPMetrics)
		ip, perr := netip.ParseAddr(host)
		if err != nil || (host != "localhost" && (perr != nil || !ip.IsLoopback())) {
			return bad("listen.mcp_metrics must be a loopback host:port, got %q", c.Listen.MCPMetrics)
		}
	}
	switch c.Egress.Mode {
	case "open", "strict":
	default:
		return bad("egress.mode must be open or strict, got %q", c.Egress.Mode)
	}
	for _, h := range c.Egress.Allow {
		if _, err := intercept.NormalizeDestination(h, 443); err != nil {
			return bad("egress.allow: %q is not a host name", h)
		}
	}
	if c.Egress.UpstreamProxy != "" {
		if _, _, err := parseUpstreamProxy(c.Egress.UpstreamProxy); err != nil {
			return err
		}
	} else if c.Egress.UpstreamProxyCredentialsFile != "" {
		return bad("egress.upstream_proxy_credentials_file is set without egress.upstream_proxy")
	}
	if !c.Policy.OwnerRules {
		return bad("policy.owner_rules cannot be turned off: every fill is decided by the owner's rules (deny by default)")
	}
	for _, h := range c.Policy.AuthorizedDestinations {
		if _, err := intercept.NormalizeDestination(h, 443); err != nil || strings.Contains(h, ":") {
			return bad("policy.authorized_destinations: %q is not a host name", h)
		}
		if _, err := hostname.Site(h); err != nil {
			return bad("policy.authorized_destinations: %q is not a site (a host with a registrable domain, or an IP address)", h)
		}
	}
	for _, f := range append(append([]string(nil), c.Policy.WireAmount.DecimalFields...), c.Policy.WireAmount.MinorUnitFields...) {
		if strings.TrimSpace(f) == "" || len(f) > 64 {
			return bad("policy.wire_amount: field names must be 1 to 64 characters")
		}
	}
	if _, err := c.Policy.Integrations(); err != nil {
		return bad("policy.payment_integrations: %s", agentvault.ErrorMessage(err))
	}
	if len(c.UnsafeTestHosts) > 0 && !c.UnsafeAllowPrivateRanges {
		return bad("unsafe_test_hosts needs unsafe_allow_private_ranges: true as well (it is for tests on this machine only)")
	}
	for h, ip := range c.UnsafeTestHosts {
		d, err := intercept.NormalizeDestination(h, 443)
		if err != nil || d.Host != h || net.ParseIP(h) != nil {
			return bad("unsafe_test_hosts: %q is not a normalised host name", h)
		}
		if _, err := netip.ParseAddr(ip); err != nil {
			return bad("unsafe_test_hosts: %q maps to %q, not an IP address", h, ip)
		}
	}
	l := c.Limits
	if l.MaxBodyBytes < 1024 || l.MaxTunnels < 1 || l.ReadHeaderTimeout <= 0 || l.IdleTimeout <= 0 || l.UpstreamTimeout <= 0 ||
		l.AuthorizeBurst < 1 || l.AuthorizePerMinute < 1 {
		return bad("limits must all be positive (max_body_bytes at least 1024)")
	}
	for _, p := range c.TLS.ExtraRoots {
		if _, err := os.Stat(expandHome(p)); err != nil {
			return bad("tls.extra_roots: %s is not readable", p)
		}
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return bad("log.level must be debug, info, warn or error")
	}
	switch c.Log.Format {
	case "json", "text":
	default:
		return bad("log.format must be json or text")
	}
	if err := c.Notify.validate(); err != nil {
		return err
	}
	if err := c.BotAuth.validate(c.Listen); err != nil {
		return err
	}
	switch c.Store.Driver {
	case "sqlite":
		if c.Store.DSN != "" {
			return bad("store.dsn is for driver postgres; the sqlite store is vault.db in data_dir")
		}
	case "postgres":
		// The reason never repeats the DSN: it may hold a password.
		if err := postgres.ValidateDSN(c.Store.DSN); err != nil {
			return bad("store.dsn: %s", agentvault.ErrorMessage(err))
		}
	default:
		return bad("store.driver must be sqlite or postgres, got %q", c.Store.Driver)
	}
	return nil
}

// validateControlTLS checks listen.control_names, and that the control
// certificate will name at least one host mcpd can dial.
func (l ListenConfig) validateControlTLS() error {
	if !l.ControlTLS {
		if len(l.ControlNames) > 0 {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "config: listen.control_names is set but listen.control_tls is false (the names are the control certificate's)")
		}
		return nil
	}
	for _, n := range l.ControlNames {
		if !validCertName(n) {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "config: listen.control_names: %q is not a lower-case host name or IP address (no port, no brackets)", n)
		}
	}
	if len(controlCertNames(l)) == 0 {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "config: listen.control %q listens on every address: listen.control_names must name the hosts mcpd dials", l.Control)
	}
	return nil
}

// controlCertNames are the names the control API's certificate holds:
// listen.control's host (unless it is every address) and
// listen.control_names, without repeats.
func controlCertNames(l ListenConfig) []string { return certNames(l.Control, l.ControlNames) }

// proxyCertNames are the names the proxy listener's certificate holds
// (listen.proxy_tls without the owner's certificate).
func proxyCertNames(l ListenConfig) []string { return certNames(l.Proxy, l.ProxyNames) }

// certNames are a listener's host (unless it is every address) and the
// extra names, without repeats.
func certNames(listen string, extra []string) []string {
	var names []string
	seen := map[string]bool{}
	add := func(n string) {
		if n != "" && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	if host, _, err := net.SplitHostPort(listen); err == nil {
		if ip, err := netip.ParseAddr(host); err == nil {
			if !ip.IsUnspecified() {
				add(ip.Unmap().String())
			}
		} else if h, err := hostname.Bare(host); err == nil {
			add(h)
		}
	}
	for _, n := range extra {
		add(n)
	}
	return names
}

// validCertName reports whether n may be named by a listener's certificate
// as the config gives it: a lower-case host name or IP address, no port,
// no brackets.
func validCertName(n string) bool {
	h, err := hostname.Bare(n)
	return err == nil && h == n && !strings.HasPrefix(n, "[")
}

// validateProxyListener checks the proxy listener's TLS keys and the proxy
// URL browsers are told.
func (c *Config) validateProxyListener() error {
	bad := func(f string, a ...any) error {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "config: "+f, a...)
	}
	l := c.Listen
	owned := l.ProxyCertFile != "" || l.ProxyKeyFile != ""
	if !l.ProxyTLS {
		if len(l.ProxyNames) > 0 || owned {
			return bad("listen.proxy_names, proxy_cert_file and proxy_key_file are for listen.proxy_tls, which is false")
		}
	}
	if owned {
		if l.ProxyCertFile == "" || l.ProxyKeyFile == "" {
			return bad("listen.proxy_cert_file and listen.proxy_key_file go together")
		}
		if len(l.ProxyNames) > 0 {
			return bad("listen.proxy_names is for the deployment CA's certificate; the owner's certificate (listen.proxy_cert_file) names its own hosts")
		}
		for _, f := range []string{l.ProxyCertFile, l.ProxyKeyFile} {
			if _, err := os.Stat(expandHome(f)); err != nil {
				return bad("listen.proxy_cert_file or proxy_key_file: %s is not readable", f)
			}
		}
	}
	for _, n := range l.ProxyNames {
		if !validCertName(n) {
			return bad("listen.proxy_names: %q is not a lower-case host name or IP address (no port, no brackets)", n)
		}
	}
	if l.ProxyTLS && !owned && len(proxyCertNames(l)) == 0 {
		return bad("listen.proxy %q listens on every address: listen.proxy_names must name the hosts browsers dial (or give the owner's certificate)", l.Proxy)
	}
	scheme := "http://"
	if l.ProxyTLS {
		scheme = "https://"
	}
	if c.ProxyURL != "" {
		u, err := url.Parse(c.ProxyURL)
		if err != nil || u.Host == "" || u.User != nil || !strings.HasPrefix(c.ProxyURL, scheme) || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			if l.ProxyTLS {
				return bad("proxy_url must be an https:// URL (host and port only): listen.proxy_tls is on")
			}
			return bad("proxy_url must be an http:// URL (host and port only; the proxy speaks CONNECT), or https:// with listen.proxy_tls")
		}
	} else if l.ProxyNetwork {
		if host, _, err := net.SplitHostPort(l.Proxy); err == nil && unspecified(host) && (!l.ProxyTLS || owned) {
			return bad("listen.proxy %q listens on every address: set proxy_url to the address browsers on other machines dial", l.Proxy)
		}
	}
	if l.ProxyNetwork && c.Limits.ProxyAuthFailures < 1 {
		return bad("limits.proxy_auth_failures must be at least 1 when listen.proxy_network is on")
	}
	return nil
}

// unspecified reports whether a listen host is every address (empty, 0.0.0.0, ::).
func unspecified(host string) bool {
	if host == "" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsUnspecified()
}

// proxyURLOf is the proxy URL browsers are told by default (proxy_url
// empty): the scheme of listen.proxy_tls and the address bound, or, when
// that is every address, the first name of the proxy's certificate.
func proxyURLOf(l ListenConfig, bound net.Addr) string {
	scheme := "http://"
	if l.ProxyTLS {
		scheme = "https://"
	}
	host, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return scheme + bound.String()
	}
	if unspecified(host) {
		if names := proxyCertNames(l); len(names) > 0 && l.ProxyCertFile == "" {
			host = names[0]
		}
	}
	return scheme + net.JoinHostPort(host, port)
}

func expandHome(p string) string { return deploy.ExpandHome(p) }

// PolicyConfig feeds the owner's rules consulted at authorize.
type PolicyConfig struct {
	// AuthorizedDestinations are hosts (with their subdomains) added to the
	// owner's authorized sites at start-up, as if the owner had authorized
	// them (`proxyd owner authorize-site`). They stay authorized until the
	// owner removes them; a site not authorized asks the owner at its
	// first fill (P1).
	AuthorizedDestinations []string `yaml:"authorized_destinations"`
	// OwnerRules is always on: every authorize is decided by the owner's
	// rules kept in the vault database (sites, key scopes, card rules,
	// approvals). The key stays so older configs that set it still load;
	// false is refused.
	OwnerRules bool `yaml:"owner_rules"`
	// WireAmount names extra request fields holding the amount a site is
	// about to charge (policy/wireamount.go has the rules).
	WireAmount WireAmountConfig `yaml:"wire_amount"`
	// PaymentIntegrations adds to (or, by name, replaces entries of) the
	// shipped list of payment integrations (policy/processors.yaml): each
	// names its card frames and the https origins they post the card to.
	// A card grant releases to the filled frame's origin plus its
	// integration's posts_to, within the card's scope
	// (docs/payment-integrations.md). Validated strictly: https origins
	// only, no wildcard wider than one host label, nothing on a public
	// suffix.
	PaymentIntegrations []policy.Integration `yaml:"payment_integrations"`
}

// Integrations is the shipped list of payment integrations with the
// owner's entries merged over it.
func (p PolicyConfig) Integrations() (*policy.Integrations, error) {
	return policy.MergeIntegrations(p.PaymentIntegrations, hostname.Registrable)
}

// WireAmountConfig adds field names to the wire amount check.
type WireAmountConfig struct {
	DecimalFields   []string `yaml:"decimal_fields"`
	MinorUnitFields []string `yaml:"minor_unit_fields"`
}

// DashConfig says how the dashboard gets its certificate.
type DashConfig struct {
	// Domain, when set, gets a certificate from ACME (Let's Encrypt) for
	// this name; otherwise a local certificate for localhost and 127.0.0.1.
	Domain string `yaml:"domain"`
	Email  string `yaml:"email"`
}

func (n NotifyConfig) validate() error {
	bad := func(f string, a ...any) error {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "config: notify."+f, a...)
	}
	w := n.Webhook
	if w.URL == "" && w.SecretFile != "" {
		return bad("webhook.secret_file is set but webhook.url is empty")
	}
	if w.URL != "" {
		// The reason names what is wrong, never the URL: its query may
		// hold a receiver's token.
		u, err := url.Parse(w.URL)
		if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" || u.Opaque != "" {
			return bad("webhook.url must be an absolute https:// URL without user info or fragment")
		}
		switch u.Scheme {
		case "https":
		case "http":
			ip, err := netip.ParseAddr(u.Hostname())
			if u.Hostname() != "localhost" && (err != nil || !ip.IsLoopback()) {
				return bad("webhook.url must be https:// (http:// only to a loopback receiver)")
			}
		default:
			return bad("webhook.url must be https:// (http:// only to a loopback receiver)")
		}
		if w.SecretFile != "" {
			b, err := os.ReadFile(expandHome(w.SecretFile))
			if err != nil {
				return bad("webhook.secret_file is not readable")
			}
			if len(bytes.TrimSpace(b)) < 16 {
				return bad("webhook.secret_file must hold at least 16 bytes")
			}
		}
	}
	m := n.SMTP
	if m.Host == "" {
		if m.From != "" || len(m.To) > 0 || m.Username != "" || m.PasswordFile != "" {
			return bad("smtp.host is empty but other smtp keys are set")
		}
		return nil
	}
	if strings.ContainsAny(m.Host, " /:@\r\n") {
		return bad("smtp.host must be a host name or an IP address, without a port (use smtp.port)")
	}
	if m.Port < 1 || m.Port > 65535 {
		return bad("smtp.port must be 1 to 65535")
	}
	addr := func(key, a string) error {
		p, err := mail.ParseAddress(a)
		if err != nil || p.Address != a || p.Name != "" {
			return bad("smtp.%s: %q is not a bare email address", key, a)
		}
		return nil
	}
	if err := addr("from", m.From); err != nil {
		return err
	}
	if len(m.To) == 0 {
		return bad("smtp.to names no recipient")
	}
	for _, a := range m.To {
		if err := addr("to", a); err != nil {
			return err
		}
	}
	if (m.Username == "") != (m.PasswordFile == "") {
		return bad("smtp.username and smtp.password_file go together")
	}
	if m.PasswordFile != "" {
		if _, err := os.Stat(expandHome(m.PasswordFile)); err != nil {
			return bad("smtp.password_file is not readable")
		}
	}
	return nil
}
