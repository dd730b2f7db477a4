package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/owner/dashboard"
)

// fakeSigning plays proxyd's signing identity.
type fakeSigning struct {
	mu      sync.Mutex
	st      dashboard.SigningState
	classes []dashboard.SignedClass
	rotated int
}

func (f *fakeSigning) SigningState(context.Context) (dashboard.SigningState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.st
	st.Sites = append([]dashboard.SignedSite(nil), f.st.Sites...)
	return st, nil
}

func (f *fakeSigning) SignedClasses(context.Context, time.Time) ([]dashboard.SignedClass, error) {
	return f.classes, nil
}

func (f *fakeSigning) EnableSigning(_ context.Context, host string, tap []string) (dashboard.SignedSite, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if strings.ContainsAny(host, "/ ") {
		return dashboard.SignedSite{}, agentvault.Errorf(agentvault.CodeInvalidInput, "%q is not a host name", host)
	}
	s := dashboard.SignedSite{Host: strings.ToLower(host), TAP: tap, Owner: true}
	for i, x := range f.st.Sites {
		if x.Host == s.Host {
			f.st.Sites[i] = s
			return s, nil
		}
	}
	f.st.Sites = append(f.st.Sites, s)
	return s, nil
}

func (f *fakeSigning) DisableSigning(_ context.Context, host string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, x := range f.st.Sites {
		if x.Host == host {
			f.st.Sites = append(f.st.Sites[:i:i], f.st.Sites[i+1:]...)
			return nil
		}
	}
	return agentvault.Errorf(agentvault.CodeNotFound, "%s is not a site requests are signed for", host)
}

func (f *fakeSigning) RotateSigningKey(context.Context) (dashboard.Rotation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rotated++
	old := f.st.Keys[len(f.st.Keys)-1]
	retire := time.Date(2026, 11, 30, 10, 10, 0, 0, time.UTC)
	f.st.Keys[len(f.st.Keys)-1].Retire = retire
	f.st.Keys = append(f.st.Keys, dashboard.SigningKey{ID: "newkeythumbprint", Created: retire})
	return dashboard.Rotation{New: "newkeythumbprint", Old: old.ID, OldRetire: retire}, nil
}

// TestSigningPage: the Signed requests page shows the identity (on, the
// directory's address, the key in use), each site with its tags, and the
// audited classes; its forms need the page's CSRF token; choosing a site
// with Visa TAP uses and stopping it reach proxyd's side; a bad host comes
// back as a message; rotating needs the confirmation page's yes. Without
// the signing identity the routes answer 404.
func TestSigningPage(t *testing.T) {
	f := &fakeSigning{st: dashboard.SigningState{On: true, DirectoryURL: "https://agent.example/.well-known/http-message-signatures-directory",
		Window: 5 * time.Minute, KeepOld: 9 * time.Minute,
		Keys:  []dashboard.SigningKey{{ID: "oldkeythumbprint", Created: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}},
		Sites: []dashboard.SignedSite{{Host: "shop.example", TAP: []string{dashboard.TAPBrowse, dashboard.TAPPay}, Config: true}}},
		classes: []dashboard.SignedClass{{Session: "s_one", Site: "shop.example", Tag: "agent-payer-auth", Key: "k_agent", First: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), Requests: 3, Ended: true}}}
	e := newEnv(t, func(c *dashboard.Config) { c.Signing = f })
	e.signIn(ownerPW)
	code, body := e.get("/signing")
	if code != 200 {
		t.Fatalf("/signing: %d", code)
	}
	for _, want := range []string{"Signing is <strong>on</strong>", f.st.DirectoryURL, "oldkeythumbprint", "in use", "shop.example",
		"Visa TAP payment (agent-payer-auth)", "in proxyd's config", `href="/signing/rotate"`,
		"<td>shop.example</td><td>agent-payer-auth</td><td>3</td>", "s_one", `aria-current="page">Signed requests`} {
		if !strings.Contains(body, want) {
			t.Errorf("/signing lacks %q", want)
		}
	}

	// No token, no change.
	if code, _ := e.do(http.MethodPost, "/signing/sites", url.Values{"host": {"pay.example"}}); code != http.StatusForbidden {
		t.Fatalf("choosing a site without CSRF: %d", code)
	}
	code, body = e.post("/signing", "/signing/sites", url.Values{"host": {"pay.example"}, "tap": {"pay"}})
	if code != 200 || !strings.Contains(body, "Requests to pay.example and its subdomains are signed with Web Bot Auth (web-bot-auth) and Visa TAP payment (agent-payer-auth)") ||
		!strings.Contains(body, `action="/signing/sites/remove"`) {
		t.Fatalf("after choosing pay.example: %d", code)
	}
	if _, body = e.post("/signing", "/signing/sites", url.Values{"host": {"https://x.example/path"}}); !strings.Contains(body, "is not a host name") {
		t.Error("a bad host is not explained")
	}
	code, body = e.post("/signing", "/signing/sites/remove", url.Values{"host": {"pay.example"}})
	if code != 200 || !strings.Contains(body, "Requests to pay.example are no longer signed.") || len(f.st.Sites) != 1 {
		t.Fatalf("after stopping pay.example: %d, %d sites", code, len(f.st.Sites))
	}

	// Rotation: the confirmation page, and nothing without its yes.
	code, body = e.get("/signing/rotate")
	if code != 200 || !strings.Contains(body, "oldkeythumbprint") || !strings.Contains(body, "9m0s") {
		t.Fatalf("the rotation page: %d", code)
	}
	if code, _ := e.post("/signing/rotate", "/signing/rotate", url.Values{}); code != http.StatusBadRequest || f.rotated != 0 {
		t.Fatalf("rotation without the confirmation: %d, rotated %d", code, f.rotated)
	}
	code, body = e.post("/signing/rotate", "/signing/rotate", url.Values{"confirm": {"yes"}})
	if code != 200 || f.rotated != 1 || !strings.Contains(body, "Key newkeythumbprint signs from now. The old key oldkeythumbprint stays in the directory until 2026-11-30 10:10 UTC") {
		t.Fatalf("after rotation: %d, rotated %d", code, f.rotated)
	}
	if !strings.Contains(body, "rotated: listed until 2026-11-30 10:10 UTC") {
		t.Error("the old key is not shown as rotated")
	}

	bare := newEnv(t)
	bare.signIn(ownerPW)
	if code, _ := bare.get("/signing"); code != http.StatusNotFound {
		t.Errorf("/signing without the signing identity: %d", code)
	}
}
