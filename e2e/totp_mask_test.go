package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/internal/leakcheck"
	"github.com/mxschmitt/playwright-go"
)

// totpMask is what proxyd puts where an enrolment page showed the seed
// (broker.TOTPMask).
const totpMask = "[stored in vault]"

// TestP23_TOTPEnrolmentSecretMaskedInChromium looks at the enrolment page
// the way every agent-facing view would, in a real Chromium going through
// proxyd with a session of its own: signed in with the login's stand-ins,
// a login.totp_secret capture armed on the control API (as
// declare_page_hint does), then the page loaded. The seed the site issued
// is stored, and what Chromium holds of the page (the DOM with every
// attribute, the rendered text a screenshot paints, the accessibility tree
// snapshot_page is built from) shows the mask where the seed was, in the
// key's text and in the otpauth:// URI alike, and no form of the seed.
func TestP23_TOTPEnrolmentSecretMaskedInChromium(t *testing.T) {
	requireE2E(t, true)
	ap := startAppliance(t)
	ctx := context.Background()
	loginURL := ap.m.Login.URL + "/login"
	cat, err := ap.ctl.Catalog(ctx, ap.apiKey, loginURL)
	if err != nil {
		t.Fatal(err)
	}
	emailTok, pwTok := findToken(string(cat), "login", "email"), findToken(string(cat), "login", "password")
	if emailTok == "" || pwTok == "" {
		t.Fatal("no login tokens for the sign-in site")
	}
	label := strings.TrimSuffix(strings.TrimPrefix(emailTok, "av_login_"), emailTok[strings.LastIndex(emailTok, "_email_"):])
	s, err := ap.ctl.CreateSession(ctx, ap.apiKey)
	if err != nil {
		t.Fatal(err)
	}
	ps := proxySession{s: s}
	email, err := ap.ctl.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: emailTok, PageURL: loginURL})
	if err != nil {
		t.Fatal(err)
	}
	pw, err := ap.ctl.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: pwTok, PageURL: loginURL})
	if err != nil || !pw.StandIn {
		t.Fatalf("password authorize: stand-in %v, %v", pw.StandIn, err)
	}
	pu := ps.proxyURL(t)
	pu.User = nil
	b := chromium(t, []string{s.CASPKI}, &playwright.Proxy{Server: pu.String(),
		Username: playwright.String(s.ProxyUser), Password: playwright.String(s.ProxyPassword), Bypass: playwright.String("<-loopback>")})
	page, err := b.NewPage()
	must(t, "new page", err)
	wait := playwright.LocatorWaitForOptions{Timeout: playwright.Float(15000)}
	_, err = page.Goto(loginURL)
	must(t, "open the sign-in page through proxyd", err)
	must(t, "email", page.Locator("input[type=email]").Fill(email.Value))
	must(t, "continue", page.Locator("#continue").Click())
	must(t, "password step", page.Locator("input[type=password]").WaitFor(wait))
	must(t, "password", page.Locator("input[type=password]").Fill(pw.Value))
	must(t, "sign in", page.Locator("#sign-in").Click())
	must(t, "account page", page.Locator("#account").WaitFor(wait))

	armed, err := ap.ctl.ArmTOTPCapture(ctx, control.TOTPArmIn{Session: s.ID, Label: label, PageURL: ap.m.Login.URL + "/account/2fa",
		Locator: control.TOTPLocator{ID: "totp-secret"}})
	if err != nil {
		t.Fatalf("arm the capture: %v", err)
	}
	_, err = page.Goto(ap.m.Login.URL + "/account/2fa")
	must(t, "open the enrolment page", err)
	took, err := ap.ctl.TakeTOTPCapture(ctx, control.TOTPTakeIn{Session: s.ID, CaptureID: armed.CaptureID, TimeoutMs: 15000})
	if err != nil || !took.Stored {
		t.Fatalf("take the capture: stored %v, %v", took.Stored, err)
	}
	issued := ap.m.IssuedTOTPSecrets()
	if len(issued) != 1 {
		t.Fatalf("the site issued %d secrets, want 1", len(issued))
	}
	secret := issued[0]

	html, err := page.Content()
	must(t, "DOM", err)
	text, err := page.Locator("body").InnerText()
	must(t, "rendered text", err)
	tree, err := page.Locator("body").AriaSnapshot()
	must(t, "accessibility tree", err)
	key, err := page.Locator("#totp-secret").InnerText()
	must(t, "the key's element", err)
	uri, err := page.Locator("#qr").GetAttribute("data-otpauth")
	must(t, "the QR code's URI", err)
	if strings.TrimSpace(key) != totpMask || !strings.Contains(uri, totpMask) || !strings.Contains(text, totpMask) {
		t.Errorf("the page does not show the mask where the seed was (key masked %v, URI masked %v)", strings.TrimSpace(key) == totpMask, strings.Contains(uri, totpMask))
	}
	// The seed's forms: as issued, grouped in fours as the page shows it,
	// lower case, and its first half (a partial leak is a leak).
	var groups []string
	for i := 0; i < len(secret); i += 4 {
		groups = append(groups, secret[i:min(i+4, len(secret))])
	}
	l := leakcheck.New(leakcheck.Value("totp seed", secret), leakcheck.Value("grouped totp seed", strings.Join(groups, " ")),
		leakcheck.Value("lower-case totp seed", strings.ToLower(secret)), leakcheck.Value("half the totp seed", secret[:len(secret)/2]))
	l.Text(t, "Chromium's DOM", []byte(html))
	l.Text(t, "Chromium's rendered text", []byte(text))
	l.Text(t, "Chromium's accessibility tree", []byte(tree))
	l.Logs(t, "proxyd logs", ap.logs.Bytes())
	l.Metrics(t, "proxyd metrics", ap.metrics(t))
	if _, err := ap.ctl.CloseSession(ctx, s.ID); err != nil {
		t.Errorf("close the session: %v", err)
	}
}
