package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/e2e/merchant"
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
	// Histogram bucket bounds and summary quantiles are fixed numbers of the
	// code, not data: a random 3-digit CVV such as 300 would match le="300"
	// by chance. They are blanked before the sinks are grepped.
	return bucketBounds.ReplaceAll(b, []byte(`$1=""`))
}

var bucketBounds = regexp.MustCompile(`\b(le|quantile)="[^"]*"`)

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var errNoPEM = errors.New("no certificate in PEM")
