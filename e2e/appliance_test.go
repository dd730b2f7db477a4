package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/e2e/merchant"
	"github.com/agentvault/agentvault/intercept"
	"github.com/agentvault/agentvault/internal/vaultcli"
	"github.com/agentvault/agentvault/tokens"
	"github.com/agentvault/agentvault/vault"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// appliance is a running proxyd (proxy listener, control API, admin
// metrics) over a real SQLite vault in a temporary data directory, with the
// test merchant behind it and canary secrets in the vault.
type appliance struct {
	m       *merchant.Merchant
	dataDir string
	vault   *vault.Vault

	proxyAddr        string
	controlURL       string
	controlTokenFile string
	apiKeyFile       string
	apiKey           string
	ctl              *control.Client
	logs             *syncBuffer
	metricsURL       string

	card struct {
		number, cvv string
		month, year int
	}
	login struct{ email, password string }
}

const org = "default"

// uncommonCVV avoids the few three-digit strings that are common in logs (HTTP
// statuses), so that a CVV found in a sink is a leak and not a coincidence.
func uncommonCVV(cvv string) string {
	for {
		switch cvv {
		case "200", "204", "301", "302", "303", "304", "400", "401", "402", "403", "404", "407", "413", "422", "429", "500", "502", "503":
			_, cvv = merchant.RandomCard()
			continue
		}
		return cvv
	}
}

// seed puts the canaries in the vault: a card usable on the shop and its
// processor, an identity, an address and a login for the sign-in site. The
// vault takes only DNS names as sites, so when the merchant runs on
// localhost and 127.0.0.1 (proxyd's Main, which resolves through the
// system) the card is an anySite card and there is no login.
func (ap *appliance) seed(t *testing.T, v *vault.Vault) {
	t.Helper()
	ctx := context.Background()
	number, cvv := merchant.RandomCard()
	ap.card.number, ap.card.cvv = number, uncommonCVV(cvv)
	ap.card.month, ap.card.year = 11, time.Now().Year()+4
	planted.Store(ap.card.number, struct{}{})
	// The owner allows the shop and the processor whose iframe takes the card.
	payHost, _, _ := net.SplitHostPort(ap.m.Pay.Host)
	shopHost, _, _ := net.SplitHostPort(ap.m.Shop.Host)
	named := net.ParseIP(payHost) == nil && payHost != "localhost"
	card := vault.CardInput{
		Number: vault.NewSecret([]byte(ap.card.number)), CVV: vault.NewSecret([]byte(ap.card.cvv)),
		ExpiryMonth: ap.card.month, ExpiryYear: ap.card.year, Holder: "Ada Lovelace",
		Sites: []string{shopHost, payHost},
	}
	if !named {
		card.Sites, card.AnySite = nil, true
	}
	if _, err := v.AddCard(ctx, org, "owner", card); err != nil {
		t.Fatalf("add card: %v", err)
	}
	ap.m.AcceptCard(ap.card.number, ap.card.cvv, ap.card.month, ap.card.year)
	if _, err := v.AddIdentity(ctx, org, "owner", vault.IdentityMeta{Name: "Ada Lovelace", Email: "ada@example.org", Phone: "+49 30 1234567"}); err != nil {
		t.Fatalf("add identity: %v", err)
	}
	if _, err := v.AddAddress(ctx, org, "owner", vault.AddressMeta{Name: "Ada Lovelace", Line1: "12 Analytical Row", City: "Berlin", PostalCode: "10115", Country: "DE"}); err != nil {
		t.Fatalf("add address: %v", err)
	}
	if !named {
		return
	}
	ap.login.email = "grace@example.org"
	ap.login.password = "Pw-" + randomHex(12) + "!x"
	planted.Store(ap.login.password, struct{}{})
	loginHost, _, _ := net.SplitHostPort(ap.m.Login.Host)
	if _, err := v.AddLogin(ctx, org, "owner", vault.LoginInput{
		Site: loginHost, Website: ap.m.Login.URL + "/login", Email: ap.login.email,
		Password: vault.NewSecret([]byte(ap.login.password)),
	}); err != nil {
		t.Fatalf("add login: %v", err)
	}
	ap.m.AddAccount(ap.login.email, ap.login.password, "Grace")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// metrics scrapes the admin listener.
func (ap *appliance) metrics(t *testing.T) []byte {
	t.Helper()
	res, err := (&http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second}).Get(ap.metricsURL)
	if err != nil {
		t.Errorf("scrape metrics: %v", err)
		return nil
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Errorf("read metrics: %v", err)
	}
	return b
}

// hostsResolver answers for the merchant's test names only; anything else is
// unknown, so no lookup ever leaves the machine.
type hostsResolver map[string]string

func (h hostsResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, ok := h[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	if host == "localhost" {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// vaultAdapter gives the proxy the two vault calls it needs.
type vaultAdapter struct{ v *vault.Vault }

func (a vaultAdapter) List(ctx context.Context, o string) ([]vault.Item, error) {
	return a.v.List(ctx, o)
}
func (a vaultAdapter) GetByLabel(ctx context.Context, o string, k vault.Kind, l string) (vault.Item, error) {
	return a.v.GetByLabel(ctx, o, k, l)
}
func (a vaultAdapter) Release(ctx context.Context, r intercept.ReleaseArgs) (vault.Secret, error) {
	return a.v.Release(ctx, vault.ReleaseArgs{Org: r.Org, ItemID: r.ItemID, Field: r.Field, Destination: r.Destination, Session: r.Session, Actor: r.Actor, Purpose: r.Purpose})
}

// startWiredAppliance wires proxyd from its real parts the way proxyd's Main
// does (the SQLite vault under a temporary data directory, intercept's CA
// sealed in the vault, its session table, MITM server and control API), with
// one difference Main has no option for: the proxy resolves the merchant's
// test names (shop.test, pay.test, login.test) to loopback. The vault takes
// only DNS names as card and login sites, so the site-scoped card and the
// login proofs need them.
func startWiredAppliance(t *testing.T) *appliance {
	t.Helper()
	m, err := merchant.Start(merchant.Options{ShopHost: "shop.test", PayHost: "pay.test", LoginHost: "login.test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	ap := &appliance{m: m, dataDir: t.TempDir(), logs: &syncBuffer{}}
	v, closeVault, err := vaultcli.OpenDefault(ap.dataDir)
	if err != nil {
		t.Fatalf("open vault: %v", err)
	}
	t.Cleanup(func() { _ = closeVault() })
	ap.vault = v
	ap.seed(t, v)

	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(ap.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ca, err := intercept.LoadOrCreateCA(ctx, v, nil)
	if err != nil {
		t.Fatalf("CA: %v", err)
	}
	secret, err := v.DeploymentSecret(ctx)
	if err != nil {
		t.Fatalf("deployment secret: %v", err)
	}
	keyID := "key_e2e"
	ap.apiKey = "avk_" + randomHex(16)
	suffix := tokens.Suffix(secret, keyID)
	lookup := func(ctx context.Context, k string) (intercept.APIKey, error) {
		if k != ap.apiKey {
			return intercept.APIKey{}, agentvault.Errorf(agentvault.CodeInvalidAPIKey, "unknown API key")
		}
		return intercept.APIKey{ID: keyID, Org: org, Suffix: suffix}, nil
	}
	sessions := intercept.NewSessions(vaultAdapter{v}, lookup)
	metrics := intercept.NewMetrics()
	block, _ := pemDecode(m.CAPEM())
	srv, err := intercept.NewServer(intercept.Config{
		CA: ca, Sessions: sessions, Logger: log, Metrics: metrics,
		UnsafeAllowPrivateRanges: true,
		ExtraRoots:               block,
		Resolver:                 hostsResolver(m.HostMap()),
	})
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	pl := listen(t)
	ap.proxyAddr = pl.Addr().String()
	go func() { _ = srv.Serve(pl) }()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})

	token := randomHex(24)
	ap.controlTokenFile = filepath.Join(ap.dataDir, "control-token")
	ap.apiKeyFile = filepath.Join(ap.dataDir, "api-key")
	if err := os.WriteFile(ap.controlTokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ap.apiKeyFile, []byte(ap.apiKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cl := listen(t)
	srv.AddSelf(cl.Addr())
	ap.controlURL = "http://" + cl.Addr().String()
	ctlSrv := &http.Server{Handler: intercept.NewControlHandler(intercept.ControlConfig{
		Sessions: sessions, CA: ca, Token: token, ProxyURL: "http://" + ap.proxyAddr, Logger: log,
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = ctlSrv.Serve(cl) }()
	t.Cleanup(func() { _ = ctlSrv.Close() })

	al := listen(t)
	srv.AddSelf(al.Addr())
	ap.metricsURL = "http://" + al.Addr().String() + "/metrics"
	adm := &http.Server{Handler: promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = adm.Serve(al) }()
	t.Cleanup(func() { _ = adm.Close() })

	ap.ctl = control.NewClient(ap.controlURL, token, nil)
	return ap
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var errNoPEM = errors.New("no certificate in PEM")
