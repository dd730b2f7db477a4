package proxyd

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/apps"
	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/credentials"
	"github.com/agentvault/agentvault/handoff"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/intercept"
	"github.com/agentvault/agentvault/internal/deploy"
	"github.com/agentvault/agentvault/internal/vaultcli"
	"github.com/agentvault/agentvault/internal/webtls"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/owner/dashboard"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/recipes"
	"github.com/agentvault/agentvault/store/postgres"
	"github.com/agentvault/agentvault/tokens"
	"github.com/agentvault/agentvault/vault"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Files under the data directory.
const (
	APIKeyFile       = deploy.APIKeyFile
	ControlTokenFile = deploy.ControlTokenFile
	// cleanStopFile marks a SQLite data directory whose last proxyd
	// stopped cleanly (its sessions' card uses are in the store).
	cleanStopFile = "clean-stop"
	CAFile        = deploy.CAFile
	// DefaultKeyID names the API key proxyd creates at first start, until
	// owner key management exists.
	DefaultKeyID = "key_default"
	// DefaultOrg is the vault org the default key works in (vaultcli's default).
	DefaultOrg = "default"
)

// Main is one proxyd process: Open, Run until the context ends, Close.
type Main struct {
	Config Config
	Logger *slog.Logger // nil: built from Config.Log on Stderr
	Stderr io.Writer

	// Set by Open.
	Vault  *vault.Vault
	Owner  *owner.Service
	CA     *intercept.CA
	Broker *broker.Broker
	// Recipes is the checkout recipe registry, in the same store.
	Recipes     *recipes.Registry
	Server      *intercept.Server
	Metrics     *intercept.Metrics
	ProxyAddr   net.Addr
	ControlAddr net.Addr
	AdminAddr   net.Addr
	// DashboardAddr is nil when the dashboard is off.
	DashboardAddr net.Addr
	// Credentials is the portal credentials service (seed 003) and
	// CredentialsAddr its credential-use listener (nil when off).
	Credentials     *credentials.Service
	CredentialsAddr net.Addr
	// Accounts is seed 004's signups and login writes (accounts.go).
	Accounts *owner.Accounts
	// Now, when set before Open, is the clock of one-time credential links
	// (tests inject one; nil is time.Now).
	Now          func() time.Time
	ControlToken string
	APIKey       string

	mu sync.Mutex
	// store is the process's one store handle (vault.db, or a Postgres
	// pool), shared by the vault, the owner service and the ledger, and
	// closed once, last (P22).
	store        appStore
	dashH        *dashboard.Handler
	dashCA       *webtls.LocalCA
	dashL        net.Listener
	dashCancel   context.CancelFunc
	dashDone     chan error
	credL        net.Listener
	handoffs     *handoff.Hub   // challenge hand-offs (handoff.go)
	notify       *notifications // the owner's notification channels (notify.go)
	apps         *apps.Registry // hosted sessions for the dashboard (apps.go)
	endedReports *endedReports  // final reports of ended proxy sessions (apps.go)
	// integrations is the shipped payment integrations merged with the
	// owner's (policy.payment_integrations).
	integrations *policy.Integrations
	credSrv      *http.Server
	secret       []byte
	proxyL       net.Listener
	controlSrv   *http.Server
	adminSrv     *http.Server
	controlL     net.Listener
	adminL       net.Listener
	serveErr     chan error
	closed       bool
	dataDir      string
	// cleanStopMark: the broker's sessions live in this process's store
	// alone (SQLite), so Close marks a clean stop (cleanStopFile).
	cleanStopMark bool
	apiKeyHash    [32]byte
	suffix        string
	configMu      sync.Mutex
	lock          *os.File // flock on <data>/proxyd.lock, held until Close
	// daemonMetrics are proxyd's own series on Metrics.Registry.
	daemonMetrics *daemonMetrics
	// botAuth signs for the sites the owner chose (botauth.go); nil: off.
	botAuth *botAuth
	// egressGate refuses new sessions while a required egress is missing
	// (egress.go).
	egressGate *egressGate
}

// pendingCount is the approvals_pending gauge's source.
func (m *Main) pendingCount(ctx context.Context) (int, error) {
	if m.Owner == nil {
		return 0, nil
	}
	ps, err := m.Owner.Pending(ctx)
	return len(ps), err
}

// idleTrimEvery is how many seconds without a proxy request proxyd waits
// before it gives memory back (and again after each as many).
const idleTrimEvery = 30

// NewMain returns a Main with the embedded defaults.
func NewMain() *Main { return &Main{Config: DefaultConfig(), Stderr: os.Stderr} }

// DataDir is the resolved data directory.
func (m *Main) DataDir() string { return expandHome(m.Config.DataDir) }

// Open validates the config, opens the vault and the CA, prepares the key
// and token files and binds the three listeners. Nothing is served yet.
func (m *Main) Open(ctx context.Context) (err error) {
	if err := m.Config.Validate(); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = m.Close()
		}
	}()
	m.dataDir = m.DataDir()
	if m.Logger == nil {
		m.Logger = newLogger(m.Config.Log, m.Stderr)
	}
	m.Metrics = intercept.NewMetrics()
	m.daemonMetrics = newDaemonMetrics(m.Metrics.Registry, m.pendingCount)
	m.Logger = slog.New(&observingHandler{next: m.Logger.Handler(), metrics: m.daemonMetrics})
	// Nothing is written before this process knows it can serve: another
	// instance on this data directory is named first, then every port is
	// bound, then the directory is locked; only then are the vault, the
	// key files and ca.pem touched.
	if err := checkNotRunning(m.dataDir); err != nil {
		return err
	}
	if err := m.listen(); err != nil {
		return err
	}
	if m.lock, err = lockDataDir(m.dataDir); err != nil {
		return err
	}
	st, err := openStore(ctx, m.Config)
	if err != nil {
		return err
	}
	m.store = st
	registerDurable(m.Metrics.Registry, st)
	v, err := vaultcli.OpenStore(ctx, m.dataDir, st)
	if err != nil {
		return err
	}
	m.Vault = v
	if m.CA, err = intercept.LoadOrCreateCA(ctx, v, nil); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(m.dataDir, CAFile), m.CA.CertPEM(), 0o644); err != nil {
		return err
	}
	secret, err := v.DeploymentSecret(ctx)
	if err != nil {
		return err
	}
	m.secret = secret
	m.suffix = tokens.Suffix(secret, DefaultKeyID)
	var roots []*x509.Certificate
	for _, p := range m.Config.TLS.ExtraRoots {
		certs, err := readPEMCerts(expandHome(p))
		if err != nil {
			return err
		}
		roots = append(roots, certs...)
	}
	if m.notify, err = m.openNotifications(roots); err != nil {
		return err
	}
	eng := policy.NewEngine(policy.Rates{}, hostname.Registrable)
	if m.Owner, err = owner.New(owner.Config{Store: st, Org: DefaultOrg, Logger: m.Logger,
		Engine: eng, Notifier: m.notify.router,
		DashboardURL: "https://" + m.Config.Listen.Dashboard + "/"}); err != nil {
		return err
	}
	if m.APIKey, err = loadOrCreateSecretFile(filepath.Join(m.dataDir, APIKeyFile), "avk_"); err != nil {
		return err
	}
	m.apiKeyHash = sha256.Sum256([]byte(m.APIKey))
	if err := m.registerDefaultKey(ctx); err != nil {
		return err
	}
	if m.ControlToken, err = loadOrCreateSecretFile(filepath.Join(m.dataDir, ControlTokenFile), "avc_"); err != nil {
		return err
	}
	// Deny by default (P1): every fill is decided by the owner's rules; a
	// site the owner has not authorized asks them first. The config's
	// authorized destinations are the owner's too.
	for _, h := range m.Config.Policy.AuthorizedDestinations {
		if err := m.Owner.AuthorizeSite(ctx, h, "config"); err != nil {
			return err
		}
	}
	// The recipe registry answers a submission within the control call's
	// time (mcpd gives each registry call 20 s and keeps polling the
	// screening up to 45 s in all).
	if m.Recipes, err = recipes.New(recipes.Config{Store: st, ScreenWait: recipeScreenWait}); err != nil {
		return err
	}
	l := m.Config.Limits
	integrations, err := m.Config.Policy.Integrations()
	if err != nil {
		return err
	}
	m.integrations = integrations
	// Deny by default (P1): every authorize, and every release on the wire,
	// is decided by the owner's rules (owner.Service, the broker's
	// policy.Authorizer). A decision that needs the owner queues an
	// approval and fails with approval_pending; the control API answers it
	// with 202 and the agent waits on /v1/waits/{id}.
	bc := broker.Config{Vault: vaultAdapter{v}, LookupKey: m.lookupKey, Authorizer: m.Owner, Policy: eng,
		WireAmount: policy.WireAmountConfig{DecimalFields: m.Config.Policy.WireAmount.DecimalFields,
			MinorUnitFields: m.Config.Policy.WireAmount.MinorUnitFields},
		GrantTTL: l.GrantTTL, SessionIdle: l.SessionIdle, SessionMaxAge: l.SessionMaxAge, MaxSessionsPerKey: l.MaxSessionsPerKey,
		PaymentOrigins: paymentOrigins(integrations),
		Limiter:        policy.NewRateLimiter(l.AuthorizeBurst, time.Minute/time.Duration(l.AuthorizePerMinute), nil),
		// A card request settles its claim when the site's answer arrives:
		// the lease outlasts the longest wait for one.
		ClaimLease: max(2*time.Minute, l.UpstreamTimeout+time.Minute),
	}
	bc.Store, bc.Notifier = sessionStore(st)
	// SQLite: one proxyd per file (the data directory's lock), so the
	// broker's cache is authoritative and card uses stay in memory.
	bc.SingleProcess = m.Config.Store.Driver != "postgres"
	if bc.SingleProcess {
		// Without the mark of a clean stop, card uses held in memory by
		// the last process are unknown.
		mark := filepath.Join(m.dataDir, cleanStopFile)
		_, err := os.Stat(mark)
		bc.UsesLost = err != nil
		_ = os.Remove(mark)
	}
	m.cleanStopMark = bc.SingleProcess && bc.Store != nil
	if m.Broker, err = broker.New(bc); err != nil {
		return err
	}
	m.Broker.OnOpen(func(*broker.Session) { m.daemonMetrics.sessions.Inc() })
	m.Broker.OnClose(func(*broker.Session) { m.daemonMetrics.sessions.Dec() })
	m.endedReports = newEndedReports(m.Now)
	m.Broker.OnClose(func(s *broker.Session) { m.endedReports.add(s.ID, s.Key.ID, s.Report()) })
	// The holder's Connected apps choices outlive a restart (a sealed
	// blob): without them every hosted connection would be refused until
	// the holder chose again.
	if err := m.appRegistry().KeepChoices(ctx, vaultChoices{open: v.OpenBlob, seal: v.SealBlob}); err != nil {
		return err
	}
	var resolver intercept.Resolver = net.DefaultResolver
	if len(m.Config.UnsafeTestHosts) > 0 {
		resolver = testHostsResolver(m.Config.UnsafeTestHosts)
		m.Logger.Warn("unsafe_test_hosts is set: named hosts resolve to fixed local addresses (tests only)")
	}
	resolver = namingResolver{next: resolver, log: m.Logger}
	if err := m.openBotAuth(ctx); err != nil {
		return err
	}
	upstreamProxy, err := m.Config.Egress.upstreamProxy()
	if err != nil {
		return err
	}
	if upstreamProxy != nil {
		m.Logger.Info("upstream connections go through the owner's egress proxy", slog.Any("upstream_proxy", upstreamProxy))
	}
	m.Server, err = intercept.NewServer(intercept.Config{
		CA: m.CA, Broker: m.Broker, Logger: m.Logger, Metrics: m.Metrics, Signer: m.botAuthSigner(),
		UnsafeAllowPrivateRanges: m.Config.UnsafeAllowPrivateRanges,
		UpstreamProxy:            upstreamProxy,
		Resolver:                 resolver,
		ExtraRoots:               roots,
		AuthGuard:                proxyAuthGuard(m.Config),
		EgressStrict:             m.Config.Egress.Mode == "strict",
		AllowedHosts:             m.Config.Egress.Allow,
		MaxBodyBytes:             l.MaxBodyBytes, MaxTunnels: l.MaxTunnels,
		ReadHeaderTimeout: l.ReadHeaderTimeout, IdleTimeout: l.IdleTimeout, UpstreamTimeout: l.UpstreamTimeout,
	})
	if err != nil {
		return err
	}
	var probe func(context.Context, time.Duration) error
	if upstreamProxy != nil {
		probe = m.Server.ProbeEgress
	}
	m.egressGate = newEgressGate(m.Config.Egress.Required, probe, m.Logger)
	if err := m.openCredentials(ctx, st, v); err != nil {
		return err
	}
	if m.Accounts, err = owner.NewAccounts(owner.AccountsConfig{Service: m.Owner, Store: st, Vault: v, Authenticate: m.authenticateKey}); err != nil {
		return err
	}
	if m.credL != nil {
		m.Server.AddSelf(m.CredentialsAddr)
	}
	if m.dashL != nil {
		liveCVV := func(ctx context.Context, a owner.Approval, cvv vault.Secret) error {
			return m.Broker.SetLiveValue(a.Session, a.CardID, vault.FieldCVV, cvv)
		}
		if m.dashH, err = dashboard.New(dashboard.Config{Service: m.Owner, Vault: v, Logger: m.Logger, LiveCVV: liveCVV,
			Recipes: m.Recipes, Credentials: m.Credentials, OnSignInFailed: m.daemonMetrics.signInFailures.Inc, Handoffs: m.handoffHub(),
			Notifications: m.notify, Apps: m.appRegistry(), Signing: botAuthOwner{m}}); err != nil {
			return err
		}
		m.DashboardAddr = m.dashL.Addr()
		m.Server.AddSelf(m.DashboardAddr)
		if m.Config.Dashboard.Domain == "" {
			if m.dashCA, err = webtls.LoadOrCreateLocalCA(ctx, v, m.dataDir, time.Now()); err != nil {
				return err
			}
		}
	}
	pl, err := proxyListener(m.proxyL, m.Config.Listen, m.CA)
	if err != nil {
		return err
	}
	m.proxyL = pl
	if m.Config.Listen.ProxyNetwork && !m.Config.Listen.ProxyTLS {
		m.Logger.Warn("listen.proxy faces the network without listen.proxy_tls: each session's proxy credentials cross it in clear; keep it on a network you trust")
	}
	m.ProxyAddr, m.ControlAddr, m.AdminAddr = m.proxyL.Addr(), m.controlL.Addr(), m.adminL.Addr()
	// Every listener of this process is a loop destination (P16).
	m.Server.AddSelf(m.ControlAddr)
	m.Server.AddSelf(m.AdminAddr)
	proxyURL := m.Config.ProxyURL
	if proxyURL == "" {
		proxyURL = proxyURLOf(m.Config.Listen, m.ProxyAddr)
	}
	m.controlSrv = &http.Server{
		Handler: control.NewHandler(&controlService{broker: m.Broker, vault: vaultAdapter{v}, ca: m.CA, owner: m.Owner, recipes: m.Recipes, proxyURL: proxyURL,
			creds: m.credentialAPI(), metrics: m.daemonMetrics, accounts: m.Accounts, HandoffService: m.handoffHub(), apps: m.appRegistry(), ended: m.endedReports,
			emails: m.notify.emailsOwner, integrations: m.integrations, egress: m.Server, egressGate: m.egressGate},
			m.ControlToken, m.Logger),
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(m.Logger.Handler(), slog.LevelDebug),
	}
	if m.Config.Listen.ControlTLS {
		cc, err := newCALeafCert(m.CA, controlCertNames(m.Config.Listen), nil)
		if err != nil {
			return err
		}
		m.controlSrv.TLSConfig = cc.tlsConfig()
	}
	admin := http.NewServeMux()
	admin.Handle("GET /metrics", promhttp.HandlerFor(m.Metrics.Registry, promhttp.HandlerOpts{}))
	// The PID lets a supervisor (scripts/run.sh) tell its own proxyd from
	// another instance already answering on the same port.
	admin.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "ok pid=%d\n", os.Getpid())
	})
	m.adminSrv = &http.Server{Handler: admin, ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: slog.NewLogLogger(m.Logger.Handler(), slog.LevelDebug)}
	return nil
}

// memoryReleaser is a store that can give back what it holds for reuse
// (SQLite: idle connections and its C heap's freed regions); a Postgres
// store keeps its pool. TestEmbeddedStoreReleasesMemory checks that the
// embedded store is one.
type memoryReleaser interface{ ReleaseMemory() bool }

func (m *Main) releaseStoreMemory() {
	if r, ok := m.store.(memoryReleaser); ok {
		r.ReleaseMemory()
	}
}

// appStore is what proxyd keeps in its one store: the vault's records,
// the owner's (incl. the ledger and agents' signup requests), the recipe
// registry and portal credentials. SQLite and Postgres hold all of it, so
// no feature depends on the driver.
type appStore interface {
	vault.Store
	owner.Store
	owner.SignupRequestStore
	recipes.Store
	credentials.Store
}

// openStore opens the store c names, once per process: SQLite in c's
// data directory (vaultcli's checks for a missing key file first), or
// Postgres. `proxyd run` (Main.Open) and every command that reads or
// writes the owner's or the vault's state (cliStore) open it here and
// nowhere else. A Postgres error names the store (postgres.Describe),
// never the DSN.
func openStore(ctx context.Context, c Config) (appStore, error) {
	switch c.Store.Driver {
	case "postgres":
		st, err := postgres.Open(ctx, c.Store.DSN)
		if err != nil {
			return nil, agentvault.Wrap(agentvault.ErrorCode(err), err, "%s: %s", postgres.Describe(c.Store.DSN), agentvault.ErrorMessage(err))
		}
		return st, nil
	default:
		st, err := vaultcli.OpenSQLite(expandHome(c.DataDir))
		if err != nil {
			return nil, err
		}
		return st, nil
	}
}

// sessionStore is where the broker keeps sessions and grants: the
// store's tables, so every replica on one Postgres serves every session
// (LISTEN/NOTIFY tells the others what changed) and a restarted proxyd on
// SQLite keeps its sessions (one process: events stay in it).
func sessionStore(st appStore) (broker.SessionStore, broker.Notifier) {
	ss, ok := st.(broker.SessionStore)
	if !ok {
		return nil, nil
	}
	if pg, ok := st.(*postgres.Store); ok {
		return ss, pg.Notifier()
	}
	return ss, &broker.LocalNotifier{}
}

// Routes lists every route this process serves on the dashboard and on the
// control API (the credential-use listener's included), each registered
// through package authz: the test that holds them against authz's table
// reads them here.
func (m *Main) Routes() (dash, ctl []string) {
	if m.dashH != nil {
		dash = append(m.dashH.Routes(), botAuthDirectoryRoute)
	}
	if m.controlSrv != nil {
		ctl = control.Routes(m.controlSrv.Handler)
	}
	if m.credSrv != nil {
		ctl = append(ctl, credentialUseRoute)
	}
	return dash, ctl
}

// registerDefaultKey records the api-key file's key in the owner store as
// DefaultKeyID (its hash only, every card and login), so the owner sees it in
// `proxyd owner keys` and on the dashboard and can revoke it. A key already
// registered keeps its state: a revocation survives restarts.
func (m *Main) registerDefaultKey(ctx context.Context) error {
	_, err := m.Owner.RegisterFileKey(ctx, DefaultKeyID, "default (api-key file)", m.APIKey,
		owner.Scope{AllCards: true, AllLogins: true})
	return err
}

// paymentOrigins lists the origins a card frame's payment integration
// posts the card to, from the shipped list merged with the owner's
// (policy.payment_integrations): the grant of a card filled in that frame
// covers them too (docs/payment-integrations.md).
func paymentOrigins(list *policy.Integrations) func(frameURL string) []hostname.Origin {
	return func(frameURL string) []hostname.Origin {
		in, ok := list.Match(frameURL)
		if !ok || in.ClientSideEncryption {
			return nil
		}
		var out []hostname.Origin
		for _, o := range in.PostsTo {
			if d, err := hostname.Parse(strings.TrimPrefix(o, "https://"), 443); err == nil {
				out = append(out, d)
			}
		}
		return out
	}
}

// authenticateKey reads an agent's key: the api-key file's key, or one
// the owner created.
func (m *Main) authenticateKey(ctx context.Context, key string) (owner.APIKey, error) {
	h := sha256.Sum256([]byte(key))
	if subtle.ConstantTimeCompare(h[:], m.apiKeyHash[:]) == 1 {
		return m.Owner.AuthenticateFileKey(ctx, DefaultKeyID, key)
	}
	return m.Owner.AuthenticateKey(ctx, key)
}

// lookupKey accepts the default API key (constant-time against the file,
// then checked in the owner store like the keys the owner created with
// `proxyd owner create-key`, so a revocation applies), each key with its own
// token suffix.
func (m *Main) lookupKey(ctx context.Context, key string) (broker.APIKey, error) {
	k, err := m.authenticateKey(ctx, key)
	if err != nil {
		return broker.APIKey{}, err
	}
	return broker.APIKey{ID: k.ID, Org: m.Owner.Org(), Suffix: tokens.Suffix(m.secret, k.ID), Scope: k.Scope.Items()}, nil
}

// Run serves until ctx ends, then shuts down gracefully.
func (m *Main) Run(ctx context.Context) error {
	if m.Server == nil {
		if err := m.Open(ctx); err != nil {
			return err
		}
	}
	m.serveErr = make(chan error, 4)
	sweepCtx, stopSweep := context.WithCancel(ctx)
	defer stopSweep()
	// Other replicas' session ends, grant changes and recipients (P10,
	// P21), listened to before anything is served.
	listening := make(chan struct{})
	go m.Broker.Listen(sweepCtx, listening)
	select {
	case <-listening:
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		// The broker checks the store before each release until it listens.
		m.Broker.HandleEvent(broker.Event{Type: broker.EventDisconnected})
		m.Logger.Warn("not listening to the other replicas yet; checking the store before each release")
	}
	go func() {
		// Idle and aged-out proxy sessions end within a second (P21).
		t := time.NewTicker(time.Second)
		defer t.Stop()
		// Every idleTrimEvery the owner's expired approvals and staged
		// seeds are swept, and then a proxy that took no CONNECT and no
		// request since the last time gives back what the last load left
		// it (idle upstream connections, freed heap, the code it ran, the
		// C heap of SQLite connections that have closed): the idle
		// footprint after a load is the one after start-up. The sweep
		// comes first on purpose: on a timer of its own it ran as often
		// and at nearly the same moment, before or after the trim as the
		// scheduler had it, and its SQL brought back 4 MiB of code pages
		// the trim had just given back (RSS between trims 15 or 19 MiB).
		// Both run off this loop (a slow store must not hold the session
		// sweep), one round at a time.
		var ticks int
		served := m.Server.Served()
		var busy atomic.Bool
		for {
			select {
			case <-sweepCtx.Done():
				return
			case <-t.C:
				m.Broker.Sweep()
				if ticks++; ticks%idleTrimEvery != 0 || busy.Load() {
					continue
				}
				now := m.Server.Served()
				idle := now == served
				served = now
				busy.Store(true)
				go func() {
					defer busy.Store(false)
					m.Owner.Sweep(sweepCtx)
					if idle {
						m.Server.CloseIdleUpstream()
						debug.FreeOSMemory()
						m.releaseStoreMemory()
						trimCodePages()
					}
				}()
			}
		}
	}()
	if m.dashL != nil {
		dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		m.dashCancel, m.dashDone = cancel, make(chan error, 1)
		tc := webtls.TLSConfig{Domain: m.Config.Dashboard.Domain, Email: m.Config.Dashboard.Email, DataDir: m.dataDir,
			LocalCA: m.dashCA, Hosts: dashboardHosts(m.Config.Listen.Dashboard), Logger: m.Logger}
		go func() { m.dashDone <- webtls.Serve(dctx, m.dashL, m.dashboardHandler(), tc) }()
	}
	m.startBotAuth(sweepCtx)
	go func() { m.serveErr <- m.Server.Serve(m.proxyL) }()
	go func() { m.serveErr <- serveHTTP(m.controlSrv, m.controlL) }()
	go func() { m.serveErr <- serveHTTP(m.adminSrv, m.adminL) }()
	if m.credSrv != nil {
		go func() { m.serveErr <- serveHTTP(m.credSrv, m.credL) }()
	}
	m.configMu.Lock()
	egress := m.Config.Egress.Mode
	m.configMu.Unlock()
	// Start-up's garbage (migrations, config, the CA) goes back to the OS
	// now rather than when the scavenger gets to it: the idle footprint.
	debug.FreeOSMemory()
	m.releaseStoreMemory()
	trimCodePages()
	m.Logger.Info("proxyd listening", slog.String("proxy", m.ProxyAddr.String()),
		slog.Bool("proxy_network", m.Config.Listen.ProxyNetwork), slog.Bool("proxy_tls", m.Config.Listen.ProxyTLS),
		slog.String("control", m.ControlAddr.String()), slog.Bool("control_tls", m.Config.Listen.ControlTLS), slog.String("admin", m.AdminAddr.String()),
		slog.String("egress", egress), slog.Bool("unsafe_allow_private_ranges", m.Config.UnsafeAllowPrivateRanges))
	var err error
	reason := "signal"
	select {
	case <-ctx.Done():
	case err = <-m.serveErr:
		reason = "listener failed"
	}
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		m.Logger.Info("proxyd stopped", slog.String("reason", reason))
	}
	return err
}

// dashboardHosts are the names the local dashboard certificate covers:
// localhost and the loopback addresses, plus the listen address's host
// when it is another one (a LAN address the owner browses to).
func dashboardHosts(listen string) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if h, _, err := net.SplitHostPort(listen); err == nil && h != "" && h != "localhost" && h != "127.0.0.1" && h != "::1" {
		if ip, err := netip.ParseAddr(h); err != nil || !ip.IsUnspecified() {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// serveHTTP serves s on l, over TLS when s has a TLS config (the control
// API with listen.control_tls: a plain HTTP request there gets the
// server's 400, never the API).
func serveHTTP(s *http.Server, l net.Listener) error {
	serve := s.Serve
	if s.TLSConfig != nil {
		serve = func(l net.Listener) error { return s.ServeTLS(l, "", "") }
	}
	if err := serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Close stops the listeners, lets in-flight requests finish (up to 10 s),
// ends every session (wiping released values) and closes the vault.
func (m *Main) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if m.Server != nil {
		_ = m.Server.Shutdown(ctx)
	}
	for _, s := range []*http.Server{m.controlSrv, m.adminSrv, m.credSrv} {
		if s != nil {
			_ = s.Shutdown(ctx)
		}
	}
	if m.dashCancel != nil {
		m.dashCancel()
		<-m.dashDone
	}
	for _, l := range []net.Listener{m.proxyL, m.controlL, m.adminL, m.dashL, m.credL} {
		if l != nil {
			_ = l.Close()
		}
	}
	if m.botAuth != nil {
		m.botAuth.close()
	}
	if m.Broker != nil {
		m.Broker.CloseAll()
		if m.cleanStopMark {
			_ = os.WriteFile(filepath.Join(m.dataDir, cleanStopFile), nil, 0o600)
		}
	}
	if m.Recipes != nil {
		m.Recipes.Close() // screenings in flight write to the store
	}
	var err error
	if m.store != nil {
		err = m.store.Close()
	}
	// The lock goes last: nothing of this process touches the data
	// directory after it.
	if m.lock != nil {
		_ = m.lock.Close()
	}
	return err
}

// Reload re-reads the config file and applies what can change at run time
// (the egress rule). A config that does not load or validate changes
// nothing (P17).
func (m *Main) Reload(path string) error {
	c, err := LoadConfig(path)
	if err != nil {
		m.Logger.Warn("config reload refused; keeping the running config", slog.String("reason", agentvault.ErrorMessage(err)))
		return err
	}
	m.configMu.Lock()
	defer m.configMu.Unlock()
	m.Config.Egress = c.Egress
	m.Server.SetEgress(c.Egress.Mode == "strict", c.Egress.Allow)
	m.egressGate.setRequired(c.Egress.Required)
	if m.botAuth != nil {
		m.botAuth.setConfig(c.BotAuth) // the sites; the rest needs a restart
	}
	m.Logger.Info("config reloaded", slog.String("egress", c.Egress.Mode))
	return nil
}

// EgressMode is the running egress mode (it changes on Reload).
func (m *Main) EgressMode() string {
	m.configMu.Lock()
	defer m.configMu.Unlock()
	return m.Config.Egress.Mode
}

type vaultAdapter struct{ v *vault.Vault }

func (a vaultAdapter) List(ctx context.Context, org string) ([]vault.Item, error) {
	return a.v.List(ctx, org)
}

func (a vaultAdapter) GetByLabel(ctx context.Context, org string, k vault.Kind, label string) (vault.Item, error) {
	return a.v.GetByLabel(ctx, org, k, label)
}

func (a vaultAdapter) Release(ctx context.Context, r broker.ReleaseArgs) (vault.Secret, error) {
	return a.v.Release(ctx, vault.ReleaseArgs{Org: r.Org, ItemID: r.ItemID, Field: r.Field,
		Destination: r.Destination, Session: r.Session, Actor: r.Actor, Purpose: r.Purpose})
}

// AuditUse audits a value the vault does not store (a live CVV) before
// the proxy uses it.
func (a vaultAdapter) AuditUse(ctx context.Context, r broker.ReleaseArgs, v vault.Secret) error {
	return a.v.AuditUse(ctx, vault.ReleaseArgs{Org: r.Org, ItemID: r.ItemID, Field: r.Field,
		Destination: r.Destination, Session: r.Session, Actor: r.Actor, Purpose: r.Purpose}, v)
}

// Recipients reads from the audit log which hosts each value was sent to
// (releases on the wire), so scrubbing after a restart still covers every
// host that ever received a value (P10).
func (a vaultAdapter) Recipients(ctx context.Context, org string) ([]broker.Recipient, error) {
	var out []broker.Recipient
	seen := map[string]bool{}
	items := map[string]vault.Item{}
	var after int64
	for {
		recs, err := a.v.Audit(ctx, vault.AuditFilter{Org: org, Action: vault.AuditRelease, AfterSeq: after, Limit: 5000})
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			after = max(after, r.Seq)
			if r.Purpose != broker.PurposeSubstitute || r.Destination == "" {
				continue
			}
			k := r.ItemID + "\x00" + string(r.Field) + "\x00" + r.Destination
			if seen[k] {
				continue
			}
			seen[k] = true
			it, ok := items[r.ItemID]
			if !ok {
				if it, err = a.v.Get(ctx, org, r.ItemID); err != nil {
					continue // removed since: nothing left to scrub with
				}
				items[r.ItemID] = it
			}
			out = append(out, broker.Recipient{Item: it, Field: r.Field, Host: r.Destination})
		}
		if len(recs) < 5000 {
			return out, nil
		}
	}
}

var (
	_ broker.RecipientLister = vaultAdapter{}
	_ broker.Vault           = vaultAdapter{}
	_ broker.UseAuditor      = vaultAdapter{}
)

func newLogger(c LogConfig, w io.Writer) *slog.Logger {
	if w == nil {
		w = os.Stderr
	}
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: lvl}
	if c.Format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// loadOrCreateSecretFile reads a credential file, creating it (0600, random
// 32 bytes hex with prefix) when missing. A file readable by others is
// refused rather than used.
func loadOrCreateSecretFile(path, prefix string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		st, serr := os.Stat(path)
		if serr == nil && st.Mode().Perm()&0o077 != 0 {
			return "", agentvault.Errorf(agentvault.CodeInvalidInput, "%s is readable by other users; chmod 600 it", filepath.Base(path))
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", agentvault.Errorf(agentvault.CodeInvalidInput, "%s is empty", filepath.Base(path))
		}
		return s, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", agentvault.Wrap(agentvault.CodeInternal, err, "cannot read %s", filepath.Base(path))
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", agentvault.Wrap(agentvault.CodeInternal, err, "random source failed")
	}
	s := prefix + hex.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", agentvault.Wrap(agentvault.CodeInternal, err, "cannot create %s", filepath.Base(path))
	}
	defer f.Close()
	if _, err := io.WriteString(f, s+"\n"); err != nil {
		return "", agentvault.Wrap(agentvault.CodeInternal, err, "cannot write %s", filepath.Base(path))
	}
	return s, f.Sync()
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "cannot write %s", filepath.Base(path))
	}
	if err := os.Rename(tmp, path); err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "cannot write %s", filepath.Base(path))
	}
	return nil
}

func readPEMCerts(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInvalidInput, err, "cannot read %s", filepath.Base(path))
	}
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, agentvault.Wrap(agentvault.CodeInvalidInput, err, "%s holds a bad certificate", filepath.Base(path))
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "%s holds no certificate", filepath.Base(path))
	}
	return out, nil
}

// testHostsResolver answers unsafe_test_hosts from its table and every other
// name from the system resolver.
type testHostsResolver map[string]string

func (h testHostsResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if n, err := hostname.Bare(host); err == nil {
		if ip, ok := h[n]; ok {
			return []netip.Addr{netip.MustParseAddr(ip)}, nil
		}
	}
	return net.DefaultResolver.LookupNetIP(ctx, network, host)
}

var _ intercept.Resolver = testHostsResolver(nil)

// namingResolver logs the name a lookup failed for: the proxy's refusal
// says only "destination does not resolve", and the operator needs the
// host (a typo, a name only unsafe_test_hosts knows) to fix it. A host
// name is logged like the canonical request line does; it is never a
// metric label.
type namingResolver struct {
	next intercept.Resolver
	log  *slog.Logger
}

func (r namingResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	ips, err := r.next.LookupNetIP(ctx, network, host)
	if err != nil {
		reason := err.Error()
		var de *net.DNSError
		if errors.As(err, &de) {
			reason = de.Err
			if de.IsNotFound {
				reason = "no such host"
			}
		}
		hint := ""
		if strings.HasSuffix(strings.TrimSuffix(host, "."), ".test") || strings.HasSuffix(strings.TrimSuffix(host, "."), ".localhost") {
			hint = "a local test name resolves only when unsafe_test_hosts names it (docs/walkthrough.md: a site of your own on this machine; scripts/testsite --configure writes them for the test shop)"
		}
		r.log.Warn("destination does not resolve", slog.String("host", host), slog.String("reason", reason), slog.String("hint", hint))
	}
	return ips, err
}
