package proxyd_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault/authz"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/credentials"
	"github.com/agentvault/agentvault/internal/httpsigtest"
	"github.com/agentvault/agentvault/internal/leakcheck"
	"github.com/agentvault/agentvault/internal/webtls"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/vault"
)

// sigSite is a merchant site that checks every request with the
// independent verifier (package httpsigtest) and records what it found.
type sigSite struct {
	h1, h2 *httptest.Server
	caPath string
	v      *httpsigtest.Verifier

	mu   sync.Mutex
	seen []sigSeen
}

type sigSeen struct {
	host, path, proto string
	signed            bool
	tags              []string
	keyID             string
	err               error
	msg               httpsigtest.Message
}

// newSigSite starts the site on two listeners, one speaking HTTP/1.1 only
// and one HTTP/2, with a certificate for the test names. verifier is set
// once proxyd runs (it needs the directory's trust root).
func newSigSite(t *testing.T) *sigSite {
	t.Helper()
	s := &sigSite{}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sig site CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour)}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "shop.test"},
		DNSNames: []string{"shop.test", "www.shop.test", "pay.test"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	leaf := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	h := http.HandlerFunc(s.serve)
	s.h1 = httptest.NewUnstartedServer(h)
	s.h1.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}}
	s.h1.StartTLS()
	s.h2 = httptest.NewUnstartedServer(h)
	s.h2.EnableHTTP2 = true
	s.h2.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}}
	s.h2.StartTLS()
	t.Cleanup(s.h1.Close)
	t.Cleanup(s.h2.Close)
	s.caPath = filepath.Join(t.TempDir(), "sig-site-ca.pem")
	if err := os.WriteFile(s.caPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *sigSite) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	m := httpsigtest.FromRequest(r)
	m.Header = r.Header.Clone()
	seen := sigSeen{host: strings.Split(r.Host, ":")[0], path: r.URL.Path, proto: r.Proto, signed: httpsigtest.Signed(r.Header), msg: m}
	if seen.signed {
		sigs, err := s.v.Verify(r.Context(), m)
		seen.err = err
		for _, sg := range sigs {
			seen.tags = append(seen.tags, sg.Tag)
			seen.keyID = sg.KeyID
		}
	}
	s.mu.Lock()
	s.seen = append(s.seen, seen)
	s.mu.Unlock()
	if seen.err != nil {
		http.Error(w, "signature refused", http.StatusUnauthorized)
		return
	}
	_, _ = io.WriteString(w, "ok")
}

func (s *sigSite) last() sigSeen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[len(s.seen)-1]
}

func (s *sigSite) port(srv *httptest.Server) string {
	_, p, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return p
}

// verifierFor trusts proxyd's dashboard root, where the directory is.
func verifierFor(t *testing.T, m *proxyd.Main, now func() time.Time) *httpsigtest.Verifier {
	t.Helper()
	pool := x509.NewCertPool()
	b, err := os.ReadFile(filepath.Join(m.DataDir(), webtls.LocalCAFile))
	if err != nil || !pool.AppendCertsFromPEM(b) {
		t.Fatalf("the dashboard root: %v", err)
	}
	return &httpsigtest.Verifier{Now: now, Client: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}}
}

// proxyClientProto is proxyClient speaking HTTP/1.1 or HTTP/2 to proxyd.
func proxyClientProto(m *proxyd.Main, s control.CreateSessionResponse, h2 bool) *http.Client {
	c := proxyClient(m, s)
	if !h2 {
		tr := c.Transport.(*http.Transport)
		tr.ForceAttemptHTTP2 = false
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return c
}

// testClock is a settable clock for Main.Now.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// startBotAuthMain runs Main with its dashboard, the directory on it, the
// site's names resolving to loopback and the owner's choice of sites.
func startBotAuthMain(t *testing.T, site *sigSite, clk *testClock, logs io.Writer, sites ...proxyd.BotAuthSite) *proxyd.Main {
	t.Helper()
	m := proxyd.NewMain()
	m.Config.DataDir = t.TempDir()
	m.Config.Listen = proxyd.ListenConfig{Proxy: "127.0.0.1:0", Control: "127.0.0.1:0", Admin: "127.0.0.1:0", Dashboard: "127.0.0.1:0"}
	m.Config.UnsafeAllowPrivateRanges = true
	m.Config.UnsafeTestHosts = map[string]string{"shop.test": "127.0.0.1", "www.shop.test": "127.0.0.1", "pay.test": "127.0.0.1"}
	m.Config.TLS.ExtraRoots = []string{site.caPath}
	m.Config.Policy.AuthorizedDestinations = []string{"shop.test"}
	m.Config.BotAuth = proxyd.BotAuthConfig{Directory: "dashboard", Window: 2 * time.Minute, Sites: sites}
	m.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if clk != nil {
		m.Now = clk.now
	}
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

// botAuthSeed reads the signing keys' private halves from the vault: the
// canary every sink is searched for.
func botAuthSeeds(t *testing.T, v *vault.Vault) [][]byte {
	t.Helper()
	b, err := v.OpenBlob(context.Background(), "botauth.keys")
	if err != nil {
		t.Fatal(err)
	}
	var kr struct {
		Keys []struct {
			Seed []byte `json:"seed"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(b, &kr); err != nil || len(kr.Keys) == 0 {
		t.Fatalf("keyring: %v", err)
	}
	var out [][]byte
	for _, k := range kr.Keys {
		out = append(out, k.Seed)
	}
	return out
}

// keyLeaks names the first sink holding a private key in a common encoding.
func keyLeaks(seeds [][]byte, sinks map[string][]byte) string {
	for _, seed := range seeds {
		priv := ed25519.NewKeyFromSeed(seed)
		for _, enc := range []string{
			base64.StdEncoding.EncodeToString(seed), base64.RawStdEncoding.EncodeToString(seed), base64.RawURLEncoding.EncodeToString(seed),
			hex.EncodeToString(seed), strings.ToUpper(hex.EncodeToString(seed)),
			base64.StdEncoding.EncodeToString(priv), base64.RawURLEncoding.EncodeToString(priv), hex.EncodeToString(priv),
		} {
			for name, b := range sinks {
				// The first 24 characters are already distinctive (about 144
				// bits): a partial print counts too.
				if bytes.Contains(b, []byte(enc[:24])) {
					return name
				}
			}
		}
	}
	return ""
}

// TestBotAuth_SignsChosenSitesOverH1AndH2 is issue 29's proof at proxyd's
// level: with shop.test chosen (and Visa TAP on for it), every request the
// agent sends there through proxyd, over HTTP/1.1 or HTTP/2 on either leg,
// reaches the site signed, and the site's own verifier (written from the
// RFCs, fetching and checking the directory on the dashboard) accepts it:
// browsing with TAP's browsing tag, the request carrying the card with its
// payment tag. pay.test, not chosen, receives no signature field. Each
// signed request class is audited once while the session runs and counted
// when it ends; the metric counts by class and tag with no host; the
// private key is in no log, metric, page or command output (P11).
func TestBotAuth_SignsChosenSitesOverH1AndH2(t *testing.T) {
	site := newSigSite(t)
	logs := &syncBuf{}
	m := startBotAuthMain(t, site, nil, logs, proxyd.BotAuthSite{Host: "shop.test", TAP: []string{"browse", "pay"}})
	site.v = verifierFor(t, m, nil)
	ctx := context.Background()
	if _, err := m.Vault.AddCard(ctx, proxyd.DefaultOrg, "owner", vault.CardInput{
		Number: vault.NewSecret([]byte("4242424242424242")), CVV: vault.NewSecret([]byte("737")), ExpiryMonth: 12, ExpiryYear: 2031, AnySite: true,
	}); err != nil {
		t.Fatal(err)
	}
	ctl := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	sess, err := ctl.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	signed := 0
	for _, clientH2 := range []bool{false, true} {
		for _, up := range []*httptest.Server{site.h1, site.h2} {
			name := fmt.Sprintf("client h2=%v, site %s", clientH2, map[bool]string{true: "h2", false: "h1"}[up == site.h2])
			c := proxyClientProto(m, sess, clientH2)
			base := "https://shop.test:" + site.port(up)
			resp, err := c.Get(base + "/products/1?color=red")
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			resp.Body.Close()
			got := site.last()
			wantProto := map[bool]string{true: "HTTP/2.0", false: "HTTP/1.1"}[up == site.h2]
			if resp.StatusCode != 200 || got.err != nil || !slices.Equal(got.tags, []string{"web-bot-auth", "agent-browser-auth"}) || got.proto != wantProto {
				t.Fatalf("%s: browsing: status %d, site verdict %v, tags %v, proto %s", name, resp.StatusCode, got.err, got.tags, got.proto)
			}
			// The payment: the card's stand-in becomes the real number in
			// the body; the signature says it is the agent paying.
			a, err := ctl.Authorize(ctx, sess.ID, control.AuthorizeRequest{Token: cardToken(t, ctl, m), PageURL: base + "/checkout"})
			if err != nil {
				t.Fatalf("%s: authorize: %v", name, err)
			}
			resp, err = c.Post(base+"/v1/payment_intents/pi_1/confirm", "application/x-www-form-urlencoded", strings.NewReader(url.Values{"card[number]": {a.Value}}.Encode()))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			resp.Body.Close()
			got = site.last()
			if resp.StatusCode != 200 || got.err != nil || !slices.Equal(got.tags, []string{"web-bot-auth", "agent-payer-auth"}) {
				t.Fatalf("%s: payment: status %d (%s), site verdict %v, tags %v", name, resp.StatusCode, resp.Header.Get("X-Agentvault-Code"), got.err, got.tags)
			}
			// A site not chosen by the owner receives no signature field.
			resp, err = c.Get("https://pay.test:" + site.port(up) + "/")
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			resp.Body.Close()
			if got = site.last(); got.host != "pay.test" || got.signed {
				t.Fatalf("%s: pay.test (not chosen) received a signature field", name)
			}
			signed += 2
		}
	}
	if site.v.Fetches() != 1 {
		t.Errorf("the site fetched the directory %d times, want once", site.v.Fetches())
	}

	// The agent's own signature fields are refused, never forwarded.
	req, _ := http.NewRequest(http.MethodGet, "https://pay.test:"+site.port(site.h2)+"/", nil)
	req.Header.Set("Signature-Agent", `sig1="https://impostor.example"`)
	before := len(site.seen)
	if resp, err := proxyClient(m, sess).Do(req); err != nil || resp.Header.Get("X-Agentvault-Code") != "signature_headers_refused" {
		t.Fatalf("the agent's own Signature-Agent: %v %v", resp, err)
	}
	if len(site.seen) != before {
		t.Fatal("the refused request reached the site")
	}

	// One audit record per class (session, site, tag) while it runs...
	recs, err := m.Vault.Audit(ctx, vault.AuditFilter{Org: proxyd.DefaultOrg, Action: vault.AuditSign})
	if err != nil {
		t.Fatal(err)
	}
	var purposes []string
	for _, r := range recs {
		if r.Destination != "shop.test" || r.Session != sess.ID || r.Actor != proxyd.DefaultKeyID {
			t.Errorf("audit record %+v", r)
		}
		purposes = append(purposes, r.Purpose)
	}
	slices.Sort(purposes)
	if want := []string{"agent-browser-auth", "agent-payer-auth", "web-bot-auth"}; !slices.Equal(purposes, want) {
		t.Errorf("audit while the session runs: %v, want one record per class %v", purposes, want)
	}
	// ... and the counts when it ends.
	if _, err := ctl.CloseSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	recs, _ = m.Vault.Audit(ctx, vault.AuditFilter{Org: proxyd.DefaultOrg, Action: vault.AuditSign})
	var counts []string
	for _, r := range recs {
		if strings.Contains(r.Purpose, "requests signed") {
			counts = append(counts, r.Purpose)
		}
	}
	slices.Sort(counts)
	want := []string{fmt.Sprintf("agent-browser-auth: %d requests signed", signed/2), fmt.Sprintf("agent-payer-auth: %d requests signed", signed/2), fmt.Sprintf("web-bot-auth: %d requests signed", signed)}
	if !slices.Equal(counts, want) {
		t.Errorf("counts at the session's end %v, want %v", counts, want)
	}

	metrics := scrape(t, m)
	if metrics[`agentvault_botauth_signed_requests_total{site_class="tap",tag="web-bot-auth"}`] != float64(signed) ||
		metrics[`agentvault_botauth_signed_requests_total{site_class="tap",tag="agent-payer-auth"}`] != float64(signed/2) ||
		metrics[`agentvault_botauth_signed_requests_total{site_class="identity",tag="web-bot-auth"}`] != 0 {
		t.Errorf("signature metric: %v", metrics)
	}
	raw, _ := http.Get("http://" + m.AdminAddr.String() + "/metrics")
	rawMetrics, _ := io.ReadAll(raw.Body)
	raw.Body.Close()
	if bytes.Contains(rawMetrics, []byte("shop.test")) {
		t.Error("a host name is in the metrics (P15)")
	}

	// P11: the private key is nowhere.
	dirResp, err := site.v.Client.Get(m.BotAuthOrigin() + "/.well-known/http-message-signatures-directory")
	if err != nil {
		t.Fatal(err)
	}
	dirBody, _ := io.ReadAll(dirResp.Body)
	dirResp.Body.Close()
	var status, errOut bytes.Buffer
	if code := proxyd.RunCLI(ctx, []string{"botauth", "status", "--data", m.DataDir()}, &status, &errOut); code != 0 {
		t.Fatalf("botauth status: %d %s", code, errOut.String())
	}
	if !strings.Contains(status.String(), m.BotAuthKeys().Active().ID()) {
		t.Errorf("status does not list the key in use: %s", status.String())
	}
	var hdrs bytes.Buffer
	for _, s := range site.seen {
		_ = s.msg.Header.Write(&hdrs)
	}
	// The owner sees the signed classes on the dashboard's Activity page.
	if err := m.Owner.SetOwnerPassword(ctx, "owner@example.org", peoplePW); err != nil {
		t.Fatal(err)
	}
	d, _ := signInAs(t, m, "owner@example.org", peoplePW, "")
	_, _, activity := d.status(http.MethodGet, "/activity", nil)
	if !strings.Contains(activity, "signed as the agent (agent-payer-auth)") || !strings.Contains(activity, "shop.test") {
		t.Error("the Activity page does not show the signed request classes")
	}
	if sink := keyLeaks(botAuthSeeds(t, m.Vault), map[string][]byte{"proxyd logs": []byte(logs.String()), "metrics": rawMetrics,
		"directory": dirBody, "botauth status": status.Bytes(), "what the sites received": hdrs.Bytes(), "activity page": []byte(activity)}); sink != "" {
		t.Fatalf("the private signing key appears in %s", sink)
	}
}

// cardToken is the vault's first card number token, from the catalog.
func cardToken(t *testing.T, ctl *control.Client, m *proxyd.Main) string {
	t.Helper()
	cat, err := ctl.Catalog(context.Background(), m.APIKey, "")
	i := bytes.Index(cat, []byte("av_card_1_number_"))
	if err != nil || i < 0 {
		t.Fatalf("no card token in the catalog: %v", err)
	}
	return string(cat[i : i+len("av_card_1_number_")+5])
}

// waitFor polls cond until it holds, failing after a generous bound (a
// running proxyd reloads the keyring and the sites every few seconds).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBotAuth_RotationAndCLI: `proxyd botauth rotate` on the running
// appliance's store makes a new key sign within proxyd's reload; the
// directory then lists both keys, and a signature the old key made just
// before still verifies at the site until its window ends; once every
// signature of the old key has expired, the directory drops it. `botauth
// enable` and `disable` choose sites for a running proxyd; a site the
// config names cannot be disabled from the command line.
func TestBotAuth_RotationAndCLI(t *testing.T) {
	site := newSigSite(t)
	clk := &testClock{t: time.Now()}
	m := startBotAuthMain(t, site, clk, io.Discard, proxyd.BotAuthSite{Host: "shop.test"})
	site.v = verifierFor(t, m, clk.now)
	ctx := context.Background()
	ctl := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	sess, err := ctl.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	c := proxyClient(m, sess)
	get := func(u string) sigSeen {
		t.Helper()
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return site.last()
	}
	shop := "https://shop.test:" + site.port(site.h2)
	pay := "https://pay.test:" + site.port(site.h2)
	// The CLI reads the deployment's config file, as the owner's shell does.
	if err := os.WriteFile(filepath.Join(m.DataDir(), "proxyd.yaml"), []byte("bot_auth:\n  directory: dashboard\n  window: 2m\n  sites:\n    - host: shop.test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := proxyd.RunCLI(ctx, append(args, "--data", m.DataDir()), &out, &errOut)
		return code, out.String() + errOut.String()
	}

	first := get(shop + "/before")
	oldID := m.BotAuthKeys().Active().ID()
	if first.err != nil || first.keyID != oldID {
		t.Fatalf("before rotation: %v, key %s (want %s)", first.err, first.keyID, oldID)
	}
	if code, out := cli("botauth", "rotate"); code != 0 || !strings.Contains(out, oldID) {
		t.Fatalf("botauth rotate: %d %s", code, out)
	}
	var after sigSeen
	waitFor(t, "the rotated key to sign", func() bool { after = get(shop + "/after"); return after.keyID != oldID })
	if after.err != nil {
		t.Fatalf("the site refused the new key's signature: %v", after.err)
	}
	d, err := site.v.FetchDirectory(ctx, m.BotAuthOrigin())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Keys[oldID]; !ok || len(d.Keys) != 2 || d.Exp[oldID] == 0 {
		t.Fatalf("after rotation the directory lists %d keys (old listed: %v, its exp %d)", len(d.Keys), ok, d.Exp[oldID])
	}
	// The old key's last signature, seen by another site within its window.
	clk.add(time.Minute)
	other := verifierFor(t, m, clk.now)
	if _, err := other.Verify(ctx, first.msg); err != nil {
		t.Fatalf("the old key's signature within its window, after rotation: %v", err)
	}
	// Past every old signature's expiry: out of the directory.
	clk.add(10 * time.Minute)
	d, err = verifierFor(t, m, clk.now).FetchDirectory(ctx, m.BotAuthOrigin())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Keys[oldID]; ok || len(d.Keys) != 1 {
		t.Fatalf("the retired key is still in the directory (%d keys)", len(d.Keys))
	}

	// Choosing a site from the command line, with TAP's payment tag.
	if got := get(pay + "/"); got.signed {
		t.Fatal("pay.test is signed before the owner chose it")
	}
	if code, out := cli("botauth", "enable", "pay.test", "--tap", "browse"); code != 0 || !strings.Contains(out, "pay.test") {
		t.Fatalf("botauth enable: %d %s", code, out)
	}
	var p sigSeen
	waitFor(t, "pay.test to be signed", func() bool { p = get(pay + "/"); return p.signed })
	if p.err != nil || !slices.Equal(p.tags, []string{"web-bot-auth", "agent-browser-auth"}) {
		t.Fatalf("pay.test after enable: %v %v", p.err, p.tags)
	}
	if code, out := cli("botauth", "status"); code != 0 || !strings.Contains(out, "pay.test") || !strings.Contains(out, "(cli)") || !strings.Contains(out, "(config)") {
		t.Errorf("botauth status: %d %s", code, out)
	}
	if code, _ := cli("botauth", "disable", "pay.test"); code != 0 {
		t.Fatal("botauth disable failed")
	}
	waitFor(t, "pay.test to be unsigned", func() bool { return !get(pay + "/").signed })
	if code, out := cli("botauth", "disable", "shop.test"); code == 0 || !strings.Contains(out, "bot_auth.sites") {
		t.Errorf("disabling a site the config names: %d %s", code, out)
	}
	// A reloaded config's sites apply too (SIGHUP runs Reload).
	cfgPath := filepath.Join(m.DataDir(), "proxyd.yaml")
	if err := os.WriteFile(cfgPath, []byte("bot_auth:\n  directory: dashboard\n  window: 2m\n  sites:\n    - host: shop.test\n    - host: pay.test\n      tap: [browse]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.Reload(cfgPath); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pay.test to be signed after the reload", func() bool { p = get(pay + "/"); return p.signed })
	if p.err != nil || !slices.Equal(p.tags, []string{"web-bot-auth", "agent-browser-auth"}) {
		t.Fatalf("pay.test after the reload: %v %v", p.err, p.tags)
	}
	if code, _ := cli("botauth", "enable", "pay.test", "--tap", "checkout"); code == 0 {
		t.Error("an unknown TAP use was accepted")
	}
}

// TestBotAuth_ConfigRules: bot_auth is off by default, and a config that
// names sites without a directory, a bad origin, window or TAP use is
// refused before anything listens (P17).
func TestBotAuth_ConfigRules(t *testing.T) {
	if c := proxyd.DefaultConfig(); c.BotAuth.Directory != "" || len(c.BotAuth.Sites) != 0 {
		t.Fatalf("bot_auth is on by default: %+v", c.BotAuth)
	}
	for name, mod := range map[string]func(*proxyd.Config){
		"sites without directory": func(c *proxyd.Config) { c.BotAuth.Sites = []proxyd.BotAuthSite{{Host: "shop.test"}} },
		"dashboard off":           func(c *proxyd.Config) { c.Listen.Dashboard = ""; c.BotAuth.Directory = "dashboard" },
		"bad directory":           func(c *proxyd.Config) { c.BotAuth.Directory = "somewhere" },
		"http origin": func(c *proxyd.Config) {
			c.BotAuth.Directory = "dashboard"
			c.BotAuth.AgentOrigin = "http://agent.example"
		},
		"origin with a path": func(c *proxyd.Config) {
			c.BotAuth.Directory = "dashboard"
			c.BotAuth.AgentOrigin = "https://agent.example/keys"
		},
		"window too long": func(c *proxyd.Config) { c.BotAuth.Directory = "dashboard"; c.BotAuth.Window = 2 * time.Hour },
		"unknown TAP use": func(c *proxyd.Config) {
			c.BotAuth.Directory = "dashboard"
			c.BotAuth.Sites = []proxyd.BotAuthSite{{Host: "shop.test", TAP: []string{"checkout"}}}
		},
	} {
		c := proxyd.DefaultConfig()
		mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "bot_auth") {
			t.Errorf("%s: %v", name, err)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "proxyd.yaml")
	_ = os.WriteFile(path, []byte("bot_auth:\n  directory: dashboard\n  sites:\n    - host: shop.example\n      tap: [pay]\n      extra: 1\n"), 0o600)
	if _, err := proxyd.LoadConfig(path); err == nil {
		t.Error("an unknown key under bot_auth.sites was accepted")
	}
	_ = os.WriteFile(path, []byte("bot_auth:\n  directory: dashboard\n  window: 2m\n  sites:\n    - host: shop.example\n      tap: [browse, pay]\n"), 0o600)
	c, err := proxyd.LoadConfig(path)
	if err != nil || c.BotAuth.Window != 2*time.Minute || len(c.BotAuth.Sites) != 1 {
		t.Errorf("a good bot_auth section: %v %+v", err, c.BotAuth)
	}
}

// TestBotAuth_OwnDirectoryListener: with bot_auth.directory a host:port,
// the directory is served there over TLS (a leaf of the local root for a
// local address), signed for the agent origin and unsigned under any other
// name; the dashboard's route then answers 404; the listener is one of
// proxyd's own, so the proxy refuses to reach it (P16).
func TestBotAuth_OwnDirectoryListener(t *testing.T) {
	m, logs := startMain(t, "", func(c *proxyd.Config) {
		c.Listen.Dashboard = "127.0.0.1:0"
		c.BotAuth = proxyd.BotAuthConfig{Directory: "127.0.0.1:0", Sites: []proxyd.BotAuthSite{{Host: "shop.test"}}}
	})
	origin := m.BotAuthOrigin()
	if !strings.HasPrefix(origin, "https://127.0.0.1:") || strings.HasSuffix(origin, ":0") {
		t.Fatalf("agent origin %q", origin)
	}
	v := verifierFor(t, m, nil)
	ctx := context.Background()
	d, err := v.FetchDirectory(ctx, origin)
	if err != nil {
		t.Fatalf("the site could not fetch and verify the directory: %v", err)
	}
	if _, ok := d.Keys[m.BotAuthKeys().Active().ID()]; !ok {
		t.Error("the directory does not list the key in use")
	}
	// Under another name (localhost), the keys come unsigned: no proof
	// binds them to a name that is not the agent's.
	req, _ := http.NewRequest(http.MethodGet, origin+"/.well-known/http-message-signatures-directory", nil)
	req.Host = "copy.example"
	resp, err := v.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Signature") != "" || resp.Header.Get("Content-Type") != "application/http-message-signatures-directory+json" {
		t.Errorf("directory under another name: %d, signature %q", resp.StatusCode, resp.Header.Get("Signature"))
	}
	resp, err = v.Client.Get("https://" + m.DashboardAddr.String() + "/.well-known/http-message-signatures-directory")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("the dashboard serves the directory too: %d", resp.StatusCode)
	}
	ctl := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	sess, err := ctl.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	// The CONNECT is refused (403, proxy_loop): the client sees the status.
	resp, err = proxyClient(m, sess).Get(origin + "/.well-known/http-message-signatures-directory")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("the proxy reached its own directory listener: %d", resp.StatusCode)
	}
	if !strings.Contains(err.Error(), "Forbidden") || !strings.Contains(logs.String(), `"code":"proxy_loop"`) {
		t.Errorf("CONNECT to the directory listener: %v, not refused as a loop", err)
	}
}

// TestBotAuth_DashboardControls is issue 29's owner controls on the
// dashboard, over its real TLS listener: the Signed requests page shows
// the identity (the key in use, the directory's address, on), the sites
// chosen with their tags, and the signed request classes as the audit log
// counted them. A member reaches none of it; an admin given the sites
// area chooses sites but neither rotates the key nor sees the audit
// classes. The owner chooses pay.test with Visa TAP browsing and the very
// next request there is signed so (the site's own verifier accepts it);
// stopping it leaves the next one unsigned; a site the config names says
// where to remove it. Rotation asks for a confirmation, then a new key
// signs the next request while the directory keeps the old one. No page
// holds a private key (P11, internal/leakcheck).
func TestBotAuth_DashboardControls(t *testing.T) {
	site := newSigSite(t)
	logs := &syncBuf{}
	m := startBotAuthMain(t, site, nil, logs, proxyd.BotAuthSite{Host: "shop.test"})
	site.v = verifierFor(t, m, nil)
	ctx := context.Background()
	const ownerEmail, adminEmail, memberEmail = "owner@example.org", "admin@example.org", "member@example.org"
	for _, e := range []string{ownerEmail, adminEmail, memberEmail} {
		if err := m.Owner.SetOwnerPassword(ctx, e, peoplePW); err != nil {
			t.Fatal(err)
		}
	}
	by, err := m.Credentials.PrincipalFor(ctx, proxyd.DefaultOrg, ownerEmail)
	if err != nil {
		t.Fatal(err)
	}
	for _, mm := range []credentials.Member{{Org: proxyd.DefaultOrg, User: adminEmail, Role: credentials.RoleAdmin}, {Org: proxyd.DefaultOrg, User: memberEmail, Role: credentials.RoleMember}} {
		if err := m.Credentials.PutMember(ctx, by, mm); err != nil {
			t.Fatal(err)
		}
	}
	var pages [][]byte // every page the test saw, for the canary check
	see := func(body string) string { pages = append(pages, []byte(body)); return body }

	ctl := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	sess, err := ctl.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	c := proxyClient(m, sess)
	get := func(u string) sigSeen {
		t.Helper()
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return site.last()
	}
	shop, pay := "https://shop.test:"+site.port(site.h2), "https://pay.test:"+site.port(site.h2)
	oldID := m.BotAuthKeys().Active().ID()
	if got := get(shop + "/"); got.err != nil || got.keyID != oldID {
		t.Fatalf("shop.test before any change: %v, key %s", got.err, got.keyID)
	}

	// A member: 403 on every signing route, and nothing changes.
	mem, _ := signInAs(t, m, memberEmail, peoplePW, "")
	_, _, memPage := mem.status(http.MethodGet, "/credentials", nil)
	memCSRF := csrfRe.FindStringSubmatch(memPage)
	if memCSRF == nil || strings.Contains(memPage, `href="/signing"`) {
		t.Fatal("the member's page has no CSRF token, or links the signing page")
	}
	for _, r := range []struct{ method, path string }{{"GET", "/signing"}, {"POST", "/signing/sites"}, {"POST", "/signing/sites/remove"}, {"GET", "/signing/rotate"}, {"POST", "/signing/rotate"}} {
		var form url.Values
		if r.method == http.MethodPost {
			form = url.Values{"csrf": {memCSRF[1]}, "host": {"pay.test"}, "tap": {"browse"}, "confirm": {"yes"}}
		}
		if st, _, body := mem.status(r.method, r.path, form); st != http.StatusForbidden || !strings.Contains(see(body), "only the owner may") {
			t.Errorf("member %s %s: %d", r.method, r.path, st)
		}
	}
	if got := get(pay + "/"); got.signed || m.BotAuthKeys().Active().ID() != oldID {
		t.Fatal("a member's attempt changed the signing identity")
	}

	// The owner sees the identity and the config's site.
	own, _ := signInAs(t, m, ownerEmail, peoplePW, "")
	page := see(own.do(http.MethodGet, "/signing", nil))
	for _, want := range []string{"Signing is <strong>on</strong>", m.BotAuthOrigin() + "/.well-known/http-message-signatures-directory", oldID,
		"shop.test", "in proxyd's config (bot_auth.sites)", "Web Bot Auth (web-bot-auth)", `href="/signing/rotate"`, "Signed request classes"} {
		if !strings.Contains(page, want) {
			t.Errorf("the signing page lacks %q", want)
		}
	}

	// The owner chooses pay.test with TAP browsing: the next request is signed so.
	page = see(own.post("/signing", "/signing/sites", url.Values{"host": {"Pay.Test"}, "tap": {"browse"}}))
	if !strings.Contains(page, "Requests to pay.test and its subdomains are signed with Web Bot Auth (web-bot-auth) and Visa TAP browsing (agent-browser-auth)") {
		t.Errorf("no confirmation of the choice on the page")
	}
	if got := get(pay + "/"); !got.signed || got.err != nil || !slices.Equal(got.tags, []string{"web-bot-auth", "agent-browser-auth"}) {
		t.Fatalf("pay.test right after the owner chose it: signed %v, verdict %v, tags %v", got.signed, got.err, got.tags)
	}
	// TAP off again for it (the Save form): Web Bot Auth only.
	see(own.post("/signing", "/signing/sites", url.Values{"host": {"pay.test"}}))
	if got := get(pay + "/"); got.err != nil || !slices.Equal(got.tags, []string{"web-bot-auth"}) {
		t.Fatalf("pay.test without TAP: %v %v", got.err, got.tags)
	}

	// An admin with the sites area: chooses sites, no rotation, no audit.
	see(own.post("/delegation", "/delegation", url.Values{"area": {string(authz.Sites)}}))
	adm, _ := signInAs(t, m, adminEmail, peoplePW, "")
	st, _, admPage := adm.status(http.MethodGet, "/signing", nil)
	if st != http.StatusOK || !strings.Contains(see(admPage), "pay.test") || strings.Contains(admPage, "Signed request classes") || strings.Contains(admPage, `href="/signing/rotate"`) {
		t.Errorf("admin with the sites area on /signing: %d (classes or rotate shown)", st)
	}
	if st, _, _ := adm.status(http.MethodGet, "/signing/rotate", nil); st != http.StatusForbidden {
		t.Errorf("admin on the rotation page: %d", st)
	}

	// The session ends: its classes are counted on the page.
	if _, err := ctl.CloseSession(ctx, sess.ID); err != nil {
		t.Fatal(err)
	}
	page = see(own.do(http.MethodGet, "/signing", nil))
	for _, want := range []string{"<td>shop.test</td><td>web-bot-auth</td><td>1</td>", "<td>pay.test</td><td>agent-browser-auth</td><td>1</td>",
		"<td>pay.test</td><td>web-bot-auth</td><td>2</td>", sess.ID} {
		if !strings.Contains(page, want) {
			t.Errorf("the signed request classes lack %q", want)
		}
	}

	// Rotation: a confirmation page first; without it nothing rotates.
	page = see(own.do(http.MethodGet, "/signing/rotate", nil))
	if !strings.Contains(page, oldID) || !strings.Contains(page, `name="confirm" value="yes"`) {
		t.Fatal("the rotation's confirmation page does not name the key in use")
	}
	if st, _, _ := own.status(http.MethodPost, "/signing/rotate", url.Values{"csrf": {csrfRe.FindStringSubmatch(page)[1]}}); st != http.StatusBadRequest || m.BotAuthKeys().Active().ID() != oldID {
		t.Fatalf("rotation without the confirmation: %d", st)
	}
	page = see(own.post("/signing/rotate", "/signing/rotate", url.Values{"confirm": {"yes"}}))
	newID := m.BotAuthKeys().Active().ID()
	if newID == oldID || !strings.Contains(page, "Key "+newID+" signs from now. The old key "+oldID+" stays in the directory until") {
		t.Fatalf("after rotation the key is %s (was %s), page says so: %v", newID, oldID, strings.Contains(page, newID))
	}
	sess2, err := ctl.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	c = proxyClient(m, sess2)
	if got := get(shop + "/after"); got.err != nil || got.keyID != newID {
		t.Fatalf("the request after the rotation: verdict %v, key %s, want %s", got.err, got.keyID, newID)
	}
	d, err := site.v.FetchDirectory(ctx, m.BotAuthOrigin())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Keys[oldID]; !ok || len(d.Keys) != 2 {
		t.Fatalf("after the rotation the directory lists %d keys (the old one: %v)", len(d.Keys), ok)
	}

	// Stop signing for pay.test; the config's site cannot be stopped here.
	see(own.post("/signing", "/signing/sites/remove", url.Values{"host": {"pay.test"}}))
	if got := get(pay + "/"); got.signed {
		t.Fatal("pay.test is still signed after the owner stopped it")
	}
	page = see(own.post("/signing", "/signing/sites/remove", url.Values{"host": {"shop.test"}}))
	if !strings.Contains(page, "bot_auth.sites: remove it there") {
		t.Error("stopping the config's site does not say where to remove it")
	}
	if got := get(shop + "/"); !got.signed {
		t.Error("the config's site stopped being signed")
	}

	// P11: no page holds a private key, in any encoding.
	var canaries []leakcheck.Canary
	for _, seed := range botAuthSeeds(t, m.Vault) {
		canaries = append(canaries, leakcheck.Value("signing key seed", string(seed)), leakcheck.Value("signing key seed (hex)", hex.EncodeToString(seed)),
			leakcheck.Value("signing private key", string(ed25519.NewKeyFromSeed(seed))))
	}
	if len(canaries) != 6 {
		t.Fatalf("%d canaries, want both keys' three forms", len(canaries))
	}
	leaks := leakcheck.New(canaries...)
	for i, p := range pages {
		leaks.Text(t, fmt.Sprintf("dashboard page %d", i), p)
	}
	leaks.Logs(t, "proxyd's log", []byte(logs.String()))
}
