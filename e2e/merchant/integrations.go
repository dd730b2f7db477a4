package merchant

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// The payment-integration shapes of issue 17, built like the common ones
// (structure only, no third-party code):
//
//   - Payment Element: one "Secure payment input frame" served by JS that
//     posts the card form-encoded (card[number]=…) to API, a different
//     origin, and hands the page a payment-method id the shop confirms.
//   - Card Element: three field frames (number, expiry, CVC) on JS and a
//     hidden controller frame that collects them by postMessage and posts.
//   - Card fields: per-field iframes card-fields-number-<id>, …-expiry-…,
//     …-verification_value-…, …-name-… from the Vault origin, which posts
//     the number grouped with spaces, as the field shows it, to its own
//     /sessions; behind a sign-in and a contact → shipping → payment
//     checkout on the shop.
//   - Secured fields: a frame on CSE that encrypts the card with RSA-OAEP
//     in its own script before it posts (client-side encryption).
//
// Collect is a processor origin inside the card's sites that no
// integration posts to: the Payment Element page sends the card there with
// ?post_to=collect.

// IntegrationSpec is one integration the test merchant runs, in the shape
// of proxyd's policy.payment_integrations entries.
type IntegrationSpec struct {
	Name    string
	Frames  []string // host/path patterns (no port: the host decides)
	PostsTo []string // https origins with their ports
}

// Integrations lists the merchant's integrations for proxyd's config. It is
// empty unless the origins have DNS names (an IP is no integration host).
func (m *Merchant) Integrations() []IntegrationSpec {
	host := func(s *Site) string { h, _, _ := net.SplitHostPort(s.Host); return h }
	if net.ParseIP(host(m.JS)) != nil || net.ParseIP(host(m.Vault)) != nil {
		return nil
	}
	v := host(m.Vault)
	return []IntegrationSpec{
		{Name: "test-pay-elements", Frames: []string{host(m.JS) + "/v3/elements-inner-*", host(m.JS) + "/v3/controller*"}, PostsTo: []string{m.API.URL}},
		{Name: "test-card-fields", Frames: []string{v + "/number", v + "/expiry", v + "/verification_value", v + "/name"}},
	}
}

// paymentMethod is a card the processor accepted and holds for a later
// charge (a Stripe payment method, a card-vault session).
type paymentMethod struct {
	brand, last4 string
	used         bool
}

// createPaymentMethod checks a card like authorize and keeps it under a new
// id with the prefix.
func (is *issuer) createPaymentMethod(prefix string, c cardInput) (string, *decline) {
	b, last4, d := is.authorize(c)
	if d != nil {
		return "", d
	}
	id := prefix + randomHex(12)
	is.mu.Lock()
	if is.pms == nil {
		is.pms = map[string]*paymentMethod{}
	}
	is.pms[id] = &paymentMethod{brand: b, last4: last4}
	is.mu.Unlock()
	return id, nil
}

// confirmWith charges an intent with a payment method, server to server.
func (is *issuer) confirmWith(intentID, pmID string) bool {
	is.mu.Lock()
	defer is.mu.Unlock()
	it, ok := is.intents[intentID]
	pm, okPM := is.pms[pmID]
	if !ok || !okPM || pm.used || it.status != "requires_payment_method" {
		return false
	}
	pm.used = true
	ch := Charge{ID: "ch_" + randomHex(12), IntentID: it.id, Amount: formatCents(it.amount), Currency: it.currency, Brand: pm.brand, Last4: pm.last4}
	is.charges = append(is.charges, ch)
	it.status, it.chargeID = "succeeded", ch.ID
	return true
}

// cardFromForm reads a card posted form-encoded the Stripe way
// (card[number]=…) or as JSON ({"card": {...}}).
func cardFromRequest(r *http.Request) (cardInput, bool) {
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var req struct {
			Card cardInput `json:"card"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			return cardInput{}, false
		}
		return req.Card, true
	}
	if err := r.ParseForm(); err != nil {
		return cardInput{}, false
	}
	f := r.PostForm
	return cardInput{Number: f.Get("card[number]"), ExpMonth: f.Get("card[exp_month]"), ExpYear: f.Get("card[exp_year]"), CVC: f.Get("card[cvc]")}, true
}

// apiRoutes is the processor API the JS frames post to (API, and Collect,
// which no integration posts to). allowOrigin is the JS origin, for CORS.
func (is *issuer) apiRoutes(allowOrigin string) http.Handler {
	mux := http.NewServeMux()
	cors := func(w http.ResponseWriter) {
		w.Header().Set("Access-Control-Allow-Origin", allowOrigin)
		w.Header().Set("Access-Control-Allow-Methods", "POST")
		w.Header().Set("Access-Control-Allow-Headers", "Content-Type")
		w.Header().Set("Vary", "Origin")
	}
	mux.HandleFunc("OPTIONS /v1/payment_methods", func(w http.ResponseWriter, r *http.Request) {
		cors(w)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/payment_methods", func(w http.ResponseWriter, r *http.Request) {
		cors(w)
		c, ok := cardFromRequest(r)
		if !ok {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": decline{"invalid_request", "The request could not be read."}})
			return
		}
		id, d := is.createPaymentMethod("pm_", c)
		if d != nil {
			writeJSON(w, http.StatusPaymentRequired, map[string]any{"error": d})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "payment_method"})
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("Payments test API\n"))
	})
	return securityHeaders(mux)
}

// frameParent reads and checks the ?parent= origin a frame page is for.
func frameParent(w http.ResponseWriter, r *http.Request) (string, bool) {
	parent, err := url.Parse(r.URL.Query().Get("parent"))
	if err != nil || parent.Scheme != "https" || parent.Host == "" {
		http.Error(w, "missing or invalid parent origin", http.StatusBadRequest)
		return "", false
	}
	o := parent.Scheme + "://" + parent.Host
	w.Header().Set("Content-Security-Policy", "frame-ancestors "+o)
	return o, true
}

// jsRoutes serves the element frames. The shop names the API origin the
// frames post to (?api=), the way a publishable key picks an account.
func jsRoutes(now func() time.Time) http.Handler {
	mux := http.NewServeMux()
	page := func(tmplName string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			parent, ok := frameParent(w, r)
			if !ok {
				return
			}
			api, err := url.Parse(r.URL.Query().Get("api"))
			if err != nil || api.Scheme != "https" || api.Host == "" {
				http.Error(w, "missing api origin", http.StatusBadRequest)
				return
			}
			render(w, elementTmpl.Lookup(tmplName), map[string]any{
				"ParentOrigin": parent, "API": api.Scheme + "://" + api.Host, "Months": months, "Years": yearsFrom(now),
			})
		}
	}
	mux.HandleFunc("GET /v3/elements-inner-payment.html", page("payment"))
	mux.HandleFunc("GET /v3/elements-inner-card-number.html", page("card-number"))
	mux.HandleFunc("GET /v3/elements-inner-card-expiry.html", page("card-expiry"))
	mux.HandleFunc("GET /v3/elements-inner-card-cvc.html", page("card-cvc"))
	mux.HandleFunc("GET /v3/controller.html", page("controller"))
	return securityHeaders(mux)
}

// cardVault is the card-fields origin: four field frames and /sessions.
type cardVault struct {
	pay *issuer
}

func (v *cardVault) routes() http.Handler {
	mux := http.NewServeMux()
	for _, field := range []string{"number", "expiry", "verification_value", "name"} {
		mux.HandleFunc("GET /"+field, func(w http.ResponseWriter, r *http.Request) {
			parent, ok := frameParent(w, r)
			if !ok {
				return
			}
			id := r.URL.Query().Get("identifier")
			if id == "" || !isHexID(id) {
				http.Error(w, "missing identifier", http.StatusBadRequest)
				return
			}
			render(w, cardFieldTmpl, map[string]any{"ParentOrigin": parent, "Field": field, "ID": id})
		})
	}
	mux.HandleFunc("POST /sessions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			CreditCard struct {
				Number            string `json:"number"`
				Name              string `json:"name"`
				Month             string `json:"month"`
				Year              string `json:"year"`
				VerificationValue string `json:"verification_value"`
			} `json:"credit_card"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": decline{"invalid_request", "The request could not be read."}})
			return
		}
		c := req.CreditCard
		id, d := v.pay.createPaymentMethod("east-", cardInput{Number: c.Number, ExpMonth: c.Month, ExpYear: c.Year, CVC: c.VerificationValue})
		if d != nil {
			writeJSON(w, http.StatusPaymentRequired, map[string]any{"error": d})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id})
	})
	return securityHeaders(mux)
}

func isHexID(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return len(s) > 0 && len(s) <= 64
}

// securedFields is the client-side-encryption origin: a card frame whose
// script encrypts the card with the processor's RSA key before it posts,
// and the endpoint that decrypts it. No proxy can substitute a value inside
// the ciphertext.
type securedFields struct {
	pay *issuer
	key *rsa.PrivateKey
	pub string // base64 SPKI
}

func newSecuredFields(pay *issuer) (*securedFields, error) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return nil, err
	}
	return &securedFields{pay: pay, key: k, pub: base64.StdEncoding.EncodeToString(der)}, nil
}

func (sf *securedFields) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /checkoutshopper/securedfields/{key}/{version}/securedFields.html", func(w http.ResponseWriter, r *http.Request) {
		parent, ok := frameParent(w, r)
		if !ok {
			return
		}
		render(w, securedFieldsTmpl, map[string]any{"ParentOrigin": parent, "PublicKey": sf.pub, "Months": months, "Years": yearsFrom(sf.pay.now)})
	})
	mux.HandleFunc("POST /checkoutshopper/v1/payment_methods", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			EncryptedCard string `json:"encryptedCard"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": decline{"invalid_request", "The request could not be read."}})
			return
		}
		ct, err := base64.StdEncoding.DecodeString(req.EncryptedCard)
		var plain []byte
		if err == nil {
			plain, err = rsa.DecryptOAEP(crypto.SHA256.New(), nil, sf.key, ct, nil)
		}
		var c cardInput
		if err == nil {
			err = json.Unmarshal(plain, &c)
		}
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": decline{"invalid_request", "The card could not be decrypted."}})
			return
		}
		id, d := sf.pay.createPaymentMethod("pm_", c)
		if d != nil {
			writeJSON(w, http.StatusPaymentRequired, map[string]any{"error": d})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id})
	})
	return securityHeaders(mux)
}

func yearsFrom(now func() time.Time) []int {
	y := now().Year()
	out := make([]int, 0, 12)
	for i := y; i < y+12; i++ {
		out = append(out, i)
	}
	return out
}

// shoppers is the shop's own sign-in for the card-fields checkout: the
// merchant's accounts, a separate session cookie.
type shoppers struct {
	acc *accounts

	mu       sync.Mutex
	sessions map[string]string // cookie -> email
	steps    map[string]url.Values
}

func (a *accounts) check(email, password string) bool {
	got := sha256.Sum256([]byte(password))
	a.mu.Lock()
	defer a.mu.Unlock()
	u, ok := a.users[strings.ToLower(strings.TrimSpace(email))]
	good := ok && subtle.ConstantTimeCompare(got[:], u.pwHash[:]) == 1
	if !good {
		a.failed++
	}
	return good
}

func (sh *shoppers) signedIn(r *http.Request) (string, bool) {
	c, err := r.Cookie("customer")
	if err != nil {
		return "", false
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, ok := sh.sessions[c.Value]
	return e, ok
}
