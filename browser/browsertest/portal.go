package browsertest

import (
	"fmt"
	"html"
	"net/http"
	"strings"
	"sync/atomic"
)

// A portal sign-in for browser_login (seed 000), on the shop origin:
//
//	/portal/login        username and password on one form
//	/portal/email-first  the password appears after Continue
//	/portal/captcha      a challenge on the page until a solver clears it
//
// POST /portal/session signs in with the stand-ins mcpserver's tests type
// (PortalUser, PortalPassword); its hidden mode makes it refuse ("reject"),
// never answer ("hang") or show a challenge after the credential
// ("captcha-after").

// The credential the portal accepts.
const (
	PortalUser     = "agent.inbox@example.com"
	PortalPassword = "Stand-In-Pass-9!"
)

// portalPosts counts sign-in submits per site.
var portalPosts atomic.Int64

// PortalPosts is how many sign-ins were submitted to any portal page.
func PortalPosts() int64 { return portalPosts.Load() }

const portalHead = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Portal</title></head><body>`

func portalForm(mode, errMsg string, emailFirst, captcha bool) string {
	var b strings.Builder
	b.WriteString(portalHead + `<h1>Sign in</h1>`)
	if captcha {
		b.WriteString(`<div id="captcha" style="border:1px solid #999;padding:8px">Verify you are human <button type="button" id="captcha-solve" onclick="document.getElementById('captcha').style.display='none'">solved</button></div>`)
	}
	b.WriteString(`<form method="post" action="/portal/session" novalidate><input type="hidden" name="mode" value="` + html.EscapeString(mode) + `">`)
	b.WriteString(`<label for="u">Email</label><input id="u" name="username" type="email" autocomplete="username">`)
	if emailFirst {
		b.WriteString(`<button type="button" id="next" onclick="document.getElementById('pwstep').style.display='block';this.style.display='none'">Continue</button><div id="pwstep" style="display:none">`)
	}
	b.WriteString(`<label for="p">Password</label><input id="p" name="password" type="password" autocomplete="current-password"><button type="submit" id="go">Sign in</button>`)
	if emailFirst {
		b.WriteString(`</div>`)
	}
	if errMsg != "" {
		b.WriteString(`<p role="alert" id="err">` + html.EscapeString(errMsg) + `</p>`)
	}
	b.WriteString(`</form></body></html>`)
	return b.String()
}

func portalRoutes(mux *http.ServeMux) {
	page := func(emailFirst, captcha bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, portalForm(r.URL.Query().Get("mode"), "", emailFirst, captcha))
		}
	}
	mux.HandleFunc("GET /portal/login", page(false, false))
	mux.HandleFunc("GET /portal/email-first", page(true, false))
	mux.HandleFunc("GET /portal/captcha", page(false, true))
	mux.HandleFunc("POST /portal/session", func(w http.ResponseWriter, r *http.Request) {
		portalPosts.Add(1)
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		mode := r.PostForm.Get("mode")
		good := r.PostForm.Get("username") == PortalUser && r.PostForm.Get("password") == PortalPassword
		switch {
		case mode == "hang":
			<-r.Context().Done()
			return
		case mode == "reject" || !good:
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, portalForm(mode, "Incorrect username or password.", false, false))
			return
		case mode == "captcha-after":
			fmt.Fprint(w, portalHead+`<div id="captcha">One more check <button type="button" id="captcha-solve" onclick="location.href='/portal/home'">solved</button></div></body></html>`)
			return
		}
		http.Redirect(w, r, "/portal/home", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /portal/home", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, portalHead+`<main id="home"><h1>Welcome back</h1><p>Your dashboard.</p></main></body></html>`)
	})
}
