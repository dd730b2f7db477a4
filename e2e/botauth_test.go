package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault/e2e/merchant"
	"github.com/agentvault/agentvault/internal/httpsigtest"
	"github.com/agentvault/agentvault/internal/leakcheck"
	"github.com/agentvault/agentvault/internal/webtls"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/vault"
)

// sigGate is what a site that recognises agents does with every request:
// the chosen sites' requests must carry signatures its own verifier
// (package httpsigtest, written from the RFCs) accepts; the others must
// carry none. It records what it saw for the test.
type sigGate struct {
	v      *httpsigtest.Verifier
	chosen map[string]bool // site names that must be signed

	mu         sync.Mutex
	seen       []gateSeen
	violations []string
}

type gateSeen struct {
	site, method, path, proto string
	tags                      []string
}

func (g *sigGate) check(site string, r *http.Request) error {
	signed := httpsigtest.Signed(r.Header)
	rec := gateSeen{site: site, method: r.Method, path: r.URL.Path, proto: r.Proto}
	var err error
	switch {
	case g.chosen[site] && !signed:
		err = errors.New("unsigned request to a site the owner chose")
	case !g.chosen[site] && signed:
		err = errors.New("signature field on a site the owner did not choose")
	case signed:
		var sigs []httpsigtest.Signature
		sigs, err = g.v.Verify(r.Context(), httpsigtest.FromRequest(r))
		for _, s := range sigs {
			rec.tags = append(rec.tags, s.Tag)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seen = append(g.seen, rec)
	if err != nil {
		g.violations = append(g.violations, fmt.Sprintf("%s %s %s: %v", site, r.Method, r.URL.Path, err))
	}
	return err
}

func (g *sigGate) find(site, method, path string) (gateSeen, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.seen {
		if s.site == site && s.method == method && (s.path == path || strings.HasPrefix(path, "*") && strings.HasSuffix(s.path, path[1:])) {
			return s, true
		}
	}
	return gateSeen{}, false
}

// sigTestSites are the test's own two origins, one speaking HTTP/1.1 only
// and one HTTP/2, each gated like the merchant: a page whose script posts
// back, so a GET and a POST reach each.
type sigTestSites struct {
	h1, h2 *httptest.Server
	caPath string
}

func startSigTestSites(t *testing.T, g *sigGate) *sigTestSites {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bot auth test sites CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour)}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "sig-h1.test"}, DNSNames: []string{"sig-h1.test", "sig-h2.test"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	leaf := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	handler := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			if err := g.check(name, r); err != nil {
				http.Error(w, "refused: "+err.Error(), http.StatusUnauthorized)
				return
			}
			switch r.URL.Path {
			case "/":
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				_, _ = io.WriteString(w, `<!doctype html><title>signed</title><body><p id="state">loading</p><script>
fetch('/submit', {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: 'q=1'})
  .then(r => r.text()).then(t => { document.body.dataset.done = t; });
</script></body>`)
			case "/submit":
				_, _ = io.WriteString(w, "ok")
			default:
				http.NotFound(w, r)
			}
		})
	}
	s := &sigTestSites{}
	s.h1 = httptest.NewUnstartedServer(handler("sig-h1"))
	s.h1.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}}
	s.h1.StartTLS()
	s.h2 = httptest.NewUnstartedServer(handler("sig-h2"))
	s.h2.EnableHTTP2 = true
	s.h2.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}}
	s.h2.StartTLS()
	t.Cleanup(s.h1.Close)
	t.Cleanup(s.h2.Close)
	s.caPath = filepath.Join(t.TempDir(), "sig-sites-ca.pem")
	if err := os.WriteFile(s.caPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

func portOf(s *httptest.Server) string {
	_, p, _ := net.SplitHostPort(s.Listener.Addr().String())
	return p
}

// TestBotAuth_MCPSignedRequests is issue 29's proof in real Chromium driven
// through mcpd: with the owner's choice of sites (the shop with Visa TAP's
// browsing tag, its card processor with browsing and payment, two test
// sites), every request Chromium makes to them reaches the site signed by
// proxyd, and each site's own verifier (written from RFC 9421 and the
// drafts; it fetches the directory from the dashboard and checks its
// signatures) accepts it: over HTTP/1.1 and HTTP/2 to the site, a page and
// its script's POST, and a whole checkout whose payment POST carries TAP's
// payment tag. The sign-in site, not chosen, receives no signature field.
// A recorded signature replayed, past its window or with its path changed
// is refused by the verifier. The private key is in no MCP result,
// screenshot, log, metric or the directory (P11).
func TestBotAuth_MCPSignedRequests(t *testing.T) {
	requireE2E(t, true)
	g := &sigGate{chosen: map[string]bool{"shop": true, "pay": true, "sig-h1": true, "sig-h2": true}}
	sites := startSigTestSites(t, g)
	ap := startAppliance(t, func(c *proxyd.Config) {
		c.Listen.Dashboard = "127.0.0.1:0"
		c.UnsafeTestHosts["sig-h1.test"] = "127.0.0.1"
		c.UnsafeTestHosts["sig-h2.test"] = "127.0.0.1"
		c.TLS.ExtraRoots = append(c.TLS.ExtraRoots, sites.caPath)
		c.BotAuth = proxyd.BotAuthConfig{Directory: "dashboard", Sites: []proxyd.BotAuthSite{
			{Host: "shop.test", TAP: []string{"browse"}},
			{Host: "pay.test", TAP: []string{"browse", "pay"}},
			{Host: "sig-h1.test"}, {Host: "sig-h2.test"},
		}}
	})
	pool := x509.NewCertPool()
	root, err := os.ReadFile(filepath.Join(ap.dataDir, webtls.LocalCAFile))
	if err != nil || !pool.AppendCertsFromPEM(root) {
		t.Fatalf("the dashboard root: %v", err)
	}
	dirClient := &http.Client{Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: pool}}}
	g.v = &httpsigtest.Verifier{Client: dirClient, Skew: 5 * time.Second}
	ap.m.SetGate(g.check)
	t.Cleanup(func() { ap.m.SetGate(nil) })

	bin := buildCmd(t, "mcpd")
	args, env := ap.mcpdArgs()
	agent := startAgent(t, bin, args, env)

	// HTTP/1.1 and HTTP/2 to the site: a page and its script's POST.
	for _, x := range []struct {
		name  string
		srv   *httptest.Server
		proto string
	}{{"sig-h1", sites.h1, "HTTP/1.1"}, {"sig-h2", sites.h2, "HTTP/2.0"}} {
		agent.must("open_page", map[string]any{"url": "https://" + x.name + ".test:" + portOf(x.srv) + "/"})
		agent.must("wait_for_selector", map[string]any{"selector": "body[data-done='ok']", "timeout": 15000})
		for _, m := range [][2]string{{http.MethodGet, "/"}, {http.MethodPost, "/submit"}} {
			s, ok := g.find(x.name, m[0], m[1])
			if !ok || s.proto != x.proto || !slices.Equal(s.tags, []string{"web-bot-auth"}) {
				t.Errorf("%s %s %s: seen %v, proto %s (want %s), tags %v", x.name, m[0], m[1], ok, s.proto, x.proto, s.tags)
			}
		}
	}

	// A site the owner did not choose: the sign-in site.
	agent.must("open_page", map[string]any{"url": ap.m.Login.URL + "/login"})
	if _, ok := g.find("login", http.MethodGet, "/login"); !ok {
		t.Error("the sign-in site saw no request")
	}
	for _, r := range ap.m.Login.Requests() {
		if httpsigtest.Signed(r.Header) {
			t.Errorf("the sign-in site (not chosen) received a signature field on %s %s", r.Method, r.Path)
		}
	}

	// A checkout through the gate: every request to the shop and the
	// processor must verify, or the order is not placed.
	cat := agent.must("get_token_catalog", map[string]any{"url": ap.m.Shop.URL + "/checkout"})
	numberTok, cvvTok := findToken(cat.text, "card", "number"), findToken(cat.text, "card", "cvv")
	agent.must("open_page", map[string]any{"url": ap.m.Shop.URL + "/products/trail-shoes"})
	agent.must("click", map[string]any{"selector": "#add-to-cart"})
	agent.must("wait_for_selector", map[string]any{"selector": "#checkout", "timeout": 10000})
	agent.must("click", map[string]any{"selector": "#checkout"})
	agent.must("wait_for_selector", map[string]any{"selector": numberSel, "frame": payFrame, "timeout": 10000})
	agent.must("fill_checkout", map[string]any{"fields": []map[string]any{
		{"selector": "#email", "value": "ada@example.org"},
		{"selector": "#first-name", "value": "Ada"},
		{"selector": "#last-name", "value": "Lovelace"},
		{"selector": "#address-line1", "value": "12 Analytical Row"},
		{"selector": "#postal-code", "value": "10115"},
		{"selector": "#city", "value": "Berlin"},
		{"selector": "#country", "value": "DE", "kind": "select"},
		{"selector": "#exp-month", "value": ap.card.month, "kind": "select", "frame": payFrame},
		{"selector": "#exp-year", "value": ap.card.year, "kind": "select", "frame": payFrame},
		{"selector": numberSel, "value": numberTok, "frame": payFrame},
		{"selector": cvcSel, "value": cvvTok, "frame": payFrame},
	}, "timeout": 5000})
	agent.must("click", map[string]any{"selector": "#place-order"})
	out := agent.must("get_session_outcome", map[string]any{
		"successSelector": successSel, "failureSelector": "#form-error:not([hidden])",
		"confirmsCheckout": true, "submitSelector": "#place-order", "timeout": 20000,
	}).json(t)
	g.mu.Lock()
	violations := slices.Clone(g.violations)
	g.mu.Unlock()
	if len(violations) > 0 {
		t.Fatalf("the sites refused requests: %s", leakcheck.Redact(strings.Join(violations, "; ")))
	}
	if out["outcome"] != "success" || len(ap.m.Orders()) != 1 {
		t.Fatalf("checkout through the verifying sites: outcome %v, %d orders", out["outcome"], len(ap.m.Orders()))
	}
	pay, ok := g.find("pay", http.MethodPost, "*/confirm")
	if !ok || !slices.Equal(pay.tags, []string{"web-bot-auth", "agent-payer-auth"}) || pay.proto != "HTTP/2.0" {
		t.Errorf("the payment POST: seen %v, tags %v, proto %s", ok, pay.tags, pay.proto)
	}
	frame, ok := g.find("pay", http.MethodGet, "/elements/card")
	if !ok || !slices.Equal(frame.tags, []string{"web-bot-auth", "agent-browser-auth"}) {
		t.Errorf("the card frame: seen %v, tags %v", ok, frame.tags)
	}
	order, ok := g.find("shop", http.MethodPost, "/checkout")
	if !ok || !slices.Equal(order.tags, []string{"web-bot-auth", "agent-browser-auth"}) {
		t.Errorf("the shop's order POST: seen %v, tags %v", ok, order.tags)
	}
	if g.v.Fetches() < 1 {
		t.Error("the site never fetched the key directory")
	}
	closed := agent.must("close_session", map[string]any{})

	// The recorded payment POST, as a site would receive it again.
	var confirm httpsigtest.Message
	for _, r := range ap.m.Pay.Requests() {
		if r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/confirm") {
			target := r.Path
			if r.RawQuery != "" {
				target += "?" + r.RawQuery
			}
			confirm = httpsigtest.Message{Method: r.Method, Authority: ap.m.Pay.Host, RequestURI: target, Header: r.Header}
		}
	}
	if confirm.Header == nil {
		t.Fatal("no payment POST recorded")
	}
	ctx := context.Background()
	fresh := func(now func() time.Time) *httpsigtest.Verifier {
		return &httpsigtest.Verifier{Client: dirClient, Now: now, Skew: 5 * time.Second}
	}
	if _, err := fresh(nil).Verify(ctx, confirm); err != nil {
		t.Fatalf("the recorded payment POST does not verify at a fresh site: %v", err)
	}
	if _, err := g.v.Verify(ctx, confirm); err == nil || !strings.Contains(err.Error(), "replay") {
		t.Errorf("a replayed signature was accepted by the site that saw it (err %v)", err)
	}
	late := fresh(func() time.Time { return time.Now().Add(5*time.Minute + 5*time.Second) })
	if _, err := late.Verify(ctx, confirm); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("a signature replayed past its window was accepted (err %v)", err)
	}
	tampered := confirm
	tampered.RequestURI = strings.Replace(confirm.RequestURI, "/confirm", "/capture", 1)
	if _, err := fresh(nil).Verify(ctx, tampered); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("a signature on a tampered path was accepted (err %v)", err)
	}

	// P11: the signing key is in no sink.
	agent.close()
	blob, err := ap.vault.OpenBlob(ctx, "botauth.keys")
	if err != nil {
		t.Fatal(err)
	}
	var kr struct {
		Keys []struct {
			Seed []byte `json:"seed"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(blob, &kr); err != nil || len(kr.Keys) == 0 {
		t.Fatal("the keyring blob")
	}
	var cs []leakcheck.Canary
	for _, k := range kr.Keys {
		priv := ed25519.NewKeyFromSeed(k.Seed)
		cs = append(cs, leakcheck.Value("signing key", string(k.Seed)), leakcheck.Value("signing key (hex)", hex.EncodeToString(k.Seed)),
			leakcheck.Value("signing key (64 bytes)", string(priv)), leakcheck.Value("signing key (64 bytes, hex)", hex.EncodeToString(priv)))
	}
	resp, err := dirClient.Get(ap.pm.BotAuthOrigin() + "/.well-known/http-message-signatures-directory")
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	l := leakcheck.New(cs...)
	agent.transcript.sweep(t, l, "MCP results")
	l.Answer(t, "close_session answer", []byte(closed.text))
	l.Logs(t, "mcpd log", agent.logs.Bytes())
	l.Logs(t, "proxyd logs", ap.logs.Bytes())
	l.Metrics(t, "proxyd metrics", ap.metrics(t))
	l.Text(t, "key directory", dir)
	for i, img := range agent.images {
		l.Binary(t, "screenshot "+itoa(i), img)
	}
	var hdrs strings.Builder
	for _, s := range []*merchant.Site{ap.m.Shop, ap.m.Pay, ap.m.Login} {
		for _, r := range s.Requests() {
			_ = r.Header.Write(&hdrs)
		}
	}
	l.Text(t, "what the sites received", []byte(hdrs.String()))
	recs, err := ap.vault.Audit(ctx, vault.AuditFilter{Org: org, Action: vault.AuditSign})
	if err != nil || len(recs) == 0 {
		t.Errorf("no audit record of the signed requests: %v", err)
	}
	t.Logf("bot auth: %d requests seen by the gate, %d audit records; P11 sweep covered %s", len(g.seen), len(recs), l.Summary())
}
