package intercept_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentvault/agentvault/broker"

	"github.com/agentvault/agentvault"
)

// luhnCandidates lists every Luhn-valid 16-digit number with the given
// first six and last four digits: the page an attacker would build to
// find the card by watching which line the scrubber changes.
func luhnCandidates(first6, last4 string) []string {
	var out []string
	for mid := 0; mid < 1000000; mid++ {
		n := first6 + fmt.Sprintf("%06d", mid) + last4
		sum := 0
		for i := 0; i < 16; i++ {
			d := int(n[15-i] - '0')
			if i%2 == 1 {
				d *= 2
				if d > 9 {
					d -= 9
				}
			}
			sum += d
		}
		if sum%10 == 0 {
			out = append(out, n)
		}
	}
	return out
}

// TestP10_NoScrubbingOracle: a page from a host that was never sent the
// card lists all 100,000 candidates; it comes back byte for byte, so it
// tells nothing. The same page from the host the card went to is scrubbed
// (that host knows the card already).
func TestP10_NoScrubbingOracle(t *testing.T) {
	const number = "4242424242424242"
	cands := luhnCandidates(number[:6], number[12:])
	if len(cands) != 100000 {
		t.Fatalf("%d candidates", len(cands))
	}
	page := []byte(strings.Join(cands, "\n"))
	e := startProxy(t, nil)
	up := startUpstream(t, e.upCA, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			_, _ = io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Candidates", number) // a header is an oracle too
		_, _ = w.Write(page)
	})
	e.addCard("1", number, "737")
	s, pw := e.session()
	a, err := e.authorize(s, tok("card", "1", "number"), hostURL(up, "shop.test", "/pay"))
	if err != nil {
		t.Fatal(err)
	}
	get := func(host string) (*http.Response, []byte) {
		resp, err := e.rawClient(s, pw, false).Get(hostURL(up, host, "/candidates"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	// Authorized, but not yet sent: the shop is no recipient yet either.
	for _, host := range []string{"evil.test", "shop.test"} {
		resp, b := get(host)
		if string(b) != string(page) || resp.Header.Get("X-Candidates") != number {
			t.Fatalf("%s was never sent the card, yet its page came back changed", host)
		}
	}
	resp, err := e.rawClient(s, pw, false).Post(hostURL(up, "shop.test", "/pay"), "application/x-www-form-urlencoded", strings.NewReader("cc="+a.Value))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if up.last().Body == nil || !strings.Contains(string(up.last().Body), number) {
		t.Fatal("the shop did not get the card")
	}
	if resp, b := get("evil.test"); string(b) != string(page) || resp.Header.Get("X-Candidates") != number {
		t.Fatal("evil.test was never sent the card, yet its page came back changed: a scrubbing oracle")
	}
	resp, b := get("shop.test")
	if strings.Contains(string(b), number) || resp.Header.Get("X-Candidates") == number {
		t.Fatal("the shop was sent the card and got it back whole")
	}
	if !strings.Contains(string(b), a.Value) {
		t.Fatal("the shop's echo was not replaced by the stand-in")
	}
}

// TestP21_PortIsInTheGrant: a card authorized for https://shop.test:<a>
// is refused on shop.test:<b>, with nothing sent.
func TestP21_PortIsInTheGrant(t *testing.T) {
	e := startProxy(t, nil)
	good := startUpstream(t, e.upCA, nil)
	other := startUpstream(t, e.upCA, nil)
	e.addCard("1", "4242424242424242", "737", "shop.test")
	s, pw := e.session()
	a, err := e.authorize(s, tok("card", "1", "number"), hostURL(good, "shop.test", "/checkout"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.rawClient(s, pw, false).Post(hostURL(other, "shop.test", "/pay"), "application/x-www-form-urlencoded", strings.NewReader("cc="+a.Value))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if codeOf(resp) != string(agentvault.CodeDestinationUnauthorized) || other.count() != 0 {
		t.Fatalf("another port: code %q, upstream reached %v", codeOf(resp), other.count() != 0)
	}
	resp, err = e.rawClient(s, pw, false).Post(hostURL(good, "shop.test", "/pay"), "application/x-www-form-urlencoded", strings.NewReader("cc="+a.Value))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if codeOf(resp) != "" || !strings.Contains(string(good.last().Body), "4242424242424242") {
		t.Fatalf("the authorized origin: %q", codeOf(resp))
	}
}

// fakeClock is a settable clock for grants and session limits.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time            { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) add(d time.Duration)       { c.ns.Add(int64(d)) }
func newClock() *fakeClock                     { c := &fakeClock{}; c.ns.Store(time.Now().UnixNano()); return c }
func (c *fakeClock) install(bc *broker.Config) { bc.Now = c.now }

// TestP21_GrantsExpireAndFailedAttemptsRetry: a declined payment may be
// retried on the same grant; the grant ends at its expiry.
func TestP21_GrantsExpireAndFailedAttemptsRetry(t *testing.T) {
	clock := newClock()
	e := startProxyWith(t, func(c *broker.Config) {
		clock.install(c)
		c.GrantTTL = 2 * time.Minute
	}, nil)
	var decline atomic.Bool
	decline.Store(true)
	up := startUpstream(t, e.upCA, func(w http.ResponseWriter, r *http.Request) {
		if decline.Load() {
			w.WriteHeader(http.StatusPaymentRequired)
		}
	})
	e.addCard("1", "4242424242424242", "737", "shop.test")
	s, pw := e.session()
	a, err := e.authorize(s, tok("card", "1", "cvv"), hostURL(up, "shop.test", "/pay"))
	if err != nil {
		t.Fatal(err)
	}
	pay := func() string {
		resp, err := e.rawClient(s, pw, false).Post(hostURL(up, "shop.test", "/pay"), "application/x-www-form-urlencoded", strings.NewReader("cvc="+a.Value))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return codeOf(resp)
	}
	for i := 0; i < 2; i++ {
		if c := pay(); c != "" {
			t.Fatalf("declined attempt %d refused by the proxy: %s", i, c)
		}
	}
	clock.add(3 * time.Minute)
	n := up.count()
	if c := pay(); c != string(agentvault.CodeGrantExpired) || up.count() != n {
		t.Fatalf("expired grant: code %q", c)
	}
	if _, err := e.authorize(s, tok("card", "1", "cvv"), hostURL(up, "shop.test", "/pay")); err != nil {
		t.Fatal(err)
	}
	decline.Store(false)
	if c := pay(); c != "" {
		t.Fatalf("renewed grant refused: %s", c)
	}
	if c := pay(); c != string(agentvault.CodeGrantUsed) {
		t.Fatalf("accepted purchase did not spend the grant: %q", c)
	}
}

// TestP21_SessionLimits: a session ends when idle or old, and one key may
// hold only so many.
func TestP21_SessionLimits(t *testing.T) {
	clock := newClock()
	e := startProxyWith(t, func(c *broker.Config) {
		clock.install(c)
		c.SessionIdle, c.SessionMaxAge, c.MaxSessionsPerKey = time.Minute, 10*time.Minute, 3
	}, nil)
	e.addCard("1", "4242424242424242", "737", "shop.test")
	idle, _ := e.session()
	clock.add(2 * time.Minute)
	if _, err := e.authorize(idle, tok("card", "1", "number"), "https://shop.test/pay"); agentvault.ErrorCode(err) != agentvault.CodeSessionEnded {
		t.Fatalf("idle session still authorizes: %v", err)
	}
	old, _ := e.session()
	for i := 0; i < 11; i++ {
		clock.add(55 * time.Second)
		if _, err := e.authorize(old, tok("card", "1", "number"), "https://shop.test/pay"); err != nil && i < 9 {
			t.Fatalf("busy young session refused at %d: %v", i, err)
		}
	}
	if !old.Closed() {
		t.Fatal("a session past its age limit is still open")
	}
	for i := 0; i < 3; i++ {
		if _, _, err := e.sessions.Create(context.Background(), "avk_test"); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := e.sessions.Create(context.Background(), "avk_test"); agentvault.ErrorCode(err) != agentvault.CodeTooManySessions {
		t.Fatalf("fourth session of a key capped at 3: %v", err)
	}
}

// TestP9_GroupedCardNumberSubstituted: a card field that shows the number
// in groups posts it that way; the site gets the real number grouped alike.
func TestP9_GroupedCardNumberSubstituted(t *testing.T) {
	e := startProxy(t, nil)
	up := startUpstream(t, e.upCA, nil)
	const number = "4242424242424242"
	e.addCard("1", number, "737", "shop.test")
	s, pw := e.session()
	for _, sep := range []string{" ", "-"} {
		a, err := e.authorize(s, tok("card", "1", "number"), hostURL(up, "shop.test", "/pay"))
		if err != nil {
			t.Fatal(err)
		}
		grouped := func(n string) string { return n[:4] + sep + n[4:8] + sep + n[8:12] + sep + n[12:] }
		body := `{"number":"` + grouped(a.Value) + `"}`
		resp, err := e.rawClient(s, pw, false).Post(hostURL(up, "shop.test", "/sessions"), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if codeOf(resp) != "" || string(up.last().Body) != `{"number":"`+grouped(number)+`"}` {
			t.Fatalf("grouped by %q: code %q", sep, codeOf(resp))
		}
	}
}

// TestP4_RedirectReadAsTheBrowserReadsIt: a Location with leading white
// space or a tab inside its scheme is still a redirect to plain http.
func TestP4_RedirectReadAsTheBrowserReadsIt(t *testing.T) {
	for _, loc := range []string{" http://shop.test/x", "\thttp://shop.test/x", "ht\ttp://shop.test/x", "HTTP://shop.test/x"} {
		e := startProxy(t, nil)
		up := startUpstream(t, e.upCA, func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Location"] = []string{loc}
			w.WriteHeader(http.StatusFound)
		})
		s, pw := e.session()
		resp, err := e.rawClient(s, pw, false).Get(hostURL(up, "shop.test", "/"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if codeOf(resp) != string(agentvault.CodeInsecureSite) {
			t.Errorf("Location %q: code %q", loc, codeOf(resp))
		}
	}
}

// TestP21_ConcurrentAuthorizeAndSubstitute: authorizing again while the
// grant is in use on the wire is race-free (go test -race).
func TestP21_ConcurrentAuthorizeAndSubstitute(t *testing.T) {
	e := startProxy(t, nil)
	up := startUpstream(t, e.upCA, nil)
	e.addLogin("shop", "shop.test", "Tr0ub4dor&3xyz!")
	s, pw := e.session()
	page := hostURL(up, "shop.test", "/login")
	a, err := e.authorize(s, tok("login", "shop", "password"), page)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				_, _ = e.sessions.Authorize(context.Background(), s, broker.AuthorizeRequest{Token: tok("login", "shop", "password"),
					PageURL: "https://pay.shop.test:" + strconv.Itoa(1000+j) + "/"})
			}
		}()
		go func() {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				resp, err := e.rawClient(s, pw, false).Post(page, "application/x-www-form-urlencoded", strings.NewReader("pw="+a.Value))
				if err == nil {
					resp.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
}

// TestP9_StandInUnderBase64IsRefused: a stand-in or token hidden under
// base64 (a bearer blob, a JWT-like document) cannot be swapped in place, so
// the request is refused and nothing reaches the site.
func TestP9_StandInUnderBase64IsRefused(t *testing.T) {
	e := startProxy(t, nil)
	up := startUpstream(t, e.upCA, nil)
	e.addCard("1", "4242424242424242", "737", "shop.test")
	s, pw := e.session()
	a, err := e.authorize(s, tok("card", "1", "number"), hostURL(up, "shop.test", "/pay"))
	if err != nil {
		t.Fatal(err)
	}
	for name, hidden := range map[string]string{
		"stand-in": `{"card":"` + a.Value + `","exp":"12/31"}`,
		"token":    `{"card":"` + tok("card", "1", "number") + `"}`,
	} {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawURLEncoding} {
			req, _ := http.NewRequest("GET", hostURL(up, "shop.test", "/api"), nil)
			req.Header.Set("Authorization", "Bearer eyJhbGciOiJub25lIn0."+enc.EncodeToString([]byte(hidden))+".x")
			resp, err := e.rawClient(s, pw, false).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if codeOf(resp) == "" || up.count() != 0 {
				t.Fatalf("%s under base64 went upstream (code %q)", name, codeOf(resp))
			}
		}
	}
}
