package corpus

import (
	"encoding/json"
	"strconv"
	"strings"
)

// shadowPage is a product page built from web components, each rendering
// into an open shadow root (some nested in others), the way Salesforce
// Lightning, Shopify's newer themes and many design systems build pages:
// header, product hero with a quantity picker, tabs, a promo box, a gallery
// of product tiles, an address form that posts, and a footer.
func shadowPage() string {
	r := rng(99)
	var tiles strings.Builder
	for i := range 16 {
		name := r.pick(adjectives) + " " + r.pick(nouns) + " " + strconv.Itoa(i+1)
		tiles.WriteString(`<product-tile name="` + esc(name) + `" price="€` + strconv.Itoa(19+r.intn(200)) + `.00" rating="` + strconv.Itoa(2+r.intn(4)) + `"></product-tile>`)
	}
	countries, _ := json.Marshal(shortCountries)
	body := `<shop-header></shop-header><main><product-hero></product-hero><product-tabs></product-tabs><promo-box></promo-box>` +
		`<product-gallery>` + tiles.String() + `</product-gallery><address-form></address-form></main><shop-footer></shop-footer>` +
		`<script>const COUNTRIES = ` + string(countries) + `;const DOT = "` + dot + `";` + shadowScript + `</script>`
	return doc("Alpine Parka – Northwind Outfitters", `product-gallery{display:block}`, body)
}

const shadowScript = `
const css = '<style>:host{display:block;margin:8px 16px}.icon{width:14px;height:14px}ul{list-style:none;padding:0;display:flex;gap:8px;flex-wrap:wrap}</style>';
function define(name, render, init) {
  customElements.define(name, class extends HTMLElement {
    connectedCallback() {
      if (this.shadowRoot) return;
      const root = this.attachShadow({mode: 'open'});
      root.innerHTML = css + render(this);
      if (init) init(root);
    }
  });
}
define('shop-header', () => '<header><a href="/shadow" aria-label="Northwind home"><img src="' + DOT + '" class="icon"></a><nav aria-label="Main"><ul>' +
  ['New', 'Jackets', 'Fleece', 'Footwear', 'Packs', 'Sale'].map((c) => '<li><a href="/shadow?c=' + c.toLowerCase() + '">' + c + '</a></li>').join('') +
  '</ul></nav><label for="site-search">Search the store</label><input type="search" id="site-search" name="q"><a href="/cart" aria-label="Cart, 1 item"><img src="' + DOT + '" class="icon"></a></header>');
define('qty-picker', () => '<div class="qty"><button type="button" aria-label="Decrease quantity">−</button><input type="number" id="qty" aria-label="Quantity" value="1" min="1"><button type="button" aria-label="Increase quantity">+</button></div>');
define('product-hero', () => '<section><div class="gallery"><img src="' + DOT + '" width="320" height="320" alt="Alpine Parka in Olive, front"><div class="thumbs">' +
  [1, 2, 3, 4].map((i) => '<button type="button" aria-label="Show image ' + i + '"><img src="' + DOT + '" class="icon"></button>').join('') + '</div></div>' +
  '<div class="info"><p class="brand">Fjellvik</p><h1>Alpine Parka</h1><p class="price"><span>€249.00</span> <s>€299.00</s></p><p><span role="img" aria-label="4 out of 5 stars">★★★★☆</span> <a href="#reviews">212 reviews</a></p>' +
  '<fieldset><legend>Colour</legend>' + ['Olive', 'Black', 'Navy', 'Rust', 'Sand', 'Grey'].map((c, i) => '<label><input type="radio" name="colour" value="' + c + '"' + (i ? '' : ' checked') + '> ' + c + '</label>').join('') + '</fieldset>' +
  '<fieldset><legend>Size</legend>' + ['XS', 'S', 'M', 'L', 'XL', 'XXL'].map((s) => '<label><input type="radio" name="size" value="' + s + '"> ' + s + '</label>').join('') + '</fieldset>' +
  '<qty-picker></qty-picker><button type="button" id="add-to-cart">Add to cart</button><button type="button" aria-label="Add to wishlist"><img src="' + DOT + '" class="icon"></button>' +
  '<ul class="perks"><li><img src="' + DOT + '" class="icon"> Free shipping over €50</li><li><img src="' + DOT + '" class="icon"> 30-day returns</li><li><img src="' + DOT + '" class="icon"> Lifetime warranty</li></ul></div></section>');
define('product-tabs', () => '<div role="tablist" aria-label="Product details"><button role="tab" aria-selected="true" id="tab-desc">Description</button><button role="tab" aria-selected="false" id="tab-spec">Specifications</button><button role="tab" aria-selected="false" id="tab-rev">Reviews</button></div>' +
  '<div role="tabpanel" aria-labelledby="tab-desc"><p>A fully waterproof, breathable parka with recycled down fill, a helmet-compatible hood and two-way zip.</p><ul>' +
  ['Waterproof rating 20,000 mm', 'Breathability 15,000 g/m²', '700 fill power recycled down', 'Weight 890 g', 'Two-way YKK zip', 'Helmet-compatible hood', 'Four external pockets', 'Internal media pocket', 'Adjustable hem', 'Machine washable'].map((s) => '<li>' + s + '</li>').join('') + '</ul></div>');
define('promo-box', () => '<div class="promo"><label for="promo-code">Promo code</label><input type="text" id="promo-code" name="promo"><button type="button" id="promo-apply">Apply code</button><p role="status" id="promo-status"></p></div>',
  (root) => root.getElementById('promo-apply').addEventListener('click', () => { root.getElementById('promo-status').textContent = 'This code has expired'; }));
define('product-tile', (el) => '<div class="tile"><a href="/shadow?p=' + encodeURIComponent(el.getAttribute('name')) + '"><img src="' + DOT + '" width="120" height="120" alt="' + el.getAttribute('name') + '"><span class="name">' + el.getAttribute('name') + '</span></a>' +
  '<p class="price">' + el.getAttribute('price') + '</p><span role="img" aria-label="' + el.getAttribute('rating') + ' out of 5 stars">' + '★'.repeat(+el.getAttribute('rating')) + '</span>' +
  '<button type="button" aria-label="Quick add ' + el.getAttribute('name') + '">+</button></div>');
define('product-gallery', () => '<section><div class="head"><h2>You may also like</h2><a id="more-link" href="/shadow?more=1">More like this</a></div><div class="grid" style="display:grid;grid-template-columns:repeat(4,1fr)"><slot></slot></div></section>');
define('address-form', () => '<form method="post" action="/shadow"><h2>Delivery address</h2>' +
  '<label for="ship-name">Full name</label><input id="ship-name" name="name" autocomplete="name">' +
  '<label for="ship-street">Street address</label><input id="ship-street" name="street" autocomplete="street-address">' +
  '<label for="ship-city">City</label><input id="ship-city" name="city" autocomplete="address-level2">' +
  '<label for="ship-zip">Postal code</label><input id="ship-zip" name="zip" autocomplete="postal-code">' +
  '<label for="ship-country">Country</label><select id="ship-country" name="country">' + COUNTRIES.map((c) => '<option>' + c + '</option>').join('') + '</select>' +
  '<label><input type="checkbox" name="default"> Make this my default address</label><button type="submit" id="ship-save">Save address</button></form>');
define('shop-footer', () => '<footer>' + [['Help', 'Contact', 'Shipping', 'Returns', 'Warranty'], ['Company', 'About', 'Careers', 'Journal', 'Stores'], ['Legal', 'Terms', 'Privacy', 'Cookies', 'Imprint']].map((col) =>
  '<div><h2>' + col[0] + '</h2><ul>' + col.slice(1).map((l) => '<li><a href="/help/' + l.toLowerCase() + '">' + l + '</a></li>').join('') + '</ul></div>').join('') + '<p><small>© 2025 Northwind Outfitters</small></p></footer>');
`
