package merchant

import (
	"net/http"
	"net/mail"
	"net/url"
	"sort"
	"strings"
	"sync"
)

// Product is one thing the shop sells.
type Product struct {
	SKU         string
	Name        string
	Description string
	PriceCents  int64
}

// Price renders the product's price, e.g. "37.60".
func (p Product) Price() string { return formatCents(p.PriceCents) }

// The catalogue is fixed so a proof knows the total it should see confirmed:
// one pair of shoes plus shipping is EUR 42.50.
var catalogue = []Product{
	{"trail-shoes", "Trail running shoes", "Light trail shoes with a grippy sole, size 42.", 3760},
	{"wool-socks", "Merino socks (2 pairs)", "Warm, quick-drying socks for long runs.", 1450},
	{"headlamp", "Rechargeable headlamp", "300 lumen headlamp with a red night mode.", 2990},
}

const (
	// Currency is the shop's only currency.
	Currency = "EUR"
	// ShippingCents is the flat shipping rate.
	ShippingCents = 490
)

// Order is a placed order.
type Order struct {
	ID       string
	Email    string
	Name     string
	Country  string
	Items    []CartLine
	Total    string // "42.50"
	Currency string
	ChargeID string
}

// CartLine is a product and a quantity.
type CartLine struct {
	Product  Product
	Quantity int
}

// Subtotal is the line's price times its quantity, in cents.
func (l CartLine) Subtotal() string { return formatCents(l.Product.PriceCents * int64(l.Quantity)) }

type shop struct {
	origin, payOrigin string
	pay               *issuer
	integ             *integrationOrigins
	sca               *sca // 3-D Secure popup and CAPTCHA (sca.go)

	mu     sync.Mutex
	carts  map[string]map[string]int // cart id -> sku -> quantity
	orders []Order
	byID   map[string]Order
}

func newShop(origin, payOrigin string, pay *issuer) *shop {
	return &shop{origin: origin, payOrigin: payOrigin, pay: pay, carts: map[string]map[string]int{}, byID: map[string]Order{}, sca: newSCA()}
}

func (s *shop) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.home)
	mux.HandleFunc("GET /products/{sku}", s.product)
	mux.HandleFunc("POST /cart", s.addToCart)
	mux.HandleFunc("GET /cart", s.cart)
	mux.HandleFunc("GET /checkout", s.checkout)
	mux.HandleFunc("POST /checkout", s.placeOrder)
	mux.HandleFunc("GET /orders/{id}", s.order)
	mux.HandleFunc("/echo", echo)
	s.integrationRoutes(mux)
	s.overlayRoutes(mux)
	s.savedRoutes(mux)
	s.sca.routes(mux)
	return securityHeaders(mux)
}

func findProduct(sku string) (Product, bool) {
	for _, p := range catalogue {
		if p.SKU == sku {
			return p, true
		}
	}
	return Product{}, false
}

func (s *shop) home(w http.ResponseWriter, r *http.Request) {
	render(w, homeTmpl, map[string]any{"Products": catalogue, "CartCount": s.cartCount(r)})
}

func (s *shop) product(w http.ResponseWriter, r *http.Request) {
	p, ok := findProduct(r.PathValue("sku"))
	if !ok {
		http.NotFound(w, r)
		return
	}
	render(w, productTmpl, map[string]any{"Product": p, "CartCount": s.cartCount(r)})
}

const cartCookie = "cart"

// cartID returns the visitor's cart id, setting a new cookie when there is none.
func (s *shop) cartID(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(cartCookie); err == nil {
		s.mu.Lock()
		_, ok := s.carts[c.Value]
		s.mu.Unlock()
		if ok {
			return c.Value
		}
	}
	id := randomHex(12)
	s.mu.Lock()
	s.carts[id] = map[string]int{}
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: cartCookie, Value: id, Path: "/", Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	return id
}

func (s *shop) lines(r *http.Request) []CartLine {
	c, err := r.Cookie(cartCookie)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []CartLine
	for sku, q := range s.carts[c.Value] {
		if p, ok := findProduct(sku); ok && q > 0 {
			out = append(out, CartLine{Product: p, Quantity: q})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Product.SKU < out[j].Product.SKU })
	return out
}

func (s *shop) cartCount(r *http.Request) int {
	n := 0
	for _, l := range s.lines(r) {
		n += l.Quantity
	}
	return n
}

func totals(lines []CartLine) (subtotal, total int64) {
	for _, l := range lines {
		subtotal += l.Product.PriceCents * int64(l.Quantity)
	}
	return subtotal, subtotal + ShippingCents
}

func (s *shop) addToCart(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	p, ok := findProduct(r.PostForm.Get("sku"))
	if !ok {
		http.Error(w, "unknown product", http.StatusBadRequest)
		return
	}
	q := 1
	if v := r.PostForm.Get("quantity"); v != "" {
		if n, err := parseQuantity(v); err == nil {
			q = n
		}
	}
	id := s.cartID(w, r)
	s.mu.Lock()
	s.carts[id][p.SKU] += q
	s.mu.Unlock()
	http.Redirect(w, r, "/cart", http.StatusSeeOther)
}

func parseQuantity(v string) (int, error) {
	n := 0
	if !isDigits(v) || len(v) > 2 {
		return 0, errBadQuantity
	}
	for _, c := range v {
		n = n*10 + int(c-'0')
	}
	if n < 1 || n > 10 {
		return 0, errBadQuantity
	}
	return n, nil
}

type quantityError struct{}

func (quantityError) Error() string { return "quantity must be 1 to 10" }

var errBadQuantity error = quantityError{}

func (s *shop) cart(w http.ResponseWriter, r *http.Request) {
	lines := s.lines(r)
	sub, total := totals(lines)
	render(w, cartTmpl, map[string]any{
		"Lines": lines, "CartCount": s.cartCount(r),
		"Subtotal": formatCents(sub), "Shipping": formatCents(ShippingCents), "Total": formatCents(total), "Currency": Currency,
	})
}

// shipping is the checkout form as posted; Errors maps a field to its message.
type shipping struct {
	Email, Phone, FirstName, LastName, Company string
	Line1, Line2, City, Region, PostalCode     string
	Country, Instructions, GiftMessage         string
	Newsletter, BillingSame                    bool
	BillingName, BillingLine1, BillingCity     string
	BillingPostalCode, BillingCountry          string
	Errors                                     map[string]string
}

var countries = []struct{ Code, Name string }{
	{"", "Select a country"}, {"AT", "Austria"}, {"BE", "Belgium"}, {"DE", "Germany"}, {"ES", "Spain"},
	{"FR", "France"}, {"GB", "United Kingdom"}, {"IE", "Ireland"}, {"IT", "Italy"}, {"NL", "Netherlands"},
	{"PT", "Portugal"}, {"US", "United States"},
}

func knownCountry(code string) bool {
	for _, c := range countries {
		if c.Code != "" && c.Code == code {
			return true
		}
	}
	return false
}

// linesOrCart is what the cart holds; an empty cart sends the shopper back
// to it (false).
func (s *shop) linesOrCart(w http.ResponseWriter, r *http.Request) ([]CartLine, bool) {
	lines := s.lines(r)
	if len(lines) == 0 {
		http.Redirect(w, r, "/cart", http.StatusSeeOther)
		return nil, false
	}
	return lines, true
}

// postedLines reads a posted checkout form and the cart (linesOrCart).
func (s *shop) postedLines(w http.ResponseWriter, r *http.Request) ([]CartLine, bool) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return nil, false
	}
	return s.linesOrCart(w, r)
}

func (s *shop) checkout(w http.ResponseWriter, r *http.Request) {
	lines, ok := s.linesOrCart(w, r)
	if !ok {
		return
	}
	s.renderCheckout(w, lines, shipping{BillingSame: true}, "", http.StatusOK)
}

func (s *shop) renderCheckout(w http.ResponseWriter, lines []CartLine, f shipping, formError string, status int) {
	sub, total := totals(lines)
	// The shop opens the payment with the processor server to server; the
	// card form only ever sees the intent and its client secret.
	it := s.pay.createIntent(total, Currency)
	frame := s.payOrigin + "/elements/card?" + url.Values{
		"pi": {it.id}, "secret": {it.secret}, "parent": {s.origin},
	}.Encode()
	w.Header().Set("Content-Security-Policy", "frame-src "+s.payOrigin+"; default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = checkoutTmpl.Execute(w, map[string]any{
		"Lines": lines, "Subtotal": formatCents(sub), "Shipping": formatCents(ShippingCents),
		"Total": formatCents(total), "Currency": Currency, "Form": f, "Countries": countries,
		"FrameURL": frame, "PayOrigin": s.payOrigin, "FormError": formError, "CartCount": 0,
	})
}

func (s *shop) placeOrder(w http.ResponseWriter, r *http.Request) {
	lines, ok := s.postedLines(w, r)
	if !ok {
		return
	}
	f := readShipping(r.PostForm)
	if len(f.Errors) > 0 {
		s.renderCheckout(w, lines, f, "Please correct the highlighted fields.", http.StatusUnprocessableEntity)
		return
	}
	_, total := totals(lines)
	status, amount, currency, ok := s.pay.intentStatus(r.PostForm.Get("payment_intent"))
	if !ok || status != "succeeded" || amount != total || currency != Currency {
		s.renderCheckout(w, lines, f, "Your payment was not completed. Please check your card details and try again.", http.StatusPaymentRequired)
		return
	}
	c, _ := r.Cookie(cartCookie)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.orders {
		if o.ChargeID == r.PostForm.Get("payment_intent") {
			http.Redirect(w, r, "/orders/"+o.ID, http.StatusSeeOther)
			return
		}
	}
	o := Order{
		ID: "A" + strings.ToUpper(randomHex(4)), Email: f.Email, Name: f.FirstName + " " + f.LastName,
		Country: f.Country, Items: lines, Total: formatCents(total), Currency: Currency,
		ChargeID: r.PostForm.Get("payment_intent"),
	}
	s.orders = append(s.orders, o)
	s.byID[o.ID] = o
	delete(s.carts, c.Value)
	http.Redirect(w, r, "/orders/"+o.ID, http.StatusSeeOther)
}

func readShipping(v url.Values) shipping {
	f := shipping{
		Email: strings.TrimSpace(v.Get("email")), Phone: strings.TrimSpace(v.Get("phone")),
		FirstName: strings.TrimSpace(v.Get("first_name")), LastName: strings.TrimSpace(v.Get("last_name")),
		Company: v.Get("company"), Line1: strings.TrimSpace(v.Get("address_line1")), Line2: v.Get("address_line2"),
		City: strings.TrimSpace(v.Get("city")), Region: v.Get("region"), PostalCode: strings.TrimSpace(v.Get("postal_code")),
		Country: v.Get("country"), Instructions: v.Get("delivery_instructions"), GiftMessage: v.Get("gift_message"),
		Newsletter: v.Get("newsletter") == "on", BillingSame: v.Get("billing_same") == "on",
		BillingName: v.Get("billing_name"), BillingLine1: v.Get("billing_line1"), BillingCity: v.Get("billing_city"),
		BillingPostalCode: v.Get("billing_postal_code"), BillingCountry: v.Get("billing_country"),
		Errors: map[string]string{},
	}
	if _, err := mail.ParseAddress(f.Email); err != nil || !strings.Contains(f.Email, "@") {
		f.Errors["email"] = "Enter a valid email address."
	}
	req := map[string]string{
		"first_name": f.FirstName, "last_name": f.LastName, "address_line1": f.Line1,
		"city": f.City, "postal_code": f.PostalCode,
	}
	for k, val := range req {
		if val == "" {
			f.Errors[k] = "This field is required."
		}
	}
	if !knownCountry(f.Country) {
		f.Errors["country"] = "Select a country."
	}
	if !f.BillingSame && (f.BillingName == "" || f.BillingLine1 == "" || f.BillingCity == "" || f.BillingPostalCode == "" || !knownCountry(f.BillingCountry)) {
		f.Errors["billing"] = "Complete the billing address or use the shipping address."
	}
	return f
}

func (s *shop) order(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	cp, ok := s.byID[r.PathValue("id")]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	var ch Charge
	for _, c := range s.pay.chargeList() {
		if c.IntentID == cp.ChargeID {
			ch = c
		}
	}
	render(w, orderTmpl, map[string]any{"Order": cp, "Charge": ch})
}

func (s *shop) orderList() []Order {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Order(nil), s.orders...)
}
