package merchant

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure Start. The zero value is ready to use.
type Options struct {
	// Logger receives one line per request (method, path, status): never a
	// body, a query or a header value. Nil discards.
	Logger *slog.Logger
	// Now is the clock used for certificates and card expiry checks.
	Now func() time.Time
	// ShopHost, PayHost and LoginHost name the three origins. They default
	// to "localhost", "127.0.0.1" and "127.0.0.1", which resolve everywhere.
	// Other names (e.g. "shop.test") must be mapped to 127.0.0.1 by whoever
	// dials them; HostMap lists them. Every listener is on 127.0.0.1.
	ShopHost, PayHost, LoginHost string
	// JSHost, APIHost, CollectHost, VaultHost and CSEHost name the payment
	// integration origins (integrations.go). They default to "127.0.0.1".
	JSHost, APIHost, CollectHost, VaultHost, CSEHost string
}

// Merchant is the running set of origins. Each Site has its own listener, so
// the shop and the processor are distinct origins the way they are on the web.
type Merchant struct {
	// Shop sells, takes shipping details and shows the order confirmation. It
	// is served as https://localhost:<port>.
	Shop *Site
	// Pay is the card processor: the card form the shop embeds in an iframe
	// and the payments API that form posts to. It is served as
	// https://127.0.0.1:<port>, a different origin from the shop.
	Pay *Site
	// Login is an email-first sign-in site with an account page, served as
	// https://localhost:<port>.
	Login *Site
	// JS serves the element frames (a "js.<processor>" origin); API is the
	// processor API they post the card to; Collect is a processor origin no
	// integration posts to; Vault is the card-fields origin that posts to
	// its own /sessions; CSE serves the client-side-encryption frame.
	JS, API, Collect, Vault, CSE *Site

	ca       *authority
	pool     *x509.CertPool
	issuer   *issuer
	accounts *accounts
	shop     *shop
	// closeOnce ends hung sign-ins (HangSignIns) once.
	closeOnce sync.Once
}

// Start generates the CA and a leaf, and starts the three origins. Close
// stops them.
func Start(opts Options) (*Merchant, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.ShopHost = cmp.Or(opts.ShopHost, "localhost")
	opts.PayHost = cmp.Or(opts.PayHost, "127.0.0.1")
	opts.LoginHost = cmp.Or(opts.LoginHost, "127.0.0.1")
	opts.JSHost = cmp.Or(opts.JSHost, "127.0.0.1")
	opts.APIHost = cmp.Or(opts.APIHost, "127.0.0.1")
	opts.CollectHost = cmp.Or(opts.CollectHost, "127.0.0.1")
	opts.VaultHost = cmp.Or(opts.VaultHost, "127.0.0.1")
	opts.CSEHost = cmp.Or(opts.CSEHost, "127.0.0.1")
	ca, err := newAuthority(opts.Now())
	if err != nil {
		return nil, fmt.Errorf("merchant: create CA: %w", err)
	}
	leaf, err := ca.leaf(opts.Now(), opts.ShopHost, opts.PayHost, opts.LoginHost,
		opts.JSHost, opts.APIHost, opts.CollectHost, opts.VaultHost, opts.CSEHost)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)

	m := &Merchant{ca: ca, pool: pool, issuer: newIssuer(opts.Now), accounts: newAccounts()}
	var started []*Site
	fail := func(err error) (*Merchant, error) {
		for _, s := range started {
			s.Close()
		}
		return nil, err
	}
	start := func(name, host string) (*Site, error) {
		s, err := listen(name, host, leaf, opts.Logger)
		if err == nil {
			started = append(started, s)
		}
		return s, err
	}
	if m.Shop, err = start("shop", opts.ShopHost); err != nil {
		return fail(err)
	}
	if m.Pay, err = start("pay", opts.PayHost); err != nil {
		return fail(err)
	}
	if m.Login, err = start("login", opts.LoginHost); err != nil {
		return fail(err)
	}
	for _, x := range []struct {
		s    **Site
		name string
		host string
	}{{&m.JS, "js", opts.JSHost}, {&m.API, "api", opts.APIHost}, {&m.Collect, "collect", opts.CollectHost}, {&m.Vault, "vault", opts.VaultHost}, {&m.CSE, "cse", opts.CSEHost}} {
		if *x.s, err = start(x.name, x.host); err != nil {
			return fail(err)
		}
	}
	sf, err := newSecuredFields(m.issuer)
	if err != nil {
		return fail(err)
	}
	m.shop = newShop(m.Shop.URL, m.Pay.URL, m.issuer)
	m.shop.integ = &integrationOrigins{
		js: m.JS.URL, api: m.API.URL, collect: m.Collect.URL, vault: m.Vault.URL, cse: m.CSE.URL,
		shoppers: &shoppers{acc: m.accounts, sessions: map[string]string{}, steps: map[string]url.Values{}},
	}
	m.Shop.serve(m.shop.routes())
	m.Pay.serve(m.issuer.routes(m.Pay.URL))
	m.Login.serve(m.accounts.routes())
	m.JS.serve(jsRoutes(opts.Now))
	m.API.serve(m.issuer.apiRoutes(m.JS.URL))
	m.Collect.serve(m.issuer.apiRoutes(m.JS.URL))
	m.Vault.serve((&cardVault{pay: m.issuer}).routes())
	m.CSE.serve(sf.routes())
	return m, nil
}

// sites is every origin, for Close and HostMap.
func (m *Merchant) sites() []*Site {
	return []*Site{m.Shop, m.Pay, m.Login, m.JS, m.API, m.Collect, m.Vault, m.CSE}
}

// Close stops every origin and waits for their handlers to return.
func (m *Merchant) Close() {
	m.closeOnce.Do(func() { close(m.accounts.quit) })
	for _, s := range m.sites() {
		if s != nil {
			s.Close()
		}
	}
}

// HostMap maps every origin name that is not an IP address to the address
// it listens on ("shop.test" -> "127.0.0.1"), for a test resolver.
func (m *Merchant) HostMap() map[string]string {
	out := map[string]string{}
	for _, s := range m.sites() {
		h, _, _ := net.SplitHostPort(s.Host)
		if net.ParseIP(h) == nil {
			out[h] = "127.0.0.1"
		}
	}
	return out
}

// DialContext dials the merchant's origins by name, for a client that talks
// to the merchant directly (without a proxy that resolves for it).
func (m *Merchant) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	h, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip, ok := m.HostMap()[h]; ok {
		addr = net.JoinHostPort(ip, port)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// CAPEM is the merchant CA certificate in PEM form, for a proxy's extra
// upstream roots or `curl --cacert`.
func (m *Merchant) CAPEM() []byte { return bytes.Clone(m.ca.pem) }

// CertPool is a pool holding only the merchant CA.
func (m *Merchant) CertPool() *x509.CertPool { return m.pool.Clone() }

// WriteCA writes the CA certificate to dir/merchant-ca.pem and returns the
// path.
func (m *Merchant) WriteCA(dir string) (string, error) {
	p := filepath.Join(dir, "merchant-ca.pem")
	return p, os.WriteFile(p, m.ca.pem, 0o644)
}

// AcceptCard tells the processor's issuer that this card exists, with this
// security code and expiry. Once any card is registered, the payments API
// declines every other one, so a stand-in that reached it unswapped is
// declined instead of being charged, as a real issuer would.
func (m *Merchant) AcceptCard(number, cvc string, expMonth, expYear int) {
	m.issuer.accept(number, cvc, expMonth, expYear)
}

// HoldPayments makes the processor call hold for each card confirmation
// once it has authorized the card, before it records the payment and
// answers: a test holds the answer there (say, while it kills the proxy
// the request came through), and the payment is recorded when hold
// returns, whether or not its client is still there. Nil stops holding.
func (m *Merchant) HoldPayments(hold func()) {
	m.issuer.mu.Lock()
	m.issuer.hold = hold
	m.issuer.mu.Unlock()
}

// AddAccount creates a sign-in account on the Login site.
func (m *Merchant) AddAccount(email, password, name string) {
	m.accounts.add(email, password, name)
}

// Orders returns the shop's placed orders, oldest first.
func (m *Merchant) Orders() []Order { return m.shop.orderList() }

// Charges returns the processor's approved charges, oldest first. They hold
// the last four digits of the card only.
func (m *Merchant) Charges() []Charge { return m.issuer.chargeList() }

// Gate decides, before any handler runs, whether a site serves a request:
// a test puts a check there that a real site would make (a signature
// verifier, say). A request it refuses is answered 401 with its reason,
// and stays on the record.
type Gate func(site string, r *http.Request) error

// SetGate sets the gate of every origin; nil removes it.
func (m *Merchant) SetGate(g Gate) {
	for _, s := range m.sites() {
		if s != nil {
			s.gate.Store(&g)
		}
	}
}

// Site is one HTTPS origin on 127.0.0.1.
type Site struct {
	Name string
	// URL is the origin, e.g. "https://localhost:43121", with no trailing slash.
	URL string
	// Host is URL's host:port.
	Host string

	srv *http.Server
	ln  net.Listener
	log *slog.Logger

	mu   sync.Mutex
	reqs []Request
	done chan struct{}
	gate atomic.Pointer[Gate]
}

// Request is one request a site received, recorded before any handler ran.
type Request struct {
	Method   string
	Path     string
	RawQuery string
	Header   http.Header
	Body     []byte
	Proto    string
}

// maxRecordedBody bounds what one request may make the site hold.
const maxRecordedBody = 4 << 20

func listen(name, host string, leaf tls.Certificate, log *slog.Logger) (*Site, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("merchant: listen for %s: %w", name, err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	hostport := net.JoinHostPort(host, fmt.Sprint(port))
	s := &Site{
		Name: name,
		URL:  "https://" + hostport,
		Host: hostport,
		ln:   ln,
		log:  log.With("site", name),
		done: make(chan struct{}),
	}
	s.srv = &http.Server{
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{leaf},
			MinVersion:   tls.VersionTLS12,
			NextProtos:   []string{"h2", "http/1.1"},
		},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return s, nil
}

func (s *Site) serve(h http.Handler) {
	s.srv.Handler = s.record(h)
	go func() {
		defer close(s.done)
		err := s.srv.ServeTLS(s.ln, "", "")
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("merchant site stopped", "err", err)
		}
	}()
}

// Close stops the site at once: open connections, including the ones a
// proxy keeps alive, are closed rather than drained.
func (s *Site) Close() {
	if s.srv.Handler == nil {
		_ = s.ln.Close()
		return
	}
	_ = s.srv.Close()
	<-s.done
}

// record keeps a copy of every request before the handler sees it, so even a
// request a handler refuses is on the record.
func (s *Site) record(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxRecordedBody+1))
		if err != nil || len(body) > maxRecordedBody {
			http.Error(w, "request body too large or unreadable", http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.mu.Lock()
		s.reqs = append(s.reqs, Request{
			Method:   r.Method,
			Path:     r.URL.Path,
			RawQuery: r.URL.RawQuery,
			Header:   r.Header.Clone(),
			Body:     body,
			Proto:    r.Proto,
		})
		s.mu.Unlock()
		if g := s.gate.Load(); g != nil && *g != nil {
			if err := (*g)(s.Name, r); err != nil {
				http.Error(w, "refused: "+err.Error(), http.StatusUnauthorized)
				return
			}
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		s.log.Debug("merchant request", "method", r.Method, "path", r.URL.Path, "status", sw.status, "proto", r.Proto)
	})
}

// Requests returns a copy of everything the site received, oldest first.
func (s *Site) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.reqs))
	for i, r := range s.reqs {
		r.Header = r.Header.Clone()
		r.Body = bytes.Clone(r.Body)
		out[i] = r
	}
	return out
}

// Reset forgets the recorded requests.
func (s *Site) Reset() {
	s.mu.Lock()
	s.reqs = nil
	s.mu.Unlock()
}

// Saw reports whether value appeared anywhere in a request the site
// received: path, query, a header or the body, as sent or URL-decoded. It
// answers yes or no so that a caller never has to print a recorded request
// (which may hold a real secret) to find out.
func (s *Site) Saw(value string) bool {
	return s.Count(value) > 0
}

// Count is the number of recorded requests in which value appeared.
func (s *Site) Count(value string) int {
	if value == "" {
		return 0
	}
	v := []byte(value)
	n := 0
	for _, r := range s.Requests() {
		if r.contains(v) {
			n++
		}
	}
	return n
}

// CountPath is the number of recorded requests to path.
func (s *Site) CountPath(method, path string) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Method == method && r.Path == path {
			n++
		}
	}
	return n
}

func (r Request) contains(v []byte) bool {
	hay := [][]byte{[]byte(r.Path), []byte(r.RawQuery), r.Body}
	if q, err := url.QueryUnescape(r.RawQuery); err == nil {
		hay = append(hay, []byte(q))
	}
	if b, err := url.QueryUnescape(string(r.Body)); err == nil {
		hay = append(hay, []byte(b))
	}
	for k, vs := range r.Header {
		for _, hv := range vs {
			hay = append(hay, []byte(k+": "+hv))
		}
	}
	for _, h := range hay {
		if bytes.Contains(h, v) {
			return true
		}
	}
	return false
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
