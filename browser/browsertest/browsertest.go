// Package browsertest serves a realistic checkout page over HTTPS on
// loopback (a shop origin and a separate payments origin holding the card
// form in an iframe) and launches Chromium trusting it, for the tests and
// benchmarks of browser and mcpserver. It must never be imported by
// non-test code.
package browsertest

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/agentvault/agentvault/browser"
)

// Site is the two test origins.
type Site struct {
	Shop, Pay *httptest.Server
	SPKI      string

	mu      sync.Mutex
	Posted  []string // raw bodies posted to the payments API
	Ordered int
}

// DriverDir finds the playwright driver: PLAYWRIGHT_DRIVER_PATH, else the
// repo's .cache/playwright-driver.
func DriverDir() string {
	if d := os.Getenv("PLAYWRIGHT_DRIVER_PATH"); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", ".cache", "playwright-driver")
}

// SkipIfNoBrowser skips when the driver or Chromium is missing.
func SkipIfNoBrowser(tb testing.TB) {
	tb.Helper()
	if _, err := os.Stat(filepath.Join(DriverDir(), "package", "cli.js")); err != nil {
		tb.Skip("playwright driver missing: run make driver")
	}
	cp := os.Getenv("CHROMIUM_PATH")
	if cp == "" {
		cp = "/usr/bin/chromium"
	}
	if _, err := os.Stat(cp); err != nil {
		tb.Skip("chromium missing")
	}
}

// Launch starts Chromium trusting the site's certificate.
func Launch(tb testing.TB, s *Site) *browser.Browser {
	tb.Helper()
	SkipIfNoBrowser(tb)
	b, err := browser.Launch(browser.Config{DriverDir: DriverDir(), TrustSPKI: []string{s.SPKI}})
	if err != nil {
		tb.Fatalf("launch: %v", err)
	}
	tb.Cleanup(func() { _ = b.Close() })
	return b
}

// Start serves the shop and the payments origin.
func Start(tb testing.TB) *Site {
	tb.Helper()
	s := &Site{}
	pay := http.NewServeMux()
	pay.HandleFunc("/card", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, cardPage)
	})
	pay.HandleFunc("/lookalike", func(w http.ResponseWriter, r *http.Request) {
		// The card page's layout with nothing sensitive in it: screenshot
		// tests find the red field here, unmasked.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, strings.NewReplacer(`id="number" name="number" autocomplete="cc-number"`, `id="nick" name="nick" autocomplete="nickname"`, `for="number"`, `for="nick"`).Replace(cardPage))
	})
	pay.HandleFunc("/nest", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, nestPage)
	})
	pay.HandleFunc("/api/pay", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		s.mu.Lock()
		s.Posted = append(s.Posted, r.Form.Encode())
		s.mu.Unlock()
		w.Write([]byte(`{"ok":true}`))
	})
	pay.HandleFunc("/summary", func(w http.ResponseWriter, r *http.Request) {
		// An overlay checkout's summary: the only place the total is.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><body><p class="line">Subtotal 40.00</p><p class="grand" aria-label="Total EUR 49.99">Pay €49.99</p><p class="dup">12.00 EUR</p><p class="dup">13.00 EUR</p><p class="bare" data-x="49.99">-</p></body></html>`)
	})
	s.Pay = httptest.NewTLSServer(pay)
	shop := http.NewServeMux()
	portalRoutes(shop) // portal.go
	shop.HandleFunc("/checkout", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, strings.ReplaceAll(checkoutPage, "{{PAY}}", s.Pay.URL))
	})
	shop.HandleFunc("/overlay", func(w http.ResponseWriter, r *http.Request) {
		// A checkout whose total lives only in a cross-origin iframe.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><body><h1>Checkout</h1><iframe id="summary" title="Order summary" src="`+s.Pay.URL+`/summary"></iframe></body></html>`)
	})
	shop.HandleFunc("/frames", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, strings.ReplaceAll(framesPage, "{{PAY}}", s.Pay.URL))
	})
	shop.HandleFunc("/popup", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><head><title>Wallet</title></head><body><h1>Wallet sign-in</h1><button id="done" onclick="window.close()">Done</button></body></html>`)
	})
	shop.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, loginPage)
	})
	// A search that bounces back to its page with an error, and one whose
	// results never load (detect_challenge signatures).
	shop.HandleFunc("/c/search", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		msg := ""
		if r.URL.Query().Get("err") != "" {
			msg = `<p role="alert">Something went wrong. Please try again.</p>`
		}
		fmt.Fprint(w, `<!doctype html><html><body><h1>Find tickets</h1>`+msg+`<form role="search" action="/c/search-go"><input type="search" name="q" id="q" value="opera"><button id="go">Search</button></form></body></html>`)
	})
	shop.HandleFunc("/c/search-go", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/c/search?err=1", http.StatusFound)
	})
	shop.HandleFunc("/c/stalled", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><body><h1>Results for opera</h1><form role="search"><input type="search" name="q" value="opera"></form><div id="results" aria-busy="true"><div class="spinner" style="width:24px;height:24px;background:#888"></div></div></body></html>`)
	})
	for path, body := range challengePages {
		shop.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, "<!doctype html><html><body>"+body+"</body></html>")
		})
	}
	for path, body := range livePages {
		shop.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, "<!doctype html><html><body><h1>Checkout</h1>"+body+"</body></html>")
		})
	}
	shop.HandleFunc("/refused", func(w http.ResponseWriter, r *http.Request) {
		// What proxyd answers inside a tunnel when it refuses a request.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Agentvault-Code", "insecure_site")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"code":"insecure_site","message":"This site redirected to a plain http:// address. Nothing was sent over plain http."}`)
	})
	shop.HandleFunc("/order", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.Ordered++
		s.mu.Unlock()
		fmt.Fprint(w, `<html><body><header><button>Sign in</button></header><p class="checkout-error" hidden>Payment failed</p><h1 id="order-success">Thank you, order placed</h1><p>We've sent your receipt to your email.</p><div aria-live="polite">Order confirmed</div></body></html>`)
	})
	s.Shop = httptest.NewTLSServer(shop)
	tb.Cleanup(s.Shop.Close)
	tb.Cleanup(s.Pay.Close)
	sum := sha256.Sum256(s.Shop.Certificate().RawSubjectPublicKeyInfo)
	s.SPKI = base64.StdEncoding.EncodeToString(sum[:])
	return s
}

// CheckoutURL is the ~30-field checkout page.
func (s *Site) CheckoutURL() string { return s.Shop.URL + "/checkout" }

// FramesURL is a page of nested iframes: a hidden one first, a frame with
// no fields, and a cross-origin frame holding a field and the card frame.
func (s *Site) FramesURL() string { return s.Shop.URL + "/frames" }

// LoginURL is an email-first sign-in page.
func (s *Site) LoginURL() string { return s.Shop.URL + "/login" }

// PostedBodies returns what the payments API received.
func (s *Site) PostedBodies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.Posted...)
}

var checkoutPage = func() string {
	var b strings.Builder
	b.WriteString(`<!doctype html><html><head><title>Checkout</title><style>input,select{display:block;margin:2px}</style></head><body>
<h1>Checkout</h1><form id="shipping" onsubmit="return false">`)
	fields := []struct{ id, label, ac, typ string }{
		{"email", "Email", "email", "email"}, {"phone", "Phone", "tel", "tel"},
		{"first", "First name", "given-name", "text"}, {"last", "Last name", "family-name", "text"},
		{"company", "Company", "organization", "text"}, {"addr1", "Address line 1", "address-line1", "text"},
		{"addr2", "Address line 2", "address-line2", "text"}, {"city", "City", "address-level2", "text"},
		{"region", "Region", "address-level1", "text"}, {"postcode", "Postcode", "postal-code", "text"},
		{"bfirst", "Billing first name", "billing given-name", "text"}, {"blast", "Billing last name", "billing family-name", "text"},
		{"baddr1", "Billing address", "billing address-line1", "text"}, {"bcity", "Billing city", "billing address-level2", "text"},
		{"bpost", "Billing postcode", "billing postal-code", "text"}, {"coupon", "Coupon", "off", "text"},
		{"giftmsg", "Gift message", "off", "text"}, {"vat", "VAT number", "off", "text"},
		{"notes", "Delivery notes", "off", "text"}, {"ref", "Order reference", "off", "text"},
		{"cname", "Name on card", "cc-name", "text"}, {"alt", "Alternate phone", "tel", "tel"},
	}
	for _, f := range fields {
		fmt.Fprintf(&b, `<label for="%s">%s</label><input id="%s" name="%s" autocomplete="%s" type="%s">`+"\n", f.id, f.label, f.id, f.id, f.ac, f.typ)
	}
	b.WriteString(`<label for="country">Country</label><select id="country" name="country"><option value="FR">France</option><option value="DE">Germany</option><option value="US">United States</option></select>
<label><input type="checkbox" id="terms" name="terms"> I accept the terms</label>
<label for="notes-ta">Notes for the courier</label><textarea id="notes-ta" name="notes_ta"></textarea>
<label for="exp-month">Expiry month</label><select id="exp-month" name="exp-month">` + opts(1, 12) + `</select>
<label for="exp-year">Expiry year</label><select id="exp-year" name="exp-year">` + opts(2026, 2035) + `</select>
<p>Total: <span id="total">EUR 42.00</span></p>
<iframe title="Secure payment input frame" src="{{PAY}}/card" style="width:420px;height:160px"></iframe>
<p id="err" role="alert"></p>
<button id="place-order" type="button" onclick="placeOrder()">Place order</button>
<button id="wallet" type="button" onclick="window.open('/popup','wallet')">Pay with wallet</button>
<button id="wallet-late" type="button" onclick="setTimeout(() => { window.open('/popup', 'late'); document.body.setAttribute('data-late', '1'); }, 150)">Pay with wallet later</button>
<button id="probe" type="button" onclick="fetch('/refused').then(() => document.body.setAttribute('data-probed', '1'))">Check availability</button>
</form>
<script>
function placeOrder() {
  const f = document.querySelector('iframe').contentWindow;
  f.postMessage('pay', '*');
}
window.addEventListener('message', (e) => {
  if (e.data === 'paid') location.href = '/order';
  else if (typeof e.data === 'string' && e.data.startsWith('error:')) document.getElementById('err').textContent = e.data.slice(6);
});
</script></body></html>`)
	return b.String()
}()

func opts(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, `<option value="%d">%02d</option>`, i, i)
	}
	return b.String()
}

const cardPage = `<!doctype html><html><body style="background:#fff">
<label for="number">Card number</label><input id="number" name="number" autocomplete="cc-number" inputmode="numeric" style="background:#f00;width:300px;height:30px">
<label for="cvc">CVC</label><input id="cvc" name="cvc" autocomplete="cc-csc" inputmode="numeric">
<div id="card-error" aria-live="polite"></div>
<script>
function luhn(n) { let s = 0, alt = false; for (let i = n.length - 1; i >= 0; i--) { let d = +n[i]; if (alt) { d *= 2; if (d > 9) d -= 9; } s += d; alt = !alt; } return s % 10 === 0; }
window.addEventListener('message', async (e) => {
  if (e.data !== 'pay') return;
  const n = document.getElementById('number').value.replace(/\s+/g, '');
  const c = document.getElementById('cvc').value;
  if (!/^\d{12,19}$/.test(n) || !luhn(n)) { document.getElementById('number').setAttribute('aria-invalid', 'true'); document.getElementById('card-error').textContent = 'Your card number ' + n + ' is invalid'; parent.postMessage('error:Card declined', '*'); return; }
  if (!/^\d{3,4}$/.test(c)) { parent.postMessage('error:Security code is invalid', '*'); return; }
  await fetch('/api/pay', {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: 'number=' + n + '&cvc=' + c});
  parent.postMessage('paid', '*');
});
</script></body></html>`

const framesPage = `<!doctype html><html><body><h1>Frames</h1>
<iframe title="Tracker" src="about:blank" style="display:none"></iframe>
<label for="q">Search</label><input id="q" type="search">
<iframe title="Banner" srcdoc="<p>Free shipping</p>" style="height:40px"></iframe>
<iframe title="Wallet" src="{{PAY}}/nest" style="width:460px;height:260px"></iframe>
</body></html>`

const nestPage = `<!doctype html><html><body><label for="holder">Card holder</label><input id="holder" name="holder">
<iframe title="Card" src="/card" style="width:420px;height:160px"></iframe></body></html>`

const loginPage = `<!doctype html><html><body><h1>Sign in</h1>
<div id="step1"><label for="identifier">Email address</label><input id="identifier" name="username" type="email" autocomplete="username">
<button id="next" onclick="document.getElementById('step2').style.display='block';document.getElementById('step1').style.display='none'">Next</button></div>
<div id="step2" style="display:none"><label for="password">Password</label><input id="password" name="password" type="password" autocomplete="current-password">
<button id="signin" onclick="location.href='/order'">Sign in</button></div>
</body></html>`

// challengePages are one page per challenge shape detect_challenge knows.
var challengePages = map[string]string{
	"/c/3ds":     `<h1>Confirm your purchase</h1><iframe name="acs-frame" src="about:blank" title="3-D Secure authentication"></iframe>`,
	"/c/captcha": `<h1>One more step</h1><div class="g-recaptcha" data-sitekey="x"></div><p>Verify you are human</p>`,
	"/c/otp":     `<h1>Check your phone</h1><p>We sent a 6-digit code to your phone.</p><label for="c">Verification code</label><input id="c" autocomplete="one-time-code">`,
	"/c/maybe":   `<h1>Almost there</h1><label for="c">Code</label><input id="c" name="code">`,
	"/c/blocked": `<h1>Access denied</h1><p>Error reference #18.2f3c.1700000000</p>`,
	"/c/plain":   `<h1>Your cart</h1><p>Nothing to see.</p>`,
}

// livePages announce outcomes in live regions, for observe_page's error
// signal: a success announcement is not an error, failure wording is.
var livePages = map[string]string{
	"/live/status-success":    `<section id="order-success" role="status"><p>Thank you, your order is confirmed.</p></section>`,
	"/live/polite-success":    `<div aria-live="polite">Payment received</div>`,
	"/live/assertive-success": `<p aria-live="assertive">Payment successful</p>`,
	"/live/status-failure":    `<div role="status">Payment failed: the card was declined.</div>`,
	"/live/assertive-failure": `<div aria-live="assertive">Something went wrong, please try again.</div>`,
	"/live/alert":             `<p role="alert">Enter a valid postcode</p>`,
	"/live/hidden-failure":    `<div role="status" hidden>Payment failed</div><p>All good.</p>`,
}
