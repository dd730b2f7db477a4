package merchant

import (
	"crypto/subtle"
	"encoding/json"
	"html/template"
	"net/http"
	"strings"
)

// The sign-in site's test captcha and slow sign-ins, for browser_login
// (seed 000):
//
//	/login?captcha=before  a challenge above the form; /session refuses a
//	                       submit that does not carry its pass
//	/login?captcha=after   good credentials meet a challenge page before
//	                       the session starts (the common post-credential
//	                       case)
//
// A challenge's answer is never on the page: only a solver that asks the
// site (OpenCaptchaAnswer, the test provider's stand-in for a managed
// browser's solver) clears it. HangSignIns makes /session never answer for
// an account, the portal that is "still loading".

type captchaChallenge struct {
	answer string
	// email is the signed-in account waiting behind an after-submit
	// challenge; empty before the submit.
	email  string
	pass   string // issued once the answer is right; one use
	solved bool
}

type captchaState struct {
	byID   map[string]*captchaChallenge
	order  []string // issue order, for OpenCaptchaAnswer
	solved int
}

func (a *accounts) captchas() *captchaState {
	if a.c == nil {
		a.c = &captchaState{byID: map[string]*captchaChallenge{}}
	}
	return a.c
}

// newChallenge issues a challenge; the caller holds a.mu.
func (a *accounts) newChallenge(email string) string {
	cs := a.captchas()
	id := randomHex(12)
	cs.byID[id] = &captchaChallenge{answer: strings.ToUpper(randomHex(3)), email: email}
	cs.order = append(cs.order, id)
	return id
}

// OpenCaptchaAnswer is the answer to the newest challenge not yet solved:
// what a test solver reads from the site to clear the page's challenge.
func (m *Merchant) OpenCaptchaAnswer() (string, bool) {
	m.accounts.mu.Lock()
	defer m.accounts.mu.Unlock()
	cs := m.accounts.captchas()
	for i := len(cs.order) - 1; i >= 0; i-- {
		if c := cs.byID[cs.order[i]]; !c.solved {
			return c.answer, true
		}
	}
	return "", false
}

// CaptchasSolved is how many challenges were answered right.
func (m *Merchant) CaptchasSolved() int {
	m.accounts.mu.Lock()
	defer m.accounts.mu.Unlock()
	return m.accounts.captchas().solved
}

// HangSignIns makes every sign-in of email reach the site and never get an
// answer (until the client gives up or the merchant closes).
func (m *Merchant) HangSignIns(email string) {
	m.accounts.mu.Lock()
	defer m.accounts.mu.Unlock()
	if m.accounts.hang == nil {
		m.accounts.hang = map[string]bool{}
	}
	m.accounts.hang[strings.ToLower(email)] = true
}

// SignInAttempts is how many sign-in submits for email reached the site,
// whatever their fate.
func (m *Merchant) SignInAttempts(email string) int {
	m.accounts.mu.Lock()
	defer m.accounts.mu.Unlock()
	return m.accounts.attempts[strings.ToLower(email)]
}

// SessionsStarted is how many signed-in sessions the site started for
// email.
func (m *Merchant) SessionsStarted(email string) int {
	m.accounts.mu.Lock()
	defer m.accounts.mu.Unlock()
	n := 0
	for _, e := range m.accounts.sessions {
		if e == strings.ToLower(email) {
			n++
		}
	}
	return n
}

// verifyCaptcha checks an answer: right, it marks the challenge solved and
// hands the page a one-use pass.
func (a *accounts) verifyCaptcha(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Challenge string `json:"challenge"`
		Answer    string `json:"answer"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad request"})
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	cs := a.captchas()
	c, ok := cs.byID[req.Challenge]
	if !ok || c.solved || subtle.ConstantTimeCompare([]byte(strings.ToUpper(strings.TrimSpace(req.Answer))), []byte(c.answer)) != 1 {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": "That was not right. Try again."})
		return
	}
	c.solved, c.pass = true, randomHex(16)
	cs.solved++
	writeJSON(w, http.StatusOK, map[string]string{"pass": c.pass})
}

// takePass spends a challenge's pass; the caller holds a.mu.
func (a *accounts) takePass(challenge, pass string) (*captchaChallenge, bool) {
	c, ok := a.captchas().byID[challenge]
	if !ok || !c.solved || c.pass == "" || subtle.ConstantTimeCompare([]byte(pass), []byte(c.pass)) != 1 {
		return nil, false
	}
	c.pass = ""
	return c, true
}

// afterChallenge ends the after-submit challenge: a spent pass starts the
// session the credentials earned.
func (a *accounts) afterChallenge(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	c, ok := a.takePass(r.PostForm.Get("challenge"), r.PostForm.Get("captcha_pass"))
	a.mu.Unlock()
	if !ok || c.email == "" {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	a.startSession(w, r, c.email)
}

// captchaWidget is the challenge: an answer field and a Verify button that
// asks the site. Before the submit it hides itself and puts the pass in the
// sign-in form; after the submit it posts the pass and stays up until the
// next page loads.
const captchaWidget = `<div id="captcha" style="border:1px solid #999;padding:10px;margin:0 auto 16px;width:340px">
<p>Security check: type the characters of the puzzle (test challenge; the site knows the answer).</p>
<input id="captcha-answer" type="text" autocomplete="off" aria-label="Puzzle characters">
<button type="button" id="captcha-verify">Verify</button>
<p id="captcha-msg"></p>
</div>
<script>
(function () {
  "use strict";
  var id = {{.Challenge}}, after = {{.After}};
  document.getElementById("captcha-verify").addEventListener("click", function () {
    var msg = document.getElementById("captcha-msg");
    fetch("/api/captcha", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ challenge: id, answer: document.getElementById("captcha-answer").value }) })
      .then(function (res) { return res.json().then(function (b) { return { ok: res.ok, b: b }; }); })
      .then(function (r) {
        if (!r.ok) { msg.textContent = r.b.error || "Try again."; return; }
        if (after) {
          document.getElementById("captcha-pass").value = r.b.pass;
          document.getElementById("captcha-done").submit();
          return;
        }
        document.getElementById("captcha-pass").value = r.b.pass;
        document.getElementById("captcha").style.display = "none";
      });
  });
})();
</script>`

var captchaPageTmpl = template.Must(template.New("captcha-page").Parse(`<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>One more check · Trailhead Club</title></head>
<body style="font-family:system-ui,sans-serif;margin-top:60px">
<h1 style="text-align:center">One more check</h1>
` + captchaWidget + `
<form id="captcha-done" method="post" action="/session/captcha">
<input type="hidden" name="challenge" value="{{.Challenge}}">
<input type="hidden" name="captcha_pass" id="captcha-pass" value="">
</form>
</body></html>`))
