package merchant

import "html/template"

// summaryBlock is the order summary every integration checkout shows; the
// total element is what mcpd reads as the checkout total.
const summaryBlock = `<aside class="summary"><h2>Order summary</h2>
<ul>{{range .Lines}}<li>{{.Product.Name}} × {{.Quantity}} <span>EUR {{.Subtotal}}</span></li>{{end}}</ul>
<dl><dt>Subtotal</dt><dd id="subtotal">EUR {{.Subtotal}}</dd><dt>Shipping</dt><dd id="shipping">EUR {{.Shipping}}</dd>
<dt><strong>Total</strong></dt><dd><strong><span id="order-total" data-total="{{.Currency}} {{.Total}}">€{{.Total}}</span></strong></dd></dl>
</aside>`

var payTmpl = shopPage(`{{define "title"}}Checkout · Northtrail Outfitters{{end}}{{template "header" .}}
<h1>Checkout</h1>
<div id="form-error" class="form-error" role="alert" aria-live="assertive" {{if not .FormError}}hidden{{end}}>{{.FormError}}</div>
<div class="grid">
<form id="pay-form" method="post" action="{{.Action}}" novalidate data-shape="{{.Shape}}">
<fieldset><legend>Contact</legend>
<label for="email">Email</label><input type="email" id="email" name="email" autocomplete="email" required>
<label for="name">Full name</label><input type="text" id="name" name="name" autocomplete="name">
</fieldset>
<fieldset><legend>Payment</legend>
{{with .PaymentFrame}}<iframe id="payment-element" name="__privateStripeFrame1" title="Secure payment input frame" src="{{.}}" allow="payment"></iframe>{{end}}
{{if .NumberFrame}}<div class="card-element">
<label>Card number</label><iframe id="card-number-element" name="__privateStripeFrame2" title="Secure card number input frame" src="{{.NumberFrame}}" style="height:48px"></iframe>
<div class="row"><div><label>Expiration date</label><iframe id="card-expiry-element" name="__privateStripeFrame3" title="Secure expiration date input frame" src="{{.ExpiryFrame}}" style="height:48px"></iframe></div>
<div><label>CVC</label><iframe id="card-cvc-element" name="__privateStripeFrame4" title="Secure CVC input frame" src="{{.CVCFrame}}" style="height:48px"></iframe></div></div>
<iframe id="controller" name="__privateStripeController" title="Payment controller" src="{{.ControllerFrame}}" style="display:none" aria-hidden="true"></iframe>
</div>{{end}}
{{with .SecuredFrame}}<iframe id="secured-fields" title="Iframe for secured card data input field" src="{{.}}" style="height:180px"></iframe>{{end}}
</fieldset>
<input type="hidden" name="intent" value="{{.Intent}}">
<input type="hidden" name="payment_method" id="payment-method">
<button type="button" id="place-order">Pay now</button>
</form>
` + summaryBlock + `</div>
<script>
(function () {
  "use strict";
  var TARGET = {{.TargetOrigin}};
  var form = document.getElementById("pay-form");
  var place = document.getElementById("place-order");
  var formError = document.getElementById("form-error");
  var target = document.getElementById("payment-element") || document.getElementById("controller") || document.getElementById("secured-fields");
  function fail(msg) {
    formError.textContent = msg; formError.hidden = false;
    place.disabled = false; place.textContent = "Pay now";
  }
  place.addEventListener("click", function () {
    formError.hidden = true;
    if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(document.getElementById("email").value.trim())) { fail("Enter a valid email address."); return; }
    place.disabled = true; place.textContent = "Processing…";
    target.contentWindow.postMessage({ type: "confirm" }, TARGET);
  });
  window.addEventListener("message", function (ev) {
    if (ev.origin !== TARGET || !ev.data) { return; }
    if (ev.data.type === "payment_method") {
      document.getElementById("payment-method").value = ev.data.id;
      form.submit();
    } else if (ev.data.type === "payment_failed") {
      fail("Payment failed: " + ev.data.message);
    }
  });
})();
</script>
{{template "footer" .}}`)

const frameHead = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Secure card input</title>
<style>body{font-family:system-ui,sans-serif;margin:0;padding:6px;font-size:15px}label{display:block;font-size:13px;margin:4px 0 2px}
input,select{box-sizing:border-box;width:100%;padding:7px;border:1px solid #bbb;border-radius:6px;font-size:15px}.row{display:flex;gap:8px}.row>div{flex:1}
#card-errors{color:#b00020;font-size:13px;min-height:16px}</style></head><body>`

// siblingsJS sends a message to every frame of the parent page that is on
// this frame's own origin (the other field frames and the controller):
// the values never pass through the merchant's page.
const siblingsJS = `function toSiblings(msg) {
  for (var i = 0; i < parent.frames.length; i++) {
    try { parent.frames[i].postMessage(msg, location.origin); } catch (e) {}
  }
}
function group(v) { var d = v.replace(/\D/g, "").slice(0, 19); return d.replace(/(\d{4})(?=\d)/g, "$1 "); }`

// postCardJS posts a card form-encoded to API the Stripe way and reports
// the payment method id (or the decline) to the parent page.
const postCardJS = `function postCard(card) {
  var body = new URLSearchParams();
  body.set("type", "card");
  body.set("card[number]", card.number);
  body.set("card[exp_month]", card.exp_month);
  body.set("card[exp_year]", card.exp_year);
  body.set("card[cvc]", card.cvc);
  fetch(API + "/v1/payment_methods", { method: "POST", body: body }).then(function (res) {
    return res.json().then(function (b) {
      if (!res.ok) { failed(b.error && b.error.message ? b.error.message : "Your card could not be used."); return; }
      parent.postMessage({ type: "payment_method", id: b.id }, PARENT);
    });
  }).catch(function () { failed("We could not reach the payment service. Please try again."); });
}
function failed(msg) {
  var e = document.getElementById("card-errors"); if (e) { e.textContent = msg; }
  parent.postMessage({ type: "payment_failed", message: msg }, PARENT);
}`

var elementTmpl = template.Must(template.New("elements").Parse(`
{{define "payment"}}` + frameHead + `
<form id="card-form" onsubmit="return false" novalidate>
<label for="card-number">Card number</label>
<input id="card-number" name="number" type="text" inputmode="numeric" autocomplete="cc-number" placeholder="1234 1234 1234 1234" maxlength="23">
<div class="row">
<div><label for="exp-month">Expiry month</label><select id="exp-month" name="exp_month" autocomplete="cc-exp-month"><option value="">MM</option>{{range .Months}}<option value="{{.Value}}">{{.Label}}</option>{{end}}</select></div>
<div><label for="exp-year">Expiry year</label><select id="exp-year" name="exp_year" autocomplete="cc-exp-year"><option value="">YYYY</option>{{range .Years}}<option value="{{.}}">{{.}}</option>{{end}}</select></div>
<div><label for="card-cvc">Security code</label><input id="card-cvc" name="cvc" type="text" inputmode="numeric" autocomplete="cc-csc" placeholder="CVC" maxlength="4"></div>
</div>
<div id="card-errors" role="alert" aria-live="polite"></div>
</form>
<script>
(function () {
  "use strict";
  var PARENT = {{.ParentOrigin}};
  var API = {{.API}};
  ` + siblingsJS + `
  ` + postCardJS + `
  var num = document.getElementById("card-number");
  num.addEventListener("input", function () { var g = group(num.value); if (g !== num.value) { num.value = g; } });
  window.addEventListener("message", function (ev) {
    if (ev.origin !== PARENT || !ev.data || ev.data.type !== "confirm") { return; }
    postCard({ number: num.value.replace(/\D/g, ""), exp_month: document.getElementById("exp-month").value,
      exp_year: document.getElementById("exp-year").value, cvc: document.getElementById("card-cvc").value });
  });
})();
</script></body></html>{{end}}

{{define "card-number"}}` + frameHead + `<input id="cardnumber" name="cardnumber" type="text" inputmode="numeric" autocomplete="cc-number" placeholder="Card number" aria-label="Credit or debit card number" maxlength="23">
<script>(function () { "use strict"; ` + siblingsJS + `
  var el = document.getElementById("cardnumber");
  el.addEventListener("input", function () { var g = group(el.value); if (g !== el.value) { el.value = g; } toSiblings({ type: "field", field: "number", value: el.value.replace(/\D/g, "") }); });
})();</script></body></html>{{end}}

{{define "card-expiry"}}` + frameHead + `<input id="exp-date" name="exp-date" type="text" inputmode="numeric" autocomplete="cc-exp" placeholder="MM / YY" aria-label="Credit or debit card expiration date" maxlength="7">
<script>(function () { "use strict"; ` + siblingsJS + `
  var el = document.getElementById("exp-date");
  el.addEventListener("input", function () { toSiblings({ type: "field", field: "expiry", value: el.value }); });
})();</script></body></html>{{end}}

{{define "card-cvc"}}` + frameHead + `<input id="cvc" name="cvc" type="text" inputmode="numeric" autocomplete="cc-csc" placeholder="CVC" aria-label="Credit or debit card CVC/CVV" maxlength="4">
<script>(function () { "use strict"; ` + siblingsJS + `
  var el = document.getElementById("cvc");
  el.addEventListener("input", function () { toSiblings({ type: "field", field: "cvc", value: el.value }); });
})();</script></body></html>{{end}}

{{define "controller"}}<!doctype html><html><head><meta charset="utf-8"><title>controller</title></head><body><div id="card-errors"></div>
<script>
(function () {
  "use strict";
  var PARENT = {{.ParentOrigin}};
  var API = {{.API}};
  ` + postCardJS + `
  var card = { number: "", expiry: "", cvc: "" };
  window.addEventListener("message", function (ev) {
    if (!ev.data) { return; }
    if (ev.origin === location.origin && ev.data.type === "field") { card[ev.data.field] = ev.data.value; return; }
    if (ev.origin !== PARENT || ev.data.type !== "confirm") { return; }
    var m = /^\s*(\d{1,2})\s*\/\s*(\d{2}|\d{4})\s*$/.exec(card.expiry);
    if (!card.number || !m || !card.cvc) { failed("Your card details are incomplete."); return; }
    var year = m[2].length === 2 ? "20" + m[2] : m[2];
    postCard({ number: card.number, exp_month: String(+m[1]), exp_year: year, cvc: card.cvc });
  });
})();
</script></body></html>{{end}}`))

// cardFieldTmpl is one card-fields frame. The number frame collects the
// others and posts the card to its own origin's /sessions, the number
// grouped with spaces exactly as the field shows it.
var cardFieldTmpl = template.Must(template.New("cardfield").Parse(frameHead + `
{{if eq .Field "number"}}<input id="number" name="number" type="text" inputmode="numeric" autocomplete="cc-number" placeholder="Card number" aria-label="Card number" maxlength="23">
{{else if eq .Field "expiry"}}<input id="expiry" name="expiry" type="text" inputmode="numeric" autocomplete="cc-exp" placeholder="Expiration date (MM / YY)" aria-label="Expiration date (MM / YY)" maxlength="7">
{{else if eq .Field "verification_value"}}<input id="verification_value" name="verification_value" type="text" inputmode="numeric" autocomplete="cc-csc" placeholder="Security code" aria-label="Security code" maxlength="4">
{{else}}<input id="name" name="name" type="text" autocomplete="cc-name" placeholder="Name on card" aria-label="Name on card">{{end}}
<script>
(function () {
  "use strict";
  var PARENT = {{.ParentOrigin}};
  var FIELD = {{.Field}};
  ` + siblingsJS + `
  var el = document.getElementById(FIELD);
  if (FIELD !== "number") {
    el.addEventListener("input", function () { toSiblings({ type: "card-field", field: FIELD, value: el.value }); });
    return;
  }
  el.addEventListener("input", function () { var g = group(el.value); if (g !== el.value) { el.value = g; } });
  var others = { expiry: "", verification_value: "", name: "" };
  window.addEventListener("message", function (ev) {
    if (!ev.data) { return; }
    if (ev.origin === location.origin && ev.data.type === "card-field") { others[ev.data.field] = ev.data.value; return; }
    if (ev.origin !== PARENT || ev.data.type !== "submit") { return; }
    var m = /^\s*(\d{1,2})\s*\/\s*(\d{2}|\d{4})\s*$/.exec(others.expiry);
    if (!el.value || !m || !others.verification_value) { parent.postMessage({ type: "error", message: "Enter your card details." }, PARENT); return; }
    fetch("/sessions", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ credit_card: {
      number: el.value, name: others.name, month: String(+m[1]), year: m[2].length === 2 ? "20" + m[2] : m[2],
      verification_value: others.verification_value } }) }).then(function (res) {
      return res.json().then(function (b) {
        if (!res.ok) { parent.postMessage({ type: "error", message: b.error && b.error.message ? b.error.message : "Your card could not be used." }, PARENT); return; }
        parent.postMessage({ type: "session", id: b.id }, PARENT);
      });
    }).catch(function () { parent.postMessage({ type: "error", message: "We could not reach the payment service." }, PARENT); });
  });
})();
</script></body></html>`))

// securedFieldsTmpl encrypts the card with the processor's RSA key in the
// frame's own script (RSA-OAEP, SHA-256) before anything is sent.
var securedFieldsTmpl = template.Must(template.New("secured").Parse(frameHead + `
<label for="encryptedCardNumber">Card number</label><input id="encryptedCardNumber" name="encryptedCardNumber" data-fieldtype="encryptedCardNumber" type="text" inputmode="numeric" autocomplete="cc-number" maxlength="23">
<div class="row">
<div><label for="encryptedExpiryMonth">Expiry month</label><select id="encryptedExpiryMonth" name="encryptedExpiryMonth"><option value="">MM</option>{{range .Months}}<option value="{{.Value}}">{{.Label}}</option>{{end}}</select></div>
<div><label for="encryptedExpiryYear">Expiry year</label><select id="encryptedExpiryYear" name="encryptedExpiryYear"><option value="">YYYY</option>{{range .Years}}<option value="{{.}}">{{.}}</option>{{end}}</select></div>
<div><label for="encryptedSecurityCode">Security code</label><input id="encryptedSecurityCode" name="encryptedSecurityCode" data-fieldtype="encryptedSecurityCode" type="text" inputmode="numeric" autocomplete="cc-csc" maxlength="4"></div>
</div><div id="card-errors" role="alert"></div>
<script>
(function () {
  "use strict";
  var PARENT = {{.ParentOrigin}};
  var PUB = {{.PublicKey}};
  function val(id) { return document.getElementById(id).value; }
  function failed(msg) { document.getElementById("card-errors").textContent = msg; parent.postMessage({ type: "payment_failed", message: msg }, PARENT); }
  window.addEventListener("message", function (ev) {
    if (ev.origin !== PARENT || !ev.data || ev.data.type !== "confirm") { return; }
    var card = JSON.stringify({ number: val("encryptedCardNumber").replace(/\D/g, ""), exp_month: val("encryptedExpiryMonth"),
      exp_year: val("encryptedExpiryYear"), cvc: val("encryptedSecurityCode") });
    var der = Uint8Array.from(atob(PUB), function (c) { return c.charCodeAt(0); });
    crypto.subtle.importKey("spki", der, { name: "RSA-OAEP", hash: "SHA-256" }, false, ["encrypt"]).then(function (k) {
      return crypto.subtle.encrypt({ name: "RSA-OAEP" }, k, new TextEncoder().encode(card));
    }).then(function (ct) {
      var b = ""; new Uint8Array(ct).forEach(function (x) { b += String.fromCharCode(x); });
      return fetch("/checkoutshopper/v1/payment_methods", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ encryptedCard: btoa(b) }) });
    }).then(function (res) {
      return res.json().then(function (b) {
        if (!res.ok) { failed(b.error && b.error.message ? b.error.message : "Your card could not be used."); return; }
        parent.postMessage({ type: "payment_method", id: b.id }, PARENT);
      });
    }).catch(function () { failed("We could not reach the payment service."); });
  });
})();
</script></body></html>`))

var shopLoginTmpl = shopPage(`{{define "title"}}Sign in · Northtrail Outfitters{{end}}{{template "header" .}}
<h1>Sign in to check out</h1>
<form id="customer-login" method="post" action="/account/login" novalidate>
<div id="login-error" class="form-error" role="alert" {{if not .Error}}hidden{{end}}>{{.Error}}</div>
<input type="hidden" name="return" value="{{.Return}}">
<label for="customer-email">Email</label><input type="email" id="customer-email" name="email" autocomplete="username" value="{{.Email}}" required>
<label for="customer-password">Password</label><input type="password" id="customer-password" name="password" autocomplete="current-password" required>
<p><button type="submit" id="sign-in">Sign in</button></p>
</form>{{template "footer" .}}`)

// cfTmpl is the three-step card-fields checkout: contact, shipping, payment.
var cfTmpl = shopPage(`{{define "title"}}Checkout · Northtrail Outfitters{{end}}{{template "header" .}}
<nav aria-label="Breadcrumb" id="steps"><ol><li>Contact</li><li>Shipping</li><li>Payment</li></ol></nav>
<div id="form-error" class="form-error" role="alert" aria-live="assertive" {{if not .FormError}}hidden{{end}}>{{.FormError}}</div>
<div class="grid">
{{if eq .Step "contact"}}<form id="step-contact" method="post" action="/cf/contact" novalidate>
<h1>Contact</h1>
<label for="checkout-email">Email</label><input type="email" id="checkout-email" name="email" autocomplete="email" value="{{.Email}}" required>
<label for="checkout-phone">Phone (optional)</label><input type="tel" id="checkout-phone" name="phone" autocomplete="tel">
<p><button type="submit" id="continue-to-shipping">Continue to shipping</button></p>
</form>
{{else if eq .Step "shipping"}}<form id="step-shipping" method="post" action="/cf/shipping" novalidate>
<h1>Shipping address</h1>
<div class="row"><div><label for="first-name">First name</label><input type="text" id="first-name" name="first_name" autocomplete="given-name"></div>
<div><label for="last-name">Last name</label><input type="text" id="last-name" name="last_name" autocomplete="family-name"></div></div>
<label for="address1">Address</label><input type="text" id="address1" name="address1" autocomplete="address-line1">
<div class="row"><div><label for="zip">Postcode</label><input type="text" id="zip" name="zip" autocomplete="postal-code"></div>
<div><label for="city">City</label><input type="text" id="city" name="city" autocomplete="address-level2"></div></div>
<label for="country">Country</label><select id="country" name="country" autocomplete="country"><option value="">Select</option><option value="DE">Germany</option><option value="FR">France</option><option value="NL">Netherlands</option></select>
<p><button type="submit" id="continue-to-payment">Continue to payment</button></p>
</form>
{{else}}<form id="step-payment" method="post" action="/cf/payment" novalidate>
<h1>Payment</h1>
<p>Ship to {{.State.Get "address1"}}, {{.State.Get "city"}}</p>
<fieldset><legend>Credit card</legend>
{{range .Fields}}<div class="card-field"><iframe class="card-fields-iframe" id="card-fields-{{.Name}}-{{$.ID}}" name="card-fields-{{.Name}}-{{$.ID}}" title="{{.Title}}" src="{{.Src}}" style="height:48px"></iframe></div>
{{end}}</fieldset>
<input type="hidden" name="s" id="session-id">
<p><button type="button" id="pay-now">Pay now</button></p>
</form>
<script>
(function () {
  "use strict";
  var VAULT = {{.VaultOrigin}};
  var number = document.getElementById({{printf "card-fields-number-%s" .ID}});
  var pay = document.getElementById("pay-now");
  var formError = document.getElementById("form-error");
  function fail(msg) { formError.textContent = msg; formError.hidden = false; pay.disabled = false; }
  pay.addEventListener("click", function () {
    formError.hidden = true; pay.disabled = true;
    number.contentWindow.postMessage({ type: "submit" }, VAULT);
  });
  window.addEventListener("message", function (ev) {
    if (ev.origin !== VAULT || !ev.data) { return; }
    if (ev.data.type === "session") { document.getElementById("session-id").value = ev.data.id; document.getElementById("step-payment").submit(); }
    else if (ev.data.type === "error") { fail(ev.data.message); }
  });
})();
</script>{{end}}
` + summaryBlock + `</div>{{template "footer" .}}`)
