package merchant

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
)

// accounts is the sign-in site: an email-first flow (email, Continue, then
// the password step appears) that checks the password on the server.
type accounts struct {
	mu       sync.Mutex
	users    map[string]account // by lowercased email
	sessions map[string]string  // session cookie -> email
	failed   int
	t        *totpState // the authenticator (totp.go)
	// signedUp and refusedSignups are /signup's record (signup.go).
	signedUp       []string
	refusedSignups int
	// c is the test captcha; hang the accounts whose sign-ins never get
	// an answer; attempts counts sign-in submits by email (captcha.go).
	c        *captchaState
	hang     map[string]bool
	attempts map[string]int
	// quit ends hung sign-ins when the merchant closes.
	quit chan struct{}
}

type account struct {
	name string
	// The site keeps a hash, as a real one would; the proof reads what the
	// server received from the request record, not from here.
	pwHash [32]byte
}

func newAccounts() *accounts {
	return &accounts{users: map[string]account{}, sessions: map[string]string{}, attempts: map[string]int{}, quit: make(chan struct{})}
}

func (a *accounts) add(email, password, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.users[strings.ToLower(email)] = account{name: name, pwHash: sha256.Sum256([]byte(password))}
}

// FailedSignIns is how many sign-ins were refused for a wrong password.
func (m *Merchant) FailedSignIns() int {
	m.accounts.mu.Lock()
	defer m.accounts.mu.Unlock()
	return m.accounts.failed
}

func (a *accounts) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		render(w, loginTmpl, a.loginPage(r.URL.Query().Get("captcha"), "", ""))
	})
	mux.HandleFunc("POST /api/identify", a.identify)
	mux.HandleFunc("POST /session", a.signIn)
	mux.HandleFunc("POST /api/captcha", a.verifyCaptcha)
	mux.HandleFunc("POST /session/captcha", a.afterChallenge)
	mux.HandleFunc("GET /signup", a.signupPage)
	mux.HandleFunc("POST /signup", a.signup)
	mux.HandleFunc("GET /account", a.account)
	mux.HandleFunc("POST /logout", a.logout)
	mux.HandleFunc("GET /account/2fa", a.totpSetup)
	mux.HandleFunc("POST /account/2fa", a.totpConfirm)
	mux.HandleFunc("GET /search", a.search)
	mux.HandleFunc("GET /login/otp", a.otpPage)
	mux.HandleFunc("POST /login/otp", a.otpCheck)
	mux.HandleFunc("/echo", echo)
	return securityHeaders(mux)
}

// identify is the first step: does an account exist for this email? Real
// sites answer this too (it is how they pick a password or an SSO step).
func (a *accounts) identify(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Email string `json:"email"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "Enter your email address."})
		return
	}
	a.mu.Lock()
	u, ok := a.users[strings.ToLower(strings.TrimSpace(req.Email))]
	a.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "We couldn't find an account with that email address."})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"method": "password", "name": u.name})
}

// loginPage is the sign-in page's data; captcha "before" puts a fresh
// challenge above the form, "after" marks the form for a challenge after
// good credentials.
func (a *accounts) loginPage(captcha, email, errMsg string) map[string]any {
	d := map[string]any{"Email": email, "Error": errMsg}
	switch captcha {
	case "before":
		a.mu.Lock()
		d["Challenge"] = a.newChallenge("")
		a.mu.Unlock()
		d["Captcha"], d["Before"], d["After"] = captcha, true, false
	case "after":
		d["Captcha"] = captcha
	}
	return d
}

func (a *accounts) signIn(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	email := strings.ToLower(strings.TrimSpace(r.PostForm.Get("email")))
	captcha := r.PostForm.Get("captcha")
	got := sha256.Sum256([]byte(r.PostForm.Get("password")))
	a.mu.Lock()
	a.attempts[email]++
	hang := a.hang[email]
	a.mu.Unlock()
	if hang {
		select {
		case <-r.Context().Done():
		case <-a.quit:
			// The connection drops with no answer at all.
			panic(http.ErrAbortHandler)
		}
		return
	}
	if captcha == "before" {
		a.mu.Lock()
		_, passed := a.takePass(r.PostForm.Get("challenge"), r.PostForm.Get("captcha_pass"))
		a.mu.Unlock()
		if !passed {
			w.WriteHeader(http.StatusBadRequest)
			render(w, loginTmpl, a.loginPage(captcha, r.PostForm.Get("email"), "Complete the security check first."))
			return
		}
	}
	a.mu.Lock()
	u, ok := a.users[email]
	good := ok && subtle.ConstantTimeCompare(got[:], u.pwHash[:]) == 1
	if !good {
		a.failed++
	}
	a.mu.Unlock()
	if !good {
		w.WriteHeader(http.StatusUnauthorized)
		render(w, loginTmpl, a.loginPage(captcha, r.PostForm.Get("email"), "Incorrect email or password."))
		return
	}
	if captcha == "after" {
		a.mu.Lock()
		id := a.newChallenge(email)
		a.mu.Unlock()
		render(w, captchaPageTmpl, map[string]any{"Challenge": id, "After": true})
		return
	}
	a.startSession(w, r, email)
}

// startSession signs email in: the authenticator step first when it is on.
func (a *accounts) startSession(w http.ResponseWriter, r *http.Request, email string) {
	if a.mfaNeeded(w, r, email) {
		return
	}
	a.openSession(w, r, email)
}

// openSession gives email a session cookie and sends it to its account: the
// last step of every sign-in, with or without the authenticator.
func (a *accounts) openSession(w http.ResponseWriter, r *http.Request, email string) {
	sid := randomHex(16)
	a.mu.Lock()
	a.sessions[sid] = email
	a.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: "sid", Value: sid, Path: "/", Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, "/account", http.StatusSeeOther)
}

func (a *accounts) signedIn(r *http.Request) (email string, u account, ok bool) {
	c, err := r.Cookie("sid")
	if err != nil {
		return "", account{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	email, ok = a.sessions[c.Value]
	if ok {
		u = a.users[email]
	}
	return email, u, ok
}

func (a *accounts) account(w http.ResponseWriter, r *http.Request) {
	email, u, ok := a.signedIn(r)
	if !ok {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	render(w, accountTmpl, map[string]any{"Email": email, "Name": u.name})
}

func (a *accounts) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie("sid"); err == nil {
		a.mu.Lock()
		delete(a.sessions, c.Value)
		a.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: "sid", Value: "", Path: "/", MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
