package broker

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

// loginVault holds one login, for the TOTP capture's rules.
type loginVault struct{ login vault.Item }

func (v loginVault) List(context.Context, string) ([]vault.Item, error) {
	return []vault.Item{v.login}, nil
}

func (v loginVault) GetByLabel(_ context.Context, _ string, k vault.Kind, label string) (vault.Item, error) {
	if k == vault.KindLogin && label == v.login.Label {
		return v.login, nil
	}
	return vault.Item{}, vault.ErrNotFound
}

func (v loginVault) Release(context.Context, ReleaseArgs) (vault.Secret, error) {
	return vault.Secret{}, vault.ErrNotFound
}

// refuseFills refuses every fill: the capture's rules need none.
type refuseFills struct{}

func (refuseFills) Authorize(context.Context, policy.Fill) error {
	return agentvault.Errorf(agentvault.CodeScopeDenied, "no fills in this test")
}
func (refuseFills) Recheck(context.Context, policy.Fill) error {
	return agentvault.Errorf(agentvault.CodeScopeDenied, "no fills in this test")
}

// signedInSession is a broker on a clock, and a session that released the
// login's password.
func signedInSession(t *testing.T) (*Broker, *Session, *time.Time) {
	t.Helper()
	login := vault.Item{ID: "itm_l", Org: "org1", Kind: vault.KindLogin, Label: "trail",
		Fields: []vault.Field{vault.FieldPassword}, Login: &vault.LoginMeta{Site: "example.com"}}
	now := time.Now()
	b, err := New(Config{Vault: loginVault{login}, Authorizer: refuseFills{}, Now: func() time.Time { return now },
		LookupKey: func(context.Context, string) (APIKey, error) {
			return APIKey{ID: "key1", Org: "org1", Suffix: "t3st1", Scope: policy.KeyScope{AllCards: true, AllLogins: true}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := b.Create(context.Background(), "avk")
	if err != nil {
		t.Fatal(err)
	}
	s.markSignedIn(login.ID)
	return b, s, &now
}

// docRequest is the GET the browser sends for raw (fragment dropped).
func docRequest(t *testing.T, raw string) TOTPRequest {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	o, err := hostname.Parse(u.Host, 443)
	if err != nil {
		t.Fatal(err)
	}
	return TOTPRequest{Method: "GET", Origin: o, Path: u.EscapedPath(), RawQuery: u.RawQuery}
}

const (
	enrolPage = "https://login.example.com/account/2fa?step=key"
	siteSeed  = "MFRGGZDFMZTWQ2LKNNWG23TPOBYXE43U" // what the site issued
)

var siteFound = TOTPFound{OK: true, Value: siteSeed, Key: siteSeed}

// TestP24_TOTPCaptureReadsOnlyTheDeclaredPage: a capture is bound to the
// URL the hint was declared on. A document from another path, another
// query, another host or port of the same site, or a non-GET, is not read
// and leaves the capture armed; the answer to the declared URL is read
// (its fragment never reaches the server); the capture ends at its expiry.
func TestP24_TOTPCaptureReadsOnlyTheDeclaredPage(t *testing.T) {
	ctx := context.Background()
	b, s, now := signedInSession(t)
	id, err := b.ArmTOTPCapture(ctx, s, "trail", enrolPage+"#scan", TOTPLocator{ID: "totp-secret"})
	if err != nil {
		t.Fatal(err)
	}
	post := docRequest(t, enrolPage)
	post.Method = "POST"
	for name, r := range map[string]TOTPRequest{
		"another path":         docRequest(t, "https://login.example.com/search?step=key"),
		"another query":        docRequest(t, "https://login.example.com/account/2fa?step=key&q=x"),
		"no query":             docRequest(t, "https://login.example.com/account/2fa"),
		"another host of site": docRequest(t, "https://www.example.com/account/2fa?step=key"),
		"another port":         docRequest(t, "https://login.example.com:8443/account/2fa?step=key"),
		"a POST":               post,
	} {
		if _, ok := b.TOTPCaptureFor(s, r); ok {
			t.Errorf("%s: the capture would read it", name)
		}
		if b.CaptureTOTP(s, r, siteFound) {
			t.Errorf("%s: the seed was taken", name)
		}
	}
	// Still armed: the declared page is read, host spelled any way.
	r := docRequest(t, "https://LOGIN.example.com.:443/account/2fa?step=key")
	if loc, ok := b.TOTPCaptureFor(s, r); !ok || loc.ID != "totp-secret" {
		t.Fatalf("the declared page is not read after other documents (%v, %+v)", ok, loc)
	}
	if !b.CaptureTOTP(s, r, siteFound) {
		t.Fatal("the declared page's seed was not taken")
	}
	got, err := b.TakeTOTPCapture(ctx, s, id, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Seed.InsecureRawBytes()) != siteSeed || got.Site != "login.example.com" || got.Page != enrolPage+"#scan" || got.Item.Label != "trail" {
		t.Fatalf("took site %q page %q item %q, or the wrong seed", got.Site, got.Page, got.Item.Label)
	}

	// Past its expiry the capture reads nothing.
	id, err = b.ArmTOTPCapture(ctx, s, "trail", enrolPage, TOTPLocator{ID: "totp-secret"})
	if err != nil {
		t.Fatal(err)
	}
	*now = now.Add(totpCaptureTTL + time.Second)
	if _, ok := b.TOTPCaptureFor(s, docRequest(t, enrolPage)); ok || b.CaptureTOTP(s, docRequest(t, enrolPage), siteFound) {
		t.Fatal("an expired capture read the page")
	}
	if _, err := b.TakeTOTPCapture(ctx, s, id, time.Millisecond); agentvault.ErrorCode(err) != agentvault.CodeHintUnresolved {
		t.Fatalf("take of an expired capture: %v", err)
	}

	// Only an https page the proxy carries can be declared.
	for _, bad := range []string{"http://login.example.com/2fa", "https://user@login.example.com/2fa", "/account/2fa"} {
		if _, err := b.ArmTOTPCapture(ctx, s, "trail", bad, TOTPLocator{ID: "x"}); err == nil {
			t.Errorf("armed on %q", bad)
		}
	}
}

// TestP24_TOTPCaptureRefusesAReflectedSeed: a seed the page could have
// built from what its own request carried (the agent chose it) is refused
// with totp_seed_untrusted and nothing is taken, however the text came:
// the query (plain, percent-encoded twice, grouped in lower case, split
// across parameters, wrapped in the page's own words), the path, a body,
// the Referer, a cookie, or the armed URL's fragment.
func TestP24_TOTPCaptureRefusesAReflectedSeed(t *testing.T) {
	ctx := context.Background()
	const agent = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP" // the agent's own seed
	grouped := "jbsw-y3dp ehpk-3pxp jbsw y3dp ehpk 3pxp"
	base := "https://login.example.com/search"
	cases := []struct {
		name  string
		page  string // declared, and requested
		key   string // the seed the page shows
		tweak func(*TOTPRequest)
	}{
		{"query", base + "?q=" + agent, agent, nil},
		{"query grouped, lower case, encoded twice", base + "?q=" + url.QueryEscape(url.QueryEscape(grouped)), agent, nil},
		{"query split across parameters", base + "?a=JBSWY3DPEHPK&b=3PXPJBSWY3DPEHPK3PXP", agent, nil},
		{"the page's words around the agent's", base + "?q=" + agent[:16], "RESULTSFOR" + agent[:16], nil},
		{"path", "https://login.example.com/u/" + agent + "/2fa", agent, nil},
		{"armed URL fragment", enrolPage + "#" + agent, agent, nil},
		{"body", enrolPage, agent, func(r *TOTPRequest) { r.Body = []byte("q=" + url.QueryEscape(grouped)) }},
		{"referer", enrolPage, agent, func(r *TOTPRequest) { r.Referer = base + "?q=" + agent }},
		{"cookie set by a page script", enrolPage, agent, func(r *TOTPRequest) {
			r.Cookie = "sid=4f1c; note=" + url.QueryEscape(grouped)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, s, _ := signedInSession(t)
			id, err := b.ArmTOTPCapture(ctx, s, "trail", tc.page, TOTPLocator{Tag: "code"})
			if err != nil {
				t.Fatal(err)
			}
			r := docRequest(t, tc.page)
			if tc.tweak != nil {
				tc.tweak(&r)
			}
			if _, ok := b.TOTPCaptureFor(s, r); !ok {
				t.Fatal("the declared page is not read")
			}
			if b.CaptureTOTP(s, r, TOTPFound{OK: true, Value: strings.ToLower(tc.key), Key: tc.key}) {
				t.Fatal("a reflected seed was taken (and would be masked as the site's)")
			}
			got, err := b.TakeTOTPCapture(ctx, s, id, time.Second)
			if agentvault.ErrorCode(err) != agentvault.CodeTOTPSeedUntrusted || !got.Seed.IsZero() {
				t.Fatalf("take: %v (seed handed over: %v)", err, !got.Seed.IsZero())
			}
			if strings.Contains(agentvault.ErrorMessage(err), agent) {
				t.Fatal("the refusal quotes the seed")
			}
		})
	}
	// The site's own seed on the same pages, with the same cookies and
	// Referer, is taken.
	b, s, _ := signedInSession(t)
	id, err := b.ArmTOTPCapture(ctx, s, "trail", enrolPage, TOTPLocator{Tag: "code"})
	if err != nil {
		t.Fatal(err)
	}
	r := docRequest(t, enrolPage)
	r.Referer, r.Cookie = "https://login.example.com/account", "sid=4f1cQ2VZ7KXW; theme=dark"
	if !b.CaptureTOTP(s, r, siteFound) {
		t.Fatal("the site's seed was refused")
	}
	if _, err := b.TakeTOTPCapture(ctx, s, id, time.Second); err != nil {
		t.Fatal(err)
	}
}
