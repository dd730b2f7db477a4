package mcpserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/browser/browsertest"
	"github.com/agentvault/agentvault/control"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// egressControl plays a proxyd whose traffic goes through the owner's
// residential egress: every session answer says so, each session has an id
// of its own, and a session the test marks lost reports egressLost, as
// proxyd's control API does once the proxy saw its egress drop a request.
type egressControl struct {
	*standInControl
	mu      sync.Mutex
	n       int
	lost    map[string]bool
	reports map[string]int // report reads per session
}

func (c *egressControl) CreateSession(ctx context.Context, apiKey string) (control.CreateSessionResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	id := fmt.Sprintf("s_egress%d", c.n)
	return control.CreateSessionResponse{ID: id, ProxyURL: "http://127.0.0.1:1", ProxyUser: id, ProxyPassword: "pw", ResidentialEgress: true}, nil
}

func (c *egressControl) Report(ctx context.Context, id string) (control.Report, error) {
	r, err := c.standInControl.Report(ctx, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reports[id]++
	r.EgressLost = c.lost[id]
	return r, err
}

func (c *egressControl) loseEgress(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lost[id] = true
}

// newEgressHarness is newHarness over egressControl.
func newEgressHarness(t *testing.T) (*harness, *egressControl) {
	t.Helper()
	browsertest.SkipIfNoBrowser(t)
	site := browsertest.Start(t)
	ctl := &egressControl{standInControl: &standInControl{}, lost: map[string]bool{}, reports: map[string]int{}}
	logs := &syncBuffer{}
	srv, err := New(Config{
		Control: ctl, APIKey: "avk_test", DriverDir: browsertest.DriverDir(),
		ExtraTrustSPKI: []string{site.SPKI}, UnsafeDirectBrowser: true, WaitPoll: 50 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, ct := mcp.NewInMemoryTransports()
	go srv.Run(ctx, st)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		srv.Close()
	})
	return &harness{t: t, site: site, ctl: ctl.standInControl, cs: cs, srv: srv, logs: logs}, ctl
}

// TestSeed004_ResidentialEgressOpensHTTPAsHTTPS: in a residential egress
// session (proxyd's session answer says so) an http:// address given to
// open_page is opened as https:// on the same host, and the answer says so.
// The test shop speaks only TLS on its port, so the page loads only if the
// scheme was upgraded. (Without an egress, http:// stays refused with
// insecure_site: TestToolsCheckoutFlow. Pages the browser itself reaches
// over http:// are refused by the proxy, egress or not: TestP4_PlainHTTPRefused
// and TestP4_RedirectReadAsTheBrowserReadsIt in intercept.)
func TestSeed004_ResidentialEgressOpensHTTPAsHTTPS(t *testing.T) {
	h, _ := newEgressHarness(t)
	httpsURL := h.site.CheckoutURL()
	plain := "http://" + strings.TrimPrefix(httpsURL, "https://")
	got := h.ok("open_page", map[string]any{"url": plain})
	if !strings.HasPrefix(got, "status=ok\nOpened "+safeURL(httpsURL)) {
		t.Fatalf("open_page of %s: %q", plain, got)
	}
	if !strings.Contains(got, "HTTPS only") || !strings.Contains(got, "opened as "+safeURL(httpsURL)) {
		t.Fatalf("the answer does not say the address was opened as https://: %q", got)
	}
	if c := jsonOf(t, h.ok("count", map[string]any{"selector": "#place-order"})); c["count"] != float64(1) {
		t.Fatalf("the checkout page did not load: %v", c)
	}
	// An http:// address on an open page is upgraded the same way.
	if got := h.ok("open_page", map[string]any{"url": plain}); !strings.Contains(got, "HTTPS only") {
		t.Fatalf("second open_page of %s: %q", plain, got)
	}
}

// TestSeed004_EgressLostRefusesLaterCalls: once proxyd reports that a
// session's residential egress was lost, every later call that reaches the
// browser is refused with egress_lost (get_session_outcome and open_page
// included), telling the agent to read the report, close and start again;
// get_run_report and close_session still work, and a new session opens.
func TestSeed004_EgressLostRefusesLaterCalls(t *testing.T) {
	h, ctl := newEgressHarness(t)
	h.ok("open_page", map[string]any{"url": h.site.CheckoutURL()})
	h.ok("count", map[string]any{"selector": "#place-order"})
	ctl.loseEgress("s_egress1")
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"count", map[string]any{"selector": "#place-order"}},
		{"click", map[string]any{"selector": "#place-order"}},
		{"get_session_outcome", map[string]any{"successSelector": "#done", "timeout": 100}},
		{"observe_page", nil},
		{"fill_checkout", map[string]any{"fields": []any{map[string]any{"selector": "#first", "value": "Jane"}}}},
		{"open_page", map[string]any{"url": h.site.CheckoutURL()}},
	} {
		txt := h.refused(c.tool, c.args, agentvault.CodeEgressLost)
		if !strings.Contains(txt, "residential egress stopped working") || !strings.Contains(txt, "close_session") {
			t.Fatalf("%s: the refusal does not say what happened and what to do: %q", c.tool, txt)
		}
	}
	rep := jsonOf(t, h.ok("get_run_report", nil))
	if rep["status"] != "ok" {
		t.Fatalf("get_run_report on a lost session: %v", rep)
	}
	closed := jsonOf(t, h.ok("close_session", nil))
	if closed["status"] != "Session closed" {
		t.Fatalf("close_session on a lost session: %v", closed)
	}
	if got := h.ok("open_page", map[string]any{"url": h.site.CheckoutURL()}); !strings.HasPrefix(got, "status=ok\nOpened ") {
		t.Fatalf("open_page after the close: %q", got)
	}
	h.ok("count", map[string]any{"selector": "#place-order"})
}

// unavailableEgress is a control service that refuses every new session
// the way proxyd does while the residential egress it requires is missing
// or not answering: egress_unavailable with a Retry-After, which the real
// control listener and client carry to mcpd.
type unavailableEgress struct {
	control.Service // nil: only CreateSession is called
	creates         atomic.Int32
}

func (c *unavailableEgress) CreateSession(ctx context.Context, apiKey string) (control.CreateSessionResponse, error) {
	c.creates.Add(1)
	return control.CreateSessionResponse{}, control.RetryAfter(agentvault.Errorf(agentvault.CodeEgressUnavailable,
		"No session was started: this deployment requires residential egress and its upstream proxy is not answering, so nothing was opened."),
		10*time.Second)
}

// noBrowserNoSession fails t when srv launched a browser or keeps a session.
func noBrowserNoSession(t *testing.T, srv *Server) {
	t.Helper()
	srv.launchMu.Lock()
	launched := srv.browser != nil
	srv.launchMu.Unlock()
	srv.mu.Lock()
	n := len(srv.sessions)
	srv.mu.Unlock()
	if launched || n != 0 {
		t.Fatalf("after a refused first open_page: browser launched %v, %d sessions kept", launched, n)
	}
}

// TestSeed004_EgressUnavailableOnFirstOpenPage: when proxyd refuses the
// first open_page's session with egress_unavailable (residential egress
// required, none answering), open_page answers that code, says nothing was
// opened and how many seconds to wait (the Retry-After, worded as for
// rate_limited), and opens no browser and keeps no session, for an https://
// and an http:// address, over stdio and on the hosted server, where no
// handle comes back.
func TestSeed004_EgressUnavailableOnFirstOpenPage(t *testing.T) {
	svc := &unavailableEgress{}
	api := httptest.NewServer(control.NewHandler(svc, "ctl-token", nil))
	t.Cleanup(api.Close)
	check := func(where, txt string, r *mcp.CallToolResult) {
		t.Helper()
		if !r.IsError || !strings.HasPrefix(txt, "status=error code=egress_unavailable\n") {
			t.Fatalf("%s: %q", where, txt)
		}
		if !strings.Contains(txt, "nothing was opened") || !strings.Contains(txt, "Retry-After: 10 s. Wait that long, then call again.") {
			t.Fatalf("%s: the answer does not say nothing was opened and how long to wait: %q", where, txt)
		}
	}
	newServer := func(hc *HostedConfig) *Server {
		srv, err := New(Config{Control: control.NewClient(api.URL, "ctl-token", nil), APIKey: "avk_test",
			DriverDir: browsertest.DriverDir(), Logger: slog.New(slog.DiscardHandler), Hosted: hc})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		return srv
	}

	// stdio
	srv := newServer(nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, ct := mcp.NewInMemoryTransports()
	go srv.Run(ctx, st)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	for _, u := range []string{"https://shop.example/checkout", "http://shop.example/checkout"} {
		txt, r := call(t, cs, "open_page", map[string]any{"url": u})
		check("stdio open_page "+u, txt, r)
	}
	noBrowserNoSession(t, srv)

	// The hosted server: the failed open_page keeps no session and
	// returns no handle.
	hsrv := newServer(&HostedConfig{SweepEvery: -1})
	hs := httptest.NewServer(hsrv.HTTPHandler(HTTPOptions{Keys: keyTable{keyA: "avk_aaaa"}}))
	t.Cleanup(hs.Close)
	h := &hostedHarness{t: t, url: hs.URL}
	txt, r := call(t, h.client(keyA), "open_page", map[string]any{"url": "https://shop.example/checkout"})
	check("hosted open_page", txt, r)
	if strings.Contains(strings.SplitN(txt, "\n", 2)[0], "session=") || regexp.MustCompile(`\bs_[a-z2-7]{8,}`).MatchString(txt) {
		t.Fatalf("the refused hosted open_page names a session: %q", txt)
	}
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok && handleLine.MatchString(tc.Text) {
			t.Fatalf("the refused hosted open_page returned a handle: %q", tc.Text)
		}
	}
	noBrowserNoSession(t, hsrv)
	if n := svc.creates.Load(); n != 3 {
		t.Fatalf("proxyd was asked for %d sessions, want one per open_page (3)", n)
	}
}
