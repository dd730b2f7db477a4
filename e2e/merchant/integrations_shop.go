package merchant

import (
	"net/http"
	"net/url"
	"strings"
)

// integrationOrigins are the origins the shop's integration pages embed.
type integrationOrigins struct {
	js, api, collect, vault, cse string
	shoppers                     *shoppers
}

// integrationRoutes adds the integration checkouts to the shop:
//
//	/pay/payment-element   one payment frame on JS posting to API
//	                       (?post_to=collect: to Collect instead)
//	/pay/card-element      number, expiry and CVC frames plus a controller
//	/pay/secured-fields    the client-side-encryption frame on CSE
//	/account/login         the shop's sign-in, then
//	/cf/contact → /cf/shipping → /cf/payment   the card-fields checkout
func (s *shop) integrationRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /pay/{shape}", s.payPage)
	mux.HandleFunc("POST /pay/{shape}", s.payPlace)
	mux.HandleFunc("GET /account/login", func(w http.ResponseWriter, r *http.Request) {
		render(w, shopLoginTmpl, map[string]any{"Return": safeReturn(r.URL.Query().Get("return")), "CartCount": s.cartCount(r)})
	})
	mux.HandleFunc("POST /account/login", s.shopSignIn)
	mux.HandleFunc("GET /cf/{step}", s.cfPage)
	mux.HandleFunc("POST /cf/{step}", s.cfPost)
}

func safeReturn(p string) string {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.Contains(p, "\\") {
		return "/cf/contact"
	}
	return p
}

var payShapes = map[string]string{
	"payment-element": "Payment Element",
	"card-element":    "Card Element",
	"secured-fields":  "Secured fields",
}

func (s *shop) payPage(w http.ResponseWriter, r *http.Request) {
	shape := r.PathValue("shape")
	if _, ok := payShapes[shape]; !ok {
		http.NotFound(w, r)
		return
	}
	lines, ok := s.linesOrCart(w, r)
	if !ok {
		return
	}
	s.renderPay(w, r, shape, lines, "", http.StatusOK)
}

func (s *shop) renderPay(w http.ResponseWriter, r *http.Request, shape string, lines []CartLine, formError string, status int) {
	sub, total := totals(lines)
	it := s.pay.createIntent(total, Currency)
	o := s.integ
	api := o.api
	if r.URL.Query().Get("post_to") == "collect" {
		api = o.collect
	}
	q := url.Values{"parent": {s.origin}, "api": {api}}.Encode()
	data := map[string]any{
		"Shape": shape, "Title": payShapes[shape], "Intent": it.id,
		"Lines": lines, "Subtotal": formatCents(sub), "Shipping": formatCents(ShippingCents),
		"Total": formatCents(total), "Currency": Currency, "FormError": formError, "CartCount": 0,
		"Action": r.URL.RequestURI(),
	}
	frameOrigin := o.js
	switch shape {
	case "payment-element":
		data["PaymentFrame"] = o.js + "/v3/elements-inner-payment.html?" + q
		data["TargetOrigin"] = o.js
	case "card-element":
		data["NumberFrame"] = o.js + "/v3/elements-inner-card-number.html?" + q
		data["ExpiryFrame"] = o.js + "/v3/elements-inner-card-expiry.html?" + q
		data["CVCFrame"] = o.js + "/v3/elements-inner-card-cvc.html?" + q
		data["ControllerFrame"] = o.js + "/v3/controller.html?" + q
		data["TargetOrigin"] = o.js
	case "secured-fields":
		frameOrigin = o.cse
		data["SecuredFrame"] = o.cse + "/checkoutshopper/securedfields/test_K7Q2/5.3.0/securedFields.html?" + url.Values{"parent": {s.origin}}.Encode()
		data["TargetOrigin"] = o.cse
	}
	w.Header().Set("Content-Security-Policy", "frame-src "+frameOrigin+"; default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = payTmpl.Execute(w, data)
}

// payPlace confirms the intent with the payment method the frame returned,
// server to server, and places the order.
func (s *shop) payPlace(w http.ResponseWriter, r *http.Request) {
	shape := r.PathValue("shape")
	if _, ok := payShapes[shape]; !ok {
		http.NotFound(w, r)
		return
	}
	lines, ok := s.postedLines(w, r)
	if !ok {
		return
	}
	intent := r.PostForm.Get("intent")
	email := strings.TrimSpace(r.PostForm.Get("email"))
	if !s.pay.confirmWith(intent, r.PostForm.Get("payment_method")) {
		s.renderPay(w, r, shape, lines, "Your payment was not completed. Please check your card details and try again.", http.StatusPaymentRequired)
		return
	}
	s.placePaid(w, r, lines, email, r.PostForm.Get("name"), "", intent)
}

// placePaid records the order for a succeeded intent and shows it.
func (s *shop) placePaid(w http.ResponseWriter, r *http.Request, lines []CartLine, email, name, country, intent string) {
	_, total := totals(lines)
	status, amount, currency, ok := s.pay.intentStatus(intent)
	if !ok || status != "succeeded" || amount != total || currency != Currency {
		http.Error(w, "payment not completed", http.StatusPaymentRequired)
		return
	}
	c, _ := r.Cookie(cartCookie)
	s.mu.Lock()
	o := Order{
		ID: "A" + strings.ToUpper(randomHex(4)), Email: email, Name: name, Country: country,
		Items: lines, Total: formatCents(total), Currency: Currency, ChargeID: intent,
	}
	s.orders = append(s.orders, o)
	s.byID[o.ID] = o
	if c != nil {
		delete(s.carts, c.Value)
	}
	s.mu.Unlock()
	http.Redirect(w, r, "/orders/"+o.ID, http.StatusSeeOther)
}

func (s *shop) shopSignIn(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	ret := safeReturn(r.PostForm.Get("return"))
	email := strings.ToLower(strings.TrimSpace(r.PostForm.Get("email")))
	if !s.integ.shoppers.acc.check(email, r.PostForm.Get("password")) {
		w.WriteHeader(http.StatusUnauthorized)
		render(w, shopLoginTmpl, map[string]any{"Return": ret, "Email": email, "Error": "Incorrect email or password.", "CartCount": s.cartCount(r)})
		return
	}
	sid := randomHex(16)
	sh := s.integ.shoppers
	sh.mu.Lock()
	sh.sessions[sid] = email
	sh.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: "customer", Value: sid, Path: "/", Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, ret, http.StatusSeeOther)
}

var cfNext = map[string]string{"contact": "shipping", "shipping": "payment"}

// cfState is the card-fields checkout so far, by cart.
func (s *shop) cfState(r *http.Request) url.Values {
	c, err := r.Cookie(cartCookie)
	if err != nil {
		return url.Values{}
	}
	sh := s.integ.shoppers
	sh.mu.Lock()
	defer sh.mu.Unlock()
	v, ok := sh.steps[c.Value]
	if !ok {
		v = url.Values{}
		sh.steps[c.Value] = v
	}
	return v
}

func (s *shop) cfGuard(w http.ResponseWriter, r *http.Request) (email string, lines []CartLine, ok bool) {
	email, ok = s.integ.shoppers.signedIn(r)
	if !ok {
		http.Redirect(w, r, "/account/login?"+url.Values{"return": {r.URL.Path}}.Encode(), http.StatusSeeOther)
		return "", nil, false
	}
	lines = s.lines(r)
	if len(lines) == 0 {
		http.Redirect(w, r, "/cart", http.StatusSeeOther)
		return "", nil, false
	}
	return email, lines, true
}

func (s *shop) cfPage(w http.ResponseWriter, r *http.Request) {
	step := r.PathValue("step")
	if step != "contact" && step != "shipping" && step != "payment" {
		http.NotFound(w, r)
		return
	}
	email, lines, ok := s.cfGuard(w, r)
	if !ok {
		return
	}
	st := s.cfState(r)
	if step == "shipping" && st.Get("email") == "" || step == "payment" && st.Get("address1") == "" {
		http.Redirect(w, r, "/cf/contact", http.StatusSeeOther)
		return
	}
	s.renderCF(w, step, email, lines, st, "", http.StatusOK)
}

func (s *shop) renderCF(w http.ResponseWriter, step, email string, lines []CartLine, st url.Values, formError string, status int) {
	sub, total := totals(lines)
	id := randomHex(8)
	v := s.integ.vault
	data := map[string]any{
		"Step": step, "Email": email, "State": st, "Lines": lines, "Subtotal": formatCents(sub),
		"Shipping": formatCents(ShippingCents), "Total": formatCents(total), "Currency": Currency,
		"FormError": formError, "CartCount": 0, "VaultOrigin": v, "ID": id,
	}
	if step == "payment" {
		q := "?" + url.Values{"identifier": {id}, "parent": {s.origin}}.Encode()
		data["Fields"] = []map[string]string{
			{"Name": "number", "Title": "Field container for: Card number", "Src": v + "/number" + q},
			{"Name": "expiry", "Title": "Field container for: Expiration date (MM / YY)", "Src": v + "/expiry" + q},
			{"Name": "verification_value", "Title": "Field container for: Security code", "Src": v + "/verification_value" + q},
			{"Name": "name", "Title": "Field container for: Name on card", "Src": v + "/name" + q},
		}
	}
	w.Header().Set("Content-Security-Policy", "frame-src "+v+"; default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = cfTmpl.Execute(w, data)
}

func (s *shop) cfPost(w http.ResponseWriter, r *http.Request) {
	step := r.PathValue("step")
	email, lines, ok := s.cfGuard(w, r)
	if !ok {
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	st := s.cfState(r)
	sh := s.integ.shoppers
	switch step {
	case "contact", "shipping":
		need := map[string][]string{"contact": {"email"}, "shipping": {"first_name", "last_name", "address1", "zip", "city", "country"}}[step]
		for _, k := range need {
			if strings.TrimSpace(r.PostForm.Get(k)) == "" {
				s.renderCF(w, step, email, lines, st, "Please complete the highlighted fields.", http.StatusUnprocessableEntity)
				return
			}
		}
		sh.mu.Lock()
		for k, vs := range r.PostForm {
			st[k] = vs
		}
		sh.mu.Unlock()
		http.Redirect(w, r, "/cf/"+cfNext[step], http.StatusSeeOther)
	case "payment":
		_, total := totals(lines)
		it := s.pay.createIntent(total, Currency)
		if !s.pay.confirmWith(it.id, r.PostForm.Get("s")) {
			s.renderCF(w, step, email, lines, st, "Your payment could not be processed. Check your card details and try again.", http.StatusPaymentRequired)
			return
		}
		sh.mu.Lock()
		name := st.Get("first_name") + " " + st.Get("last_name")
		country, contact := st.Get("country"), st.Get("email")
		sh.mu.Unlock()
		s.placePaid(w, r, lines, contact, name, country, it.id)
	default:
		http.NotFound(w, r)
	}
}
