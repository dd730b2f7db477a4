package proxyd_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/vault"
)

func scrape(t *testing.T, m *proxyd.Main) map[string]float64 {
	t.Helper()
	res, err := http.Get("http://" + m.AdminAddr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out
}

func sumPrefix(ms map[string]float64, prefix string) float64 {
	var s float64
	for k, v := range ms {
		if strings.HasPrefix(k, prefix) {
			s += v
		}
	}
	return s
}

// TestOperator_MetricsConventions: every closed label set exists at zero
// from the first scrape; a CONNECT without credentials (Chromium's normal
// first try) is a challenge, not a refusal and not a warning; an upstream
// failure is an upstream error, not a refusal; authorize outcomes, open
// sessions, failed dashboard sign-ins and upstream status classes are
// counted; the Go runtime, process and build info collectors are there.
func TestOperator_MetricsConventions(t *testing.T) {
	up, roots := tlsUpstream(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello") })
	m, logs := startMain(t, roots, func(c *proxyd.Config) { c.Listen.Dashboard = "127.0.0.1:0" })
	first := scrape(t, m)
	for _, name := range []string{
		`agentvault_proxy_refusals_total{code="proxy_auth_required"}`,
		`agentvault_proxy_refusals_total{code="destination_unauthorized"}`,
		`agentvault_proxy_refusals_total{code="other"}`,
		`agentvault_proxy_upstream_errors_total{code="upstream_error"}`,
		`agentvault_proxy_upstream_errors_total{code="timeout"}`,
		`agentvault_proxy_auth_challenges_total`,
		`agentvault_proxy_upstream_responses_total{class="5xx"}`,
		`agentvault_authorize_total{outcome="granted"}`,
		`agentvault_authorize_total{outcome="pending"}`,
		`agentvault_authorize_total{outcome="refused"}`,
		`agentvault_authorize_refusals_total{code="unknown_token"}`,
		`agentvault_approval_decisions_total{outcome="approved"}`,
		`agentvault_approval_decisions_total{outcome="expired"}`,
		`agentvault_approval_wait_seconds_count{outcome="denied"}`,
		`agentvault_approvals_pending`,
		`agentvault_sessions_open`,
		`agentvault_dashboard_signin_failures_total`,
	} {
		v, ok := first[name]
		if !ok || v != 0 {
			t.Errorf("%s at start: %v (present %v), want 0", name, v, ok)
		}
	}
	// The durable writer's counters: one release is one audit record in
	// one commit.
	for _, name := range []string{`agentvault_store_durable_commits_total`, `agentvault_store_durable_records_total`} {
		if _, ok := first[name]; !ok {
			t.Errorf("%s is missing", name)
		}
	}
	card, err := m.Vault.AddCard(context.Background(), proxyd.DefaultOrg, "owner", vault.CardInput{
		Number: vault.NewSecret([]byte("4242424242424242")), CVV: vault.NewSecret([]byte("737")), ExpiryMonth: 12, ExpiryYear: 2031,
		Sites: []string{"shop.test"}})
	if err != nil {
		t.Fatal(err)
	}
	before := scrape(t, m)
	commits, records := before[`agentvault_store_durable_commits_total`], before[`agentvault_store_durable_records_total`]
	sec, err := m.Vault.Release(context.Background(), vault.ReleaseArgs{Org: proxyd.DefaultOrg, ItemID: card.ID,
		Field: vault.FieldNumber, Destination: "shop.test", Session: "test", Actor: "test", Purpose: "test"})
	if err != nil {
		t.Fatal(err)
	}
	sec.Wipe()
	after := scrape(t, m)
	if got := after[`agentvault_store_durable_records_total`] - records; got != 1 {
		t.Errorf("durable records moved by %v for one release, want 1", got)
	}
	if got := after[`agentvault_store_durable_commits_total`] - commits; got != 1 {
		t.Errorf("durable commits moved by %v for one release, want 1", got)
	}
	for _, name := range []string{"go_goroutines", "process_open_fds", "process_resident_memory_bytes"} {
		if _, ok := first[name]; !ok {
			t.Errorf("%s is missing (standard collectors)", name)
		}
	}
	if sumPrefix(first, "agentvault_build_info{") != 1 || sumPrefix(first, "go_build_info{") != 1 {
		t.Error("agentvault_build_info or go_build_info is missing")
	}

	// Chromium's first CONNECT carries no credentials.
	c, err := net.Dial("tcp", m.ProxyAddr.String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", up.Listener.Addr(), up.Listener.Addr())
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || res.StatusCode != http.StatusProxyAuthRequired {
		t.Fatalf("CONNECT without credentials: %v %v", res, err)
	}
	c.Close()

	ctl := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	ctx := context.Background()
	s, err := ctl.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	pc := proxyClient(m, s)
	if r, err := pc.Get(up.URL + "/"); err != nil || r.StatusCode != 200 {
		t.Fatalf("through the proxy: %v %v", r, err)
	} else {
		r.Body.Close()
	}
	if r, err := pc.Get("https://no-such-host.invalid/"); err == nil {
		r.Body.Close()
	}
	// The log names the host that did not resolve (the refusal itself
	// says only "destination does not resolve").
	if !strings.Contains(logs.String(), `"msg":"destination does not resolve","host":"no-such-host.invalid"`) {
		t.Error("the log does not name the host that did not resolve")
	}
	if _, err := ctl.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: "av_card_9_number_zzzzz", PageURL: up.URL + "/"}); err == nil {
		t.Fatal("authorize of an unknown token succeeded")
	}
	// A wrong dashboard password.
	jar, _ := cookiejar.New(nil)
	d := &dashClient{t: t, base: "https://" + m.DashboardAddr.String(),
		hc: &http.Client{Jar: jar, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}}
	if err := m.Owner.SetOwnerPassword(ctx, "owner@example.org", "a long owner passphrase 42"); err != nil {
		t.Fatal(err)
	}
	d.post("/signin", "/signin", url.Values{"email": {"owner@example.org"}, "password": {"wrong"}})

	mid := scrape(t, m)
	checks := map[string]float64{
		`agentvault_proxy_auth_challenges_total`:                        1,
		`agentvault_proxy_upstream_responses_total{class="2xx"}`:        1,
		`agentvault_proxy_upstream_errors_total{code="upstream_error"}`: 1,
		`agentvault_authorize_total{outcome="refused"}`:                 1,
		`agentvault_sessions_open`:                                      1,
		`agentvault_dashboard_signin_failures_total`:                    1,
	}
	for name, want := range checks {
		if got := mid[name]; got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := sumPrefix(mid, "agentvault_proxy_refusals_total{"); got != 0 {
		t.Errorf("refusals counted %v for a credentials challenge and an upstream failure, want 0", got)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, "proxy_auth_required") {
			t.Errorf("the credentials challenge is a warning: %s", line)
		}
	}
	if _, err := ctl.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if got := scrape(t, m)[`agentvault_sessions_open`]; got != 0 {
		t.Errorf("sessions_open after close = %v", got)
	}
}
