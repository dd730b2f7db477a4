package proxyd_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/vault"

	"github.com/agentvault/agentvault/internal/leakcheck"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// tlsUpstream starts a TLS server on 127.0.0.1 signed by a fresh CA and
// writes that CA to a PEM file for tls.extra_roots.
func tlsUpstream(t *testing.T, h http.HandlerFunc) (*httptest.Server, string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test upstream CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour * 24)}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"shop.test", "pay.test"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour * 24)}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "upstream-ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return srv, path
}

// startMain runs a real Main on loopback ports with a fresh data directory.
func startMain(t *testing.T, roots string, mod func(*proxyd.Config)) (*proxyd.Main, *syncBuf) {
	t.Helper()
	logs := &syncBuf{}
	return startMainLogging(t, roots, mod, logs), logs
}

// startMainLogging is startMain with the JSON log lines going to w.
func startMainLogging(t *testing.T, roots string, mod func(*proxyd.Config), w io.Writer) *proxyd.Main {
	t.Helper()
	m := proxyd.NewMain()
	m.Config.DataDir = t.TempDir()
	m.Config.Listen = proxyd.ListenConfig{Proxy: "127.0.0.1:0", Control: "127.0.0.1:0", Admin: "127.0.0.1:0"}
	m.Config.UnsafeAllowPrivateRanges = true
	if roots != "" {
		m.Config.TLS.ExtraRoots = []string{roots}
	}
	if mod != nil {
		mod(&m.Config)
	}
	m.Logger = slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.Open(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return m
}

func proxyClient(m *proxyd.Main, s control.CreateSessionResponse) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(s.CAPEM))
	pu, _ := url.Parse(s.ProxyURL)
	pu.User = url.UserPassword(s.ProxyUser, s.ProxyPassword)
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
}

func TestMainEndToEnd(t *testing.T) {
	const number = "4242424242424242"
	var mu sync.Mutex
	var got []byte
	up, roots := tlsUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = b
		mu.Unlock()
		_, _ = w.Write([]byte("received " + string(b)))
	})
	m, logs := startMain(t, roots, func(c *proxyd.Config) { c.Policy.AuthorizedDestinations = []string{"127.0.0.1"} })
	ctx := context.Background()
	if _, err := m.Vault.AddCard(ctx, proxyd.DefaultOrg, "owner", vault.CardInput{
		Number: vault.NewSecret([]byte(number)), CVV: vault.NewSecret([]byte("737")), ExpiryMonth: 12, ExpiryYear: 2031, AnySite: true,
	}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{proxyd.APIKeyFile, proxyd.ControlTokenFile} {
		st, err := os.Stat(filepath.Join(m.DataDir(), f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, err, st.Mode())
		}
	}
	c := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	if _, err := control.NewClient("http://"+m.ControlAddr.String(), "wrong", nil).CreateSession(ctx, m.APIKey); agentvault.ErrorCode(err) != agentvault.CodeUnauthorized {
		t.Fatalf("control API without the token: %v", err)
	}
	if _, err := c.CreateSession(ctx, "avk_wrong"); agentvault.ErrorCode(err) != agentvault.CodeInvalidAPIKey {
		t.Fatalf("unknown API key: %v", err)
	}
	s, err := c.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := c.Catalog(ctx, m.APIKey, "")
	if err != nil || !strings.Contains(string(cat), "av_card_1_number_") {
		t.Fatalf("catalog: %v %s", err, cat)
	}
	i := strings.Index(string(cat), "av_card_1_number_")
	token := string(cat)[i : i+len("av_card_1_number_")+5]
	a, err := c.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: token, PageURL: up.URL + "/checkout"})
	if err != nil || !a.StandIn {
		t.Fatalf("authorize: %v", err)
	}
	resp, err := proxyClient(m, s).Post(up.URL+"/pay", "application/x-www-form-urlencoded", strings.NewReader("cc="+a.Value))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if string(got) != "cc="+number {
		t.Fatal("upstream did not receive the real number")
	}
	if strings.Contains(string(body), number) || !strings.Contains(string(body), a.Value) {
		t.Fatal("response not scrubbed back to the stand-in")
	}
	if resp.ProtoMajor != 2 {
		t.Fatalf("browser leg spoke %s, want HTTP/2", resp.Proto)
	}
	rep, err := c.CloseSession(ctx, s.ID)
	if err != nil || rep.Status != "Session closed" || len(rep.Report.FilledFieldKinds) != 1 {
		t.Fatalf("close: %v %+v", err, rep)
	}
	hz, err := http.Get("http://" + m.AdminAddr.String() + "/healthz")
	if err != nil || hz.StatusCode != 200 {
		t.Fatalf("healthz: %v", err)
	}
	hz.Body.Close()
	mt, err := http.Get("http://" + m.AdminAddr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mtext, _ := io.ReadAll(mt.Body)
	mt.Body.Close()
	if !strings.Contains(string(mtext), `agentvault_proxy_substitutions_total{kind="card"} 1`) {
		t.Fatalf("metrics lack the substitution:\n%s", mtext)
	}
	leakcheck.New(leakcheck.Value("card number", number), leakcheck.Value("card number stand-in", a.Value)).
		Logs(t, "proxyd's log", []byte(logs.String()))
	// The session's credential no longer works.
	if _, err := proxyClient(m, s).Get(up.URL + "/"); err == nil {
		t.Fatal("closed session's proxy credential still works")
	}
}

func TestP17_ConfigFailsSafe(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for name, body := range map[string]string{
		"unknown top-level key":   "data_dir: /tmp/x\nunsafe_allow_privat_ranges: true\n",
		"unknown nested key":      "egress:\n  mode: strict\n  alow: [a.com]\n",
		"bad egress mode":         "egress:\n  mode: permissive\n",
		"bad allow host":          "egress:\n  mode: strict\n  allow: [\"evil.com/a.com\"]\n",
		"control not loopback":    "listen:\n  control: 0.0.0.0:7701\n",
		"admin not loopback":      "listen:\n  admin: 10.0.0.1:7702\n",
		"negative limit":          "limits:\n  max_tunnels: -1\n",
		"wrong type":              "limits:\n  max_body_bytes: lots\n",
		"two documents":           "log:\n  level: info\n---\nlog:\n  level: debug\n",
		"missing extra root file": "tls:\n  extra_roots: [/nonexistent/ca.pem]\n",
		"invalid policy host":     "policy:\n  authorized_destinations: [\"shop.example/x\"]\n",
		"unknown policy key":      "policy:\n  authorized: [shop.example]\n",
		"owner rules off":         "policy:\n  owner_rules: false\n",
		"localhost authorized":    "policy:\n  authorized_destinations: [localhost]\n",
		"test hosts alone":        "unsafe_test_hosts: {shop.test: 127.0.0.1}\n",
		"test host not an IP":     "unsafe_allow_private_ranges: true\nunsafe_test_hosts: {shop.test: localhost}\n",
		"test host not a name":    "unsafe_allow_private_ranges: true\nunsafe_test_hosts: {\"Shop.Test\": 127.0.0.1}\n",
		"zero authorize rate":     "limits:\n  authorize_per_minute: 0\n",
		"integration http origin": "policy:\n  payment_integrations: [{name: p, frames: [js.pay.example/f], posts_to: [\"http://api.pay.example\"]}]\n",
		"integration wide frame":  "policy:\n  payment_integrations: [{name: p, frames: [\"*.co.uk/f\"], posts_to: [\"https://api.pay.example\"]}]\n",
		"integration unknown key": "policy:\n  payment_integrations: [{name: p, frames: [js.pay.example/f], post_to: [\"https://api.pay.example\"]}]\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := proxyd.LoadConfig(write("c.yaml", body)); err == nil {
				t.Fatal("config accepted")
			}
		})
	}
	// A Main with an invalid config refuses to open: nothing listens.
	m := proxyd.NewMain()
	m.Config.DataDir = t.TempDir()
	m.Config.Egress.Mode = "sometimes"
	if err := m.Open(context.Background()); err == nil || m.ProxyAddr != nil {
		t.Fatal("Main opened with an invalid config")
	}
	// A valid owner integration loads and is merged over the shipped list.
	okc, err := proxyd.LoadConfig(write("integ.yaml", "policy:\n  payment_integrations:\n    - name: example-pay\n      frames: [js.pay.example/elements/*]\n      posts_to: [\"https://api.pay.example\"]\n"))
	if err != nil {
		t.Fatalf("valid payment integration refused: %v", err)
	}
	if set, err := okc.Policy.Integrations(); err != nil {
		t.Fatal(err)
	} else if in, ok := set.Match("https://js.pay.example/elements/card"); !ok || !in.PostsToOrigin("https://api.pay.example") {
		t.Fatalf("owner integration not matched: %+v", in)
	}
	// The example config in the repo loads.
	if _, err := proxyd.LoadConfig("../configs/proxyd.yaml"); err != nil {
		t.Fatalf("configs/proxyd.yaml: %v", err)
	}

	// A failed reload keeps the running egress rule.
	up, roots := tlsUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
	good := write("good.yaml", "egress:\n  mode: strict\n  allow: [\"127.0.0.1\"]\n")
	mm, _ := startMain(t, roots, func(c *proxyd.Config) { c.Egress = proxyd.EgressConfig{Mode: "strict", Allow: []string{"127.0.0.1"}} })
	if err := mm.Reload(good); err != nil {
		t.Fatal(err)
	}
	bad := write("bad.yaml", "egress:\n  mode: open\n  bogus: 1\n")
	if err := mm.Reload(bad); err == nil {
		t.Fatal("bad reload accepted")
	}
	if mm.EgressMode() != "strict" {
		t.Fatal("failed reload changed the running config")
	}
	c := control.NewClient("http://"+mm.ControlAddr.String(), mm.ControlToken, nil)
	s, err := c.CreateSession(context.Background(), mm.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := proxyClient(mm, s).Get(up.URL)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("allowed host after failed reload: %v", err)
	}
	resp.Body.Close()
}

// TestP1_DenyByDefaultAsksTheOwner: with the default config, a fill on a
// site the owner has not authorized waits for the owner (202 and a wait
// id), a site listed in policy.authorized_destinations does not, and an
// owner's no is the fill's refusal (counted once in the report). Nothing is
// substituted for a token that was never authorized.
func TestP1_DenyByDefaultAsksTheOwner(t *testing.T) {
	var hits int
	var mu sync.Mutex
	up, roots := tlsUpstream(t, func(w http.ResponseWriter, r *http.Request) { mu.Lock(); hits++; mu.Unlock() })
	m, _ := startMain(t, roots, func(c *proxyd.Config) { c.Policy.AuthorizedDestinations = []string{"shop.example"} })
	ctx := context.Background()
	if _, err := m.Vault.AddIdentity(ctx, proxyd.DefaultOrg, "owner", vault.IdentityMeta{Name: "Ada", Email: "ada@example.org"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Vault.AddCard(ctx, proxyd.DefaultOrg, "owner", vault.CardInput{Number: vault.NewSecret([]byte("4242424242424242")),
		CVV: vault.NewSecret([]byte("737")), ExpiryMonth: 12, ExpiryYear: 2031, AnySite: true}); err != nil {
		t.Fatal(err)
	}
	c := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	s, err := c.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	cat, _ := c.Catalog(ctx, m.APIKey, "")
	token := func(prefix string) string {
		i := strings.Index(string(cat), prefix)
		if i < 0 {
			t.Fatalf("no %s token", prefix)
		}
		tok := string(cat)[i:]
		return tok[:strings.IndexByte(tok, '"')]
	}
	var waitID string
	for _, tok := range []string{token("av_identity_"), token("av_card_1_number_")} {
		for page, pending := range map[string]bool{
			"https://evil.example/form":  true,
			up.URL + "/form":             true,
			"https://www.shop.example/x": false,
		} {
			_, err := c.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: tok, PageURL: page})
			p, ok := control.PendingOf(err)
			if pending != (agentvault.ErrorCode(err) == agentvault.CodeApprovalPending && ok) || !pending && err != nil {
				t.Fatalf("authorize on %s: %v (pending wanted: %v)", page, err, pending)
			}
			if ok && strings.HasPrefix(page, up.URL) {
				waitID = p.WaitID
			}
		}
	}
	if rep, _ := c.Report(ctx, s.ID); rep.DeniedCount != 0 {
		t.Fatalf("a fill parked for the owner counted as a refusal: %d", rep.DeniedCount)
	}
	// The token was never authorized for the upstream: it is refused, not sent.
	resp, err := proxyClient(m, s).Post(up.URL+"/pay", "application/x-www-form-urlencoded", strings.NewReader("cc="+token("av_card_1_number_")))
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("unauthorized token: status %d", resp.StatusCode)
		}
	}
	mu.Lock()
	if hits != 0 {
		t.Fatal("a request with an unauthorized token reached the site")
	}
	mu.Unlock()
	before, _ := c.Report(ctx, s.ID) // the refused request counts
	if before.DeniedCount != 1 {
		t.Fatalf("refused request: deniedCount %d", before.DeniedCount)
	}
	if _, err := m.Owner.Decide(ctx, waitID, false, "owner@example.org"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		w, err := c.Wait(ctx, waitID, time.Second)
		if err != nil || w.Status != "denied" || w.Code != string(agentvault.CodeDestinationUnauthorized) {
			t.Fatalf("wait after the owner's no: %+v %v", w, err)
		}
	}
	if rep, _ := c.Report(ctx, s.ID); rep.DeniedCount != 2 {
		t.Fatalf("the owner's no counted %d times, want once", rep.DeniedCount-1)
	}
}

func TestP1_OwnerRulesAskTheOwner(t *testing.T) {
	m, _ := startMain(t, "", nil)
	ctx := context.Background()
	if _, err := m.Vault.AddIdentity(ctx, proxyd.DefaultOrg, "owner", vault.IdentityMeta{Name: "Ada", Email: "ada@example.org"}); err != nil {
		t.Fatal(err)
	}
	_, key, err := m.Owner.CreateAPIKey(ctx, "agent", owner.Scope{AllCards: true, AllLogins: true})
	if err != nil {
		t.Fatal(err)
	}
	c := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	s, err := c.CreateSession(ctx, key) // an owner-created key works
	if err != nil {
		t.Fatal(err)
	}
	cat, _ := c.Catalog(ctx, key, "")
	i := strings.Index(string(cat), "av_identity_")
	token := string(cat)[i:]
	token = token[:strings.IndexByte(token, '"')]
	req := control.AuthorizeRequest{Token: token, PageURL: "https://www.shop.example/form"}
	_, err = c.Authorize(ctx, s.ID, req)
	p, ok := control.PendingOf(err)
	if agentvault.ErrorCode(err) != agentvault.CodeApprovalPending || !ok || p.Site == "" {
		t.Fatalf("unauthorized site: %v", err)
	}
	if w, err := c.Wait(ctx, p.WaitID, 10*time.Millisecond); err != nil || w.Status != "pending" {
		t.Fatalf("wait before the owner decided: %+v %v", w, err)
	}
	if _, err := m.Owner.Decide(ctx, p.WaitID, true, "owner@example.org"); err != nil {
		t.Fatal(err)
	}
	if w, err := c.Wait(ctx, p.WaitID, 5*time.Second); err != nil || w.Status != "approved" {
		t.Fatalf("wait after approval: %+v %v", w, err)
	}
	if a, err := c.Authorize(ctx, s.ID, req); err != nil || a.Value != "Ada" && a.Value != "ada@example.org" {
		t.Fatalf("after approval: %v", err)
	}
	// The file-based default key goes through the same owner rules.
	ds, err := c.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	dcat, _ := c.Catalog(ctx, m.APIKey, "")
	j := strings.Index(string(dcat), "av_identity_")
	dtok := string(dcat)[j:]
	dtok = dtok[:strings.IndexByte(dtok, '"')]
	if _, err := c.Authorize(ctx, ds.ID, control.AuthorizeRequest{Token: dtok, PageURL: "https://www.shop.example/form"}); err != nil {
		t.Fatalf("default key on an approved site: %v", err)
	}
	if _, err := c.Authorize(ctx, ds.ID, control.AuthorizeRequest{Token: dtok, PageURL: "https://other.example/form"}); agentvault.ErrorCode(err) != agentvault.CodeApprovalPending {
		t.Fatalf("default key on a new site: %v", err)
	}
}

func TestMainServesDashboard(t *testing.T) {
	m, _ := startMain(t, "", func(c *proxyd.Config) { c.Listen.Dashboard = "127.0.0.1:0" })
	if m.DashboardAddr == nil {
		t.Fatal("dashboard not listening")
	}
	// The local certificate is trusted by nobody; this only checks that the
	// listener speaks TLS and answers.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var resp *http.Response
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err = hc.Get("https://" + m.DashboardAddr.String() + "/"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for the dashboard to answer over TLS: %v", err)
		}
	}
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		t.Fatalf("dashboard answered %d", resp.StatusCode)
	}
}

func TestOwnerKeyScopeLimitsCatalogAndAuthorize(t *testing.T) {
	m, _ := startMain(t, "", nil)
	ctx := context.Background()
	card, err := m.Vault.AddCard(ctx, proxyd.DefaultOrg, "owner", vault.CardInput{
		Number: vault.NewSecret([]byte("4242424242424242")), CVV: vault.NewSecret([]byte("737")), ExpiryMonth: 12, ExpiryYear: 2031, AnySite: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Vault.AddIdentity(ctx, proxyd.DefaultOrg, "owner", vault.IdentityMeta{Name: "Ada", Email: "ada@example.org"}); err != nil {
		t.Fatal(err)
	}
	_, key, err := m.Owner.CreateAPIKey(ctx, "no cards", owner.Scope{AllLogins: true})
	if err != nil {
		t.Fatal(err)
	}
	c := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	cat, err := c.Catalog(ctx, key, "")
	if err != nil || strings.Contains(string(cat), "av_card_") {
		t.Fatalf("catalog shows a card outside the key's scope: %v", err)
	}
	s, err := c.CreateSession(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// The token this key would use for the card: same grammar, its own suffix.
	_, err = c.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: "av_card_" + card.Label + "_number_" + suffixOf(t, c, key), PageURL: "https://shop.example/"})
	if agentvault.ErrorCode(err) != agentvault.CodeScopeDenied {
		t.Fatalf("authorize outside the key's scope: %v", err)
	}
}

// suffixOf reads a key's token suffix from any token in its catalog.
func suffixOf(t *testing.T, c *control.Client, key string) string {
	cat, err := c.Catalog(context.Background(), key, "")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(cat), `"av_`)
	if i < 0 {
		t.Fatalf("no token in the catalog: %s", cat)
	}
	tok := string(cat)[i+1:]
	tok = tok[:strings.IndexByte(tok, '"')]
	return tok[len(tok)-5:]
}

// TestEmbeddedStoreReleasesMemory: the idle trim reaches the embedded
// SQLite store through an interface; a renamed method would silently
// leave its connections and C heap resident.
func TestEmbeddedStoreReleasesMemory(t *testing.T) {
	m, _ := startMain(t, "", nil)
	if !proxyd.StoreReleasesMemory(m) {
		t.Fatal("the embedded store does not release memory when proxyd is idle")
	}
}
