package corpus

import (
	"fmt"
	"html"
	"net/http"
	"strings"
)

// pageRoutes serves the pages. A POST to a page's path lands on the page
// again with a 303, the way a form that saves and moves on does.
func (c *Corpus) pageRoutes() http.Handler {
	mux := http.NewServeMux()
	pages := map[string]func(r *http.Request) string{
		"/listing":  func(r *http.Request) string { return listingPage(r.URL.Query().Get("page")) },
		"/checkout": func(r *http.Request) string { return checkoutPage(c.Frames) },
		"/shadow":   func(r *http.Request) string { return shadowPage() },
		"/selects":  func(r *http.Request) string { return selectsPage() },
		"/spa":      func(r *http.Request) string { return spaPage() },
		"/latepay":  func(r *http.Request) string { return latePayPage(c.Frames[5]) },
	}
	for path, render := range pages {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			switch r.Method {
			case http.MethodGet:
				writeHTML(w, render(r))
			case http.MethodPost:
				_ = r.ParseForm()
				http.Redirect(w, r, path+"?saved=1", http.StatusSeeOther)
			default:
				http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			}
		})
	}
	mux.HandleFunc("/spa/data.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprint(w, spaData())
	})
	mux.HandleFunc("/favicon.ico", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	return mux
}

// frameRoutes serves one frame origin: its document at every path.
func frameRoutes(doc string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/favicon.ico" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		writeHTML(w, doc)
	})
}

func writeHTML(w http.ResponseWriter, doc string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	fmt.Fprint(w, doc)
}

// esc escapes text for HTML.
func esc(s string) string { return html.EscapeString(s) }

// rng is a small deterministic generator: the corpus is the same on every
// run, so two runs (and two servers) read the same pages.
type rng uint64

func (r *rng) next() uint64 {
	*r = *r*6364136223846793005 + 1442695040888963407
	return uint64(*r >> 33)
}

func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

func (r *rng) pick(list []string) string { return list[r.intn(len(list))] }

// dot is a tiny inline image: pages load nothing from outside their origin.
const dot = `data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' width='8' height='8'/%3E`

const baseCSS = `
body{font-family:sans-serif;margin:0;color:#222}
header.site{display:flex;gap:16px;align-items:center;padding:8px 16px;border-bottom:1px solid #ddd}
header.site nav a{margin-right:10px}
footer.site{display:grid;grid-template-columns:repeat(4,1fr);gap:12px;padding:16px;border-top:1px solid #ddd;font-size:13px}
footer.site ul{list-style:none;padding:0;margin:0}
.icon{width:14px;height:14px;vertical-align:middle}
.sr-only{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}
`

// siteHeader is the header every page of the shop shares: logo, category
// navigation, a search form, account and cart links.
func siteHeader(search bool) string {
	var b strings.Builder
	b.WriteString(`<header class="site"><div class="logo"><a href="/listing" aria-label="Northwind Outfitters home"><img src="` + dot + `" alt="" class="icon"><span>Northwind</span></a></div><nav aria-label="Main"><ul style="display:flex;list-style:none;gap:8px;margin:0;padding:0">`)
	for _, c := range []string{"New arrivals", "Men", "Women", "Kids", "Shoes", "Outdoor", "Accessories", "Sale"} {
		b.WriteString(`<li><a href="/listing?c=` + strings.ToLower(strings.ReplaceAll(c, " ", "-")) + `">` + esc(c) + `</a></li>`)
	}
	b.WriteString(`</ul></nav>`)
	if search {
		b.WriteString(`<form role="search" action="/listing" method="get"><label class="sr-only" for="q">Search products</label><input type="search" id="q" name="q" placeholder="Search products"><button type="submit"><img src="` + dot + `" class="icon"><span class="sr-only">Search</span></button></form>`)
	}
	b.WriteString(`<div class="account"><a href="/account"><img src="` + dot + `" class="icon">Sign in</a> <a href="/cart" aria-label="Cart, 2 items"><img src="` + dot + `" class="icon"><span class="badge">2</span></a></div></header>`)
	return b.String()
}

// siteFooter is the shared footer; with newsletter, it holds a form that
// posts to postPath.
func siteFooter(newsletter bool, postPath string) string {
	var b strings.Builder
	b.WriteString(`<footer class="site">`)
	cols := [][]string{
		{"Customer care", "Contact us", "Shipping", "Returns", "Order status", "Size guide", "Gift cards"},
		{"About", "Our story", "Careers", "Sustainability", "Press", "Affiliates", "Stores"},
		{"Legal", "Terms of service", "Privacy policy", "Cookie settings", "Accessibility", "Imprint", "Do not sell my data"},
	}
	for _, col := range cols {
		b.WriteString(`<div><h2 style="font-size:14px">` + esc(col[0]) + `</h2><ul>`)
		for _, l := range col[1:] {
			b.WriteString(`<li><a href="/help/` + strings.ToLower(strings.ReplaceAll(l, " ", "-")) + `">` + esc(l) + `</a></li>`)
		}
		b.WriteString(`</ul></div>`)
	}
	b.WriteString(`<div>`)
	if newsletter {
		b.WriteString(`<form method="post" action="` + postPath + `" id="newsletter"><h2 style="font-size:14px">Newsletter</h2><p>Ten percent off your first order.</p><label for="news-email">Email address</label> <input type="email" id="news-email" name="email" autocomplete="email"><button type="submit" id="subscribe">Subscribe</button></form>`)
	}
	b.WriteString(`<div class="social">`)
	for _, s := range []string{"Instagram", "Facebook", "YouTube", "Pinterest"} {
		b.WriteString(`<a href="/social/` + strings.ToLower(s) + `" aria-label="` + s + `"><img src="` + dot + `" class="icon"></a> `)
	}
	b.WriteString(`</div><p><small>© 2025 Northwind Outfitters GmbH. All rights reserved.</small></p><div class="pay-icons">`)
	for range 6 {
		b.WriteString(`<img src="` + dot + `" class="icon">`)
	}
	b.WriteString(`</div></div></footer>`)
	return b.String()
}

func doc(title, css, body string) string {
	return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>` + esc(title) + `</title><style>` + baseCSS + css + `</style></head><body>` + body + `</body></html>`
}
