package corpus

import (
	"fmt"
	"strconv"
	"strings"
)

var (
	adjectives = []string{"Trail", "Summit", "Coastal", "Alpine", "Urban", "Ridge", "Canyon", "Harbor", "Meadow", "Glacier", "Desert", "Forest"}
	nouns      = []string{"Runner", "Hiker", "Parka", "Fleece", "Backpack", "Beanie", "Sandal", "Boot", "Windbreaker", "Tee", "Chino", "Sock"}
	colours    = []string{"Black", "Olive", "Navy", "Sand", "Rust", "Grey", "Forest green", "Sky blue"}
	brands     = []string{"Northwind", "Fjellvik", "Karoo", "Lumen", "Basalt", "Tundra", "Wayfarer", "Odessa", "Pioneer", "Halden"}
)

// listingProducts is how many cards the listing shows: with the chrome,
// filters and pagination, the page has about 2,000 elements.
const listingProducts = 84

// listingPage is a category page: filters, sorting, a grid of product cards
// (image, wishlist button, title link, rating, prices, badges with
// decorative icons, a quantity field and an add-to-cart button each) and
// pagination.
func listingPage(page string) string {
	n, _ := strconv.Atoi(page)
	if n < 1 {
		n = 1
	}
	r := rng(42)
	var b strings.Builder
	b.WriteString(siteHeader(true))
	b.WriteString(`<nav aria-label="Breadcrumb" class="crumbs"><ol style="display:flex;list-style:none;gap:6px;padding:0 16px"><li><a href="/">Home</a></li><li><a href="/listing?c=outdoor">Outdoor</a></li><li aria-current="page">All outdoor gear</li></ol></nav>`)
	b.WriteString(`<div class="layout" style="display:flex;gap:16px;padding:0 16px"><aside id="filters" style="width:220px"><h2>Filters</h2>`)
	group := func(title, kind, name string, opts []string) {
		b.WriteString(`<fieldset><legend>` + esc(title) + `</legend>`)
		for i, o := range opts {
			id := fmt.Sprintf("%s-%d", name, i)
			b.WriteString(`<div class="opt"><input type="` + kind + `" id="` + id + `" name="` + name + `" value="` + esc(o) + `"><label for="` + id + `">` + esc(o) + ` <span class="count">(` + strconv.Itoa(3+r.intn(90)) + `)</span></label></div>`)
		}
		b.WriteString(`</fieldset>`)
	}
	group("Category", "checkbox", "cat", []string{"Jackets", "Fleece", "Shirts", "Trousers", "Shorts", "Footwear", "Backpacks", "Headwear", "Gloves", "Socks"})
	group("Brand", "checkbox", "brand", brands)
	group("Price", "radio", "price", []string{"Under €25", "€25 to €50", "€50 to €100", "€100 to €200", "Over €200"})
	group("Customer rating", "radio", "rating", []string{"4 stars and up", "3 stars and up", "2 stars and up", "1 star and up"})
	b.WriteString(`<button type="button" id="clear-filters">Clear all</button></aside><main style="flex:1"><h1>All outdoor gear</h1>`)
	b.WriteString(`<div class="toolbar" style="display:flex;gap:12px;align-items:center"><p>Showing ` + strconv.Itoa((n-1)*listingProducts+1) + `–` + strconv.Itoa(n*listingProducts) + ` of 1,204 results</p>`)
	b.WriteString(`<label for="sort">Sort by</label><select id="sort" name="sort"><option>Featured</option><option>Best selling</option><option>Price, low to high</option><option>Price, high to low</option><option>Newest</option><option>Customer rating</option></select>`)
	b.WriteString(`<button type="button" id="toggle-filters" aria-pressed="true" onclick="const on=this.getAttribute('aria-pressed')==='true';this.setAttribute('aria-pressed',String(!on));document.getElementById('grid').classList.toggle('list',on)">Grid view</button></div>`)
	b.WriteString(`<ul id="grid" style="display:grid;grid-template-columns:repeat(4,1fr);gap:12px;list-style:none;padding:0">`)
	for i := range listingProducts {
		id := (n-1)*listingProducts + i + 1
		name := fmt.Sprintf("%s %s %d", r.pick(adjectives), r.pick(nouns), id)
		colour := r.pick(colours)
		price := 15 + r.intn(240)
		was := price + 10 + r.intn(60)
		rating := 2 + r.intn(4)
		reviews := 1 + r.intn(900)
		b.WriteString(`<li class="card"><div class="media"><a href="/p/` + strconv.Itoa(id) + `" tabindex="-1"><img src="` + dot + `" width="160" height="160" alt="` + esc(name+" in "+colour) + `"></a>`)
		b.WriteString(`<button type="button" class="wish" aria-label="Add ` + esc(name) + ` to wishlist"><img src="` + dot + `" class="icon"></button></div>`)
		b.WriteString(`<div class="body"><span class="brand">` + esc(r.pick(brands)) + `</span><a class="title" href="/p/` + strconv.Itoa(id) + `">` + esc(name) + `</a>`)
		b.WriteString(`<div class="rating"><span role="img" aria-label="` + strconv.Itoa(rating) + ` out of 5 stars">` + strings.Repeat("★", rating) + strings.Repeat("☆", 5-rating) + `</span> <span>(` + strconv.Itoa(reviews) + `)</span></div>`)
		b.WriteString(`<div class="price"><span class="now">€` + strconv.Itoa(price) + `.00</span> <s>€` + strconv.Itoa(was) + `.00</s></div>`)
		b.WriteString(`<div class="badges"><span><img src="` + dot + `" class="icon"> Free shipping</span> <span><img src="` + dot + `" class="icon"> In stock</span></div>`)
		b.WriteString(`<div class="buy"><label>Qty <input type="number" name="qty-` + strconv.Itoa(id) + `" value="1" min="1" max="10" style="width:3em"></label> <button type="button" class="add" data-id="` + strconv.Itoa(id) + `">Add to cart</button></div></div></li>`)
	}
	b.WriteString(`</ul><nav aria-label="Pagination" class="pages"><ul style="display:flex;gap:6px;list-style:none">`)
	if n > 1 {
		b.WriteString(`<li><a href="/listing?page=` + strconv.Itoa(n-1) + `">Previous page</a></li>`)
	}
	for p := 1; p <= 8; p++ {
		if p == n {
			b.WriteString(`<li><a aria-current="page" href="/listing?page=` + strconv.Itoa(p) + `">` + strconv.Itoa(p) + `</a></li>`)
		} else {
			b.WriteString(`<li><a href="/listing?page=` + strconv.Itoa(p) + `">` + strconv.Itoa(p) + `</a></li>`)
		}
	}
	b.WriteString(`<li><a id="next-page" href="/listing?page=` + strconv.Itoa(n%8+1) + `">Next page</a></li></ul></nav>`)
	b.WriteString(`<section><h2>Recently viewed</h2><p>Items you looked at recently appear here.</p></section></main></div>`)
	b.WriteString(siteFooter(true, "/listing"))
	return doc("All outdoor gear – Northwind Outfitters", `.card{border:1px solid #eee;padding:6px}.card img{max-width:100%}#grid.list{grid-template-columns:1fr}`, b.String())
}
