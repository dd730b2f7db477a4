package merchant

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

func start(t *testing.T) *Merchant {
	t.Helper()
	m, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// client trusts only the merchant CA and keeps cookies, like a browser would.
func client(t *testing.T, m *Merchant) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &http.Client{
		Jar: jar,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: m.CertPool()},
			ForceAttemptHTTP2: true,
			Proxy:             nil,
		},
	}
}

func testCard() (number, cvc string) { return RandomCard() }

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestGenerateCardNumberPassesLuhn(t *testing.T) {
	for i := 0; i < 200; i++ {
		n, _ := testCard()
		if len(n) != 16 || !luhnValid(n) || !strings.HasPrefix(n, "4") {
			t.Fatalf("generated number of length %d does not pass Luhn", len(n))
		}
	}
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"4242424242424242", true}, {"4242424242424241", false}, {"378282246310005", true},
		{"42424242a2424242", false}, {"1234", false}, {"", false},
	} {
		if got := luhnValid(tc.in); got != tc.want {
			t.Errorf("luhnValid(case %q) = %v", tc.in, got)
		}
	}
}

var (
	frameSrcRe = regexp.MustCompile(`<iframe id="card-frame" title="Secure payment input frame" src="([^"]+)"`)
	intentRe   = regexp.MustCompile(`var INTENT = "([^"]+)";`)
	secretRe   = regexp.MustCompile(`var SECRET = "([^"]+)";`)
)

// checkout walks the shop the way the card form's script does, and returns
// the confirmation page.
func checkout(t *testing.T, m *Merchant, c *http.Client, number, cvc string, expYear int) (status int, page string) {
	t.Helper()
	res, err := c.PostForm(m.Shop.URL+"/cart", url.Values{"sku": {"trail-shoes"}, "quantity": {"1"}})
	if err != nil {
		t.Fatal(err)
	}
	if cart := body(t, res); !strings.Contains(cart, `id="cart-total">EUR 42.50`) {
		t.Fatalf("cart page does not show the expected total")
	}
	res, err = c.Get(m.Shop.URL + "/checkout")
	if err != nil {
		t.Fatal(err)
	}
	page = body(t, res)
	if !strings.Contains(page, `data-total="EUR 42.50"`) {
		t.Fatal("checkout page has no order total")
	}
	src := frameSrcRe.FindStringSubmatch(page)
	if src == nil {
		t.Fatal("checkout page has no card iframe")
	}
	frameURL := strings.ReplaceAll(src[1], "&amp;", "&")
	if !strings.HasPrefix(frameURL, m.Pay.URL+"/elements/card?") {
		t.Fatalf("card iframe is not on the payments origin: %s", frameURL)
	}
	res, err = c.Get(frameURL)
	if err != nil {
		t.Fatal(err)
	}
	if csp := res.Header.Get("Content-Security-Policy"); csp != "frame-ancestors "+m.Shop.URL {
		t.Errorf("card frame CSP = %q", csp)
	}
	frame := body(t, res)
	intent, secret := intentRe.FindStringSubmatch(frame), secretRe.FindStringSubmatch(frame)
	if intent == nil || secret == nil {
		t.Fatal("card frame carries no payment intent")
	}
	js, _ := json.Marshal(map[string]any{"client_secret": secret[1], "card": map[string]string{
		"number": number, "exp_month": "12", "exp_year": itoa(expYear), "cvc": cvc,
	}})
	res, err = c.Post(m.Pay.URL+"/v1/payment_intents/"+intent[1]+"/confirm", "application/json", bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	confirm := body(t, res)
	if res.StatusCode != http.StatusOK {
		return res.StatusCode, confirm
	}
	res, err = c.PostForm(m.Shop.URL+"/checkout", url.Values{
		"email": {"ada@example.org"}, "first_name": {"Ada"}, "last_name": {"Lovelace"},
		"address_line1": {"12 Analytical Row"}, "postal_code": {"10115"}, "city": {"Berlin"},
		"country": {"DE"}, "billing_same": {"on"}, "payment_intent": {intent[1]},
	})
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, body(t, res)
}

func itoa(n int) string { return jsonNumber(n) }

func jsonNumber(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestCheckoutChargesTheProcessorNotTheShop(t *testing.T) {
	m := start(t)
	c := client(t, m)
	number, cvc := testCard()
	m.AcceptCard(number, cvc, 12, 2031)

	status, page := checkout(t, m, c, number, cvc, 2031)
	if status != http.StatusOK || !strings.Contains(page, `id="order-success"`) {
		t.Fatalf("checkout ended with status %d and no confirmation", status)
	}
	if !strings.Contains(page, `data-total="EUR 42.50"`) {
		t.Error("confirmation does not show the charged total")
	}
	if !m.Pay.Saw(number) || !m.Pay.SawField(cvc) {
		t.Error("the processor did not receive the card number and code")
	}
	if m.Shop.Saw(number) {
		t.Error("the shop received the card number")
	}
	if strings.Contains(page, number) {
		t.Error("the confirmation page shows the full card number")
	}
	if got := m.Orders(); len(got) != 1 || got[0].Total != "42.50" || got[0].Currency != "EUR" {
		t.Errorf("orders = %d, want one for EUR 42.50", len(got))
	}
	if ch := m.Charges(); len(ch) != 1 || ch[0].Last4 != number[12:] {
		t.Errorf("charges = %d, want one with the card's last four", len(ch))
	}
}

func TestProcessorDeclinesCardsItDidNotIssue(t *testing.T) {
	m := start(t)
	number, cvc := testCard()
	m.AcceptCard(number, cvc, 12, 2031)
	other, _ := testCard()

	tests := []struct {
		name, number, cvc string
		year              int
		code              string
	}{
		{"unknown card", other, cvc, 2031, "card_declined"},
		{"wrong code", number, wrongCVC(cvc), 2031, "incorrect_cvc"},
		{"wrong expiry", number, cvc, 2032, "invalid_expiry"},
		{"not Luhn", number[:15] + string('0'+(number[15]-'0'+1)%10), cvc, 2031, "incorrect_number"},
		{"short code", number, cvc[:2], 2031, "incorrect_cvc"},
		{"expired", number, cvc, 2001, "invalid_expiry"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, answer := checkout(t, m, client(t, m), tc.number, tc.cvc, tc.year)
			if status != http.StatusPaymentRequired || !strings.Contains(answer, `"code":"`+tc.code+`"`) {
				t.Fatalf("status %d, want 402 with code %s", status, tc.code)
			}
		})
	}
	if len(m.Orders()) != 0 || len(m.Charges()) != 0 {
		t.Error("a declined card produced an order or a charge")
	}
}

func wrongCVC(c string) string {
	b := []byte(c)
	b[0] = '0' + (b[0]-'0'+1)%10
	return string(b)
}

func TestShopRefusesAnOrderWithoutAPaidIntent(t *testing.T) {
	m := start(t)
	c := client(t, m)
	if _, err := c.PostForm(m.Shop.URL+"/cart", url.Values{"sku": {"headlamp"}}); err != nil {
		t.Fatal(err)
	}
	res, err := c.PostForm(m.Shop.URL+"/checkout", url.Values{
		"email": {"ada@example.org"}, "first_name": {"Ada"}, "last_name": {"Lovelace"},
		"address_line1": {"1 Row"}, "postal_code": {"1"}, "city": {"X"}, "country": {"FR"}, "billing_same": {"on"}, "payment_intent": {"pi_forged"},
	})
	if err != nil {
		t.Fatal(err)
	}
	page := body(t, res)
	if res.StatusCode != http.StatusPaymentRequired || !strings.Contains(page, `role="alert"`) || strings.Contains(page, "order-success") {
		t.Fatalf("status %d: an unpaid order was not refused with an alert", res.StatusCode)
	}
	res, err = c.PostForm(m.Shop.URL+"/checkout", url.Values{"email": {"nope"}})
	if err != nil {
		t.Fatal(err)
	}
	page = body(t, res)
	if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, "Enter a valid email address.") {
		t.Fatalf("status %d: missing shipping fields were not reported", res.StatusCode)
	}
}

func TestLegacyFormEchoesTheNumber(t *testing.T) {
	m := start(t)
	c := client(t, m)
	number, cvc := testCard()
	res, err := c.PostForm(m.Pay.URL+"/legacy/checkout", url.Values{
		"number": {number}, "cvc": {cvc}, "exp_month": {"3"}, "exp_year": {"2033"}, "amount": {"42.50"}, "currency": {"EUR"},
	})
	if err != nil {
		t.Fatal(err)
	}
	page := body(t, res)
	if res.StatusCode != http.StatusOK || !strings.Contains(page, `id="payment-ok"`) {
		t.Fatalf("legacy payment status %d", res.StatusCode)
	}
	// This page is meant to be unsafe: it is what a proxy must scrub.
	if !strings.Contains(page, number) {
		t.Error("the legacy receipt no longer echoes the number, so it proves nothing about scrubbing")
	}
	if m.Pay.Count(number) != 1 {
		t.Error("the processor did not record the legacy payment")
	}
}

func TestEchoReflectsTheBody(t *testing.T) {
	m := start(t)
	c := client(t, m)
	for _, site := range []*Site{m.Shop, m.Pay, m.Login} {
		res, err := c.Post(site.URL+"/echo", "application/json", strings.NewReader(`{"v":"canary"}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := body(t, res); got != `{"v":"canary"}` || res.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s echo answered %q", site.Name, got)
		}
		if res.ProtoMajor != 2 {
			t.Errorf("%s spoke %s, want HTTP/2", site.Name, res.Proto)
		}
	}
}

func TestEmailFirstSignIn(t *testing.T) {
	m := start(t)
	c := client(t, m)
	m.AddAccount("grace@example.org", "correct horse 42!", "Grace")

	res, err := c.Get(m.Login.URL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	if page := body(t, res); !strings.Contains(page, `id="continue"`) || strings.Contains(page, `id="password"`) {
		t.Fatal("the first step should ask for the email only")
	}
	res, err = c.Post(m.Login.URL+"/api/identify", "application/json", strings.NewReader(`{"email":"Grace@example.org"}`))
	if err != nil {
		t.Fatal(err)
	}
	if body(t, res); res.StatusCode != http.StatusOK {
		t.Fatalf("identify status %d", res.StatusCode)
	}
	res, err = c.PostForm(m.Login.URL+"/session", url.Values{"email": {"grace@example.org"}, "password": {"wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	if page := body(t, res); res.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "Incorrect email or password.") {
		t.Fatalf("a wrong password got status %d", res.StatusCode)
	}
	res, err = c.PostForm(m.Login.URL+"/session", url.Values{"email": {"grace@example.org"}, "password": {"correct horse 42!"}})
	if err != nil {
		t.Fatal(err)
	}
	if page := body(t, res); !strings.Contains(page, `id="account"`) {
		t.Fatalf("sign-in did not land on the account page (status %d)", res.StatusCode)
	}
	if !m.Login.Saw("correct horse 42!") || m.FailedSignIns() != 1 {
		t.Error("the login site's record is wrong")
	}
}

func TestNamedOriginsResolveThroughHostMap(t *testing.T) {
	m, err := Start(Options{ShopHost: "shop.test", PayHost: "pay.test", LoginHost: "login.test"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := m.HostMap(); len(got) != 3 || got["pay.test"] != "127.0.0.1" {
		t.Fatalf("HostMap = %v", got)
	}
	c := &http.Client{Transport: &http.Transport{
		DialContext:     m.DialContext,
		TLSClientConfig: &tls.Config{RootCAs: m.CertPool()},
	}}
	for _, s := range []*Site{m.Shop, m.Pay, m.Login} {
		if !strings.HasPrefix(s.URL, "https://"+s.Name+".test:") {
			t.Errorf("%s URL = %s", s.Name, s.URL)
		}
		res, err := c.Get(s.URL + "/echo?x=1")
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if got := body(t, res); got != "x=1" {
			t.Errorf("%s echo = %q", s.Name, got)
		}
	}
}
