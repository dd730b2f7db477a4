package merchant

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

var challengeRe = regexp.MustCompile(`name="challenge" value="([0-9a-f]+)"`)

// solve answers the page's challenge the way the test solver does, with
// the answer the site hands out, and returns the pass.
func solve(t *testing.T, c *http.Client, m *Merchant, page string) (challenge, pass string) {
	t.Helper()
	mm := challengeRe.FindStringSubmatch(page)
	if mm == nil {
		t.Fatal("no challenge on the page")
	}
	ans, ok := m.OpenCaptchaAnswer()
	if !ok || strings.Contains(page, ans) {
		t.Fatalf("open challenge: %v; the page must not hold its answer", ok)
	}
	post := func(a string) *http.Response {
		b, _ := json.Marshal(map[string]string{"challenge": mm[1], "answer": a})
		res, err := c.Post(m.Login.URL+"/api/captcha", "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := post("WRONG"); res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("a wrong answer: %d", res.StatusCode)
	}
	res := post(strings.ToLower(ans))
	var out struct{ Pass string }
	if err := json.Unmarshal([]byte(body(t, res)), &out); err != nil || res.StatusCode != http.StatusOK || out.Pass == "" {
		t.Fatalf("right answer: %d %v", res.StatusCode, err)
	}
	if again, open := m.OpenCaptchaAnswer(); open && again == ans {
		t.Fatal("the solved challenge is still open")
	}
	return mm[1], out.Pass
}

func noRedirects(c *http.Client) *http.Client {
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// A challenge before the submit: /session refuses a submit without the
// challenge's pass (nothing about the password is checked), takes it once
// solved, and never twice.
func TestBrowserLoginSiteCaptchaBeforeSubmit(t *testing.T) {
	m := start(t)
	m.AddAccount("grace@example.org", "right-one", "Grace")
	c := noRedirects(client(t, m))
	page := body(t, must200(t, c, m.Login.URL+"/login?captcha=before"))
	if !strings.Contains(page, `id="captcha"`) || !strings.Contains(page, `name="captcha" value="before"`) {
		t.Fatal("no challenge on /login?captcha=before")
	}
	form := url.Values{"email": {"grace@example.org"}, "password": {"right-one"}, "captcha": {"before"}}
	form.Set("challenge", challengeRe.FindStringSubmatch(page)[1])
	res, err := c.PostForm(m.Login.URL+"/session", form)
	if err != nil {
		t.Fatal(err)
	}
	// The refusal shows a fresh challenge, the one to solve.
	if page = body(t, res); res.StatusCode != http.StatusBadRequest || !strings.Contains(page, "Complete the security check") {
		t.Fatalf("submit before the challenge is solved: %d", res.StatusCode)
	}
	challenge, pass := solve(t, c, m, page)
	form.Set("challenge", challenge)
	form.Set("captcha_pass", pass)
	if res, err = c.PostForm(m.Login.URL+"/session", form); err != nil || res.StatusCode != http.StatusSeeOther {
		t.Fatalf("submit with the pass: %v %v", res, err)
	}
	if res, err = c.PostForm(m.Login.URL+"/session", form); err != nil || res.StatusCode != http.StatusBadRequest {
		t.Fatalf("the pass twice: %v %v", res, err)
	}
	if m.SessionsStarted("grace@example.org") != 1 || m.SignInAttempts("grace@example.org") != 3 || m.CaptchasSolved() != 1 {
		t.Fatalf("sessions %d, attempts %d, solved %d", m.SessionsStarted("grace@example.org"), m.SignInAttempts("grace@example.org"), m.CaptchasSolved())
	}
}

// A challenge after good credentials: no session until it is solved; a
// wrong password is refused as usual, with no challenge.
func TestBrowserLoginSiteCaptchaAfterSubmit(t *testing.T) {
	m := start(t)
	m.AddAccount("grace@example.org", "right-one", "Grace")
	c := noRedirects(client(t, m))
	if p := body(t, must200(t, c, m.Login.URL+"/login?captcha=after")); !strings.Contains(p, `name="captcha" value="after"`) || strings.Contains(p, `id="captcha"`) {
		t.Fatal("/login?captcha=after: a challenge before the submit, or no mark")
	}
	form := url.Values{"email": {"grace@example.org"}, "password": {"wrong"}, "captcha": {"after"}}
	res, err := c.PostForm(m.Login.URL+"/session", form)
	if err != nil || res.StatusCode != http.StatusUnauthorized || strings.Contains(body(t, res), `id="captcha"`) {
		t.Fatalf("wrong password: %v %v", res, err)
	}
	form.Set("password", "right-one")
	if res, err = c.PostForm(m.Login.URL+"/session", form); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("good credentials: %v %v", res, err)
	}
	page := body(t, res)
	if !strings.Contains(page, "One more check") || m.SessionsStarted("grace@example.org") != 0 {
		t.Fatal("no challenge after good credentials, or a session before it")
	}
	challenge, pass := solve(t, c, m, page)
	res, err = c.PostForm(m.Login.URL+"/session/captcha", url.Values{"challenge": {challenge}, "captcha_pass": {pass}})
	if err != nil || res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/account" {
		t.Fatalf("after the challenge: %v %v", res, err)
	}
	if m.SessionsStarted("grace@example.org") != 1 {
		t.Fatal("no session after the challenge")
	}
}

// A hung account's sign-in reaches the site and gets no answer; closing
// the merchant ends it.
func TestBrowserLoginSiteHungSignIn(t *testing.T) {
	m, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.AddAccount("slow@example.org", "right-one", "Slow")
	m.HangSignIns("slow@example.org")
	c := client(t, m)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, m.Login.URL+"/session",
			strings.NewReader(url.Values{"email": {"slow@example.org"}, "password": {"right-one"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		res, err := c.Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for m.SignInAttempts("slow@example.org") == 0 {
		select {
		case err := <-done:
			t.Fatalf("the hung sign-in answered: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("waited 30s for the sign-in to reach the site")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("the hung sign-in answered: %v", err)
	default:
	}
	m.Close()
	if err := <-done; err == nil {
		t.Fatal("a hung sign-in got an answer when the merchant closed")
	}
	if m.SessionsStarted("slow@example.org") != 0 {
		t.Fatal("a hung sign-in started a session")
	}
}
