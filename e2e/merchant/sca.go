package merchant

import (
	"crypto/rand"
	"encoding/json"
	"html/template"
	"math/big"
	"net/http"
	"sync"
)

// Strong customer authentication on the shop (issue 11): a checkout whose
// Pay button opens the bank's 3-D Secure window in a popup, where a one-time
// code "sent by SMS" must be typed, and a CAPTCHA page in front of it. Only
// the account owner may clear either: the agent hands the page off. The
// code is what the owner's phone would show; tests read it with SCACode.

type scaOrder struct {
	code     string
	paid     bool
	attempts int
}

type sca struct {
	mu     sync.Mutex
	orders map[string]*scaOrder
	last   string
	// checkouts and dones count the pages served, for tests that wait
	// for the shop to move on.
	checkouts, dones int
}

func newSCA() *sca { return &sca{orders: map[string]*scaOrder{}} }

func randomDigits(n int) string {
	s := ""
	for range n {
		d, _ := rand.Int(rand.Reader, big.NewInt(10))
		s += d.String()
	}
	return s
}

func (z *sca) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /sca/checkout", z.checkout)
	mux.HandleFunc("GET /sca/3ds", z.challengePage)
	mux.HandleFunc("POST /sca/3ds", z.verify)
	mux.HandleFunc("GET /sca/status", z.status)
	mux.HandleFunc("GET /sca/done", z.done)
	mux.HandleFunc("GET /sca/captcha", func(w http.ResponseWriter, r *http.Request) { render(w, captchaTmpl, nil) })
	mux.HandleFunc("POST /sca/captcha", func(w http.ResponseWriter, r *http.Request) {
		if r.PostFormValue("robot") != "on" {
			render(w, captchaTmpl, map[string]any{"Error": true})
			return
		}
		http.Redirect(w, r, "/sca/checkout", http.StatusSeeOther)
	})
}

func (z *sca) checkout(w http.ResponseWriter, r *http.Request) {
	id := "sca_" + randomDigits(8)
	z.mu.Lock()
	z.orders[id] = &scaOrder{code: randomDigits(6)}
	z.last = id
	z.checkouts++
	z.mu.Unlock()
	render(w, scaCheckoutTmpl, map[string]any{"ID": id})
}

func (z *sca) order(id string) (*scaOrder, bool) {
	z.mu.Lock()
	defer z.mu.Unlock()
	o, ok := z.orders[id]
	return o, ok
}

func (z *sca) challengePage(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("order")
	if _, ok := z.order(id); !ok {
		http.NotFound(w, r)
		return
	}
	render(w, threeDSTmpl, map[string]any{"ID": id})
}

func (z *sca) verify(w http.ResponseWriter, r *http.Request) {
	id := r.PostFormValue("order")
	z.mu.Lock()
	o, ok := z.orders[id]
	good := ok && o.code == r.PostFormValue("code")
	if ok {
		o.attempts++
		o.paid = o.paid || good
	}
	z.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if !good {
		render(w, threeDSTmpl, map[string]any{"ID": id, "Error": true})
		return
	}
	render(w, verifiedTmpl, nil)
}

func (z *sca) status(w http.ResponseWriter, r *http.Request) {
	o, ok := z.order(r.URL.Query().Get("order"))
	z.mu.Lock()
	paid := ok && o.paid
	z.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]bool{"paid": paid})
}

func (z *sca) done(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("order")
	o, ok := z.order(id)
	z.mu.Lock()
	paid := ok && o.paid
	if paid {
		z.dones++
	}
	z.mu.Unlock()
	if !paid {
		http.Error(w, "not paid", http.StatusPaymentRequired)
		return
	}
	render(w, scaDoneTmpl, map[string]any{"ID": id})
}

// SCALayout is where the 3-D Secure and CAPTCHA pages put their controls,
// in CSS pixels from the page's top left corner: the centre of each.
var SCALayout = map[string][2]float64{
	"otp": {140, 258}, "verify": {310, 258}, "robot": {53, 213}, "continue": {100, 278},
}

// SCACode is the one-time code the bank "sent" for the latest 3-D Secure
// checkout: what the account owner reads on their phone.
func (m *Merchant) SCACode() string {
	z := m.shop.sca
	z.mu.Lock()
	defer z.mu.Unlock()
	if o, ok := z.orders[z.last]; ok {
		return o.code
	}
	return ""
}

// SCAPages counts the 3-D Secure checkout pages the shop served (one after
// each CAPTCHA passed, too) and the confirmations it served after a
// payment: what a test waits for when the shop moves on by itself.
func (m *Merchant) SCAPages() (checkouts, confirmations int) {
	z := m.shop.sca
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.checkouts, z.dones
}

// SCAPaid reports whether the latest 3-D Secure checkout was verified, and
// how many codes were tried.
func (m *Merchant) SCAPaid() (paid bool, attempts int) {
	z := m.shop.sca
	z.mu.Lock()
	defer z.mu.Unlock()
	if o, ok := z.orders[z.last]; ok {
		return o.paid, o.attempts
	}
	return false, 0
}

var scaCheckoutTmpl = template.Must(template.New("sca").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Pay</title></head>
<body>
<h1>Review and pay</h1>
<p>Rechargeable headlamp · <span id="order-total" data-total="29.90 EUR">EUR 29.90</span></p>
<button type="button" id="pay">Pay now</button>
<p id="waiting" hidden>Waiting for your bank…</p>
<script>
document.getElementById('pay').addEventListener('click', function () {
  window.open('/sca/3ds?order={{.ID}}', 'bank', 'width=520,height=640');
  document.getElementById('waiting').hidden = false;
  var t = setInterval(function () {
    fetch('/sca/status?order={{.ID}}', {cache: 'no-store'}).then(function (r) { return r.json(); }).then(function (s) {
      if (s.paid) { clearInterval(t); location.href = '/sca/done?order={{.ID}}'; }
    });
  }, 300);
});
</script>
</body></html>`))

var threeDSTmpl = template.Must(template.New("3ds").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Bank verification</title>
<style>
.bank { display: flex; gap: 12px; align-items: center; }
.pulse { width: 18px; height: 18px; border-radius: 50%; background: #1a4fa0; animation: pulse 0.8s ease-in-out infinite alternate; }
@keyframes pulse { from { transform: scale(0.6); opacity: 0.4; } to { transform: scale(1.2); opacity: 1; } }
/* Fixed places, so a test playing the owner knows where to click on the
   live view (SCALayout). */
#otp { position: absolute; left: 40px; top: 240px; width: 200px; height: 36px; }
#verify { position: absolute; left: 260px; top: 240px; width: 100px; height: 36px; }
</style></head>
<body>
<div class="bank"><div class="pulse" aria-hidden="true"></div><strong>Verified by Visa</strong></div>
<h1>3-D Secure verification</h1>
<p>We sent a code by text message to your phone ending 42. Enter it to approve EUR 29.90.</p>
{{if .Error}}<p role="alert" id="otp-error">That code is incorrect. Try again.</p>{{end}}
<form method="post" action="/sca/3ds">
<input type="hidden" name="order" value="{{.ID}}">
<label for="otp">Verification code</label>
<input id="otp" name="code" autocomplete="one-time-code" inputmode="numeric" maxlength="6" autofocus>
<button id="verify">Verify</button>
</form>
</body></html>`))

var verifiedTmpl = template.Must(template.New("verified").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Verified</title></head>
<body><h1>Verified</h1><p>You can close this window.</p>
<script>setTimeout(function () { window.close(); }, 400);</script>
</body></html>`))

var scaDoneTmpl = template.Must(template.New("done").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Thank you</title></head>
<body><h1 id="order-success">Thank you, your order is confirmed</h1>
<p>Order {{.ID}} · <span id="order-total" data-total="29.90 EUR">EUR 29.90</span></p>
</body></html>`))

var captchaTmpl = template.Must(template.New("captcha").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Security check</title>
<style>
.box { display: inline-flex; gap: 10px; align-items: center; padding: 14px 18px; border: 1px solid #bbb; border-radius: 4px; background: #f9f9f9; }
.box.checked { background: #d9f2dc; border-color: #3a9b48; }
#robot { position: absolute; left: 40px; top: 200px; width: 26px; height: 26px; margin: 0; }
.box label { position: absolute; left: 80px; top: 204px; }
#continue { position: absolute; left: 40px; top: 260px; width: 120px; height: 36px; }
</style></head>
<body>
<h1>Complete the security check</h1>
<p>Please verify you are a human before you continue to checkout.</p>
{{if .}}<p role="alert">Tick the box first.</p>{{end}}
<form method="post" action="/sca/captcha">
<div class="g-recaptcha box" id="box" data-sitekey="e2e-test-sitekey">
<input type="checkbox" id="robot" name="robot"><label for="robot">I'm not a robot</label>
</div>
<p><button id="continue" disabled>Continue</button></p>
</form>
<script>
document.getElementById('robot').addEventListener('change', function (e) {
  document.getElementById('box').classList.toggle('checked', e.target.checked);
  document.getElementById('continue').disabled = !e.target.checked;
});
</script>
</body></html>`))
