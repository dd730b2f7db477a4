package corpus

import (
	"strconv"
	"strings"
)

var (
	shortCountries = []string{"United States", "Canada", "United Kingdom", "Germany", "France", "Spain", "Italy", "Netherlands", "Belgium", "Austria", "Switzerland", "Sweden", "Norway", "Denmark", "Finland", "Ireland", "Portugal", "Poland", "Australia", "New Zealand", "Japan"}
	usStates       = []string{"Alabama", "Alaska", "Arizona", "Arkansas", "California", "Colorado", "Connecticut", "Delaware", "District of Columbia", "Florida", "Georgia", "Hawaii", "Idaho", "Illinois", "Indiana", "Iowa", "Kansas", "Kentucky", "Louisiana", "Maine", "Maryland", "Massachusetts", "Michigan", "Minnesota", "Mississippi", "Missouri", "Montana", "Nebraska", "Nevada", "New Hampshire", "New Jersey", "New Mexico", "New York", "North Carolina", "North Dakota", "Ohio", "Oklahoma", "Oregon", "Pennsylvania", "Rhode Island", "South Carolina", "South Dakota", "Tennessee", "Texas", "Utah", "Vermont", "Virginia", "Washington", "West Virginia", "Wisconsin", "Wyoming"}
)

func options(list []string, selected string) string {
	var b strings.Builder
	for _, o := range list {
		if o == selected {
			b.WriteString(`<option selected>` + esc(o) + `</option>`)
		} else {
			b.WriteString(`<option>` + esc(o) + `</option>`)
		}
	}
	return b.String()
}

func textField(id, name, label, autocomplete string) string {
	return `<div class="field"><label for="` + id + `">` + esc(label) + `</label><input type="text" id="` + id + `" name="` + name + `" autocomplete="` + autocomplete + `"></div>`
}

// checkoutPage is a one-page checkout in the Shopify style with five
// cross-origin iframes: express checkout buttons, the card number, expiry
// and security code fields (each its own frame, as Stripe's split card
// element does) and a chat widget.
func checkoutPage(frames [6]string) string {
	var b strings.Builder
	b.WriteString(`<header class="site"><a href="/listing" aria-label="Northwind Outfitters home"><img src="` + dot + `" alt="" class="icon"> Northwind</a><nav aria-label="Checkout steps"><ol style="display:flex;gap:8px;list-style:none"><li><a id="edit-cart" href="/checkout?step=cart">Edit cart</a></li><li aria-current="step">Information</li><li>Shipping</li><li>Payment</li></ol></nav><span><img src="` + dot + `" class="icon"> Secure checkout</span></header>`)
	b.WriteString(`<div style="display:flex;gap:24px;padding:16px"><main style="flex:2">`)
	b.WriteString(`<section aria-label="Express checkout"><h2>Express checkout</h2><iframe title="Express checkout" src="` + frames[3] + `/express" style="width:100%;height:60px;border:0"></iframe><p class="or">Or continue below</p></section>`)
	b.WriteString(`<form id="shipping" method="post" action="/checkout">`)
	b.WriteString(`<section><div class="row"><h2>Contact</h2><a href="/account">Already have an account? Log in</a></div>`)
	b.WriteString(`<div class="field"><label for="email">Email</label><input type="email" id="email" name="email" autocomplete="email"></div>`)
	b.WriteString(`<div class="check"><input type="checkbox" id="news" name="news"><label for="news">Email me with news and offers</label></div></section>`)
	b.WriteString(`<section><h2>Shipping address</h2><div class="field"><label for="country">Country/Region</label><select id="country" name="country" autocomplete="country-name">` + options(shortCountries, "Germany") + `</select></div>`)
	b.WriteString(`<div class="row">` + textField("first-name", "firstName", "First name", "given-name") + textField("last-name", "lastName", "Last name", "family-name") + `</div>`)
	b.WriteString(textField("company", "company", "Company (optional)", "organization"))
	b.WriteString(textField("address1", "address1", "Address", "address-line1"))
	b.WriteString(textField("address2", "address2", "Apartment, suite, etc. (optional)", "address-line2"))
	b.WriteString(`<div class="row">` + textField("city", "city", "City", "address-level2"))
	b.WriteString(`<div class="field"><label for="state">State</label><select id="state" name="state" autocomplete="address-level1"><option value="">Select a state</option>` + options(usStates, "") + `</select></div>`)
	b.WriteString(textField("zip", "zip", "ZIP code", "postal-code") + `</div>`)
	b.WriteString(`<div class="field"><label for="phone">Phone</label><input type="tel" id="phone" name="phone" autocomplete="tel"><button type="button" class="tip" aria-label="Why we need your phone number"><img src="` + dot + `" class="icon"></button></div>`)
	b.WriteString(`<div class="check"><input type="checkbox" id="save-info" name="save"><label for="save-info">Save this information for next time</label></div></section>`)
	b.WriteString(`<section><h2>Shipping method</h2><div role="radiogroup" aria-label="Shipping method">`)
	for i, m := range []string{"Standard (3–5 business days) €4.90", "Express (1–2 business days) €12.90", "Pick up in store Free"} {
		id := "ship-" + strconv.Itoa(i)
		checked := ""
		if i == 0 {
			checked = " checked"
		}
		b.WriteString(`<div class="check"><input type="radio" id="` + id + `" name="ship" value="` + strconv.Itoa(i) + `"` + checked + `><label for="` + id + `">` + esc(m) + `</label></div>`)
	}
	b.WriteString(`</div></section><button type="submit" id="continue">Continue to payment</button></form>`)
	b.WriteString(`<section><h2>Payment</h2><p>All transactions are secure and encrypted.</p><div class="card-box">`)
	b.WriteString(`<iframe title="Secure card number input frame" src="` + frames[0] + `/number" style="width:100%;height:44px;border:0"></iframe>`)
	b.WriteString(`<div class="row"><iframe title="Secure expiration date input frame" src="` + frames[1] + `/expiry" style="width:48%;height:44px;border:0"></iframe><iframe title="Secure CVC input frame" src="` + frames[2] + `/cvc" style="width:48%;height:44px;border:0"></iframe></div>`)
	b.WriteString(textField("card-holder", "cardHolder", "Name on card", "cc-name"))
	b.WriteString(`<div class="check"><input type="checkbox" id="same-billing" name="sameBilling" checked><label for="same-billing">Use shipping address as billing address</label></div></div></section>`)
	b.WriteString(`<footer><ul style="display:flex;gap:10px;list-style:none;padding:0"><li><a href="/help/refunds">Refund policy</a></li><li><a href="/help/shipping">Shipping policy</a></li><li><a href="/help/privacy">Privacy policy</a></li><li><a href="/help/terms">Terms of service</a></li></ul></footer></main>`)
	b.WriteString(`<aside style="flex:1" aria-label="Order summary"><h2>Order summary</h2><table><tbody>`)
	r := rng(7)
	total := 0
	for i := range 5 {
		name := r.pick(adjectives) + " " + r.pick(nouns)
		price := 20 + r.intn(120)
		qty := 1 + r.intn(2)
		total += price * qty
		b.WriteString(`<tr><td><div class="thumb"><img src="` + dot + `" width="48" height="48" alt="` + esc(name) + `"><span class="qty" aria-label="Quantity ` + strconv.Itoa(qty) + `">` + strconv.Itoa(qty) + `</span></div></td><td><p class="name">` + esc(name) + `</p><p class="variant">` + esc(r.pick(colours)) + ` / M</p></td><td>€` + strconv.Itoa(price*qty) + `.00</td></tr>`)
		_ = i
	}
	b.WriteString(`</tbody></table><div class="promo"><label for="promo">Discount code or gift card</label><input type="text" id="promo" name="promo"><button type="button" id="apply-promo" onclick="document.getElementById('promo-msg').textContent='Enter a valid discount code or gift card'">Apply</button><p id="promo-msg" role="status"></p></div>`)
	b.WriteString(`<dl><dt>Subtotal</dt><dd>€` + strconv.Itoa(total) + `.00</dd><dt>Shipping</dt><dd>€4.90</dd><dt>Estimated taxes</dt><dd>€` + strconv.Itoa(total*19/119) + `.00</dd><dt>Total</dt><dd class="total">EUR €` + strconv.Itoa(total) + `.90</dd></dl></aside></div>`)
	b.WriteString(`<iframe title="Chat widget" src="` + frames[4] + `/chat" style="position:fixed;right:8px;bottom:8px;width:220px;height:90px;border:0"></iframe>`)
	return doc("Checkout – Northwind Outfitters", `.row{display:flex;gap:8px}.field{margin:6px 0}`, b.String())
}

// framePage are the five documents of the checkout's frames, each served
// by its own origin.
var framePage = [5]string{
	frameDoc("Card number", `<div class="input"><label for="card-number">Card number</label><input id="card-number" name="cardnumber" autocomplete="cc-number" inputmode="numeric" placeholder="1234 1234 1234 1234"><span class="brands"><img src="`+dot+`" class="icon"><img src="`+dot+`" class="icon"><img src="`+dot+`" class="icon"><img src="`+dot+`" class="icon"></span></div><div role="alert" class="err"></div><input type="hidden" name="session" value="cs_test">`),
	frameDoc("Expiration date", `<div class="input"><label for="card-expiry">Expiration date</label><input id="card-expiry" name="exp-date" autocomplete="cc-exp" inputmode="numeric" placeholder="MM / YY"></div><div role="alert" class="err"></div>`),
	frameDoc("Security code", `<div class="input"><label for="card-cvc">Security code</label><input id="card-cvc" name="cvc" autocomplete="cc-csc" inputmode="numeric" placeholder="CVC"><button type="button" aria-label="What is the security code?"><img src="`+dot+`" class="icon"></button></div><div role="alert" class="err"></div>`),
	frameDoc("Express checkout", `<div class="buttons" style="display:flex;gap:8px"><button type="button" id="wallet-pay" aria-label="Pay with WalletPay"><img src="`+dot+`" class="icon"></button><button type="button" id="pay-later">Pay in 4 interest-free installments</button><button type="button" id="more-options" aria-expanded="false">More options</button></div>`),
	frameDoc("Chat", `<div class="launcher"><p>Questions? We are online.</p><button type="button" id="open-chat"><img src="`+dot+`" class="icon"> Chat with us</button></div>`),
}

func frameDoc(title, body string) string {
	return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>` + esc(title) + `</title><style>body{margin:0;font-family:sans-serif}.icon{width:14px;height:14px}</style></head><body><div class="frame-root"><div class="wrap">` + body + `</div></div></body></html>`
}
