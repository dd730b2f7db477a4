package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/e2e/merchant"
	"github.com/agentvault/agentvault/internal/leakcheck"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/vault"
)

// appliance is a running proxyd (proxy listener, control API, admin
// metrics) over a real SQLite vault in a temporary data directory, with the
// test merchant behind it and canary secrets in the vault.
type appliance struct {
	m       *merchant.Merchant
	dataDir string
	vault   *vault.Vault
	// pm is proxyd's Main when the appliance runs it (startProxydMain).
	pm *proxyd.Main

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

// uncommonCVV draws again while the CVV is a number a run prints anyway (an
// HTTP status, a year): a short canary must be absent from the run's output
// unless it leaked (leakcheck.Common).
func uncommonCVV(cvv string) string {
	for leakcheck.Common(cvv) {
		_, cvv = merchant.RandomCard()
	}
	return cvv
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
	leakcheck.Plant(ap.card.number)
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
	leakcheck.Plant(ap.login.password)
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

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var errNoPEM = errors.New("no certificate in PEM")
