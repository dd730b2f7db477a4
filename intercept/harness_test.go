package intercept_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/policy"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/intercept"
	"github.com/agentvault/agentvault/vault"
)

// memVault is an in-memory stand-in for the vault service with the same
// audit-first Release contract; the proxyd tests use the real vault.
type memVault struct {
	mu        sync.Mutex
	items     []vault.Item
	values    map[string]map[vault.Field][]byte
	audit     []broker.ReleaseArgs
	failAudit atomic.Bool
}

func newMemVault() *memVault { return &memVault{values: map[string]map[vault.Field][]byte{}} }

func (v *memVault) add(it vault.Item, vals map[vault.Field]string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	it.ID = "itm_" + it.Label + string(it.Kind)
	it.Org = "org1"
	v.values[it.ID] = map[vault.Field][]byte{}
	for f, s := range vals {
		it.Fields = append(it.Fields, f)
		v.values[it.ID][f] = []byte(s)
	}
	v.items = append(v.items, it)
}

func (v *memVault) List(ctx context.Context, org string) ([]vault.Item, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]vault.Item(nil), v.items...), nil
}

func (v *memVault) GetByLabel(ctx context.Context, org string, kind vault.Kind, label string) (vault.Item, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, it := range v.items {
		if it.Org == org && it.Kind == kind && it.Label == label {
			return it, nil
		}
	}
	return vault.Item{}, agentvault.Errorf(agentvault.CodeNotFound, "not found")
}

func (v *memVault) Release(ctx context.Context, a broker.ReleaseArgs) (vault.Secret, error) {
	if v.failAudit.Load() {
		return vault.Secret{}, agentvault.Errorf(agentvault.CodeAuditUnavailable, "audit log unavailable")
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.audit = append(v.audit, a)
	return vault.NewSecret(v.values[a.ItemID][a.Field]), nil
}

func (v *memVault) audits(purpose string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for _, a := range v.audit {
		if a.Purpose == purpose {
			n++
		}
	}
	return n
}

type memBlobs struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (b *memBlobs) SealBlob(ctx context.Context, name string, data []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string][]byte{}
	}
	b.m[name] = append([]byte(nil), data...)
	return nil
}

func (b *memBlobs) OpenBlob(ctx context.Context, name string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.m[name]
	if !ok {
		return nil, vault.ErrNotFound
	}
	return d, nil
}

// hostsResolver maps test names to loopback, like /etc/hosts.
type hostsResolver map[string]string

func (h hostsResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, ok := h[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// upstreamCA signs the upstream test servers' certificates; the proxy
// trusts it through Config.ExtraRoots (P5), the system roots do not.
type upstreamCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newUpstreamCA(t testing.TB) *upstreamCA {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "upstream test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &upstreamCA{cert: c, key: key}
}

func (ca *upstreamCA) leaf(t testing.TB, names ...string) tls.Certificate {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// testNames are the upstream names every test server answers for.
var testNames = []string{"shop.test", "pay.shop.test", "evil.test", "login.example.com", "www.example.com", "xn--pple-43d.test", "shop.test.evil.test", "127.0.0.1"}

// upstream is a TLS test server that counts accepted connections and
// records what it received.
type upstream struct {
	*httptest.Server
	accepts atomic.Int64
	mu      sync.Mutex
	got     []recorded
}

type recorded struct {
	Method, Host, RequestURI, Proto string
	Header                          http.Header
	Body                            []byte
}

func (u *upstream) last() recorded {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.got) == 0 {
		return recorded{}
	}
	return u.got[len(u.got)-1]
}

func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.got)
}

func (u *upstream) port() string {
	_, p, _ := net.SplitHostPort(u.Listener.Addr().String())
	return p
}

// startUpstream starts a TLS upstream with h, recording each request
// (the body is read first, then replaced by a reader over it for h).
func startUpstream(t testing.TB, ca *upstreamCA, h http.HandlerFunc) *upstream {
	u := &upstream{}
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/__deliver" {
			// subFixture.deliver: makes this host a recipient of the
			// fixture's values; not recorded, not the test's handler.
			w.WriteHeader(http.StatusNoContent)
			return
		}
		u.mu.Lock()
		u.got = append(u.got, recorded{Method: r.Method, Host: r.Host, RequestURI: r.RequestURI, Proto: r.Proto, Header: r.Header.Clone(), Body: body})
		u.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		h(w, r)
	}))
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, testNames...)}}
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.accepts.Add(1)
		}
	}
	srv.StartTLS()
	u.Server = srv
	t.Cleanup(srv.Close)
	return u
}

// logBuffer captures the proxy's slog output for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type proxyEnv struct {
	t        testing.TB
	srv      *intercept.Server
	addr     string
	ca       *intercept.CA
	sessions *broker.Broker
	auth     *testAuthorizer
	vault    *memVault
	metrics  *intercept.Metrics
	logs     *logBuffer
	upCA     *upstreamCA

	// grants are the authorizations e.authorize made; client re-authorizes
	// a session's grants before each request, as the agent fills again
	// before each submit (a card grant covers one purchase, P21).
	grantsMu sync.Mutex
	grants   map[*broker.Session][][2]string
}

const testSuffix = "t3st1"

func startProxy(t testing.TB, mod func(*intercept.Config)) *proxyEnv {
	t.Helper()
	return startProxyWith(t, nil, mod)
}

// testAuthorizer is the broker's Authorizer in these tests: it allows
// every fill unless a test sets decide (each authorize) or recheck (each
// release).
type testAuthorizer struct {
	mu              sync.Mutex
	decide, recheck func(policy.Fill) error
}

func (a *testAuthorizer) set(decide, recheck func(policy.Fill) error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.decide, a.recheck = decide, recheck
}

func (a *testAuthorizer) Authorize(_ context.Context, f policy.Fill) error {
	a.mu.Lock()
	fn := a.decide
	a.mu.Unlock()
	if fn == nil {
		return nil
	}
	return fn(f)
}

func (a *testAuthorizer) Recheck(_ context.Context, f policy.Fill) error {
	a.mu.Lock()
	fn := a.recheck
	a.mu.Unlock()
	if fn == nil {
		return nil
	}
	return fn(f)
}

// startProxyWith is startProxy with bmod applied to the broker's Config
// (over the memVault, the test key and a testAuthorizer) first.
func startProxyWith(t testing.TB, bmod func(*broker.Config), mod func(*intercept.Config)) *proxyEnv {
	t.Helper()
	ctx := context.Background()
	ca, err := intercept.LoadOrCreateCA(ctx, &memBlobs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mv := newMemVault()
	auth := &testAuthorizer{}
	bc := broker.Config{Vault: mv, Authorizer: auth, LookupKey: func(ctx context.Context, key string) (broker.APIKey, error) {
		if key != "avk_test" {
			return broker.APIKey{}, agentvault.Errorf(agentvault.CodeInvalidAPIKey, "unknown API key")
		}
		return broker.APIKey{ID: "key1", Org: "org1", Suffix: testSuffix, Scope: policy.KeyScope{AllCards: true, AllLogins: true}}, nil
	}}
	if bmod != nil {
		bmod(&bc)
	}
	sessions, err := broker.New(bc)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	upCA := newUpstreamCA(t)
	m := intercept.NewMetrics()
	resolver := hostsResolver{}
	for _, n := range testNames {
		resolver[n] = "127.0.0.1"
	}
	cfg := intercept.Config{
		CA: ca, Broker: sessions, Metrics: m,
		Logger:                   slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		UnsafeAllowPrivateRanges: true,
		ExtraRoots:               []*x509.Certificate{upCA.cert},
		Resolver:                 resolver,
	}
	if mod != nil {
		mod(&cfg)
		sessions = cfg.Broker
	}
	srv, err := intercept.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return &proxyEnv{t: t, srv: srv, addr: l.Addr().String(), ca: ca, sessions: sessions, auth: auth, vault: mv, metrics: m, logs: logs, upCA: upCA}
}

// session opens a proxy session and returns it with its password.
func (e *proxyEnv) session() (*broker.Session, string) {
	s, pw, err := e.sessions.Create(context.Background(), "avk_test")
	if err != nil {
		e.t.Fatal(err)
	}
	return s, pw
}

// client returns an HTTP client that goes through the proxy as sess,
// trusting the proxy's CA, and renews the session's grants (e.authorize)
// before each request. h2 says whether to offer HTTP/2 to the proxy.
func (e *proxyEnv) client(sess *broker.Session, pw string, h2 bool) *http.Client {
	c := e.rawClient(sess, pw, h2)
	c.Transport = reauthTransport{e: e, s: sess, base: c.Transport}
	return c
}

type reauthTransport struct {
	e    *proxyEnv
	s    *broker.Session
	base http.RoundTripper
}

func (r reauthTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.e.grantsMu.Lock()
	gs := append([][2]string(nil), r.e.grants[r.s]...)
	r.e.grantsMu.Unlock()
	for _, g := range gs {
		_, _ = r.e.sessions.Authorize(context.Background(), r.s, broker.AuthorizeRequest{Token: g[0], PageURL: g[1]})
	}
	return r.base.RoundTrip(req)
}

func (r reauthTransport) CloseIdleConnections() {
	r.base.(*http.Transport).CloseIdleConnections()
}

// rawClient is client without renewing grants: each grant is used by its
// own rule.
func (e *proxyEnv) rawClient(sess *broker.Session, pw string, h2 bool) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(e.ca.Certificate())
	pu := &url.URL{Scheme: "http", Host: e.addr, User: url.UserPassword(sess.ID, pw)}
	tr := &http.Transport{
		Proxy:             http.ProxyURL(pu),
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: h2,
	}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	e.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// addCard puts a card in the vault usable on sites.
func (e *proxyEnv) addCard(label, number, cvv string, sites ...string) {
	e.vault.add(vault.Item{Kind: vault.KindCard, Label: label, Card: &vault.CardMeta{Sites: sites, AnySite: len(sites) == 0}},
		map[vault.Field]string{vault.FieldNumber: number, vault.FieldCVV: cvv})
}

func (e *proxyEnv) addLogin(label, site, password string) {
	e.vault.add(vault.Item{Kind: vault.KindLogin, Label: label, Login: &vault.LoginMeta{Site: site}},
		map[vault.Field]string{vault.FieldPassword: password, vault.FieldUsername: "owner"})
}

func (e *proxyEnv) authorize(s *broker.Session, token, page string) (broker.Authorized, error) {
	a, err := e.sessions.Authorize(context.Background(), s, broker.AuthorizeRequest{Token: token, PageURL: page})
	if err == nil {
		e.grantsMu.Lock()
		if e.grants == nil {
			e.grants = map[*broker.Session][][2]string{}
		}
		e.grants[s] = append(e.grants[s], [2]string{token, page})
		e.grantsMu.Unlock()
	}
	return a, err
}

func tok(kind, label, field string) string {
	return "av_" + kind + "_" + label + "_" + field + "_" + testSuffix
}

func codeOf(resp *http.Response) string { return resp.Header.Get("X-Agentvault-Code") }

func readAll(t testing.TB, r io.Reader) string {
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// hostURL is an upstream URL under a test name.
func hostURL(u *upstream, host, path string) string {
	return "https://" + host + ":" + u.port() + path
}

var _ = strings.Contains

// amount is a checkout total as proxyd reads it from the control API.
func amount(t testing.TB, value, currency string) *policy.Amount {
	t.Helper()
	a, err := policy.ParseDecimal(value, currency)
	if err != nil {
		t.Fatal(err)
	}
	return &a
}
