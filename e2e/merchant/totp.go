package merchant

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"
)

// The sign-in site's authenticator (TOTP, RFC 6238): a signed-in user opens
// /account/2fa, which shows a fresh secret on every load (as real sites do)
// and asks for a current code to turn it on. Once on, the password step is
// followed by an authenticator step (/login/otp) that checks a current code.

type totpState struct {
	enrolled  map[string]string // email -> secret
	enrolling map[string]string // sid -> secret shown
	mfa       map[string]string // mfa cookie -> email, after the password
	issued    []string
}

func (a *accounts) totp() *totpState {
	if a.t == nil {
		a.t = &totpState{enrolled: map[string]string{}, enrolling: map[string]string{}, mfa: map[string]string{}}
	}
	return a.t
}

// IssuedTOTPSecrets lists every authenticator secret the site showed.
func (m *Merchant) IssuedTOTPSecrets() []string {
	m.accounts.mu.Lock()
	defer m.accounts.mu.Unlock()
	return append([]string(nil), m.accounts.totp().issued...)
}

// TOTPEnrolled reports whether email turned its authenticator on.
func (m *Merchant) TOTPEnrolled(email string) bool {
	m.accounts.mu.Lock()
	defer m.accounts.mu.Unlock()
	_, ok := m.accounts.totp().enrolled[strings.ToLower(email)]
	return ok
}

// EnrollTOTPSecret turns email's authenticator on with secret, as if the
// owner had set it up before (the vault holds the same seed).
func (m *Merchant) EnrollTOTPSecret(email, secret string) {
	m.accounts.mu.Lock()
	defer m.accounts.mu.Unlock()
	m.accounts.totp().enrolled[strings.ToLower(email)] = secret
}

// EnrolledTOTPSecret is the secret email's authenticator has on, "" when
// it is off.
func (m *Merchant) EnrolledTOTPSecret(email string) string {
	m.accounts.mu.Lock()
	defer m.accounts.mu.Unlock()
	return m.accounts.totp().enrolled[strings.ToLower(email)]
}

// search is the site's search page: it shows the query back, as search
// pages do (a page that reflects text its visitor chose).
func (a *accounts) search(w http.ResponseWriter, r *http.Request) {
	render(w, searchTmpl, map[string]any{"Q": r.URL.Query().Get("q")})
}

func totpCode(secret string, t time.Time) string {
	key, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(secret)
	if err != nil {
		return ""
	}
	var msg [8]byte
	binary.BigEndian.PutUint64(msg[:], uint64(t.Unix()/30))
	h := hmac.New(sha1.New, key)
	h.Write(msg[:])
	sum := h.Sum(nil)
	off := sum[len(sum)-1] & 0x0f
	v := binary.BigEndian.Uint32(sum[off:off+4]) & 0x7fffffff
	return fmt.Sprintf("%06d", v%1000000)
}

// codeGood accepts the current step and the one either side.
func codeGood(secret, code string) bool {
	now := time.Now()
	code = strings.TrimSpace(code)
	for _, d := range []time.Duration{-30 * time.Second, 0, 30 * time.Second} {
		if c := totpCode(secret, now.Add(d)); c != "" && hmac.Equal([]byte(c), []byte(code)) {
			return true
		}
	}
	return false
}

func (a *accounts) sid(r *http.Request) string {
	c, err := r.Cookie("sid")
	if err != nil {
		return ""
	}
	return c.Value
}

func (a *accounts) totpSetup(w http.ResponseWriter, r *http.Request) {
	email, _, ok := a.signedIn(r)
	if !ok {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	var raw [20]byte
	_, _ = rand.Read(raw[:])
	secret := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(raw[:])
	a.mu.Lock()
	ts := a.totp()
	ts.enrolling[a.sid(r)] = secret
	ts.issued = append(ts.issued, secret)
	a.mu.Unlock()
	var grouped []string
	for i := 0; i < len(secret); i += 4 {
		grouped = append(grouped, secret[i:min(i+4, len(secret))])
	}
	uri := "otpauth://totp/Trailhead:" + email + "?secret=" + secret + "&issuer=Trailhead"
	render(w, totpSetupTmpl, map[string]any{"Grouped": strings.Join(grouped, " "), "URI": uri})
}

func (a *accounts) totpConfirm(w http.ResponseWriter, r *http.Request) {
	email, _, ok := a.signedIn(r)
	if !ok || r.ParseForm() != nil {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	a.mu.Lock()
	ts := a.totp()
	secret := ts.enrolling[a.sid(r)]
	good := secret != "" && codeGood(secret, r.PostForm.Get("code"))
	if good {
		ts.enrolled[email] = secret
		delete(ts.enrolling, a.sid(r))
	}
	a.mu.Unlock()
	if !good {
		w.WriteHeader(http.StatusUnprocessableEntity)
		render(w, totpDoneTmpl, map[string]any{"Error": "That code didn't match. Try the current one."})
		return
	}
	render(w, totpDoneTmpl, map[string]any{})
}

// mfaNeeded starts the authenticator step after a good password when the
// user has one: a short-lived mfa cookie, then /login/otp.
func (a *accounts) mfaNeeded(w http.ResponseWriter, r *http.Request, email string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	ts := a.totp()
	if _, on := ts.enrolled[email]; !on {
		return false
	}
	id := randomHex(16)
	ts.mfa[id] = email
	http.SetCookie(w, &http.Cookie{Name: "mfa", Value: id, Path: "/", Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, "/login/otp", http.StatusSeeOther)
	return true
}

func (a *accounts) otpPage(w http.ResponseWriter, r *http.Request) {
	render(w, otpTmpl, map[string]any{})
}

func (a *accounts) otpCheck(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie("mfa")
	if err != nil || r.ParseForm() != nil {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	a.mu.Lock()
	ts := a.totp()
	email := ts.mfa[c.Value]
	good := email != "" && codeGood(ts.enrolled[email], r.PostForm.Get("otp"))
	if good {
		delete(ts.mfa, c.Value)
	} else {
		a.failed++
	}
	a.mu.Unlock()
	if !good {
		w.WriteHeader(http.StatusUnauthorized)
		render(w, otpTmpl, map[string]any{"Error": "That code didn't work."})
		return
	}
	a.openSession(w, r, email)
}

var totpSetupTmpl = template.Must(template.New("totp").Parse(`<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Turn on two-step sign-in · Trailhead Club</title></head><body>
<main id="totp-setup"><h1>Set up your authenticator app</h1>
<div id="qr" data-otpauth="{{.URI}}"></div>
<p>Can't scan? Enter this key: <code id="totp-secret">{{.Grouped}}</code></p>
<form method="post" action="/account/2fa"><label for="totp-code">Code from the app</label>
<input id="totp-code" name="code" inputmode="numeric" autocomplete="one-time-code">
<button type="submit" id="totp-confirm">Turn on</button></form>
</main></body></html>`))

var totpDoneTmpl = template.Must(template.New("totpdone").Parse(`<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Two-step sign-in · Trailhead Club</title></head><body>
{{if .Error}}<p id="totp-error" role="alert">{{.Error}}</p>{{else}}<p id="totp-enabled">Two-step sign-in is on.</p>{{end}}
</body></html>`))

var otpTmpl = template.Must(template.New("otp").Parse(`<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Two-step sign-in · Trailhead Club</title></head><body>
<main id="otp-step"><h1>Enter the code from your authenticator app</h1>
<form method="post" action="/login/otp"><label for="otp">Authentication code</label>
<input id="otp" name="otp" inputmode="numeric" autocomplete="one-time-code">
<button type="submit" id="otp-submit">Verify</button>
{{if .Error}}<p id="otp-error" role="alert">{{.Error}}</p>{{end}}</form>
</main></body></html>`))

var searchTmpl = template.Must(template.New("search").Parse(`<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Search · Trailhead Club</title></head><body>
<main id="search"><h1>Search</h1><p>No results for <code id="query">{{.Q}}</code>.</p></main></body></html>`))
