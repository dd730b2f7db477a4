package proxyd

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/authz"
	"github.com/agentvault/agentvault/botauth"
	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/intercept"
	"github.com/agentvault/agentvault/internal/webtls"
	"github.com/agentvault/agentvault/owner/dashboard"
	"github.com/agentvault/agentvault/vault"
	"github.com/prometheus/client_golang/prometheus"
)

// The agent's identity on the wire (package botauth): proxyd keeps the
// signing keys sealed in the vault, signs requests to the sites the owner
// chose (intercept asks through intercept.RequestSigner), audits each
// signed request class, counts signatures and serves the key directory.

// BotAuthConfig is the bot_auth section. Its zero value signs nothing.
type BotAuthConfig struct {
	// Directory is where proxyd serves the agent's key directory
	// (/.well-known/http-message-signatures-directory): "dashboard" (a
	// public path on the dashboard listener), a host:port for a TLS
	// listener of its own, or "" (off: no request is signed).
	Directory string `yaml:"directory"`
	// AgentOrigin is the https origin sites fetch the directory from, sent
	// in every Signature-Agent header. Empty: the directory listener's own
	// (https://<dashboard.domain>, else https://<its listen address>).
	AgentOrigin string `yaml:"agent_origin"`
	// Window is how long a signature is valid (TAP's at most 8 minutes);
	// 0 is 5 minutes.
	Window time.Duration `yaml:"window"`
	// Sites are the sites signed for, besides those chosen with `proxyd
	// botauth enable`; none by default (an identity is a disclosure).
	Sites []BotAuthSite `yaml:"sites"`
}

// BotAuthSite is one chosen site: a host (with its subdomains) and the
// Visa TAP uses turned on for it ("browse", "pay").
type BotAuthSite struct {
	Host string   `yaml:"host"`
	TAP  []string `yaml:"tap"`
}

const (
	botAuthDirDashboard = "dashboard"
	// botAuthKeysBlob holds the keyring (private keys: sealed under the
	// master key like the MITM CA's); botAuthSitesBlob the sites the owner
	// chose on the command line.
	botAuthKeysBlob  = "botauth.keys"
	botAuthSitesBlob = "botauth.sites"
	// botAuthReload is how often proxyd reads the keyring and the sites
	// from the store: a rotation or a choice made with the CLI (or on
	// another replica) applies within it.
	botAuthReload = 3 * time.Second
	// botAuthDirectoryRoute is the directory's route, on the dashboard
	// listener (or one of its own). It is public: sites fetch it.
	botAuthDirectoryRoute = "GET " + botauth.DirectoryPath
)

func (c BotAuthConfig) window() time.Duration {
	if c.Window == 0 {
		return botauth.DefaultWindow
	}
	return c.Window
}

func (c BotAuthConfig) sites() []botauth.Site {
	out := make([]botauth.Site, 0, len(c.Sites))
	for _, s := range c.Sites {
		out = append(out, botauth.Site{Host: s.Host, TAP: s.TAP})
	}
	return out
}

func (c BotAuthConfig) validate(l ListenConfig) error {
	bad := func(f string, a ...any) error {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "config: bot_auth."+f, a...)
	}
	switch c.Directory {
	case "":
		if len(c.Sites) > 0 || c.AgentOrigin != "" {
			return bad("directory is empty, so nothing is signed: set it to dashboard or a host:port to sign for bot_auth.sites")
		}
	case botAuthDirDashboard:
		if l.Dashboard == "" {
			return bad("directory is dashboard but listen.dashboard is off")
		}
	default:
		if _, _, err := net.SplitHostPort(c.Directory); err != nil {
			return bad("directory must be dashboard or a host:port, got %q", c.Directory)
		}
	}
	if c.AgentOrigin != "" {
		if err := botauth.CheckAgentOrigin(strings.TrimSuffix(c.AgentOrigin, "/")); err != nil {
			return bad("agent_origin: %s", agentvault.ErrorMessage(err))
		}
	}
	if c.Window != 0 {
		if err := botauth.CheckWindow(c.Window); err != nil {
			return bad("window: %s", agentvault.ErrorMessage(err))
		}
	}
	if _, err := botauth.NewRules(c.sites()); err != nil {
		return bad("sites: %s", agentvault.ErrorMessage(err))
	}
	return nil
}

// botAuth is the running identity: the signer over the sealed keyring and
// the owner's rules, the audit of signed request classes and the metric.
type botAuth struct {
	cfg    BotAuthConfig
	vault  *vault.Vault
	signer *botauth.Signer
	log    *slog.Logger
	now    func() time.Time
	// agentAuthority is the agent origin's host[:port]: the directory
	// signs its responses only for it.
	agentAuthority string
	signed         map[[2]string]prometheus.Counter // by site class and tag

	mu      sync.Mutex
	classes map[signClass]*classCount
	dirL    net.Listener // the directory's own listener, when not the dashboard
	// localCA issues the own listener's certificate for a local name.
	localCA *webtls.LocalCA
}

// signClass is one audited class of signed requests: a session's requests
// to one chosen site under one tag.
type signClass struct{ session, site, tag string }

type classCount struct {
	mu         sync.Mutex
	org, actor string
	audited    bool
	n          int
}

// newBotAuthMetric registers the signature counter (every series at zero
// from the start). Its labels come from closed sets: never a host (P15).
func newBotAuthMetric(reg *prometheus.Registry) map[[2]string]prometheus.Counter {
	cv := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentvault_botauth_signed_requests_total",
		Help: "Requests proxyd signed with the agent's identity, by site class (identity, tap) and tag (web-bot-auth, agent-browser-auth, agent-payer-auth)."},
		[]string{"site_class", "tag"})
	reg.MustRegister(cv)
	out := map[[2]string]prometheus.Counter{}
	for _, c := range botauth.Classes {
		for _, t := range botauth.Tags {
			out[[2]string{c, t}] = cv.WithLabelValues(c, t)
		}
	}
	return out
}

// openBotAuth loads (or creates) the keyring and the owner's choices and
// binds the directory's own listener when it has one. With bot_auth off
// it does nothing: intercept then only refuses the agent's own signature
// fields.
func (m *Main) openBotAuth(ctx context.Context) error {
	signed := newBotAuthMetric(m.Metrics.Registry)
	c := m.Config.BotAuth
	if c.Directory == "" {
		return nil
	}
	now := m.Now
	if now == nil {
		now = time.Now
	}
	b := &botAuth{cfg: c, vault: m.Vault, log: m.Logger, now: now, signed: signed, classes: map[signClass]*classCount{}}
	origin := strings.TrimSuffix(c.AgentOrigin, "/")
	var servedAt net.Addr
	if c.Directory == botAuthDirDashboard {
		servedAt = m.dashL.Addr()
		if origin == "" && m.Config.Dashboard.Domain != "" {
			origin = "https://" + m.Config.Dashboard.Domain
		}
	} else {
		var err error
		l, err := net.Listen("tcp", c.Directory)
		if err != nil {
			return agentvault.Wrap(agentvault.CodeInternal, err, "cannot listen on %s (bot_auth.directory): %s", c.Directory, listenReason(err))
		}
		b.dirL, servedAt = l, l.Addr()
		if b.localCA, err = webtls.LoadOrCreateLocalCA(ctx, m.Vault, m.dataDir, now()); err != nil {
			b.close()
			return err
		}
	}
	if origin == "" {
		ap, err := netip.ParseAddrPort(servedAt.String())
		if err != nil || ap.Addr().IsUnspecified() {
			b.close()
			return agentvault.Errorf(agentvault.CodeInvalidInput, "config: bot_auth.agent_origin is needed: the directory listens on every address, so proxyd cannot tell which name sites reach it at")
		}
		origin = "https://" + ap.String()
	}
	u, _ := url.Parse(origin)
	b.agentAuthority = strings.ToLower(u.Host)
	keys, sites, err := loadBotAuth(ctx, m.Vault, now)
	if err != nil {
		b.close()
		return err
	}
	rules, err := botauth.NewRules(c.sites(), sites)
	if err != nil {
		b.close()
		return err
	}
	if b.signer, err = botauth.NewSigner(botauth.SignerConfig{AgentOrigin: origin, Window: c.window(), Now: now}, keys, rules); err != nil {
		b.close()
		return err
	}
	m.botAuth = b
	m.Broker.OnClose(b.sessionClosed)
	m.Logger.Info("bot auth on", slog.String("agent_origin", origin), slog.Int("sites", len(rules.Sites())), slog.String("key", keys.Active().ID()))
	return nil
}

// loadBotAuth reads the keyring (created and sealed at first use, once for
// every replica) and the sites chosen with the CLI.
func loadBotAuth(ctx context.Context, v *vault.Vault, now func() time.Time) (*botauth.Keyring, []botauth.Site, error) {
	data, err := v.OpenOrCreateBlob(ctx, botAuthKeysBlob, func() ([]byte, error) {
		kr, err := botauth.NewKeyring(now(), rand.Reader)
		if err != nil {
			return nil, err
		}
		return kr.InsecureEncode(), nil
	})
	if err != nil {
		return nil, nil, agentvault.Wrap(agentvault.ErrorCode(err), err, "open the agent's signing keys")
	}
	keys, err := botauth.ParseKeyring(data)
	clear(data)
	if err != nil {
		return nil, nil, err
	}
	sites, err := loadBotAuthSites(ctx, v)
	return keys, sites, err
}

func loadBotAuthSites(ctx context.Context, v *vault.Vault) ([]botauth.Site, error) {
	data, err := v.OpenBlob(ctx, botAuthSitesBlob)
	if agentvault.ErrorCode(err) == agentvault.CodeNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, agentvault.Wrap(agentvault.ErrorCode(err), err, "read the sites chosen for the agent's signatures")
	}
	var sites []botauth.Site
	if err := json.Unmarshal(data, &sites); err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "the stored bot auth sites are malformed")
	}
	return sites, nil
}

// signer is what intercept calls; nil when bot auth is off.
func (m *Main) botAuthSigner() intercept.RequestSigner {
	if m.botAuth == nil {
		return nil
	}
	return m.botAuth
}

// SignRequest signs a request for a chosen site (intercept.RequestSigner).
// The first request of each class (session, site, tag) is audited before
// its signature goes out; an audit failure refuses the request.
func (b *botAuth) SignRequest(ctx context.Context, a intercept.SignArgs) (http.Header, error) {
	s, ok, err := b.signer.Sign(botauth.Request{Host: a.Host, Authority: a.Authority, Path: a.Path, Payment: a.Payment})
	if err != nil || !ok {
		return nil, err
	}
	for _, tag := range s.Tags {
		if err := b.audit(ctx, a, s.Site, tag); err != nil {
			return nil, err
		}
	}
	for _, tag := range s.Tags {
		if c := b.signed[[2]string{s.Class, tag}]; c != nil {
			c.Inc()
		}
	}
	h := http.Header{}
	h.Set("Signature-Agent", s.Agent)
	h.Set("Signature-Input", s.Input)
	h.Set("Signature", s.Signature)
	return h, nil
}

// audit writes one record per signed request class, at its first request,
// and counts the rest (sessionClosed writes the count).
func (b *botAuth) audit(ctx context.Context, a intercept.SignArgs, site, tag string) error {
	k := signClass{session: a.Session, site: site, tag: tag}
	b.mu.Lock()
	c := b.classes[k]
	if c == nil {
		c = &classCount{org: a.Org, actor: a.KeyID}
		b.classes[k] = c
	}
	b.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.audited {
		if err := b.vault.AuditSign(ctx, vault.SignArgs{Org: a.Org, Destination: site, Session: a.Session, Actor: a.KeyID, Purpose: tag}); err != nil {
			return err
		}
		c.audited = true
	}
	c.n++
	return nil
}

// sessionClosed writes, for each class the session signed, how many
// requests it signed.
func (b *botAuth) sessionClosed(sess *broker.Session) {
	b.mu.Lock()
	var done []signClass
	for k := range b.classes {
		if k.session == sess.ID {
			done = append(done, k)
		}
	}
	counts := map[signClass]*classCount{}
	for _, k := range done {
		counts[k] = b.classes[k]
		delete(b.classes, k)
	}
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for k, c := range counts {
		c.mu.Lock()
		n, org, actor := c.n, c.org, c.actor
		c.mu.Unlock()
		if err := b.vault.AuditSign(ctx, vault.SignArgs{Org: org, Destination: k.site, Session: k.session, Actor: actor,
			Purpose: signCountPurpose(k.tag, n)}); err != nil {
			b.log.Warn("could not record how many requests a session signed", slog.String("session", k.session), slog.String("reason", agentvault.ErrorMessage(err)))
		}
	}
}

// signCountPurpose is the purpose of the audit record that closes a signed
// request class: its tag and how many requests the session signed under
// it (the record of its first request has the tag alone).
func signCountPurpose(tag string, n int) string { return fmt.Sprintf("%s: %d requests signed", tag, n) }

// parseSignPurpose reads a signing audit record's purpose: its tag, and
// the count when the record closes its class.
func parseSignPurpose(p string) (tag string, n int, counted bool) {
	tag, rest, ok := strings.Cut(p, ": ")
	if !ok {
		return p, 0, false
	}
	num, ok := strings.CutSuffix(rest, " requests signed")
	if !ok {
		return p, 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return p, 0, false
	}
	return tag, n, true
}

// reload reads the keyring and the CLI's sites again: a rotation or a
// choice made by `proxyd botauth` (or on another replica) applies here.
// A failed read keeps what is in use.
func (b *botAuth) reload(ctx context.Context) {
	keys, sites, err := loadBotAuth(ctx, b.vault, b.now)
	if err == nil {
		var rules botauth.Rules
		if rules, err = botauth.NewRules(b.configSites(), sites); err == nil {
			b.signer.SetKeys(keys)
			b.signer.SetRules(rules)
			return
		}
	}
	b.log.Warn("could not reload the agent's signing keys or sites; keeping the ones in use", slog.String("reason", agentvault.ErrorMessage(err)))
}

func (b *botAuth) configSites() []botauth.Site {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cfg.sites()
}

// setConfig applies a reloaded config's sites (the rest needs a restart).
func (b *botAuth) setConfig(c BotAuthConfig) {
	b.mu.Lock()
	b.cfg.Sites = c.Sites
	b.mu.Unlock()
}

// startBotAuth serves the directory's own listener (a loop destination
// for the proxy, P16) and reloads the keyring and the sites until ctx ends.
func (m *Main) startBotAuth(ctx context.Context) {
	if m.botAuth == nil {
		return
	}
	if m.botAuth.dirL != nil {
		m.Server.AddSelf(m.botAuth.dirL.Addr())
	}
	go m.botAuth.run(ctx, m)
}

// run reloads until ctx ends, and serves the directory's own listener.
func (b *botAuth) run(ctx context.Context, m *Main) {
	if b.dirL != nil {
		host := strings.Split(b.agentAuthority, ":")[0]
		if strings.HasPrefix(host, "[") {
			host = strings.Trim(strings.SplitN(b.agentAuthority, "]", 2)[0], "[")
		}
		tc := webtls.TLSConfig{DataDir: m.dataDir, LocalCA: b.localCA, Hosts: []string{host}, Logger: m.Logger}
		if !webtls.LocalRootCovers(host) {
			// A public name: its certificate from ACME, on this listener.
			tc.Domain, tc.Email = host, m.Config.Dashboard.Email
		}
		mux := http.NewServeMux()
		authz.MustLookup(authz.Dashboard, botAuthDirectoryRoute)
		mux.HandleFunc(botAuthDirectoryRoute, b.serveDirectory)
		go func() {
			if err := webtls.Serve(ctx, b.dirL, mux, tc); err != nil {
				m.Logger.Error("the key directory's listener stopped", slog.String("reason", agentvault.ErrorMessage(err)))
			}
		}()
	}
	t := time.NewTicker(botAuthReload)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b.reload(ctx)
		}
	}
}

func (b *botAuth) close() {
	if b.dirL != nil {
		_ = b.dirL.Close()
	}
}

// serveDirectory answers the key directory: the published keys, signed for
// the agent origin's authority (botauth.Directory).
func (b *botAuth) serveDirectory(w http.ResponseWriter, r *http.Request) {
	now := b.now()
	body, fields, err := botauth.Directory(b.signer.Keys().Published(now), r.Host, b.agentAuthority, now)
	if err != nil {
		http.Error(w, "the key directory is unavailable", http.StatusInternalServerError)
		return
	}
	for _, f := range fields {
		w.Header().Set(f.Name, f.Value)
	}
	w.Header().Set("Access-Control-Allow-Origin", "*")
	_, _ = w.Write(body)
}

// dashboardHandler is the dashboard with the directory's public route
// beside it. The route is always there (authz's table names it); it
// answers 404 unless bot_auth.directory is the dashboard.
func (m *Main) dashboardHandler() http.Handler {
	mux := http.NewServeMux()
	authz.MustLookup(authz.Dashboard, botAuthDirectoryRoute)
	mux.HandleFunc(botAuthDirectoryRoute, func(w http.ResponseWriter, r *http.Request) {
		if m.botAuth == nil || m.botAuth.dirL != nil {
			http.NotFound(w, r)
			return
		}
		m.botAuth.serveDirectory(w, r)
	})
	mux.Handle("/", m.dashH)
	return mux
}

// BotAuthKeys is the keyring in use (tests: the canary reads the key from
// the vault; this gives the ids); nil when bot auth is off.
func (m *Main) BotAuthKeys() *botauth.Keyring {
	if m.botAuth == nil {
		return nil
	}
	return m.botAuth.signer.Keys()
}

// BotAuthOrigin is the origin in Signature-Agent; "" when bot auth is off.
func (m *Main) BotAuthOrigin() string {
	if m.botAuth == nil {
		return ""
	}
	return m.botAuth.signer.AgentOrigin()
}

// botAuthOwner is the dashboard's signed requests page
// (dashboard.Signing): the same choices and rotation as `proxyd botauth`,
// through the same functions, applied to the running signer at once
// rather than at its next reload.
type botAuthOwner struct{ m *Main }

// signedClassesMax bounds the classes the page lists.
const signedClassesMax = 200

func (o botAuthOwner) configSites() []botauth.Site {
	if b := o.m.botAuth; b != nil {
		return b.configSites()
	}
	return o.m.Config.BotAuth.sites()
}

// applied makes the running signer read the keyring and the sites now.
func (o botAuthOwner) applied(ctx context.Context) {
	if b := o.m.botAuth; b != nil {
		b.reload(ctx)
	}
}

func (o botAuthOwner) SigningState(ctx context.Context) (dashboard.SigningState, error) {
	cfg := o.m.Config.BotAuth
	st := dashboard.SigningState{On: o.m.botAuth != nil, Window: cfg.window(), KeepOld: botauth.RetireAfter(cfg.window())}
	if st.On {
		st.DirectoryURL = o.m.botAuth.signer.AgentOrigin() + botauth.DirectoryPath
	}
	kr, err := readBotAuthKeys(ctx, o.m.Vault)
	if err != nil {
		return st, err
	}
	if kr != nil {
		for _, k := range kr.Published(o.now()) {
			st.Keys = append(st.Keys, dashboard.SigningKey{ID: k.ID(), Created: k.Created(), Retire: k.Retire()})
		}
	}
	owned, err := loadBotAuthSites(ctx, o.m.Vault)
	if err != nil {
		return st, err
	}
	cfgSites := o.configSites()
	rules, err := botauth.NewRules(cfgSites, owned)
	if err != nil {
		return st, err
	}
	in := func(list []botauth.Site, host string) bool {
		return slices.ContainsFunc(list, func(x botauth.Site) bool { n, err := botauth.NormalizeSite(x); return err == nil && n.Host == host })
	}
	for _, s := range rules.Sites() {
		st.Sites = append(st.Sites, dashboard.SignedSite{Host: s.Host, TAP: s.TAP, Config: in(cfgSites, s.Host), Owner: in(owned, s.Host)})
	}
	return st, nil
}

func (o botAuthOwner) now() time.Time {
	if o.m.Now != nil {
		return o.m.Now()
	}
	return time.Now()
}

func (o botAuthOwner) SignedClasses(ctx context.Context, since time.Time) ([]dashboard.SignedClass, error) {
	recs, err := o.m.Vault.Audit(ctx, vault.AuditFilter{Org: DefaultOrg, Action: vault.AuditSign, Since: since})
	if err != nil {
		return nil, err
	}
	var out []dashboard.SignedClass
	at := map[signClass]int{}
	for _, r := range recs {
		tag, n, counted := parseSignPurpose(r.Purpose)
		k := signClass{session: r.Session, site: r.Destination, tag: tag}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, dashboard.SignedClass{Session: r.Session, Site: r.Destination, Tag: tag, Key: r.Actor, First: r.Time})
		}
		if counted {
			out[i].Requests, out[i].Ended = n, true
		} else if r.Time.Before(out[i].First) {
			out[i].First = r.Time
		}
	}
	slices.SortStableFunc(out, func(a, b dashboard.SignedClass) int { return b.First.Compare(a.First) })
	if len(out) > signedClassesMax {
		out = out[:signedClassesMax]
	}
	return out, nil
}

func (o botAuthOwner) EnableSigning(ctx context.Context, host string, tap []string) (dashboard.SignedSite, error) {
	site, err := chooseBotAuthSite(ctx, o.m.Vault, botauth.Site{Host: host, TAP: tap})
	if err != nil {
		return dashboard.SignedSite{}, err
	}
	o.applied(ctx)
	// What the site gets: the owner's choice with the config's, if it
	// names the site too.
	rules, err := botauth.NewRules(o.configSites(), []botauth.Site{site})
	if err != nil {
		return dashboard.SignedSite{}, err
	}
	got, _ := rules.Match(site.Host)
	return dashboard.SignedSite{Host: got.Host, TAP: got.TAP, Owner: true}, nil
}

func (o botAuthOwner) DisableSigning(ctx context.Context, host string) error {
	_, err := dropBotAuthSite(ctx, o.m.Vault, o.configSites(), host)
	o.applied(ctx)
	return err
}

func (o botAuthOwner) RotateSigningKey(ctx context.Context) (dashboard.Rotation, error) {
	kr, err := rotateBotAuthKey(ctx, o.m.Vault, o.m.Config.BotAuth.window(), o.now())
	if err != nil {
		return dashboard.Rotation{}, err
	}
	o.applied(ctx)
	keys := kr.Keys()
	old := keys[len(keys)-2]
	return dashboard.Rotation{New: kr.Active().ID(), Old: old.ID(), OldRetire: old.Retire()}, nil
}

var _ dashboard.Signing = botAuthOwner{}
