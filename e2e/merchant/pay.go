package merchant

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// issuer is the card processor behind the Pay origin: payment intents the
// shop creates server to server, the card form the shop embeds, and the API
// that form posts to.
type issuer struct {
	now func() time.Time

	mu      sync.Mutex
	cards   map[string]issuedCard // by number
	intents map[string]*intent
	pms     map[string]*paymentMethod // payment methods and card-vault sessions
	charges []Charge
	// hold, when set, runs after a confirmation's card was authorized and
	// before the payment is recorded (HoldPayments).
	hold func()
}

type issuedCard struct {
	cvc      string
	expMonth int
	expYear  int
}

type intent struct {
	id       string
	secret   string
	amount   int64
	currency string
	status   string // "requires_payment_method", "succeeded"
	chargeID string
}

// Charge is an approved payment. It keeps what a processor shows a merchant:
// the brand and the last four digits, never the number or the code.
type Charge struct {
	ID       string
	IntentID string // empty for a charge taken by the legacy form
	Amount   string // "42.50"
	Currency string
	Brand    string
	Last4    string
}

func newIssuer(now func() time.Time) *issuer {
	return &issuer{now: now, cards: map[string]issuedCard{}, intents: map[string]*intent{}}
}

func (is *issuer) accept(number, cvc string, month, year int) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.cards[number] = issuedCard{cvc: cvc, expMonth: month, expYear: year}
}

func (is *issuer) chargeList() []Charge {
	is.mu.Lock()
	defer is.mu.Unlock()
	return append([]Charge(nil), is.charges...)
}

// createIntent is the shop's server-to-server call that opens a payment for
// an amount. The client secret goes to the card form so that only the page
// the shop rendered can confirm it.
func (is *issuer) createIntent(amount int64, currency string) *intent {
	it := &intent{id: "pi_" + randomHex(12), secret: randomHex(16), amount: amount, currency: currency, status: "requires_payment_method"}
	is.mu.Lock()
	is.intents[it.id] = it
	is.mu.Unlock()
	return it
}

// intentStatus is the shop's server-to-server check before it accepts an order.
func (is *issuer) intentStatus(id string) (status string, amount int64, currency string, ok bool) {
	is.mu.Lock()
	defer is.mu.Unlock()
	it, ok := is.intents[id]
	if !ok {
		return "", 0, "", false
	}
	return it.status, it.amount, it.currency, true
}

// cardInput is the card as the form or an API client sends it.
type cardInput struct {
	Number   string `json:"number"`
	ExpMonth string `json:"exp_month"`
	ExpYear  string `json:"exp_year"`
	CVC      string `json:"cvc"`
}

// decline is a processor refusal with the message a card form shows.
type decline struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// authorize checks a card the way an issuer would. It returns the charge's
// brand and last four digits, or why it was declined.
func (is *issuer) authorize(c cardInput) (brandName, last4 string, d *decline) {
	number := digitsOnly(c.Number)
	if !isDigits(number) || !luhnValid(number) {
		return "", "", &decline{"incorrect_number", "Your card number is incorrect."}
	}
	month, errM := strconv.Atoi(c.ExpMonth)
	year, errY := strconv.Atoi(c.ExpYear)
	if errM != nil || errY != nil || expired(month, year, is.now()) {
		return "", "", &decline{"invalid_expiry", "Your card's expiration date is incomplete or in the past."}
	}
	if len(c.CVC) != cvcLength(number) || !isDigits(c.CVC) {
		return "", "", &decline{"incorrect_cvc", "Your card's security code is incomplete."}
	}
	if year < 100 {
		year += 2000
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	if len(is.cards) > 0 {
		card, ok := is.cards[number]
		switch {
		case !ok:
			return "", "", &decline{"card_declined", "Your card was declined."}
		case subtle.ConstantTimeCompare([]byte(card.cvc), []byte(c.CVC)) != 1:
			return "", "", &decline{"incorrect_cvc", "Your card's security code is incorrect."}
		case card.expMonth != month || card.expYear != year:
			return "", "", &decline{"invalid_expiry", "Your card's expiration date is incorrect."}
		}
	}
	return brand(number), number[len(number)-4:], nil
}

func (is *issuer) routes(origin string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /elements/card", is.cardFrame)
	mux.HandleFunc("POST /v1/payment_intents/{id}/confirm", is.confirm)
	mux.HandleFunc("GET /legacy/checkout", is.legacyForm)
	mux.HandleFunc("POST /legacy/checkout", is.legacyPay)
	mux.HandleFunc("/echo", echo)
	is.overlayRoutes(mux)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("Payments test processor\n"))
	})
	return securityHeaders(mux)
}

func (is *issuer) cardFrame(w http.ResponseWriter, r *http.Request) {
	is.renderFrame(w, r, cardFrameTmpl, func(it *intent, page map[string]any) {
		page["Currency"] = it.currency
	})
}

// renderFrame answers a frame of the processor's for the payment the query
// names (pi and its secret), framed only by the shop that created it (the
// parent origin): the card element and the overlay. more adds what the
// one page shows besides.
func (is *issuer) renderFrame(w http.ResponseWriter, r *http.Request, tmpl *template.Template, more func(it *intent, page map[string]any)) {
	q := r.URL.Query()
	parent, err := url.Parse(q.Get("parent"))
	if err != nil || parent.Scheme != "https" || parent.Host == "" {
		http.Error(w, "missing or invalid parent origin", http.StatusBadRequest)
		return
	}
	is.mu.Lock()
	it, ok := is.intents[q.Get("pi")]
	is.mu.Unlock()
	if !ok || subtle.ConstantTimeCompare([]byte(it.secret), []byte(q.Get("secret"))) != 1 {
		http.Error(w, "unknown payment", http.StatusNotFound)
		return
	}
	parentOrigin := parent.Scheme + "://" + parent.Host
	w.Header().Set("Content-Security-Policy", "frame-ancestors "+parentOrigin)
	years := make([]int, 0, 12)
	for y := is.now().Year(); y < is.now().Year()+12; y++ {
		years = append(years, y)
	}
	page := map[string]any{"Intent": it.id, "Secret": it.secret, "ParentOrigin": parentOrigin,
		"Amount": formatCents(it.amount), "Years": years, "Months": months}
	if more != nil {
		more(it, page)
	}
	render(w, tmpl, page)
}

type confirmRequest struct {
	ClientSecret string    `json:"client_secret"`
	Card         cardInput `json:"card"`
}

func (is *issuer) confirm(w http.ResponseWriter, r *http.Request) {
	var req confirmRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": decline{"invalid_request", "The request could not be read."}})
		return
	}
	is.mu.Lock()
	it, ok := is.intents[r.PathValue("id")]
	is.mu.Unlock()
	if !ok || subtle.ConstantTimeCompare([]byte(it.secret), []byte(req.ClientSecret)) != 1 {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": decline{"resource_missing", "No such payment."}})
		return
	}
	b, last4, d := is.authorize(req.Card)
	if d != nil {
		writeJSON(w, http.StatusPaymentRequired, map[string]any{"error": d})
		return
	}
	is.mu.Lock()
	hold := is.hold
	is.mu.Unlock()
	if hold != nil {
		hold()
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	if it.status == "succeeded" {
		writeJSON(w, http.StatusConflict, map[string]any{"error": decline{"payment_intent_unexpected_state", "This payment has already been completed."}})
		return
	}
	ch := Charge{ID: "ch_" + randomHex(12), IntentID: it.id, Amount: formatCents(it.amount), Currency: it.currency, Brand: b, Last4: last4}
	is.charges = append(is.charges, ch)
	it.status, it.chargeID = "succeeded", ch.ID
	writeJSON(w, http.StatusOK, map[string]any{
		"id": it.id, "status": it.status, "amount": it.amount, "currency": it.currency,
		"payment_method": map[string]any{"brand": b, "last4": last4},
	})
}

// legacyForm is an old-style payment page: a plain HTML form with no
// JavaScript, posted straight to the processor. It is what the proxy proof
// submits three ways (Go client, curl, Chromium).
func (is *issuer) legacyForm(w http.ResponseWriter, r *http.Request) {
	render(w, legacyFormTmpl, map[string]any{"Months": months, "Year": is.now().Year() + 3})
}

// legacyPay charges a card posted by the legacy form. Like many old
// integrations it echoes what it was sent in its receipt, card number
// included: the page a proxy must scrub before a browser renders it.
func (is *issuer) legacyPay(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	c := cardInput{
		Number:   r.PostForm.Get("number"),
		ExpMonth: r.PostForm.Get("exp_month"),
		ExpYear:  r.PostForm.Get("exp_year"),
		CVC:      r.PostForm.Get("cvc"),
	}
	amount := r.PostForm.Get("amount")
	cents, err := parseAmount(amount)
	if err != nil {
		http.Error(w, "bad amount", http.StatusBadRequest)
		return
	}
	b, last4, d := is.authorize(c)
	data := map[string]any{"Number": c.Number, "Amount": formatCents(cents), "Currency": r.PostForm.Get("currency")}
	if d != nil {
		data["Error"] = d.Message
		w.WriteHeader(http.StatusPaymentRequired)
		render(w, legacyReceiptTmpl, data)
		return
	}
	ch := Charge{ID: "ch_" + randomHex(12), Amount: formatCents(cents), Currency: r.PostForm.Get("currency"), Brand: b, Last4: last4}
	is.mu.Lock()
	is.charges = append(is.charges, ch)
	is.mu.Unlock()
	data["Charge"] = ch
	render(w, legacyReceiptTmpl, data)
}

// parseAmount reads "42.50" or "42" as cents.
func parseAmount(s string) (int64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1e9 {
		return 0, strconv.ErrSyntax
	}
	return int64(f*100 + 0.5), nil
}

var months = []struct {
	Value int
	Label string
}{
	{1, "01"}, {2, "02"}, {3, "03"}, {4, "04"}, {5, "05"}, {6, "06"},
	{7, "07"}, {8, "08"}, {9, "09"}, {10, "10"}, {11, "11"}, {12, "12"},
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("merchant: crypto/rand failed: " + err.Error())
	}
	return hex.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func render(w http.ResponseWriter, t *template.Template, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := t.Execute(w, data); err != nil {
		// The header is out already; the truncated page is the signal.
		return
	}
}

// securityHeaders adds what a careful merchant sends on every response.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "strict-origin-when-cross-origin")
		h.ServeHTTP(w, r)
	})
}

// echo reflects the request body (or, for a GET, the query) with the
// request's content type: the kind of endpoint that would hand a real value
// back to the agent if the proxy did not scrub responses.
func echo(w http.ResponseWriter, r *http.Request) {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		ct = "text/plain; charset=utf-8"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(r.URL.RawQuery))
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	_, _ = w.Write(body)
}
