package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/internal/leakcheck"
	"github.com/agentvault/agentvault/vault"
	"github.com/mxschmitt/playwright-go"
)

// proxySession is one control-API session with its card tokens authorized
// for the processor's legacy payment page.
type proxySession struct {
	s              control.CreateSessionResponse
	numberStandIn  string
	cvvStandIn     string
	numberToken    string
	cvvToken       string
	legacyCheckout string
}

func (ap *appliance) cardSession(t *testing.T) proxySession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := ap.ctl.CreateSession(ctx, ap.apiKey)
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	t.Cleanup(func() { _, _ = ap.ctl.CloseSession(context.Background(), s.ID) })
	cat, err := ap.ctl.Catalog(ctx, ap.apiKey, ap.m.Pay.URL+"/legacy/checkout")
	if err != nil {
		t.Fatalf("catalog: %v", err)
	}
	ps := proxySession{s: s, legacyCheckout: ap.m.Pay.URL + "/legacy/checkout"}
	ps.numberToken = findToken(string(cat), "card", "number")
	ps.cvvToken = findToken(string(cat), "card", "cvv")
	if ps.numberToken == "" || ps.cvvToken == "" {
		t.Fatalf("catalog (%d bytes) lists no card tokens for the processor", len(cat))
	}
	total := &control.OrderTotal{Amount: "42.50", Currency: "EUR"}
	a, err := ap.ctl.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: ps.numberToken, PageURL: ps.legacyCheckout, OrderTotal: total})
	if err != nil {
		t.Fatalf("authorize number: %v", err)
	}
	if !a.StandIn || a.Value == ap.card.number || len(a.Value) != len(ap.card.number) {
		t.Fatalf("authorize returned no format-preserving stand-in (standIn=%v, len %d)", a.StandIn, len(a.Value))
	}
	ps.numberStandIn = a.Value
	c, err := ap.ctl.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: ps.cvvToken, PageURL: ps.legacyCheckout, OrderTotal: total})
	if err != nil {
		t.Fatalf("authorize cvv: %v", err)
	}
	ps.cvvStandIn = c.Value
	return ps
}

func (ps proxySession) proxyURL(t *testing.T) *url.URL {
	u, err := url.Parse(ps.s.ProxyURL)
	if err != nil {
		t.Fatalf("proxy URL: %v", err)
	}
	u.User = url.UserPassword(ps.s.ProxyUser, ps.s.ProxyPassword)
	return u
}

// goClient trusts only proxyd's CA and goes through the proxy with the
// session's credential.
func (ps proxySession) goClient(t *testing.T) *http.Client {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(ps.s.CAPEM)) {
		t.Fatal("session carries no CA PEM")
	}
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			Proxy:             http.ProxyURL(ps.proxyURL(t)),
			TLSClientConfig:   &tls.Config{RootCAs: pool},
			ForceAttemptHTTP2: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func (ps proxySession) form(ap *appliance) url.Values {
	return url.Values{
		"number": {ps.numberStandIn}, "cvc": {ps.cvvStandIn},
		"exp_month": {strconv.Itoa(ap.card.month)}, "exp_year": {strconv.Itoa(ap.card.year)},
		"amount": {"42.50"}, "currency": {"EUR"},
	}
}

// TestP10_ProxydCheckoutThreeWays is the issue-3 proof: the same checkout
// request, carrying stand-ins, goes through proxyd from Go's http.Client,
// curl and Chromium submitting a real HTML form. Each time the processor
// receives the real card (P9) and the receipt it echoes back reaches the
// client with the stand-in in place of the real number (P10).
func TestP10_ProxydCheckoutThreeWays(t *testing.T) {
	requireE2E(t, false)
	ap := startAppliance(t)
	leak := leakcheck.New(leakcheck.Value("card number", ap.card.number))
	var sessionsSeen []proxySession
	cardSession := func(t *testing.T) proxySession {
		ps := ap.cardSession(t)
		sessionsSeen = append(sessionsSeen, ps)
		return ps
	}

	check := func(t *testing.T, way string, ps proxySession, status int, page []byte, before int) {
		t.Helper()
		if got := ap.m.Pay.Count(ap.card.number); got != before+1 {
			t.Errorf("%s: the processor received the real number %d times, want %d", way, got-before, 1)
		}
		if ap.m.Pay.Saw(ps.numberStandIn) {
			t.Errorf("%s: the stand-in reached the processor", way)
		}
		if status != http.StatusOK || !bytes.Contains(page, []byte(`id="payment-ok"`)) {
			t.Errorf("%s: status %d, no payment confirmation in %d bytes", way, status, len(page))
		}
		leak.Text(t, way+" response page", page)
		if !bytes.Contains(page, []byte(ps.numberStandIn)) {
			t.Errorf("%s: the echoed number was not replaced by the session's stand-in", way)
		}
		ap.checkAudit(t, way, ps.s.ID)
	}

	t.Run("GoHTTPClient", func(t *testing.T) {
		ps := cardSession(t)
		before := ap.m.Pay.Count(ap.card.number)
		res, err := ps.goClient(t).PostForm(ps.legacyCheckout, ps.form(ap))
		if err != nil {
			t.Fatalf("post through proxyd: %v", err)
		}
		page, _ := io.ReadAll(res.Body)
		res.Body.Close()
		check(t, "Go client", ps, res.StatusCode, page, before)
	})

	t.Run("Curl", func(t *testing.T) {
		curl, err := exec.LookPath("curl")
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal("curl is missing")
			}
			t.Skip("curl is missing")
		}
		ps := cardSession(t)
		caFile := filepath.Join(t.TempDir(), "proxyd-ca.pem")
		if err := os.WriteFile(caFile, []byte(ps.s.CAPEM), 0o600); err != nil {
			t.Fatal(err)
		}
		before := ap.m.Pay.Count(ap.card.number)
		pu := ps.proxyURL(t)
		pu.User = nil
		cmd := exec.Command(curl, "-sS", "--max-time", "30", "-w", "\n%{http_code}",
			"--proxy", pu.String(), "--proxy-user", ps.s.ProxyUser+":"+ps.s.ProxyPassword,
			"--cacert", caFile, "--data", ps.form(ap).Encode(), ps.legacyCheckout)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")} // no proxy variables
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("curl through proxyd failed: %v", err)
		}
		i := bytes.LastIndexByte(out, '\n')
		status, _ := strconv.Atoi(string(out[i+1:]))
		check(t, "curl", ps, status, out[:i], before)
	})

	t.Run("Chromium", func(t *testing.T) {
		requireE2E(t, true)
		ps := cardSession(t)
		pu := ps.proxyURL(t)
		pu.User = nil
		b := chromium(t, []string{ps.s.CASPKI}, &playwright.Proxy{
			Server:   pu.String(),
			Username: playwright.String(ps.s.ProxyUser),
			Password: playwright.String(ps.s.ProxyPassword),
			Bypass:   playwright.String("<-loopback>"),
		})
		page, err := b.NewPage()
		must(t, "new page", err)
		before := ap.m.Pay.Count(ap.card.number)
		_, err = page.Goto(ps.legacyCheckout)
		must(t, "open the legacy payment page through proxyd", err)
		must(t, "number", page.Locator("#number").Fill(ps.numberStandIn))
		_, err = page.Locator("#exp_month").SelectOption(playwright.SelectOptionValues{Values: &[]string{strconv.Itoa(ap.card.month)}})
		must(t, "month", err)
		must(t, "year", page.Locator("#exp_year").Fill(strconv.Itoa(ap.card.year)))
		must(t, "cvc", page.Locator("#cvc").Fill(ps.cvvStandIn))
		must(t, "pay", page.Locator("#pay").Click())
		must(t, "receipt", page.Locator("#payment-ok, #payment-error").First().WaitFor())
		html, err := page.Content()
		must(t, "page content", err)
		text, err := page.Locator("body").InnerText()
		must(t, "page text", err)
		check(t, "Chromium", ps, http.StatusOK, []byte(html), before)
		leak.Text(t, "Chromium rendered text", []byte(text))
	})

	t.Run("Refusals", func(t *testing.T) {
		ps := cardSession(t)
		c := ps.goClient(t)

		// The card is authorized for the processor only: the same stand-in
		// sent to the shop (another origin) is refused and never arrives.
		shopBefore := len(ap.m.Shop.Requests())
		res, err := c.Post(ap.m.Shop.URL+"/echo", "application/x-www-form-urlencoded", strings.NewReader(ps.form(ap).Encode()))
		code, body := refusal(t, res, err)
		if code != "destination_unauthorized" && code != "token_not_authorized" && code != "scope_denied" {
			t.Errorf("stand-in to an unauthorized host: code %q, want destination_unauthorized, token_not_authorized or scope_denied", code)
		}
		t.Logf("unauthorized host refused with %s", code)
		leak.Text(t, "refusal body", body)
		if ap.m.Shop.Saw(ps.numberStandIn) || ap.m.Shop.Saw(ap.card.number) || len(ap.m.Shop.Requests()) != shopBefore {
			t.Error("a request carrying the stand-in reached an unauthorized host")
		}

		// Plain http:// never carries anything (P4): the listener counts zero.
		var hits atomic.Int64
		plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
		defer plain.Close()
		res, err = c.Post(plain.URL+"/echo", "application/x-www-form-urlencoded", strings.NewReader(ps.form(ap).Encode()))
		code, _ = refusal(t, res, err)
		if code != "insecure_site" {
			t.Errorf("http:// request: code %q, want insecure_site", code)
		}
		if hits.Load() != 0 {
			t.Errorf("the plain-http listener received %d requests", hits.Load())
		}
	})
	leak.Logs(t, "proxyd logs", ap.logs.Bytes())
	metrics := ap.metrics(t)
	leak.Metrics(t, "proxyd metrics", metrics)
	// P15: metric labels come from closed sets; no host, token or session.
	for _, s := range sessionsSeen {
		for name, v := range map[string]string{"session id": s.s.ID, "number token": s.numberToken, "number stand-in": s.numberStandIn} {
			if bytes.Contains(metrics, []byte(v)) {
				t.Errorf("a metric label holds a %s", name)
			}
		}
	}
	for _, h := range []string{ap.m.Shop.Host, ap.m.Pay.Host, "localhost", "127.0.0.1"} {
		if bytes.Contains(metrics, []byte(h)) {
			t.Errorf("a metric label holds the host %s", h)
		}
	}
	if !bytes.Contains(metrics, []byte("# TYPE")) {
		t.Error("the admin listener served no metrics")
	}
	t.Logf("P11 sweep covered %s", leak.Summary())
}

// checkAudit asserts P12 for one session: the card number's releases are in
// the vault's audit log for the processor's host, with an HMAC of the value
// and never the value.
func (ap *appliance) checkAudit(t *testing.T, way, session string) {
	t.Helper()
	recs, err := ap.vault.Audit(context.Background(), vault.AuditFilter{Org: org, Session: session})
	if err != nil {
		t.Fatalf("%s: read audit: %v", way, err)
	}
	want := ap.vault.AuditHMAC(vault.NewSecret([]byte(ap.card.number)))
	payHost, _, _ := net.SplitHostPort(ap.m.Pay.Host)
	n := 0
	l := leakcheck.New(leakcheck.Value("card number", ap.card.number))
	for _, r := range recs {
		if r.Field == vault.FieldNumber && r.Destination == payHost && bytes.Equal(r.ValueHMAC, want) {
			n++
		}
		js, _ := json.Marshal(r)
		l.Answer(t, way+": an audit record", js)
	}
	if n == 0 {
		t.Errorf("%s: no audit record of the number's release to the processor (%d records in the session)", way, len(recs))
	}
}

// refusal reads a refused answer's code from the JSON error body or the
// status line a proxy writes.
func refusal(t *testing.T, res *http.Response, err error) (string, []byte) {
	t.Helper()
	if err != nil {
		// A refusal on CONNECT surfaces as a transport error naming the status.
		return codeFromText(err.Error()), []byte(err.Error())
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode < 400 {
		t.Errorf("expected a refusal, got status %d", res.StatusCode)
	}
	if c := res.Header.Get("X-Agentvault-Code"); c != "" {
		return c, body
	}
	return codeFromText(string(body)), body
}

func codeFromText(s string) string {
	if m := codeRe.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}
