package merchant

import (
	"html/template"
	"net/http"
	"net/url"
)

// An overlay checkout (issue 10), the way Paddle or Lemon Squeezy sell: the
// shop's page names the product and nothing else, and the whole payment,
// order total included, lives in the processor's cross-origin iframe. No
// convention finds the total on the shop's page, so an agent paying with a
// card that has spending limits must point at it (declare_page_hint
// order.total with frame).

// OverlayTotal is what the overlay checkout charges: the headlamp and the
// flat shipping.
const OverlayTotal = "34.80"

const overlayProduct = "headlamp"

func (s *shop) overlayRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /overlay/checkout", s.overlayCheckout)
	mux.HandleFunc("GET /overlay/done", s.overlayDone)
}

func (s *shop) overlayCheckout(w http.ResponseWriter, r *http.Request) {
	p, _ := findProduct(overlayProduct)
	it := s.pay.createIntent(p.PriceCents+ShippingCents, Currency)
	frame := s.payOrigin + "/overlay?" + url.Values{"pi": {it.id}, "secret": {it.secret}, "parent": {s.origin}}.Encode()
	w.Header().Set("Content-Security-Policy", "frame-src "+s.payOrigin+"; default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'")
	render(w, overlayShopTmpl, map[string]any{"Product": p, "FrameURL": frame, "PayOrigin": s.payOrigin})
}

func (s *shop) overlayDone(w http.ResponseWriter, r *http.Request) {
	status, amount, currency, ok := s.pay.intentStatus(r.URL.Query().Get("pi"))
	if !ok || status != "succeeded" {
		http.Error(w, "not paid", http.StatusPaymentRequired)
		return
	}
	render(w, overlayDoneTmpl, map[string]any{"Amount": formatCents(amount), "Currency": currency})
}

func (is *issuer) overlayRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /overlay", is.overlayFrame)
}

// overlayFrame is the processor's checkout overlay: the total due and the
// card form, posting to the same confirm API as the card element.
func (is *issuer) overlayFrame(w http.ResponseWriter, r *http.Request) {
	is.renderFrame(w, r, overlayFrameTmpl, nil)
}

var overlayShopTmpl = template.Must(template.New("overlay-shop").Parse(`<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Buy {{.Product.Name}} · Northtrail Outfitters</title>
<style>body{font-family:system-ui,sans-serif;margin:40px}iframe{width:420px;height:420px;border:1px solid #ccc;border-radius:10px}</style></head>
<body><h1>{{.Product.Name}}</h1>
<p>{{.Product.Description}} Checkout opens below; shipping is included.</p>
<iframe id="checkout-overlay" title="Checkout" src="{{.FrameURL}}" allow="payment"></iframe>
<script>
(function () {
  "use strict";
  var PAY_ORIGIN = {{.PayOrigin}};
  window.addEventListener("message", function (ev) {
    if (ev.origin !== PAY_ORIGIN || !ev.data || ev.data.type !== "overlay_paid") { return; }
    location.href = "/overlay/done?pi=" + encodeURIComponent(ev.data.paymentIntent);
  });
})();
</script>
</body></html>`))

var overlayDoneTmpl = template.Must(template.New("overlay-done").Parse(`<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Thank you · Northtrail Outfitters</title></head>
<body><h1 id="order-success">Thank you, your order is confirmed</h1>
<p>Paid <span id="order-total" data-total="{{.Currency}} {{.Amount}}">{{.Currency}} {{.Amount}}</span>.</p>
</body></html>`))

var overlayFrameTmpl = template.Must(template.New("overlay").Parse(`<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Checkout</title>
<style>body{font-family:system-ui,sans-serif;margin:0;padding:12px;font-size:15px}
label{display:block;font-size:13px;margin:6px 0 3px}input,select{box-sizing:border-box;width:100%;padding:8px}
.row{display:flex;gap:8px}.row>div{flex:1}#ov-error{color:#b00020;min-height:18px}</style></head>
<body>
<p class="ov-line">Total due today <strong id="ov-due">€{{.Amount}}</strong></p>
<form id="ov-form" novalidate onsubmit="return false">
<label for="card-number">Card number</label>
<input id="card-number" name="number" type="text" inputmode="numeric" autocomplete="cc-number" maxlength="23">
<div class="row">
<div><label for="exp-month">Month</label><select id="exp-month" name="exp_month"><option value="">MM</option>{{range .Months}}<option value="{{.Value}}">{{.Label}}</option>{{end}}</select></div>
<div><label for="exp-year">Year</label><select id="exp-year" name="exp_year"><option value="">YYYY</option>{{range .Years}}<option value="{{.}}">{{.}}</option>{{end}}</select></div>
<div><label for="card-cvc">Security code</label><input id="card-cvc" name="cvc" type="text" inputmode="numeric" autocomplete="cc-csc" maxlength="4"></div>
</div>
<div id="ov-error" role="alert" aria-live="polite"></div>
<button type="button" id="ov-pay">Pay now</button>
<p id="ov-paid" hidden>Paid.</p>
</form>
<script>
(function () {
  "use strict";
  var PARENT = {{.ParentOrigin}};
  var INTENT = {{.Intent}};
  var SECRET = {{.Secret}};
  var err = document.getElementById("ov-error");
  function v(id) { return document.getElementById(id).value; }
  document.getElementById("ov-pay").addEventListener("click", function () {
    var number = v("card-number").replace(/\D/g, "");
    if (number.length < 12 || !v("exp-month") || !v("exp-year") || !/^\d{3,4}$/.test(v("card-cvc"))) {
      err.textContent = "Enter your card details.";
      return;
    }
    fetch("/v1/payment_intents/" + encodeURIComponent(INTENT) + "/confirm", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ client_secret: SECRET,
        card: { number: number, exp_month: v("exp-month"), exp_year: v("exp-year"), cvc: v("card-cvc") } })
    }).then(function (res) {
      return res.json().then(function (body) {
        if (!res.ok) { err.textContent = body.error && body.error.message ? body.error.message : "Your payment could not be completed."; return; }
        document.getElementById("ov-paid").hidden = false;
        parent.postMessage({ type: "overlay_paid", paymentIntent: body.id }, PARENT);
      });
    }).catch(function () { err.textContent = "We could not reach the payment service."; });
  });
})();
</script>
</body></html>`))
