package merchant

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"html/template"
	"net/http"
	"net/mail"
	"strings"
	"unicode"
)

// The sign-in site's sign-up form (issue 10): it states its own password
// rules (length bounds, character classes, a short symbol set, no triple
// repeats) beside a confirm-password field, and the server checks them and
// refuses a weak password, as a careful site does. An account it creates
// is stored (a hash) and signs in through the usual email-first /login.

// PasswordRules are a sign-up form's stated password rules.
type PasswordRules struct {
	MinLength, MaxLength int
	// Symbols is the punctuation the site accepts; at least one is needed.
	Symbols        string
	NoTripleRepeat bool
}

// SignupRules are the rules /signup states and enforces.
var SignupRules = PasswordRules{MinLength: 14, MaxLength: 20, Symbols: "!_-.", NoTripleRepeat: true}

// Check returns why pw breaks the rules, in the site's words; nil when it
// keeps them.
func (r PasswordRules) Check(pw string) []string {
	var out []string
	if n := len([]rune(pw)); n < r.MinLength || n > r.MaxLength {
		out = append(out, fmt.Sprintf("Use %d to %d characters.", r.MinLength, r.MaxLength))
	}
	var lower, upper, digit, symbol, other bool
	for _, c := range pw {
		switch {
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= '0' && c <= '9':
			digit = true
		case strings.ContainsRune(r.Symbols, c):
			symbol = true
		default:
			other = true
		}
	}
	if !lower || !upper || !digit {
		out = append(out, "Use upper- and lower-case letters and a digit.")
	}
	if !symbol {
		out = append(out, "Use at least one of "+spaced(r.Symbols)+".")
	}
	if other {
		out = append(out, "Use no characters other than letters, digits and "+spaced(r.Symbols)+".")
	}
	if r.NoTripleRepeat {
		rs := []rune(pw)
		for i := 2; i < len(rs); i++ {
			if rs[i] == rs[i-1] && rs[i] == rs[i-2] {
				out = append(out, "Do not repeat a character three times in a row.")
				break
			}
		}
	}
	return out
}

func spaced(s string) string {
	var parts []string
	for _, c := range s {
		parts = append(parts, string(c))
	}
	return strings.Join(parts, " ")
}

func (a *accounts) signupPage(w http.ResponseWriter, r *http.Request) {
	render(w, signupTmpl, map[string]any{"Rules": SignupRules, "Symbols": spaced(SignupRules.Symbols)})
}

// signup creates an account when the form keeps the rules, signs it in and
// goes to the account page; otherwise it answers 422 (409 for a taken
// email) with the reasons and creates nothing.
func (a *accounts) signup(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	email := strings.TrimSpace(r.PostForm.Get("email"))
	name := strings.TrimSpace(r.PostForm.Get("name"))
	pw, confirm := r.PostForm.Get("password"), r.PostForm.Get("confirm_password")
	var problems []string
	if addr, err := mail.ParseAddress(email); err != nil || addr.Address != email {
		problems = append(problems, "Enter a valid email address.")
	}
	problems = append(problems, SignupRules.Check(pw)...)
	if subtle.ConstantTimeCompare([]byte(pw), []byte(confirm)) != 1 {
		problems = append(problems, "The passwords do not match.")
	}
	status := http.StatusUnprocessableEntity
	key := strings.ToLower(email)
	a.mu.Lock()
	if _, taken := a.users[key]; taken && len(problems) == 0 {
		problems, status = append(problems, "An account with this email already exists."), http.StatusConflict
	}
	if len(problems) > 0 {
		a.refusedSignups++
		a.mu.Unlock()
		w.WriteHeader(status)
		render(w, signupTmpl, map[string]any{"Rules": SignupRules, "Symbols": spaced(SignupRules.Symbols), "Email": email, "Problems": problems})
		return
	}
	if name == "" {
		name = strings.TrimFunc(email[:strings.IndexByte(email, '@')], func(c rune) bool { return !unicode.IsLetter(c) })
	}
	a.users[key] = account{name: name, pwHash: sha256.Sum256([]byte(pw))}
	a.signedUp = append(a.signedUp, key)
	sid := randomHex(16)
	a.sessions[sid] = key
	a.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: "sid", Value: sid, Path: "/", Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, "/account", http.StatusSeeOther)
}

// SignedUp lists the emails of the accounts /signup created, oldest first.
func (m *Merchant) SignedUp() []string {
	m.accounts.mu.Lock()
	defer m.accounts.mu.Unlock()
	return append([]string(nil), m.accounts.signedUp...)
}

// RefusedSignups is how many sign-ups the server refused.
func (m *Merchant) RefusedSignups() int {
	m.accounts.mu.Lock()
	defer m.accounts.mu.Unlock()
	return m.accounts.refusedSignups
}

// AccountPasswordIs reports whether email's account holds password, so a
// proof compares the site's copy with the vault's without either being
// printed.
func (m *Merchant) AccountPasswordIs(email, password string) bool {
	m.accounts.mu.Lock()
	u, ok := m.accounts.users[strings.ToLower(email)]
	m.accounts.mu.Unlock()
	got := sha256.Sum256([]byte(password))
	return ok && subtle.ConstantTimeCompare(got[:], u.pwHash[:]) == 1
}

var signupTmpl = template.Must(template.New("signup").Parse(`<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Create your account · Trailhead Club</title>
<style>body{font-family:system-ui,sans-serif;display:flex;justify-content:center;margin-top:60px}
form{width:360px;padding:24px;border:1px solid #ddd;border-radius:10px}input{width:100%;box-sizing:border-box;padding:9px;margin:4px 0 10px}
button{width:100%;padding:10px}.error{color:#b00020;font-size:14px}.rules{font-size:13px;color:#444}</style></head>
<body><form id="signup" method="post" action="/signup" novalidate>
<h1>Create your account</h1>
<div id="signup-error" class="error" role="alert" aria-live="assertive">{{range .Problems}}<p>{{.}}</p>{{end}}</div>
<label for="signup-email">Email address</label>
<input type="email" id="signup-email" name="email" autocomplete="email" value="{{.Email}}" required>
<label for="signup-name">Your name (optional)</label>
<input type="text" id="signup-name" name="name" autocomplete="name">
<label for="signup-password">Password</label>
<input type="password" id="signup-password" name="password" autocomplete="new-password" minlength="{{.Rules.MinLength}}" maxlength="{{.Rules.MaxLength}}" aria-describedby="password-rules" required>
<ul id="password-rules" class="rules">
<li>{{.Rules.MinLength}} to {{.Rules.MaxLength}} characters</li>
<li>upper- and lower-case letters and at least one digit</li>
<li>at least one of {{.Symbols}}, and no other punctuation</li>
{{if .Rules.NoTripleRepeat}}<li>no character three times in a row</li>{{end}}
</ul>
<label for="signup-confirm">Confirm password</label>
<input type="password" id="signup-confirm" name="confirm_password" autocomplete="new-password" required>
<button type="submit" id="create-account">Create account</button>
<p>Already a member? <a href="/login">Sign in</a></p>
</form></body></html>`))
