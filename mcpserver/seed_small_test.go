package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/browser/browsertest"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// limitedCatalog is a control service whose catalog reads are limited per
// key the way proxyd limits a key's calls (policy.RateLimiter): the real
// control API answers 429 with Retry-After over it.
type limitedCatalog struct {
	control.Service // nil: only Catalog and CreateSession are called
	limit           *policy.RateLimiter
}

// CreateSession refuses: the test reads the catalog only, and a session
// asked for on the side must not reach the nil service (a panic in the
// control handler's log).
func (limitedCatalog) CreateSession(context.Context, string) (control.CreateSessionResponse, error) {
	return control.CreateSessionResponse{}, agentvault.Errorf(agentvault.CodeUnavailable, "this test's control API opens no sessions")
}

func (c limitedCatalog) Catalog(ctx context.Context, apiKey, pageURL string) (json.RawMessage, error) {
	if err := c.limit.Allow(apiKey); err != nil {
		return nil, err
	}
	return json.RawMessage(`{"identity":{"tokens":{}},"addresses":[],"cards":[],"logins":[]}`), nil
}

// TestSeed004_TokenCatalogRateLimitedWaitsForRetryAfter: get_token_catalog
// refused with rate_limited says how long to wait, from the control API's
// Retry-After (seed 004: "rate_limited (wait for Retry-After)"), through
// the real control listener and client and the MCP transport.
func TestSeed004_TokenCatalogRateLimitedWaitsForRetryAfter(t *testing.T) {
	svc := limitedCatalog{limit: policy.NewRateLimiter(1, time.Hour, nil)}
	api := httptest.NewServer(control.NewHandler(svc, "ctl-token", nil))
	t.Cleanup(api.Close)
	srv, err := New(Config{Control: control.NewClient(api.URL, "ctl-token", nil), APIKey: "avk_test", DriverDir: browsertest.DriverDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, ct := mcp.NewInMemoryTransports()
	go srv.Run(ctx, st)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); cancel(); srv.Close() })
	catalog := func() (string, bool) {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_token_catalog", Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		return text(r), r.IsError
	}
	if txt, isErr := catalog(); isErr {
		t.Fatalf("first read: %q", txt)
	}
	txt, isErr := catalog()
	if !isErr || !strings.HasPrefix(txt, "status=error code=rate_limited") {
		t.Fatalf("second read: %q", txt)
	}
	// The wait is the proxy's (an hour, less the moments since the first
	// read): the agent is told it, in seconds.
	m := regexp.MustCompile(`Retry-After: (\d+) s\. Wait that long, then call again\.`).FindStringSubmatch(txt)
	secs := 0
	if m != nil {
		secs, _ = strconv.Atoi(m[1])
	}
	if secs < 3500 || secs > 3600 {
		t.Fatalf("the refusal does not name the Retry-After: %q", txt)
	}
}

// stdioServer runs a Server on a pair of pipes, the way a host runs mcpd
// on stdin/stdout, and initializes the connection.
func stdioServer(t *testing.T, ctl *standInControl) (*stdioPeer, *browsertest.Site) {
	t.Helper()
	browsertest.SkipIfNoBrowser(t)
	site := browsertest.Start(t)
	srv, err := New(Config{
		Control: ctl, APIKey: "avk_test", DriverDir: browsertest.DriverDir(),
		ExtraTrustSPKI: []string{site.SPKI}, UnsafeDirectBrowser: true, WaitPoll: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); srv.Run(ctx, &mcp.IOTransport{Reader: inR, Writer: outW}) }()
	t.Cleanup(func() { cancel(); inW.Close(); outR.Close(); <-done; srv.Close() })
	sc := bufio.NewScanner(outR)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	p := &stdioPeer{t: t, in: inW, out: sc}
	p.send(map[string]any{"id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "host", "version": "0"}}})
	p.answer(1)
	p.send(map[string]any{"method": "notifications/initialized", "params": map[string]any{}})
	return p, site
}

// TestSeed004_GetPendingResultOnStdio: the seed lists get_pending_result
// for the hosted server only, but mcpd's stdio server answers a call that
// waits on the owner with status=pending too, when the host sent no
// progress token to keep it open (most hosts abandon a call at about 60 s,
// and an owner takes minutes). So the tool is listed on stdio as well, and
// a pending answer there is collected with it, a second request on the
// same call opening with NEW REQUEST as on the hosted server.
func TestSeed004_GetPendingResultOnStdio(t *testing.T) {
	ctl := &standInControl{}
	p, site := stdioServer(t, ctl)

	p.send(map[string]any{"id": 2, "method": "tools/list", "params": map[string]any{}})
	listed, answered := false, false
	for !answered && p.out.Scan() {
		var m struct {
			ID     *int `json:"id"`
			Result struct {
				Tools []struct {
					Name string `json:"name"`
				} `json:"tools"`
			} `json:"result"`
		}
		if json.Unmarshal(p.out.Bytes(), &m) != nil || m.ID == nil || *m.ID != 2 {
			continue
		}
		answered = true
		for _, tl := range m.Result.Tools {
			listed = listed || tl.Name == "get_pending_result"
		}
	}
	if !listed {
		t.Fatal("get_pending_result is not listed on stdio")
	}

	if txt := p.call(3, "open_page", map[string]any{"url": site.CheckoutURL()}); !strings.HasPrefix(txt, "status=ok") {
		t.Fatalf("open_page: %q", txt)
	}
	p.call(4, "wait_for_selector", map[string]any{"selector": "#number", "frame": payFrame, "timeout": 30000})
	exp := time.Now().Add(time.Hour)
	script := &ownerScript{field: "number", answers: []string{"pending"},
		pending:   control.Pending{WaitID: "apr_1", Kind: "purchase", Reason: "every_purchase", Site: "127.0.0.1", ExpiresAt: exp},
		next:      &control.Pending{WaitID: "apr_2", Kind: "purchase", Reason: "cvv_again", Site: "127.0.0.1", ExpiresAt: exp},
		nextField: "cvv"}
	ctl.mu.Lock()
	ctl.owner = script
	ctl.mu.Unlock()
	txt := p.call(5, "fill_checkout", map[string]any{"fields": []map[string]any{
		{"selector": "#number", "frame": payFrame, "value": "av_card_1_number_u7x2k"},
		{"selector": "#cvc", "frame": payFrame, "value": "av_card_1_cvv_u7x2k"},
	}})
	m := regexp.MustCompile(`^status=pending wait=(w_[a-z2-7]+) waiting_on_owner=true reason=every_purchase`).FindStringSubmatch(txt)
	if m == nil {
		t.Fatalf("a fill waiting on the owner over stdio: %q", txt)
	}
	wait := m[1]
	script.mu.Lock()
	script.answers = []string{"approved"}
	script.mu.Unlock()
	id := 6
	poll := func() string {
		id++
		return p.call(id, "get_pending_result", map[string]any{"wait": wait})
	}
	deadline := time.Now().Add(60 * time.Second)
	for txt = poll(); strings.HasPrefix(txt, "status=pending") && !strings.Contains(txt, "NEW REQUEST") && time.Now().Before(deadline); txt = poll() {
	}
	line, body, _ := strings.Cut(txt, "\n")
	if !strings.Contains(line, "new_request=true") || !strings.HasPrefix(body, "NEW REQUEST") {
		t.Fatalf("the second request over stdio: %q", txt)
	}
	script.mu.Lock()
	script.answers = []string{"approved"}
	script.mu.Unlock()
	for strings.HasPrefix(txt, "status=pending") && time.Now().Before(deadline) {
		txt = poll()
	}
	if !strings.HasPrefix(txt, "status=ok filled=2/2") {
		t.Fatalf("the fill's own answer, collected with get_pending_result: %q", txt)
	}
}

// challengePages serves one-time-code steps: one that says the code was
// sent, by SMS or by email, and an authenticator step that sends nothing.
func challengeSite(t *testing.T) string {
	t.Helper()
	pages := map[string]string{
		"/sms":           `<h1>Check your phone</h1><p>We texted a 6-digit code to your phone.</p><label for="c">Verification code</label><input id="c" autocomplete="one-time-code">`,
		"/email":         `<h1>Check your inbox</h1><p>We emailed a code to your address.</p><label for="c">Verification code</label><input id="c" autocomplete="one-time-code">`,
		"/authenticator": `<h1>Two-step verification</h1><p>Open your authenticator app and enter the code it shows.</p><label for="c">Verification code</label><input id="c" autocomplete="one-time-code">`,
		"/covered": `<button id="buy" onclick="document.body.dataset.bought=1">Place order</button>
<label><input type="checkbox" id="terms"> I accept</label>
<div id="tile" onclick="document.body.dataset.tile=1" style="width:80px;height:30px;background:#ccc">Pick</div>
<div id="scrim" style="position:fixed;inset:0;background:rgba(0,0,0,.3)"></div>`,
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!doctype html><html><body>"+body+"</body></html>")
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestSeed004_DetectChallengeDeliveredCode: detect_challenge says
// deliveredCode: true on an otp step whose page says the code was sent by
// SMS or email (hand it off, never fill tokens.totp), and leaves it out on
// an authenticator step, over the MCP transport in Chromium.
func TestSeed004_DetectChallengeDeliveredCode(t *testing.T) {
	h := newHarness(t)
	site := challengeSite(t)
	for _, c := range []struct {
		path      string
		delivered bool
	}{{"/sms", true}, {"/email", true}, {"/authenticator", false}} {
		h.ok("open_page", map[string]any{"url": site + c.path})
		got := jsonOf(t, h.ok("detect_challenge", nil))
		if got["detected"] != true || got["type"] != "otp" {
			t.Fatalf("%s: %v", c.path, got)
		}
		if d, present := got["deliveredCode"]; c.delivered && d != true || !c.delivered && present {
			t.Fatalf("%s: deliveredCode %v (present %v), want %v", c.path, d, present, c.delivered)
		}
	}
}

// TestSeed004_ClickBehindOverlayNamesTheFix: a click that times out
// because something covers its target says so and names the fix for that
// target: press with Enter for a button, Space for a checkbox, and, for
// an element no key activates, clear the overlay. Nothing was clicked.
func TestSeed004_ClickBehindOverlayNamesTheFix(t *testing.T) {
	h := newHarness(t)
	h.ok("open_page", map[string]any{"url": challengeSite(t) + "/covered"})
	for _, c := range []struct {
		selector, want, not string
	}{
		{"#buy", "use press with Enter on #buy instead", "clear the overlay"},
		{"#terms", "use press with Space on #terms instead", "clear the overlay"},
		{"#tile", "no key activates this target: clear the overlay first", "use press"},
	} {
		txt := h.refused("click", map[string]any{"selector": c.selector, "timeout": 8000}, "timeout")
		if !strings.Contains(txt, "because another element covers it") || !strings.Contains(txt, c.want) || strings.Contains(txt, c.not) {
			t.Fatalf("%s: %q", c.selector, txt)
		}
	}
	if got := jsonOf(t, h.ok("count", map[string]any{"selector": "body[data-bought],body[data-tile]"})); got["count"] != float64(0) {
		t.Fatalf("a covered click went through: %v", got)
	}
}
