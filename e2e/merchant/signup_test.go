package merchant

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The sign-up form refuses every password that breaks one of its stated
// rules, and a confirm field that differs, creating nothing; a good one
// makes an account that then signs in through /session.
func TestSignupEnforcesItsPasswordRules(t *testing.T) {
	m := start(t)
	c := client(t, m)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	post := func(email, pw, confirm string) (int, string) {
		t.Helper()
		res, err := c.PostForm(m.Login.URL+"/signup", url.Values{"email": {email}, "password": {pw}, "confirm_password": {confirm}})
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, body(t, res)
	}
	page := body(t, must200(t, c, m.Login.URL+"/signup"))
	for _, want := range []string{`id="signup-password"`, `id="signup-confirm"`, "14 to 20 characters", "! _ - ."} {
		if !strings.Contains(page, want) {
			t.Errorf("sign-up page lacks %q", want)
		}
	}
	const good = "Trail-Runner_2026x"
	for _, tc := range []struct{ name, pw, confirm, why string }{
		{"too short", "Tr-1a", "Tr-1a", "14 to 20"},
		{"too long", good + "abcdefgh", good + "abcdefgh", "14 to 20"},
		{"no upper case", strings.ToLower(good), strings.ToLower(good), "upper- and lower-case"},
		{"no digit", "Trail-Runner_abcd", "Trail-Runner_abcd", "a digit"},
		{"no symbol", "TrailRunner2026xy", "TrailRunner2026xy", "at least one of"},
		{"symbol outside the set", "Trail#Runner_2026", "Trail#Runner_2026", "no characters other"},
		{"triple repeat", "Traaail-Runner_26", "Traaail-Runner_26", "three times"},
		{"confirm differs", good, good + "y", "do not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, page := post("runner@example.org", tc.pw, tc.confirm)
			if code != http.StatusUnprocessableEntity || !strings.Contains(page, tc.why) {
				t.Errorf("answered %d; page names %q: %v", code, tc.why, strings.Contains(page, tc.why))
			}
		})
	}
	if len(m.SignedUp()) != 0 || m.RefusedSignups() != 8 {
		t.Fatalf("after weak passwords: %d accounts, %d refusals", len(m.SignedUp()), m.RefusedSignups())
	}
	if code, _ := post("runner@example.org", good, good); code != http.StatusSeeOther {
		t.Fatalf("good password: %d", code)
	}
	if got := m.SignedUp(); len(got) != 1 || got[0] != "runner@example.org" || !m.AccountPasswordIs("runner@example.org", good) || m.AccountPasswordIs("runner@example.org", good+"x") {
		t.Fatalf("the account was not stored with its password: %v", got)
	}
	if code, _ := post("Runner@example.org", good, good); code != http.StatusConflict {
		t.Errorf("same email again: %d, want 409", code)
	}
	res, err := client(t, m).PostForm(m.Login.URL+"/session", url.Values{"email": {"runner@example.org"}, "password": {good}})
	if err != nil {
		t.Fatal(err)
	}
	if page := body(t, res); !strings.Contains(page, `id="account"`) {
		t.Errorf("signing in with the new account did not reach the account page (%d)", res.StatusCode)
	}
}

func must200(t *testing.T, c *http.Client, u string) *http.Response {
	t.Helper()
	res, err := c.Get(u)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %v", u, res, err)
	}
	return res
}
