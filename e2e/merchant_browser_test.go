package e2e

import (
	"testing"

	"github.com/agentvault/agentvault/e2e/merchant"
	"github.com/mxschmitt/playwright-go"
)

const cardFrame = `iframe[title="Secure payment input frame"]`

// shipping is what the scripted buyer types on the checkout page.
var shipping = []struct{ selector, value string }{
	{"#email", "ada@example.org"},
	{"#phone", "+49 30 1234567"},
	{"#first-name", "Ada"},
	{"#last-name", "Lovelace"},
	{"#address-line1", "12 Analytical Row"},
	{"#postal-code", "10115"},
	{"#city", "Berlin"},
}

func startMerchant(t *testing.T) *merchant.Merchant {
	t.Helper()
	m, err := merchant.Start(merchant.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestMerchantCheckoutInChromium buys from the merchant with a real Chromium
// and no proxy: it proves the merchant's own pages (cart, cross-origin card
// iframe, client-side validation, postMessage hand-off, confirmation) work,
// so a failure of the proxied proofs points at the appliance, not the shop.
func TestMerchantCheckoutInChromium(t *testing.T) {
	requireE2E(t, true)
	m := startMerchant(t)
	number, cvc := merchant.RandomCard()
	m.AcceptCard(number, cvc, 11, 2031)

	b := chromium(t, []string{spkiOfPEM(t, m.CAPEM())}, nil)
	page, err := b.NewPage()
	must(t, "new page", err)

	_, err = page.Goto(m.Shop.URL + "/products/trail-shoes")
	must(t, "open product", err)
	must(t, "add to cart", page.Locator("#add-to-cart").Click())
	must(t, "go to checkout", page.Locator("#checkout").Click())
	must(t, "checkout page", page.Locator("#place-order").WaitFor())
	for _, f := range shipping {
		must(t, "fill "+f.selector, page.Locator(f.selector).Fill(f.value))
	}
	_, err = page.Locator("#country").SelectOption(playwright.SelectOptionValues{Values: &[]string{"DE"}})
	must(t, "country", err)

	card := page.FrameLocator(cardFrame)
	// A wrong number first: the card form's own Luhn check must stop it.
	must(t, "fill bad number", card.Locator("input[name='number']").Fill("4242424242424241"))
	must(t, "place order", page.Locator("#place-order").Click())
	must(t, "card error", card.Locator("#card-errors").Filter(playwright.LocatorFilterOptions{HasText: "invalid"}).WaitFor())
	if m.Pay.Saw("4242424242424241") || len(m.Charges()) != 0 {
		t.Fatal("an invalid number reached the processor")
	}

	_, err = card.Locator("#exp-month").SelectOption(playwright.SelectOptionValues{Values: &[]string{"11"}})
	must(t, "expiry month", err)
	_, err = card.Locator("#exp-year").SelectOption(playwright.SelectOptionValues{Values: &[]string{"2031"}})
	must(t, "expiry year", err)
	must(t, "fill number", card.Locator("input[name='number']").Fill(number))
	must(t, "fill cvc", card.Locator("input[name='cvc']").Fill(cvc))
	must(t, "place order", page.Locator("#place-order").Click())
	must(t, "confirmation", page.Locator("#order-success").WaitFor())

	if !m.Pay.Saw(number) || !m.Pay.SawField(cvc) {
		t.Error("the processor did not receive the card")
	}
	if m.Shop.Saw(number) || m.Shop.SawField(cvc) {
		t.Error("the shop received the card")
	}
	if o := m.Orders(); len(o) != 1 || o[0].Total != "42.50" {
		t.Errorf("want one EUR 42.50 order, have %d", len(o))
	}
}

// TestMerchantSignInInChromium walks the email-first sign-in directly.
func TestMerchantSignInInChromium(t *testing.T) {
	requireE2E(t, true)
	m := startMerchant(t)
	m.AddAccount("grace@example.org", "s3cret-Passw0rd", "Grace")
	b := chromium(t, []string{spkiOfPEM(t, m.CAPEM())}, nil)
	page, err := b.NewPage()
	must(t, "new page", err)
	_, err = page.Goto(m.Login.URL + "/login")
	must(t, "open login", err)
	must(t, "email", page.Locator("input[type='email']").Fill("grace@example.org"))
	must(t, "continue", page.Locator("#continue").Click())
	must(t, "password step", page.Locator("input[type='password']").WaitFor())
	must(t, "password", page.Locator("input[type='password']").Fill("s3cret-Passw0rd"))
	must(t, "sign in", page.Locator("#sign-in").Click())
	must(t, "account page", page.Locator("#account").WaitFor())
}
