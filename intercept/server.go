package intercept

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/vault"
	"github.com/elazarl/goproxy"
	"golang.org/x/net/http2"
)

// Config is the proxy's configuration. Zero values take the defaults noted.
type Config struct {
	CA      *CA
	Broker  *broker.Broker // sessions, grants and every release decision
	Logger  *slog.Logger   // nil: discard
	Metrics *Metrics       // nil: none
	// Signer signs requests for the sites the owner chose (sign.go).
	Signer RequestSigner

	// UnsafeAllowPrivateRanges lets upstreams be on loopback or private
	// addresses. Only for tests and local development (P3).
	UnsafeAllowPrivateRanges bool
	// ExtraRoots are trusted for upstream TLS on top of the system roots (P5).
	ExtraRoots []*x509.Certificate
	// AuthGuard, when set, limits wrong proxy credentials per client (a
	// proxy listener that faces a network); nil: no limit.
	AuthGuard AuthGuard
	// EgressStrict refuses every CONNECT to a host outside AllowedHosts (P1).
	EgressStrict bool
	AllowedHosts []string

	MaxBodyBytes      int64         // default 10 MiB
	MaxTunnels        int           // default 512
	ReadHeaderTimeout time.Duration // default 10s
	IdleTimeout       time.Duration // default 90s
	UpstreamTimeout   time.Duration // default 60s (to response headers)
	Resolver          Resolver      // default net.DefaultResolver
	// UpstreamProxy, when set, carries every connection to a site
	// (residential egress); destinations are vetted before it (P3).
	UpstreamProxy *UpstreamProxy
}

// AuthGuard slows down guessing of proxy credentials: proxyd hands the
// proxy package failguard's rule, keyed by client.
type AuthGuard interface {
	// Wait is how long the client at remoteAddr (host:port) must still
	// wait before a credential of its is checked (0: now).
	Wait(remoteAddr string) time.Duration
	// Failed counts a wrong credential from the client at remoteAddr.
	Failed(remoteAddr string)
}

// Server is the MITM proxy.
type Server struct {
	cfg      Config
	log      *slog.Logger
	metrics  *Metrics
	scrubHit func(vault.Kind) // metrics.scrub, bound once: not per response
	ca       *CA
	broker   *broker.Broker
	caches   sync.Map // *broker.Session → *sessionCache
	lost     sync.Map // session ID → struct{}: its egress dropped a request (egress.go)
	dialer   *Dialer
	upstream *http.Transport
	gp       *goproxy.ProxyHttpServer
	h2       *http2.Server
	http     *http.Server

	egressMu sync.RWMutex
	tunnels  atomic.Int64
	closing  atomic.Bool
	served   atomic.Uint64 // CONNECTs and requests taken (Served)
	mu       sync.Mutex
	live     map[*tunnel]struct{}
	tunnelWG sync.WaitGroup
}

// tunnel is one MITM'd CONNECT.
type tunnel struct {
	sess *broker.Session
	dest Destination
	conn net.Conn
	// authority is dest as the upstream request's URL host names it,
	// formed once for all the tunnel's requests (upstreamAuthority).
	authority string

	mu     sync.Mutex
	active bool
	// host is the last Host value seen to normalise to dest: a browser
	// sends the same one on every request of a tunnel, and normalising
	// (IDNA, IP forms) is a pure function of it, so an equal string needs
	// no second pass.
	host atomic.Pointer[string]
	// reqLog is the handler of the tunnel's request lines (logHandler),
	// made by its first request that logs.
	reqLog atomic.Pointer[slog.Handler]
}

// NewServer builds the proxy from cfg.
func NewServer(cfg Config) (*Server, error) {
	if cfg.CA == nil || cfg.Broker == nil {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "proxy needs a CA and a session table")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 10 << 20
	}
	if cfg.MaxTunnels <= 0 {
		cfg.MaxTunnels = 512
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = 10 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 90 * time.Second
	}
	if cfg.UpstreamTimeout <= 0 {
		cfg.UpstreamTimeout = 60 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	for _, c := range cfg.ExtraRoots {
		roots.AddCert(c)
	}
	s := &Server{
		cfg: cfg, log: log, metrics: cfg.Metrics, ca: cfg.CA, broker: cfg.Broker,
		dialer: &Dialer{UnsafeAllowPrivateRanges: cfg.UnsafeAllowPrivateRanges, Resolver: cfg.Resolver, Upstream: cfg.UpstreamProxy},
		live:   map[*tunnel]struct{}{},
	}
	s.scrubHit = s.metrics.scrub
	s.ca.metrics = cfg.Metrics
	cfg.Broker.OnClose(func(sess *broker.Session) {
		s.caches.Delete(sess)
		s.lost.Delete(sess.ID)
	})
	// Our own transport (P5): verified TLS against system + extra roots, no
	// proxy from the environment, every dial through the vetting dialer (P3).
	s.upstream = &http.Transport{
		Proxy:                 nil,
		DialContext:           s.dialer.DialContext,
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: cfg.UpstreamTimeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
	s.h2 = &http2.Server{IdleTimeout: cfg.IdleTimeout, MaxReadFrameSize: 1 << 20}

	gp := goproxy.NewProxyHttpServer()
	gp.Logger = discardLogger{}
	gp.Tr = s.upstream // never used to forward; set so no default transport exists
	gp.NonproxyHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.refuse(nil, agentvault.Errorf(agentvault.CodeMalformedRequest, "not a proxy request"), r.Method, "")
		writeError(w, agentvault.Errorf(agentvault.CodeMalformedRequest, "not a proxy request"))
	})
	gp.OnRequest().HandleConnectFunc(s.onConnect)
	// Absolute-form http:// requests: refused before anything goes upstream (P4).
	gp.OnRequest().DoFunc(func(r *http.Request, ctx *goproxy.ProxyCtx) (*http.Request, *http.Response) {
		err := agentvault.Errorf(agentvault.CodeInsecureSite, "plain http is refused: use https")
		s.refuse(nil, err, r.Method, "")
		return r, errorResponse(r, err)
	})
	s.gp = gp
	s.http = &http.Server{
		Handler:           gp,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return s, nil
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

// AddSelf tells the dialer about another of this process's listeners, so a
// request to it is refused as a loop (P16).
func (s *Server) AddSelf(a net.Addr) { s.dialer.AddSelf(a) }

// Serve accepts proxy connections on l until Shutdown.
func (s *Server) Serve(l net.Listener) error {
	s.dialer.AddSelf(l.Addr())
	err := s.http.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting, lets in-flight requests finish, closes idle
// tunnels, and force-closes what is left when ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	err := s.http.Shutdown(ctx)
	s.mu.Lock()
	for t := range s.live {
		t.mu.Lock()
		if !t.active {
			_ = t.conn.Close()
		}
		t.mu.Unlock()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.tunnelWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.mu.Lock()
		for t := range s.live {
			t.mu.Lock()
			_ = t.conn.Close()
			t.mu.Unlock()
		}
		s.mu.Unlock()
		<-done
	}
	s.upstream.CloseIdleConnections()
	return err
}

// CloseIdleUpstream closes the upstream connections no request is using
// (an idle proxy's trim; the next request dials again).
func (s *Server) CloseIdleUpstream() { s.upstream.CloseIdleConnections() }

// UpstreamTransport is the proxy's upstream transport (for tests).
func (s *Server) UpstreamTransport() *http.Transport { return s.upstream }

// Served counts the CONNECTs and the requests inside tunnels the proxy has
// taken since it started: a caller that sees it stand still knows the
// proxy idled in between (proxyd then gives memory back to the system).
func (s *Server) Served() uint64 { return s.served.Load() }
