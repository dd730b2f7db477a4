package merchant

import (
	"bytes"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// The overlay checkout's shop page shows no total: only the processor's
// cross-origin frame does; paying in the frame charges the total once and
// the done page then confirms.
func TestOverlayCheckoutTotalOnlyInTheFrame(t *testing.T) {
	m := start(t)
	number, cvc := testCard()
	m.AcceptCard(number, cvc, 11, 2031)
	c := client(t, m)
	top := body(t, must200(t, c, m.Shop.URL+"/overlay/checkout"))
	if strings.Contains(top, OverlayTotal) || regexp.MustCompile(`(?i)(data-total|id="[^"]*total|class="[^"]*total)`).MatchString(top) {
		t.Fatal("the shop's page shows or marks a total")
	}
	src := regexp.MustCompile(`id="checkout-overlay"[^>]*src="([^"]+)"`).FindStringSubmatch(top)
	if src == nil {
		t.Fatal("no overlay frame")
	}
	frameURL := html.UnescapeString(src[1])
	if !strings.HasPrefix(frameURL, m.Pay.URL+"/overlay?") {
		t.Fatalf("the overlay is not the processor's: %s", frameURL)
	}
	frame := body(t, must200(t, c, frameURL))
	if !strings.Contains(frame, `<strong id="ov-due">€`+OverlayTotal+`</strong>`) {
		t.Fatal("the overlay does not show the total due")
	}
	u, _ := url.Parse(frameURL)
	pi, secret := u.Query().Get("pi"), u.Query().Get("secret")
	if res, _ := c.Get(m.Shop.URL + "/overlay/done?pi=" + pi); res == nil || res.StatusCode != http.StatusPaymentRequired {
		t.Fatalf("done before paying: %v", res)
	}
	req, _ := json.Marshal(map[string]any{"client_secret": secret, "card": map[string]string{"number": number, "exp_month": "11", "exp_year": "2031", "cvc": cvc}})
	res, err := c.Post(m.Pay.URL+"/v1/payment_intents/"+pi+"/confirm", "application/json", bytes.NewReader(req))
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("confirm: %v %v", res, err)
	}
	res.Body.Close()
	if ch := m.Charges(); len(ch) != 1 || ch[0].Amount != OverlayTotal || ch[0].IntentID != pi {
		t.Fatalf("charges %+v", ch)
	}
	if done := body(t, must200(t, c, m.Shop.URL+"/overlay/done?pi="+pi)); !strings.Contains(done, `id="order-success"`) {
		t.Fatal("done page after paying has no confirmation")
	}
}
