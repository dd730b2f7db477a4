package browser_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/agentvault/agentvault/browser"
	"github.com/agentvault/agentvault/browser/browsertest"
)

func TestDetectChallengeShapes(t *testing.T) {
	site := browsertest.Start(t)
	b := browsertest.Launch(t, site)
	s, err := b.NewSession(browser.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cases := []struct {
		path      string
		types     []string
		weak      bool
		delivered bool
		signature string
	}{
		{"/c/3ds", []string{"three_ds"}, false, false, ""},
		{"/c/captcha", []string{"captcha"}, false, false, ""},
		{"/c/otp", []string{"otp"}, false, true, ""},
		{"/c/maybe", []string{"otp"}, true, false, ""},
		{"/c/blocked", []string{"blocked"}, false, false, "error_reference"},
		{"/c/plain", nil, false, false, ""},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			if err := s.Goto(site.Shop.URL+c.path, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			got, err := s.DetectChallenge()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Types, c.types) || got.OTPWeak != c.weak || got.DeliveredCode != c.delivered || got.Signature != c.signature || got.Incomplete {
				t.Fatalf("got %+v", got)
			}
		})
	}
	// observe_page's code-sent signal on the same OTP page.
	if err := s.Goto(site.Shop.URL+"/c/otp", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	sig, err := s.Observe()
	if err != nil || !sig.CodeSent || sig.PasswordField {
		t.Fatalf("observe on the otp page: %+v %v", sig, err)
	}
}

// TestDetectChallengeSearchSignatures (seed 004): a search that came back
// to its own page with a generic error is blocked/search_bounce; a search
// whose results still spin well after the page loaded is
// blocked/stalled_search (not before); the plain search page is neither.
func TestDetectChallengeSearchSignatures(t *testing.T) {
	site := browsertest.Start(t)
	b := browsertest.Launch(t, site)
	s, err := b.NewSession(browser.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	detect := func() browser.Challenge {
		t.Helper()
		c, err := s.DetectChallenge()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if err := s.Goto(site.Shop.URL+"/c/search", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if c := detect(); len(c.Types) != 0 || c.Signature != "" {
		t.Fatalf("the plain search page: %+v", c)
	}
	if _, err := s.Click(browser.Target{Selector: "#go"}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor(browser.Target{Selector: "[role=alert]"}, "", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if c := detect(); !reflect.DeepEqual(c.Types, []string{"blocked"}) || c.Signature != "search_bounce" {
		t.Fatalf("a search bounced back with an error: %+v", c)
	}

	if err := s.Goto(site.Shop.URL+"/c/stalled?q=opera", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if c := detect(); len(c.Types) != 0 {
		t.Fatalf("a search spinning just after load is not stalled yet: %+v", c)
	}
	// The page counts as stalled 4 s after it loaded; wait for the
	// detector to say so, with room for a busy machine.
	var c browser.Challenge
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if c = detect(); len(c.Types) > 0 {
			break
		}
	}
	if !reflect.DeepEqual(c.Types, []string{"blocked"}) || c.Signature != "stalled_search" {
		t.Fatalf("a search that never loads: %+v", c)
	}
}
