package e2e

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault/control"
)

// TestP9_PasswordStandInsSubstituteInForms signs in over the proxy with a
// fresh password stand-in in each of many sessions. Stand-ins keep the real
// password's character classes, so their symbols get percent-encoded by the
// form encoding; every one must still reach the site as the real password.
func TestP9_PasswordStandInsSubstituteInForms(t *testing.T) {
	requireE2E(t, false)
	ap := startWiredAppliance(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	loginPage := ap.m.Login.URL + "/login"
	cat, err := ap.ctl.Catalog(ctx, ap.apiKey, loginPage)
	if err != nil {
		t.Fatal(err)
	}
	emailTok, pwTok := findToken(string(cat), "login", "email"), findToken(string(cat), "login", "password")
	if emailTok == "" || pwTok == "" {
		t.Fatalf("catalog (%d bytes) has no login tokens for the sign-in site", len(cat))
	}
	leak := newLeaks(newCanary("password", ap.login.password))
	const rounds = 25
	failed := 0
	for i := 0; i < rounds; i++ {
		s, err := ap.ctl.CreateSession(ctx, ap.apiKey)
		if err != nil {
			t.Fatal(err)
		}
		ps := proxySession{s: s}
		email, err := ap.ctl.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: emailTok, PageURL: loginPage})
		if err != nil {
			t.Fatalf("authorize email: %v", err)
		}
		pw, err := ap.ctl.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: pwTok, PageURL: loginPage})
		if err != nil {
			t.Fatalf("authorize password: %v", err)
		}
		if !pw.StandIn || pw.Value == ap.login.password || len(pw.Value) != len(ap.login.password) {
			t.Fatalf("password stand-in is not format-preserving (len %d vs %d)", len(pw.Value), len(ap.login.password))
		}
		c := ps.goClient(t)
		res, err := c.PostForm(ap.m.Login.URL+"/session", url.Values{"email": {email.Value}, "password": {pw.Value}})
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther || !strings.HasSuffix(res.Header.Get("Location"), "/account") {
			failed++
			classes := ""
			for _, r := range pw.Value {
				if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
					classes += url.QueryEscape(string(r)) + " "
				}
			}
			t.Errorf("round %d: sign-in answered %d (%s); stand-in symbols, encoded: %s", i, res.StatusCode, res.Header.Get("X-Agentvault-Code"), classes)
		}
		if ap.m.Login.Saw(pw.Value) {
			t.Errorf("round %d: the stand-in reached the site", i)
		}
		_, _ = ap.ctl.CloseSession(ctx, s.ID)
	}
	t.Logf("%d of %d sign-ins with fresh stand-ins failed", failed, rounds)
	leak.check(t, "proxyd logs", ap.logs.Bytes())
}
