package e2e

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/internal/leakcheck"
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
	leak := leakcheck.New(leakcheck.Value("password", ap.login.password))
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
	leak.Logs(t, "proxyd logs", ap.logs.Bytes())
}

// TestP2_SiteScopedCardStaysOnItsSites uses a card the owner allowed on the
// shop and its processor only (named hosts, real vault scope): authorizing
// it for the sign-in site is refused, and its stand-in, authorized for the
// processor, is refused on the way to the sign-in site and never arrives.
func TestP2_SiteScopedCardStaysOnItsSites(t *testing.T) {
	requireE2E(t, false)
	ap := startWiredAppliance(t)
	ps := ap.cardSession(t)
	ctx := context.Background()

	_, err := ap.ctl.Authorize(ctx, ps.s.ID, control.AuthorizeRequest{Token: ps.numberToken, PageURL: ap.m.Login.URL + "/login"})
	if code := codeFromText(errString(err)); code != "scope_denied" {
		t.Errorf("authorizing the card for a site outside its scope: code %q, want scope_denied", code)
	}

	before := len(ap.m.Login.Requests())
	res, err := ps.goClient(t).Post(ap.m.Login.URL+"/echo", "application/json",
		strings.NewReader(`{"card":"`+ps.numberStandIn+`"}`))
	code, _ := refusal(t, res, err)
	if code == "" {
		t.Error("the stand-in was forwarded to a host outside the card's scope")
	}
	if len(ap.m.Login.Requests()) != before || ap.m.Login.Saw(ap.card.number) || ap.m.Login.Saw(ps.numberStandIn) {
		t.Error("the sign-in site received a request carrying the card")
	}

	// The processor still gets it, in JSON this time.
	res, err = ps.goClient(t).Post(ap.m.Pay.URL+"/echo", "application/json",
		strings.NewReader(`{"card":"`+ps.numberStandIn+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !ap.m.Pay.Saw(ap.card.number) {
		t.Error("the processor did not receive the real number in JSON")
	}
	leakcheck.New(leakcheck.Value("card number", ap.card.number)).Text(t, "echoed JSON response", body)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return "code=" + string(agentvault.ErrorCode(err))
}
