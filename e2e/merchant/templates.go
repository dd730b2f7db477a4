package merchant

import "html/template"

// The pages are plain server-rendered HTML with a little inline script, the
// way many small shops are built. Validation messages sit in elements marked
// role="alert" (or aria-live) so assistive technology, and an agent's
// observe_page, can tell them from the rest of the page.

const shopStyle = `<style>
[hidden]{display:none!important}
body{font-family:system-ui,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
header{display:flex;justify-content:space-between;align-items:center;padding:12px 24px;background:#14342b;color:#fff}
header a{color:#fff;text-decoration:none}
main{max-width:960px;margin:24px auto;padding:0 16px}
.grid{display:grid;grid-template-columns:2fr 1fr;gap:24px}
fieldset{border:1px solid #ddd;border-radius:8px;margin:0 0 16px;padding:12px 16px;background:#fff}
label{display:block;font-size:14px;margin:8px 0 4px}
input[type=text],input[type=email],input[type=tel],select,textarea{width:100%;box-sizing:border-box;padding:8px;border:1px solid #bbb;border-radius:6px;font-size:15px}
.row{display:flex;gap:12px}.row>div{flex:1}
.field-error{color:#b00020;font-size:13px;margin:4px 0 0}
.form-error{background:#fdecea;color:#b00020;padding:10px;border-radius:6px}
button{background:#14342b;color:#fff;border:0;border-radius:6px;padding:12px 20px;font-size:16px;cursor:pointer}
button[disabled]{opacity:.6}
iframe{width:100%;height:210px;border:0}
.summary{background:#fff;border:1px solid #ddd;border-radius:8px;padding:16px}
.summary dl{display:grid;grid-template-columns:1fr auto;gap:6px}
</style>`

var shopLayout = `{{define "header"}}<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1"><title>{{block "title" .}}Northtrail Outfitters{{end}}</title>` + shopStyle + `</head>
<body><header><a href="/" id="logo">Northtrail Outfitters</a>
<form role="search" action="/" method="get"><label for="search" hidden>Search</label><input type="text" id="search" name="q" placeholder="Search products"></form>
<a href="/cart" id="cart-link">Cart ({{.CartCount}})</a></header><main>{{end}}
{{define "footer"}}</main><footer><p style="text-align:center;font-size:12px;color:#666">Test merchant for agentvault end-to-end proofs.</p></footer></body></html>{{end}}`

func shopPage(body string) *template.Template {
	// Two parses, so that a page may redefine the layout's "title" block.
	return template.Must(template.Must(template.New("page").Parse(shopLayout)).Parse(body))
}

var homeTmpl = shopPage(`{{template "header" .}}
<h1>Gear for the long way round</h1>
<ul id="products">{{range .Products}}
<li class="product"><a href="/products/{{.SKU}}">{{.Name}}</a> <span class="price">EUR {{.Price}}</span></li>{{end}}
</ul>{{template "footer" .}}`)

var productTmpl = shopPage(`{{template "header" .}}
<article id="product" data-sku="{{.Product.SKU}}">
<h1>{{.Product.Name}}</h1>
<p>{{.Product.Description}}</p>
<p class="price" id="price">EUR {{.Product.Price}}</p>
<form id="add-to-cart-form" method="post" action="/cart">
<input type="hidden" name="sku" value="{{.Product.SKU}}">
<label for="quantity">Quantity</label>
<select id="quantity" name="quantity"><option value="1">1</option><option value="2">2</option><option value="3">3</option></select>
<p><button type="submit" id="add-to-cart">Add to cart</button></p>
</form></article>{{template "footer" .}}`)

var cartTmpl = shopPage(`{{template "header" .}}
<h1>Your cart</h1>
{{if .Lines}}<table id="cart"><thead><tr><th>Item</th><th>Qty</th><th>Price</th></tr></thead><tbody>
{{range .Lines}}<tr><td>{{.Product.Name}}</td><td>{{.Quantity}}</td><td>EUR {{.Subtotal}}</td></tr>{{end}}
</tbody></table>
<p>Subtotal: EUR {{.Subtotal}} · Shipping: EUR {{.Shipping}}</p>
<p><strong>Total: <span id="cart-total">{{.Currency}} {{.Total}}</span></strong></p>
<p><a href="/checkout" id="checkout" role="button">Go to checkout</a></p>
{{else}}<p id="cart-empty">Your cart is empty. <a href="/">Continue shopping</a></p>{{end}}
{{template "footer" .}}`)

var checkoutTmpl = shopPage(`{{define "title"}}Checkout · Northtrail Outfitters{{end}}{{template "header" .}}
<h1>Checkout</h1>
<div id="form-error" class="form-error" role="alert" aria-live="assertive" {{if not .FormError}}hidden{{end}}>{{.FormError}}</div>
<div class="grid">
<form id="checkout-form" method="post" action="/checkout" novalidate>
<fieldset><legend>Contact</legend>
<label for="email">Email</label><input type="email" id="email" name="email" autocomplete="email" required value="{{.Form.Email}}">
<p class="field-error" role="alert" id="email-error">{{index .Form.Errors "email"}}</p>
<label for="phone">Phone (for delivery updates)</label><input type="tel" id="phone" name="phone" autocomplete="tel" value="{{.Form.Phone}}">
<label><input type="checkbox" id="newsletter" name="newsletter" {{if .Form.Newsletter}}checked{{end}}> Send me trail news and offers</label>
</fieldset>
<fieldset><legend>Shipping address</legend>
<div class="row"><div><label for="first-name">First name</label><input type="text" id="first-name" name="first_name" autocomplete="given-name" required value="{{.Form.FirstName}}">
<p class="field-error" role="alert" id="first-name-error">{{index .Form.Errors "first_name"}}</p></div>
<div><label for="last-name">Last name</label><input type="text" id="last-name" name="last_name" autocomplete="family-name" required value="{{.Form.LastName}}">
<p class="field-error" role="alert" id="last-name-error">{{index .Form.Errors "last_name"}}</p></div></div>
<label for="company">Company (optional)</label><input type="text" id="company" name="company" autocomplete="organization" value="{{.Form.Company}}">
<label for="address-line1">Address</label><input type="text" id="address-line1" name="address_line1" autocomplete="address-line1" required value="{{.Form.Line1}}">
<p class="field-error" role="alert" id="address-line1-error">{{index .Form.Errors "address_line1"}}</p>
<label for="address-line2">Apartment, suite, etc. (optional)</label><input type="text" id="address-line2" name="address_line2" autocomplete="address-line2" value="{{.Form.Line2}}">
<div class="row"><div><label for="postal-code">Postcode</label><input type="text" id="postal-code" name="postal_code" autocomplete="postal-code" required value="{{.Form.PostalCode}}">
<p class="field-error" role="alert" id="postal-code-error">{{index .Form.Errors "postal_code"}}</p></div>
<div><label for="city">City</label><input type="text" id="city" name="city" autocomplete="address-level2" required value="{{.Form.City}}">
<p class="field-error" role="alert" id="city-error">{{index .Form.Errors "city"}}</p></div></div>
<label for="region">State / region (optional)</label><input type="text" id="region" name="region" autocomplete="address-level1" value="{{.Form.Region}}">
<label for="country">Country</label><select id="country" name="country" autocomplete="country" required>
{{$c := .Form.Country}}{{range .Countries}}<option value="{{.Code}}" {{if eq .Code $c}}selected{{end}}>{{.Name}}</option>{{end}}</select>
<p class="field-error" role="alert" id="country-error">{{index .Form.Errors "country"}}</p>
<label for="delivery-instructions">Delivery instructions (optional)</label><textarea id="delivery-instructions" name="delivery_instructions" rows="2">{{.Form.Instructions}}</textarea>
</fieldset>
<fieldset><legend>Billing address</legend>
<label><input type="checkbox" id="billing-same" name="billing_same" {{if .Form.BillingSame}}checked{{end}}> Same as shipping address</label>
<div id="billing-fields" {{if .Form.BillingSame}}hidden{{end}}>
<label for="billing-name">Name on card</label><input type="text" id="billing-name" name="billing_name" autocomplete="cc-name" value="{{.Form.BillingName}}">
<label for="billing-line1">Billing address</label><input type="text" id="billing-line1" name="billing_line1" autocomplete="billing address-line1" value="{{.Form.BillingLine1}}">
<div class="row"><div><label for="billing-postal-code">Postcode</label><input type="text" id="billing-postal-code" name="billing_postal_code" autocomplete="billing postal-code" value="{{.Form.BillingPostalCode}}"></div>
<div><label for="billing-city">City</label><input type="text" id="billing-city" name="billing_city" autocomplete="billing address-level2" value="{{.Form.BillingCity}}"></div></div>
<label for="billing-country">Country</label><select id="billing-country" name="billing_country" autocomplete="billing country">
{{$b := .Form.BillingCountry}}{{range .Countries}}<option value="{{.Code}}" {{if eq .Code $b}}selected{{end}}>{{.Name}}</option>{{end}}</select>
</div>
<p class="field-error" role="alert" id="billing-error">{{index .Form.Errors "billing"}}</p>
</fieldset>
<fieldset><legend>Payment</legend>
<iframe id="card-frame" title="Secure payment input frame" src="{{.FrameURL}}" allow="payment"></iframe>
</fieldset>
<fieldset><legend>Extras</legend>
<label for="gift-message">Gift message (optional)</label><textarea id="gift-message" name="gift_message" rows="2">{{.Form.GiftMessage}}</textarea>
<label for="promo-code">Promo code</label><div class="row"><div><input type="text" id="promo-code" name="promo_code"></div><div><button type="button" id="apply-promo">Apply</button></div></div>
<p class="field-error" role="alert" id="promo-error"></p>
</fieldset>
<input type="hidden" name="payment_intent" id="payment-intent">
<button type="button" id="place-order">Place order</button>
</form>
<aside class="summary"><h2>Order summary</h2>
<ul>{{range .Lines}}<li>{{.Product.Name}} × {{.Quantity}} <span>EUR {{.Subtotal}}</span></li>{{end}}</ul>
<dl><dt>Subtotal</dt><dd id="subtotal">EUR {{.Subtotal}}</dd><dt>Shipping</dt><dd id="shipping">EUR {{.Shipping}}</dd>
<dt><strong>Total</strong></dt><dd><strong><span id="order-total" data-total="{{.Currency}} {{.Total}}">€{{.Total}}</span></strong></dd></dl>
</aside></div>
<script>
(function () {
  "use strict";
  var PAY_ORIGIN = {{.PayOrigin}};
  var form = document.getElementById("checkout-form");
  var place = document.getElementById("place-order");
  var frame = document.getElementById("card-frame");
  var formError = document.getElementById("form-error");
  var billingSame = document.getElementById("billing-same");
  billingSame.addEventListener("change", function () {
    document.getElementById("billing-fields").hidden = billingSame.checked;
  });
  document.getElementById("apply-promo").addEventListener("click", function () {
    var code = document.getElementById("promo-code").value.trim();
    document.getElementById("promo-error").textContent = code ? "This promo code is not valid." : "Enter a promo code.";
  });
  function fieldError(id, msg) {
    var el = document.getElementById(id + "-error");
    if (el) { el.textContent = msg; }
    return msg === "";
  }
  function validate() {
    var ok = true;
    var email = document.getElementById("email").value.trim();
    ok = fieldError("email", /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email) ? "" : "Enter a valid email address.") && ok;
    ["first-name", "last-name", "address-line1", "postal-code", "city"].forEach(function (id) {
      ok = fieldError(id, document.getElementById(id).value.trim() ? "" : "This field is required.") && ok;
    });
    ok = fieldError("country", document.getElementById("country").value ? "" : "Select a country.") && ok;
    return ok;
  }
  function fail(msg) {
    formError.textContent = msg;
    formError.hidden = false;
    place.disabled = false;
    place.textContent = "Place order";
  }
  place.addEventListener("click", function () {
    formError.hidden = true;
    formError.textContent = "";
    if (!validate()) { fail("Please correct the highlighted fields."); return; }
    place.disabled = true;
    place.textContent = "Processing…";
    frame.contentWindow.postMessage({ type: "confirm" }, PAY_ORIGIN);
  });
  window.addEventListener("message", function (ev) {
    if (ev.origin !== PAY_ORIGIN || !ev.data) { return; }
    if (ev.data.type === "payment_succeeded") {
      document.getElementById("payment-intent").value = ev.data.paymentIntent;
      form.submit();
    } else if (ev.data.type === "payment_failed") {
      fail("Payment failed: " + ev.data.message);
    }
  });
})();
</script>
{{template "footer" .}}`)

var orderTmpl = shopPage(`{{define "title"}}Order confirmed · Northtrail Outfitters{{end}}{{template "header" .}}
<section id="order-success" role="status">
<h1>Thank you, your order is confirmed</h1>
<p>Order number <strong id="order-number">{{.Order.ID}}</strong>. A receipt is on its way to {{.Order.Email}}.</p>
<p>Total charged: <span id="confirmed-total" data-total="{{.Order.Currency}} {{.Order.Total}}">{{.Order.Currency}} {{.Order.Total}}</span>
{{with .Charge}}to your {{.Brand}} card ending in <span id="card-last4">{{.Last4}}</span>{{end}}.</p>
<p><a href="/">Continue shopping</a></p>
</section>{{template "footer" .}}`)

var cardFrameTmpl = template.Must(template.New("card").Parse(`<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Secure card payment</title>
<style>
body{font-family:system-ui,sans-serif;margin:0;padding:8px;font-size:15px}
label{display:block;font-size:13px;margin:6px 0 3px;color:#333}
input,select{box-sizing:border-box;width:100%;padding:8px;border:1px solid #bbb;border-radius:6px;font-size:15px}
.row{display:flex;gap:8px}.row>div{flex:1}
#card-errors{color:#b00020;font-size:13px;min-height:18px;margin-top:6px}
.brand{font-size:12px;color:#666}
</style></head>
<body>
<form id="card-form" novalidate onsubmit="return false">
<label for="card-number">Card number <span class="brand" id="card-brand"></span></label>
<input id="card-number" name="number" type="text" inputmode="numeric" autocomplete="cc-number" placeholder="1234 1234 1234 1234" maxlength="23" spellcheck="false">
<div class="row">
<div><label for="exp-month">Expiry month</label><select id="exp-month" name="exp_month" autocomplete="cc-exp-month"><option value="">MM</option>{{range .Months}}<option value="{{.Value}}">{{.Label}}</option>{{end}}</select></div>
<div><label for="exp-year">Expiry year</label><select id="exp-year" name="exp_year" autocomplete="cc-exp-year"><option value="">YYYY</option>{{range .Years}}<option value="{{.}}">{{.}}</option>{{end}}</select></div>
<div><label for="card-cvc">Security code</label><input id="card-cvc" name="cvc" type="text" inputmode="numeric" autocomplete="cc-csc" placeholder="CVC" maxlength="4"></div>
</div>
<div id="card-errors" role="alert" aria-live="polite"></div>
<p class="brand">Paying {{.Currency}} {{.Amount}}</p>
</form>
<script>
(function () {
  "use strict";
  var PARENT = {{.ParentOrigin}};
  var INTENT = {{.Intent}};
  var SECRET = {{.Secret}};
  var num = document.getElementById("card-number");
  var month = document.getElementById("exp-month");
  var year = document.getElementById("exp-year");
  var cvc = document.getElementById("card-cvc");
  var errors = document.getElementById("card-errors");
  function digits(s) { return s.replace(/[\s-]/g, ""); }
  function luhn(d) {
    if (!/^\d{12,19}$/.test(d)) { return false; }
    var sum = 0, dbl = false;
    for (var i = d.length - 1; i >= 0; i--) {
      var n = d.charCodeAt(i) - 48;
      if (dbl) { n *= 2; if (n > 9) { n -= 9; } }
      sum += n; dbl = !dbl;
    }
    return sum % 10 === 0;
  }
  function brand(d) {
    if (/^4/.test(d)) { return "Visa"; }
    if (/^3[47]/.test(d)) { return "American Express"; }
    if (/^(5[1-5]|2[2-7])/.test(d)) { return "Mastercard"; }
    return "";
  }
  function cvcLength(d) { return /^3[47]/.test(d) ? 4 : 3; }
  function show(msg) { errors.textContent = msg; }
  // Group the number in fours as it is typed, as card forms do; only digits
  // are sent.
  num.addEventListener("input", function () {
    var d = num.value.replace(/\D/g, "").slice(0, 19);
    var grouped = d.replace(/(\d{4})(?=\d)/g, "$1 ");
    if (num.value !== grouped) { num.value = grouped; }
    document.getElementById("card-brand").textContent = brand(d);
    show("");
  });
  num.addEventListener("blur", function () {
    var d = digits(num.value);
    if (d && !luhn(d)) { show("Your card number is invalid."); }
  });
  cvc.addEventListener("input", function () { show(""); });
  function validate() {
    var d = digits(num.value);
    if (!d) { return "Your card number is incomplete."; }
    if (!luhn(d)) { return "Your card number is invalid."; }
    if (!month.value || !year.value) { return "Your card's expiration date is incomplete."; }
    var now = new Date(), y = +year.value, m = +month.value;
    if (y < now.getFullYear() || (y === now.getFullYear() && m < now.getMonth() + 1)) {
      return "Your card's expiration date is in the past.";
    }
    if (!new RegExp("^\\d{" + cvcLength(d) + "}$").test(cvc.value)) { return "Your card's security code is incomplete."; }
    return "";
  }
  function failed(msg) {
    show(msg);
    parent.postMessage({ type: "payment_failed", message: msg }, PARENT);
  }
  window.addEventListener("message", function (ev) {
    if (ev.origin !== PARENT || !ev.data || ev.data.type !== "confirm") { return; }
    var msg = validate();
    if (msg) { failed(msg); return; }
    fetch("/v1/payment_intents/" + encodeURIComponent(INTENT) + "/confirm", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        client_secret: SECRET,
        card: { number: digits(num.value), exp_month: month.value, exp_year: year.value, cvc: cvc.value }
      })
    }).then(function (res) {
      return res.json().then(function (body) {
        if (!res.ok) { failed(body.error && body.error.message ? body.error.message : "Your payment could not be completed."); return; }
        show("");
        parent.postMessage({ type: "payment_succeeded", paymentIntent: body.id }, PARENT);
      });
    }).catch(function () {
      failed("We could not reach the payment service. Please try again.");
    });
  });
})();
</script>
</body></html>`))

var legacyFormTmpl = template.Must(template.New("legacy").Parse(`<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Pay by card</title></head><body>
<h1>Pay by card</h1>
<form id="legacy-pay" method="post" action="/legacy/checkout">
<input type="hidden" name="amount" value="42.50"><input type="hidden" name="currency" value="EUR">
<label for="number">Card number</label><input id="number" name="number" autocomplete="cc-number">
<label for="exp_month">Month</label><select id="exp_month" name="exp_month">{{range .Months}}<option value="{{.Value}}">{{.Label}}</option>{{end}}</select>
<label for="exp_year">Year</label><input id="exp_year" name="exp_year" value="{{.Year}}">
<label for="cvc">CVC</label><input id="cvc" name="cvc" autocomplete="cc-csc">
<button type="submit" id="pay">Pay EUR 42.50</button>
</form></body></html>`))

var legacyReceiptTmpl = template.Must(template.New("receipt").Parse(`<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Payment receipt</title></head><body>
{{if .Error}}<h1>Payment declined</h1><p id="payment-error" role="alert">{{.Error}}</p>
{{else}}<h1 id="payment-ok">Payment received</h1><p>Charge <span id="charge-id">{{.Charge.ID}}</span>: {{.Currency}} {{.Amount}}, {{.Charge.Brand}} ending {{.Charge.Last4}}.</p>{{end}}
<p>Card number on file for this payment: <span id="echoed-number">{{.Number}}</span></p>
</body></html>`))

var loginTmpl = template.Must(template.New("login").Parse(`<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Sign in · Trailhead Club</title>
<style>body{font-family:system-ui,sans-serif;display:flex;justify-content:center;margin-top:60px}
form{width:340px;padding:24px;border:1px solid #ddd;border-radius:10px}input{width:100%;box-sizing:border-box;padding:9px;margin:4px 0 10px}
button{width:100%;padding:10px}.error{color:#b00020;font-size:14px}</style></head>
<body>{{if .Before}}` + captchaWidget + `{{end}}<form id="signin" method="post" action="/session" novalidate>
<h1>Sign in</h1>
{{if .Captcha}}<input type="hidden" name="captcha" value="{{.Captcha}}">{{end}}
{{if .Before}}<input type="hidden" name="challenge" value="{{.Challenge}}"><input type="hidden" name="captcha_pass" id="captcha-pass" value="">{{end}}
<div id="signin-error" class="error" role="alert" aria-live="assertive">{{.Error}}</div>
<div id="step-email">
<label for="email">Email address</label>
<input type="email" id="email" name="email" autocomplete="username" value="{{.Email}}" required>
<button type="button" id="continue">Continue</button>
</div>
<div id="step-password"></div>
</form>
<script>
(function () {
  "use strict";
  var email = document.getElementById("email");
  var err = document.getElementById("signin-error");
  var step = document.getElementById("step-password");
  // The password step is added only once the site knows the account, like the
  // email-first sign-ins of the big identity providers.
  function showPassword(name) {
    if (document.getElementById("password")) { return; }
    var hello = document.createElement("p");
    hello.id = "hello";
    hello.textContent = "Welcome back, " + name + ".";
    var label = document.createElement("label");
    label.htmlFor = "password";
    label.textContent = "Password";
    var pw = document.createElement("input");
    pw.type = "password"; pw.id = "password"; pw.name = "password"; pw.autocomplete = "current-password"; pw.required = true;
    var btn = document.createElement("button");
    btn.type = "submit"; btn.id = "sign-in"; btn.textContent = "Sign in";
    step.append(hello, label, pw, btn);
    email.readOnly = true;
    document.getElementById("continue").hidden = true;
    pw.focus();
  }
  function next() {
    err.textContent = "";
    var v = email.value.trim();
    if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(v)) { err.textContent = "Enter a valid email address."; return; }
    fetch("/api/identify", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ email: v }) })
      .then(function (res) { return res.json().then(function (b) { return { ok: res.ok, b: b }; }); })
      .then(function (r) {
        if (!r.ok) { err.textContent = r.b.error || "Something went wrong."; return; }
        // Delay like a real identity provider's round trip before the step appears.
        setTimeout(function () { showPassword(r.b.name); }, 300);
      })
      .catch(function () { err.textContent = "Could not reach the sign-in service."; });
  }
  document.getElementById("continue").addEventListener("click", next);
  email.addEventListener("keydown", function (ev) { if (ev.key === "Enter") { ev.preventDefault(); next(); } });
  {{if .Error}}showPassword("");{{end}}
})();
</script></body></html>`))

var accountTmpl = template.Must(template.New("account").Parse(`<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Your account · Trailhead Club</title></head><body>
<main id="account"><h1>Hello, {{.Name}}</h1>
<p>Signed in as <span id="account-email">{{.Email}}</span>.</p>
<form method="post" action="/logout"><button type="submit" id="sign-out">Sign out</button></form>
</main></body></html>`))
