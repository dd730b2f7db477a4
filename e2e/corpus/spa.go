package corpus

import (
	"encoding/json"
	"fmt"
	"strings"
)

// spaData is the product feed the single-page app fetches.
func spaData() string {
	r := rng(2024)
	type product struct {
		ID    int    `json:"id"`
		Name  string `json:"name"`
		Price string `json:"price"`
		Stock bool   `json:"stock"`
		Deal  string `json:"deal,omitempty"`
	}
	var ps []product
	for i := range 60 {
		p := product{ID: i + 1, Name: fmt.Sprintf("%s %s %s", r.pick(colours), r.pick(adjectives), r.pick(nouns)),
			Price: fmt.Sprintf("€%d.%02d", 9+r.intn(190), r.intn(100)), Stock: r.intn(4) != 0}
		if r.intn(3) == 0 {
			p.Deal = fmt.Sprintf("%d%% off", 10+5*r.intn(8))
		}
		ps = append(ps, p)
	}
	b, _ := json.Marshal(map[string]any{"products": ps, "categories": []string{"All", "Jackets", "Footwear", "Packs", "Accessories"}})
	return string(b)
}

// spaPage is a single-page app: the document is a shell, the app fetches
// its data and renders only after the page's load event, and re-renders
// the product list on every keystroke in the filter and on every toggle.
func spaPage() string {
	body := `<header class="site"><a href="/spa" aria-label="Deals home"><img src="` + dot + `" alt="" class="icon"> Northwind Deals</a><nav aria-label="Main"><a href="/spa?c=new">New</a> <a href="/spa?c=sale">Sale</a> <a href="/spa?c=outlet">Outlet</a></nav></header>` +
		`<main id="app" aria-busy="true"><p>Loading…</p></main><script>const DOT = "` + dot + `";` + spaScript + `</script>`
	return doc("Deals – Northwind Outfitters", `.item{border-bottom:1px solid #eee;padding:4px}.item img{width:40px;height:40px}`, body)
}

const spaScript = `
const dataP = fetch('/spa/data.json', {cache: 'no-store'}).then((r) => r.json());
const loaded = new Promise((f) => window.addEventListener('load', f));
Promise.all([dataP, loaded]).then(([data]) => {
  const app = document.getElementById('app');
  const state = {filter: '', inStock: false, tab: 0};
  const item = (p) => '<li class="item"><div class="row"><img src="' + DOT + '" alt=""><div class="meta"><h3><a href="/spa?p=' + p.id + '">' + p.name + '</a></h3>' +
    '<p class="price">' + p.price + (p.deal ? ' <span class="deal">' + p.deal + '</span>' : '') + '</p><p class="stock">' + (p.stock ? 'In stock' : 'Sold out') + '</p></div>' +
    '<button type="button" aria-label="Add ' + p.name + ' to cart"' + (p.stock ? '' : ' disabled') + '>Add</button></div></li>';
  app.innerHTML = '<h1>Today\'s deals</h1><div class="toolbar"><label for="filter">Filter products</label><input id="filter" type="text" autocomplete="off">' +
    '<button type="button" id="in-stock" aria-pressed="false">In stock only</button></div>' +
    '<div role="tablist" aria-label="Categories">' + data.categories.map((c, i) => '<button role="tab" aria-selected="' + (i === 0) + '">' + c + '</button>').join('') + '</div>' +
    '<p id="count" role="status"></p><ul id="list" style="list-style:none;padding:0"></ul><p><a id="view-more" href="/spa?view=deals">View all deals</a></p>' +
    '<form id="callback" method="post" action="/spa"><h2>Questions? We call you back</h2><label for="cb-name">Your name</label><input id="cb-name" name="name" autocomplete="name">' +
    '<label for="cb-phone">Phone</label><input id="cb-phone" type="tel" name="phone" autocomplete="tel"><button type="submit" id="spa-submit">Request a callback</button></form>';
  const list = app.querySelector('#list');
  const count = app.querySelector('#count');
  const render = () => {
    const shown = data.products.filter((p) => (!state.inStock || p.stock) && p.name.toLowerCase().includes(state.filter.toLowerCase()));
    list.innerHTML = shown.map(item).join('');
    count.textContent = shown.length + ' products shown';
  };
  app.querySelector('#filter').addEventListener('input', (e) => { state.filter = e.target.value; render(); });
  app.querySelector('#in-stock').addEventListener('click', (e) => {
    state.inStock = !state.inStock;
    e.currentTarget.setAttribute('aria-pressed', String(state.inStock));
    render();
  });
  render();
  app.removeAttribute('aria-busy');
  app.dataset.ready = '1';
});
`

// latePayPage is a checkout whose card form arrives late: the payment
// provider's script inserts its frame a moment after the page's load, and
// the frame mounts its fields a moment after its own load (the way Stripe
// Elements, Adyen and Braintree drop-ins do).
func latePayPage(frameOrigin string) string {
	var b strings.Builder
	b.WriteString(`<header class="site"><a href="/listing" aria-label="Northwind Outfitters home"><img src="` + dot + `" alt="" class="icon"> Northwind</a><span>Checkout</span></header><main style="padding:16px;max-width:760px">`)
	b.WriteString(`<form id="contact" method="post" action="/latepay"><h2>Contact</h2><div class="field"><label for="email">Email</label><input type="email" id="email" name="email" autocomplete="email"></div>`)
	b.WriteString(`<div class="check"><input type="checkbox" id="gift" name="gift" onchange="document.getElementById('gift-note').hidden=!this.checked"><label for="gift">This is a gift</label></div><div id="gift-note" hidden><label for="gift-msg">Gift message</label><textarea id="gift-msg" name="giftMessage"></textarea></div>`)
	b.WriteString(`<button type="submit" id="save-contact">Save contact</button></form>`)
	b.WriteString(`<section><h2>Shipping to</h2><p>Ada Lovelace, 12 Analytical Row, 10115 Berlin, Germany</p><p>Standard delivery, 3–5 business days</p><a id="change-shipping" href="/latepay?edit=shipping">Change shipping</a></section>`)
	b.WriteString(`<section><h2>Payment</h2><div id="pay-mount"><p id="pay-status" role="status">Loading payment form…</p></div></section>`)
	b.WriteString(`<section aria-label="Order summary"><h2>Order summary</h2><ul>`)
	r := rng(11)
	for range 3 {
		b.WriteString(`<li><img src="` + dot + `" width="40" height="40" alt=""> ` + esc(r.pick(adjectives)+" "+r.pick(nouns)) + ` <span>€` + fmt.Sprint(20+r.intn(100)) + `.00</span></li>`)
	}
	b.WriteString(`</ul><p class="total">Total EUR €162.40</p><button type="button" id="pay-now">Pay now</button></section></main>`)
	b.WriteString(`<script>window.addEventListener('load', () => setTimeout(() => {
  const f = document.createElement('iframe');
  f.title = 'Secure payment input frame';
  f.src = '` + frameOrigin + `/element';
  f.style.cssText = 'width:100%;height:240px;border:0';
  document.getElementById('pay-mount').appendChild(f);
}, 400));
window.addEventListener('message', (e) => {
  if (e.origin !== '` + frameOrigin + `' || !e.data || e.data.type !== 'mounted') return;
  const s = document.getElementById('pay-status');
  s.textContent = 'Payment form ready';
  s.dataset.ready = '1';
});</script>`)
	return doc("Checkout – Northwind Outfitters", `.field{margin:6px 0}`, b.String())
}

// latePayFrame is the late payment frame's document: empty at its load,
// its fields mounted a moment later, then it tells the page.
var latePayFrame = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Payment</title><style>body{margin:0;font-family:sans-serif}.f{margin:4px 0}</style></head><body><div id="root"></div><script>
window.addEventListener('load', () => setTimeout(() => {
  const countries = ` + func() string { b, _ := json.Marshal(shortCountries); return string(b) }() + `;
  document.getElementById('root').innerHTML = '<form class="element" onsubmit="return false"><div class="f"><label for="card-number">Card number</label><input id="card-number" name="number" autocomplete="cc-number" inputmode="numeric" placeholder="1234 1234 1234 1234"></div>' +
    '<div class="f"><label for="card-expiry">Expiration date</label><input id="card-expiry" name="expiry" autocomplete="cc-exp" placeholder="MM / YY"></div>' +
    '<div class="f"><label for="card-cvc">Security code</label><input id="card-cvc" name="cvc" autocomplete="cc-csc" placeholder="CVC"></div>' +
    '<div class="f"><label for="card-name">Name on card</label><input id="card-name" name="name" autocomplete="cc-name"></div>' +
    '<div class="f"><label for="card-country">Country</label><select id="card-country" name="country">' + countries.map((c) => '<option>' + c + '</option>').join('') + '</select></div>' +
    '<div class="f"><label for="card-zip">ZIP</label><input id="card-zip" name="zip" autocomplete="postal-code"></div><div role="alert" class="err"></div></form>';
  parent.postMessage({type: 'mounted'}, '*');
}, 300));
</script></body></html>`
