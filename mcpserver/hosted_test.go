package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/browser/browsertest"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/mcpserver/hosted"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hostedControl is standInControl with a fresh proxyd session per
// CreateSession, a session limit, and a credential lifetime.
type hostedControl struct {
	*standInControl
	mu       sync.Mutex
	created  int
	live     map[string]bool
	limit    int
	lifetime time.Duration
	now      func() time.Time
}

func (c *hostedControl) CreateSession(ctx context.Context, apiKey string) (control.CreateSessionResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.limit > 0 && len(c.live) >= c.limit {
		return control.CreateSessionResponse{}, agentvault.Errorf(agentvault.CodeTooManySessions, "this API key has too many open sessions: close one first")
	}
	c.created++
	id := fmt.Sprintf("s_proxy%d", c.created)
	c.live[id] = true
	r := control.CreateSessionResponse{ID: id, ProxyURL: "http://127.0.0.1:1", ProxyUser: id, ProxyPassword: "pw"}
	if c.lifetime > 0 {
		r.ExpiresAt = c.now().Add(c.lifetime)
	}
	return r, nil
}

func (c *hostedControl) CloseSession(ctx context.Context, id string) (control.CloseResponse, error) {
	c.mu.Lock()
	delete(c.live, id)
	c.mu.Unlock()
	return c.standInControl.CloseSession(ctx, id)
}

func (c *hostedControl) creates() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.created
}

// keyTable plays proxyd's key check.
type keyTable map[string]string // key -> id

func (k keyTable) AuthenticateKey(ctx context.Context, key string) (control.KeyInfo, error) {
	if id, ok := k[key]; ok {
		// The holder has chosen every use (apps_test.go tests the choice).
		return control.KeyInfo{ID: id, Name: "app " + id, AppChosen: true, AppUses: control.AppUses}, nil
	}
	return control.KeyInfo{}, agentvault.Errorf(agentvault.CodeInvalidAPIKey, "the API key is not valid")
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type hostedHarness struct {
	t     *testing.T
	site  *browsertest.Site
	ctl   *hostedControl
	srv   *Server
	url   string
	clock *fakeClock
	// sessionIDs counts Mcp-Session-Id response headers seen.
	mu         sync.Mutex
	sessionIDs int
}

const keyA, keyB = "avk_aaaa_secretA", "avk_bbbb_secretB"

// The hosted server's wording (package hosted) that these tests read back.
const (
	endedNoRecord    = "This session has ended: it was closed, timed out, or the gateway restarted."
	reasonIdle       = "it was idle too long"
	reasonAge        = "its browser was near the proxy's one-hour limit for a session"
	reasonCredential = "its credential was about to lapse"
	reasonLimitOwn   = "the account was at its browser session limit and another session of this connection needed the slot"
	reasonOwner      = "the account holder ended it on the dashboard"
)

func newHostedHarness(t *testing.T, hc HostedConfig, tune func(*hostedControl)) *hostedHarness {
	t.Helper()
	return newHostedHarnessWrap(t, hc, tune, nil)
}

// newHostedHarnessWrap is newHostedHarness whose mcpd sees wrap(ctl).
func newHostedHarnessWrap(t *testing.T, hc HostedConfig, tune func(*hostedControl), wrap func(*hostedControl) Control) *hostedHarness {
	t.Helper()
	browsertest.SkipIfNoBrowser(t)
	site := browsertest.Start(t)
	clock := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	ctl := &hostedControl{standInControl: &standInControl{}, live: map[string]bool{}, now: clock.now}
	if tune != nil {
		tune(ctl)
	}
	hc.Now = clock.now
	hc.SweepEvery = -1
	var mctl Control = ctl
	if wrap != nil {
		mctl = wrap(ctl)
	}
	srv, err := New(Config{
		Control: mctl, APIKey: "avk_local", DriverDir: browsertest.DriverDir(),
		ExtraTrustSPKI: []string{site.SPKI}, UnsafeDirectBrowser: true, WaitPoll: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Hosted: &hc,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := &hostedHarness{t: t, site: site, ctl: ctl, srv: srv, clock: clock}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.HTTPHandler(HTTPOptions{Keys: keyTable{keyA: "avk_aaaa", keyB: "avk_bbbb"}}).ServeHTTP(w, r)
	}))
	h.url = hs.URL
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return h
}

// bearer adds the key and records Mcp-Session-Id response headers.
type bearer struct {
	key string
	h   *hostedHarness
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && resp.Header.Get("Mcp-Session-Id") != "" {
		b.h.mu.Lock()
		b.h.sessionIDs++
		b.h.mu.Unlock()
	}
	return resp, err
}

func (h *hostedHarness) client(key string) *mcp.ClientSession {
	h.t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "agent-" + key[:8], Version: "0"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: h.url,
		HTTPClient: &http.Client{Transport: bearer{key, h}}}, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { cs.Close() })
	return cs
}

// call runs a tool and returns the first text item, the whole result.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, *mcp.CallToolResult) {
	t.Helper()
	if args == nil {
		args = map[string]any{}
	}
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	return text(r), r
}

var pendingWait = regexp.MustCompile(`^status=pending wait=(w_[a-z2-7]+) waiting_on_owner=false`)

// openPage opens url on the client's session (session "" starts one) and
// returns the page's own answer: a call that outlived the call deadline is
// followed with get_pending_result, and one that ended with hard_timeout (a
// browser starting on a loaded machine can outlast a short limit) is made
// again, as its answer tells an agent to check and repeat. Bounded: three
// attempts.
func openPage(t *testing.T, cs *mcp.ClientSession, url, session string) (string, *mcp.CallToolResult) {
	t.Helper()
	var txt string
	var r *mcp.CallToolResult
	for attempt := 0; attempt < 3; attempt++ {
		args := map[string]any{"url": url}
		if session != "" {
			args["session"] = session
		}
		txt, r = call(t, cs, "open_page", args)
		for m := pendingWait.FindStringSubmatch(txt); m != nil; m = pendingWait.FindStringSubmatch(txt) {
			txt, r = call(t, cs, "get_pending_result", map[string]any{"wait": m[1]})
		}
		if strings.HasPrefix(txt, "status=ok") {
			return txt, r
		}
		if !strings.Contains(strings.SplitN(txt, "\n", 2)[0], "code=hard_timeout") {
			t.Fatalf("open_page: %q", txt)
		}
		if m := regexp.MustCompile(`session=(s_[a-z2-7]+)`).FindStringSubmatch(txt); m != nil {
			session = m[1]
		}
	}
	t.Fatalf("open_page did not open the page in three attempts: %q", txt)
	return "", nil
}

var handleLine = regexp.MustCompile(`^session: (s_[a-z2-7]+) \(pass this as "session" on every later call in this task\)$`)

// handleOf checks the handle line at the end of r and the session= status
// field, and returns the handle.
func handleOf(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	last, _ := r.Content[len(r.Content)-1].(*mcp.TextContent)
	if last == nil || !handleLine.MatchString(last.Text) {
		t.Fatalf("no handle line at the end of %q", text(r))
	}
	h := handleLine.FindStringSubmatch(last.Text)[1]
	first := text(r)
	if !strings.Contains(strings.SplitN(first, "\n", 2)[0], "session="+h) && !strings.Contains(first, `"session":"`+h+`"`) {
		t.Fatalf("status of %q does not name session %s", first, h)
	}
	return h
}

// TestHostedSessionsByHandle: the session argument, the handle line and
// session= status field, calls without a session by the seed's table, a
// handle reading as ended on another connection, DELETE 405 with the
// browser going on, no Mcp-Session-Id header, and close_session's record.
func TestHostedSessionsByHandle(t *testing.T) {
	h := newHostedHarness(t, HostedConfig{}, nil)
	a, b := h.client(keyA), h.client(keyB)

	txt, _ := call(t, a, "click", map[string]any{"selector": "#place-order"})
	if !strings.HasPrefix(txt, "status=error code=no_page\n") || !strings.Contains(txt, "click needs a browser session: call open_page first, then pass the `session` it returns on this call.") {
		t.Fatalf("click without a session: %q", txt)
	}
	_, r := call(t, a, "get_token_catalog", nil)
	catHandle := handleOf(t, r)
	_, r = call(t, a, "open_page", map[string]any{"url": h.site.CheckoutURL(), "session": catHandle})
	if got := handleOf(t, r); got != catHandle {
		t.Fatalf("open_page on the catalog's session answered %s", got)
	}
	_, r = call(t, b, "open_page", map[string]any{"url": h.site.CheckoutURL()})
	bHandle := handleOf(t, r)
	if bHandle == catHandle || h.ctl.creates() != 2 {
		t.Fatalf("two connections, %d proxyd sessions, handles %s %s", h.ctl.creates(), catHandle, bHandle)
	}
	// A handle belongs to the connection that started it.
	txt, _ = call(t, b, "count", map[string]any{"selector": "#email", "session": catHandle})
	if !strings.HasPrefix(txt, "status=error code=session_ended session_ended=true\n") ||
		!strings.Contains(txt, endedNoRecord+" Call open_page without `session` to start a new one.") {
		t.Fatalf("A's handle on B: %q", txt)
	}
	txt, _ = call(t, a, "count", map[string]any{"selector": strings.Repeat("x", 10), "session": strings.Repeat("s", 201)})
	if !strings.HasPrefix(txt, "status=error code=invalid_params") {
		t.Fatalf("a 201-character session: %q", txt)
	}

	// DELETE closes nothing.
	req, _ := http.NewRequest(http.MethodDelete, h.url, nil)
	req.Header.Set("Authorization", "Bearer "+keyA)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE answered %d", resp.StatusCode)
	}
	txt, r = call(t, a, "count", map[string]any{"selector": "#email", "session": catHandle})
	if r.IsError || !strings.HasPrefix(txt, `{"status":"ok","session":"`+catHandle+`"`) {
		t.Fatalf("count after DELETE: %q", txt)
	}
	// Unauthenticated requests are refused.
	resp, err = http.Post(h.url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no key: %d", resp.StatusCode)
	}

	txt, r = call(t, a, "close_session", map[string]any{"session": catHandle})
	if !strings.HasPrefix(txt, `{"_status":"ok","session":"`+catHandle+`","session_ended":true,"status":"Session closed"`) {
		t.Fatalf("close_session: %q", txt)
	}
	again, _ := call(t, a, "close_session", map[string]any{"session": catHandle})
	if again != txt {
		t.Fatalf("close_session again: %q, first %q", again, txt)
	}
	txt, _ = call(t, a, "count", map[string]any{"selector": "#email", "session": catHandle})
	if !strings.Contains(txt, "This session has ended: the gateway closed it because it was asked to (close_session). What its close found: {\"reports\":[") ||
		!strings.Contains(txt, `"coversWholeRun":true`) || !strings.HasSuffix(txt, "Call open_page without `session` to start a new one.") {
		t.Fatalf("count after close: %q", txt)
	}
	// B's browser went on all along.
	if txt, r = call(t, b, "count", map[string]any{"selector": "#email", "session": bHandle}); r.IsError {
		t.Fatalf("B after A closed: %q", txt)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sessionIDs != 0 {
		t.Fatalf("%d answers carried an Mcp-Session-Id header", h.sessionIDs)
	}
}

// TestHostedSessionEnds: every end reason on an injected clock, with the
// first ended-session message and the close report; a restart leaves only
// the second message.
func TestHostedSessionEnds(t *testing.T) {
	h := newHostedHarness(t, HostedConfig{}, func(c *hostedControl) { c.limit = 2; c.lifetime = 50 * time.Minute })
	a := h.client(keyA)
	open := func() string {
		t.Helper()
		txt, r := call(t, a, "open_page", map[string]any{"url": h.site.CheckoutURL()})
		if r.IsError {
			t.Fatalf("open_page: %q", txt)
		}
		return handleOf(t, r)
	}
	ended := func(handle, reason string) {
		t.Helper()
		txt, _ := call(t, a, "count", map[string]any{"selector": "#email", "session": handle})
		want := "This session has ended: the gateway closed it because " + reason + ". What its close found: "
		if !strings.HasPrefix(txt, "status=error code=session_ended session_ended=true\n"+want) || !strings.Contains(txt, `"reports":[`) {
			t.Fatalf("ended session %s: %q", reason, txt)
		}
	}

	idle := open()
	h.clock.add(12 * time.Minute)
	h.srv.calls.Sweep()
	call(t, a, "count", map[string]any{"selector": "#email", "session": idle}) // a use at 12 min
	h.clock.add(12 * time.Minute)
	h.srv.calls.Sweep()
	if txt, r := call(t, a, "count", map[string]any{"selector": "#email", "session": idle}); r.IsError {
		t.Fatalf("a session used 12 minutes ago ended: %q", txt)
	}
	h.clock.add(13 * time.Minute)
	h.srv.calls.Sweep()
	ended(idle, reasonIdle)

	// The credential lapses 50 minutes after the proxyd session opened:
	// the session ends a minute before.
	cred := open()
	for range 4 {
		h.clock.add(12 * time.Minute)
		h.srv.calls.Sweep()
		call(t, a, "count", map[string]any{"selector": "#email", "session": cred})
	}
	h.clock.add(time.Minute)
	h.srv.calls.Sweep()
	ended(cred, reasonCredential)

	// Age: 56 minutes after the browser opened, even when in use.
	h.ctl.lifetime = 0
	old := open()
	for range 5 {
		h.clock.add(11 * time.Minute)
		h.srv.calls.Sweep()
		call(t, a, "count", map[string]any{"selector": "#email", "session": old})
	}
	h.clock.add(2 * time.Minute)
	h.srv.calls.Sweep()
	ended(old, reasonAge)

	// The key's session limit is 2: a third open_page closes the least
	// recently used session of this connection.
	// The fake clock moves between steps, so "least recently used" has one
	// answer (equal times would leave the choice to map order).
	first := open()
	h.clock.add(time.Second)
	second := open()
	h.clock.add(time.Second)
	call(t, a, "count", map[string]any{"selector": "#email", "session": second})
	h.clock.add(time.Second)
	third := open()
	ended(first, reasonLimitOwn)
	if txt, r := call(t, a, "count", map[string]any{"selector": "#email", "session": third}); r.IsError {
		t.Fatalf("the new session: %q", txt)
	}

	// A restart forgets every session and record.
	h2 := newHostedHarness(t, HostedConfig{}, nil)
	txt, _ := call(t, h2.client(keyA), "count", map[string]any{"selector": "#email", "session": second})
	if !strings.Contains(txt, endedNoRecord) {
		t.Fatalf("after a restart: %q", txt)
	}
}

// TestHostedCallDeadlines: a call waiting on the owner answers pending at
// once with the wait named, get_pending_result returns the fill's own
// answer after the approval; a slow call answers pending at the deadline
// without an owner wait; a call past its limit answers hard_timeout.
func TestHostedCallDeadlines(t *testing.T) {
	h := newHostedHarness(t, HostedConfig{CallDeadline: 8 * time.Second, CallLimit: 20 * time.Second}, nil)
	a := h.client(keyA)
	// The deadlines under test are short; on a loaded machine the first
	// open_page (the browser starting) can outlast even the 20 s limit.
	// openPage follows it as an agent would, so the phases below start
	// with a page open.
	_, r := openPage(t, a, h.site.CheckoutURL(), "")
	s := handleOf(t, r)
	var txt string
	script := &ownerScript{field: "email", answers: []string{"pending"},
		pending: control.Pending{WaitID: "apr_9", Kind: "new_destination", Reason: "new_destination", Site: "127.0.0.1", ExpiresAt: time.Now().Add(time.Hour), Email: true}}
	h.ctl.owner = script
	txt, r = call(t, a, "fill_checkout", map[string]any{"session": s, "fields": []map[string]any{{"selector": "#email", "value": "av_identity_1_email_u7x2k"}}})
	// On a loaded machine the fill may reach the deadline before it reaches
	// the owner's wait: its pending answer then says no owner wait yet, and
	// the next get_pending_result names the wait once proxyd reported it.
	for i := 0; i < 5 && strings.HasPrefix(txt, "status=pending") && strings.Contains(strings.SplitN(txt, "\n", 2)[0], "waiting_on_owner=false"); i++ {
		w := regexp.MustCompile(`wait=(w_[a-z2-7]+)`).FindStringSubmatch(txt)
		if w == nil {
			break
		}
		txt, r = call(t, a, "get_pending_result", map[string]any{"wait": w[1]})
	}
	m := regexp.MustCompile(`^status=pending wait=(w_[a-z2-7]+) waiting_on_owner=true reason=new_destination session=` + s + "\n").FindStringSubmatch(txt)
	if m == nil || !strings.Contains(txt, "fill_checkout is waiting for the account owner to approve a new site (127.0.0.1)") ||
		!strings.Contains(txt, "'Authorize new site: 127.0.0.1'") {
		t.Fatalf("pending fill: %q", txt)
	}
	sc, _ := json.Marshal(r.StructuredContent)
	if !strings.Contains(string(sc), `"waiting_on_owner":true`) || !strings.Contains(string(sc), `"reason":"new_destination"`) {
		t.Fatalf("structuredContent %s", sc)
	}
	wait := m[1]
	txt, _ = call(t, a, "get_pending_result", map[string]any{"wait": wait})
	if !strings.HasPrefix(txt, "status=pending wait="+wait+" waiting_on_owner=true") {
		t.Fatalf("still waiting: %q", txt)
	}
	script.mu.Lock()
	script.answers = []string{"approved"}
	script.mu.Unlock()
	txt, r = call(t, a, "get_pending_result", map[string]any{"wait": wait})
	if r.IsError || !strings.HasPrefix(txt, "status=ok filled=1/1 session="+s+"\n") || handleOf(t, r) != s {
		t.Fatalf("the fill's own answer: %q", txt)
	}

	// No owner wait: pending at the deadline, then the call's own answer.
	txt, _ = call(t, a, "wait_for_selector", map[string]any{"session": s, "selector": "#never", "timeout": 12000})
	m = regexp.MustCompile(`^status=pending wait=(w_[a-z2-7]+) waiting_on_owner=false session=`).FindStringSubmatch(txt)
	if m == nil || !strings.Contains(txt, "No request to the account owner has been reported for this call") {
		t.Fatalf("slow call: %q", txt)
	}
	for {
		txt, _ = call(t, a, "get_pending_result", map[string]any{"wait": m[1]})
		if !strings.HasPrefix(txt, "status=pending") {
			break
		}
	}
	if !strings.HasPrefix(txt, "status=error code=timeout session="+s) {
		t.Fatalf("slow call's answer: %q", txt)
	}
	// Past the call limit: hard_timeout.
	txt, _ = call(t, a, "wait_for_selector", map[string]any{"session": s, "selector": "#never", "timeout": 60000})
	wait = regexp.MustCompile(`wait=(w_[a-z2-7]+)`).FindStringSubmatch(txt)[1]
	for strings.HasPrefix(txt, "status=pending") {
		txt, _ = call(t, a, "get_pending_result", map[string]any{"wait": wait})
	}
	if !strings.HasPrefix(txt, "status=error code=hard_timeout session="+s) || !strings.Contains(txt, "wait_for_selector did not finish within 20s. Its outcome is unknown: check before repeating it.") {
		t.Fatalf("past the limit: %q", txt)
	}
}

// rawCall posts one tools/call with a chosen JSON-RPC id and returns the
// result's text items, joined.
func (h *hostedHarness) rawCall(t *testing.T, key string, id int, tool string, args map[string]any) string {
	t.Helper()
	return h.rawCallWith(t, key, id, tool, args, callProof{})
}

// callProof is what a raw call carries as its idempotency key.
type callProof struct {
	header string // the Idempotency-Key header
	meta   string // _meta's hosted.IdempotencyMeta
}

// rawCallWith is rawCall with an idempotency key.
func (h *hostedHarness) rawCallWith(t *testing.T, key string, id int, tool string, args map[string]any, p callProof) string {
	t.Helper()
	params := map[string]any{"name": tool, "arguments": args}
	if p.meta != "" {
		params["_meta"] = map[string]any{hosted.IdempotencyMeta: p.meta}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
	req, _ := http.NewRequest(http.MethodPost, h.url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	if p.header != "" {
		req.Header.Set(hosted.IdempotencyHeader, p.header)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "data: ")
		var msg struct {
			ID     int `json:"id"`
			Result *struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(line), &msg) != nil || msg.ID != id {
			continue
		}
		if msg.Error != nil {
			t.Fatalf("%s: %s", tool, msg.Error.Message)
		}
		var parts []string
		for _, c := range msg.Result.Content {
			parts = append(parts, c.Text)
		}
		return strings.Join(parts, "\n")
	}
	t.Fatalf("%s: no answer for id %d (status %d)", tool, id, resp.StatusCode)
	return ""
}

// TestP20_RetransmittedCallsNeverRunTwice: a retransmitted first open_page
// (same idempotency key) starts no second session; a retransmitted fill
// (same id, same session) authorizes nothing and returns the first answer,
// a new id runs it again; identical calls at the same time join; refusals
// before the tool ran are not kept.
func TestP20_RetransmittedCallsNeverRunTwice(t *testing.T) {
	h := newHostedHarness(t, HostedConfig{}, nil)
	// Start the browser first on another connection, as a server that has
	// been up has: a cold start on a loaded machine outlasts the 25 s call
	// deadline, and the retransmission would then (rightly) get the
	// finished answer instead of the pending one it repeats.
	openPage(t, h.client(keyB), h.site.CheckoutURL(), "")
	base := h.ctl.creates()
	idem := callProof{header: "3f0c2a9e-5b7d-4e1a-9c6f-0d8b7a6e5f41"}
	first := h.rawCallWith(t, keyA, 1, "open_page", map[string]any{"url": h.site.CheckoutURL()}, idem)
	again := h.rawCallWith(t, keyA, 1, "open_page", map[string]any{"url": h.site.CheckoutURL()}, idem)
	if first != again || h.ctl.creates() != base+1 {
		t.Fatalf("retransmitted first call: %d sessions; %q vs %q", h.ctl.creates()-base, first, again)
	}
	s := regexp.MustCompile(`session: (s_[a-z2-7]+)`).FindStringSubmatch(first)[1]
	cat1 := h.rawCallWith(t, keyA, 2, "get_token_catalog", nil, idem)
	cat2 := h.rawCallWith(t, keyA, 2, "get_token_catalog", nil, idem)
	if h.ctl.creates() != base+2 || regexp.MustCompile(`session: (s_[a-z2-7]+)`).FindString(cat1) != regexp.MustCompile(`session: (s_[a-z2-7]+)`).FindString(cat2) {
		t.Fatalf("retransmitted catalog started another session (%d)", h.ctl.creates()-base)
	}

	fill := map[string]any{"session": s, "fields": []map[string]any{{"selector": "#email", "value": "av_identity_1_email_u7x2k"}}}
	auths := func() int { h.ctl.mu.Lock(); defer h.ctl.mu.Unlock(); return len(h.ctl.auths) }
	n0 := auths()
	a1 := h.rawCall(t, keyA, 3, "fill_checkout", fill)
	a2 := h.rawCall(t, keyA, 3, "fill_checkout", fill)
	if a1 != a2 || auths() != n0+1 || !strings.HasPrefix(a1, "status=ok filled=1/1") {
		t.Fatalf("retransmitted fill: %d authorizations; %q vs %q", auths()-n0, a1, a2)
	}
	h.rawCall(t, keyA, 4, "fill_checkout", fill)
	if auths() != n0+2 {
		t.Fatalf("a new id did not run the fill again (%d)", auths()-n0)
	}
	// On another connection the same id is another call.
	if txt := h.rawCall(t, keyB, 3, "fill_checkout", fill); !strings.Contains(txt, endedNoRecord) {
		t.Fatalf("B: %q", txt)
	}

	// Identical calls at the same time join: one owner request.
	script := &ownerScript{field: "email", answers: []string{"pending"},
		pending: control.Pending{WaitID: "apr_7", Kind: "new_destination", Reason: "new_destination", Site: "127.0.0.1", ExpiresAt: time.Now().Add(time.Hour)}}
	h.ctl.owner = script
	var wg sync.WaitGroup
	answers := make([]string, 2)
	for i := range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); answers[i] = h.rawCall(t, keyA, 10+i, "fill_checkout", fill) }()
	}
	wg.Wait()
	w0 := regexp.MustCompile(`wait=(w_[a-z2-7]+)`).FindString(answers[0])
	if w0 == "" || w0 != regexp.MustCompile(`wait=(w_[a-z2-7]+)`).FindString(answers[1]) || script.asked != 1 {
		t.Fatalf("joined calls: asked %d; %q / %q", script.asked, answers[0], answers[1])
	}
	script.mu.Lock()
	script.approved = true
	script.mu.Unlock()

	// A refusal before the tool ran is not kept: sent again, it runs.
	r1 := h.rawCall(t, keyA, 20, "click", map[string]any{"selector": "#x"})
	if !strings.HasPrefix(r1, "status=error code=no_page") {
		t.Fatalf("click without a session: %q", r1)
	}
	// That it was not kept is package hosted's TestP20_RefusalBeforeTheToolNotKept.
}

func TestInsertStatusKeys(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"status":"ok","count":1}`, `{"status":"ok","session":"s_x","count":1}`},
		{`{"_status":"ok","status":"Session closed"}`, `{"_status":"ok","session":"s_x","status":"Session closed"}`},
		{`{"status":"ok"}`, `{"status":"ok","session":"s_x"}`},
		{`{"status":"ok","session":"mine"}`, `{"status":"ok","_session":"s_x","session":"mine"}`},
	} {
		if got := insertStatusKeys(c.in, [][2]string{{"session", "s_x"}}); got != c.want {
			t.Errorf("%s: got %s", c.in, got)
		}
	}
}

// TestP24_ReplayOnlyToTheClientThatCalled: two MCP clients on one API key
// make the same first calls with the same JSON-RPC ids (every new client
// counts from 1). Each gets a session of its own; the second never sees a
// handle of the first, and driving its own session leaves the first one's
// page where it was.
func TestP24_ReplayOnlyToTheClientThatCalled(t *testing.T) {
	h := newHostedHarness(t, HostedConfig{}, nil)
	a, b := h.client(keyA), h.client(keyA)
	var bSaw strings.Builder
	callB := func(name string, args map[string]any) (string, *mcp.CallToolResult) {
		t.Helper()
		txt, r := call(t, b, name, args)
		for _, c := range r.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				bSaw.WriteString(tc.Text + "\n")
			}
		}
		return txt, r
	}
	checkout := map[string]any{"url": h.site.CheckoutURL()}

	_, r := call(t, a, "open_page", checkout)
	aPage := handleOf(t, r)
	_, r = callB("open_page", checkout)
	bPage := handleOf(t, r)
	if bPage == aPage || h.ctl.creates() != 2 {
		t.Fatalf("the same first open_page on two clients: %d proxyd sessions, handles %s and %s", h.ctl.creates(), aPage, bPage)
	}
	// B's new browser is told of A's by its site, not its handle (seed 004
	// open_page; the handle check is at the end).
	if host := strings.Split(strings.TrimPrefix(h.site.Shop.URL, "https://"), ":")[0]; !strings.Contains(bSaw.String(), "This connection already has 1 other open browser: one on "+host+" (") {
		t.Fatalf("B's open_page does not name A's browser by its site: %q", bSaw.String())
	}
	// get_token_catalog is not kept, but a retransmitted first call runs on
	// the session the first one started: only for the same client.
	_, r = call(t, a, "get_token_catalog", nil)
	aCat := handleOf(t, r)
	_, r = callB("get_token_catalog", nil)
	bCat := handleOf(t, r)
	if bCat == aCat || bCat == aPage || h.ctl.creates() != 4 {
		t.Fatalf("the same first get_token_catalog on two clients: %d proxyd sessions, handles %s and %s", h.ctl.creates(), aCat, bCat)
	}

	// B drives its own browser only.
	if txt, r := callB("open_page", map[string]any{"url": h.site.LoginURL(), "session": bPage}); r.IsError {
		t.Fatalf("B's own open_page: %q", txt)
	}
	if txt, _ := call(t, a, "count", map[string]any{"selector": "#place-order", "session": aPage}); !strings.Contains(txt, `"count":1`) {
		t.Fatalf("A's page after B's navigation: %q", txt)
	}
	if txt, _ := callB("count", map[string]any{"selector": "#place-order", "session": bPage}); !strings.Contains(txt, `"count":0`) {
		t.Fatalf("B's page: %q", txt)
	}
	for _, hs := range []string{aPage, aCat} {
		if strings.Contains(bSaw.String(), hs) {
			t.Fatalf("B was given A's handle %s", hs)
		}
	}
}

// gateControl holds every CreateSession while the gate is shut, telling
// the test each time one arrives.
type gateControl struct {
	*hostedControl
	arrived chan struct{}
	gate    chan struct{}
}

func (g *gateControl) CreateSession(ctx context.Context, apiKey string) (control.CreateSessionResponse, error) {
	g.arrived <- struct{}{}
	<-g.gate
	return g.hostedControl.CreateSession(ctx, apiKey)
}

// TestP24_SameCallAtTheSameTimeJoinsOnlyItsClient: while one client's first
// open_page runs, another client on the same API key sending the same call
// with the same JSON-RPC id does not join it: it starts its own session.
func TestP24_SameCallAtTheSameTimeJoinsOnlyItsClient(t *testing.T) {
	g := &gateControl{arrived: make(chan struct{}, 4), gate: make(chan struct{})}
	h := newHostedHarnessWrap(t, HostedConfig{}, nil, func(c *hostedControl) Control {
		g.hostedControl = c
		return g
	})
	a, b := h.client(keyA), h.client(keyA)
	var opened sync.Once
	open := func() { opened.Do(func() { close(g.gate) }) }
	t.Cleanup(open) // before the clients close: a failed test leaves no call held
	args := map[string]any{"url": h.site.CheckoutURL()}
	answers := make(chan *mcp.CallToolResult, 2)
	for _, cs := range []*mcp.ClientSession{a, b} {
		go func() {
			r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "open_page", Arguments: args})
			if err != nil {
				r = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
			}
			answers <- r
		}()
	}
	// Both calls reach proxyd: neither joined the other.
	for i := range 2 {
		select {
		case <-g.arrived:
		case <-time.After(time.Minute):
			t.Fatalf("%d of the two first calls asked proxyd for a session: the other joined it", i)
		}
	}
	open()
	var handles []string
	for range 2 {
		select {
		case r := <-answers:
			if r.IsError {
				t.Fatalf("open_page: %q", text(r))
			}
			handles = append(handles, handleOf(t, r))
		case <-time.After(time.Minute):
			t.Fatal("open_page did not answer")
		}
	}
	if handles[0] == handles[1] || h.ctl.creates() != 2 {
		t.Fatalf("two clients at the same time: %d proxyd sessions, handles %v", h.ctl.creates(), handles)
	}
}

// loginFailControl answers login writes the way proxyd does for a key it
// does not know (invalid_api_key), and a rotation as a write whose outcome
// is unknown; it counts the calls that reached it.
type loginFailControl struct {
	*hostedControl
	mu                         sync.Mutex
	creates, usernames, rotate int
}

func (c *loginFailControl) CreateLogin(ctx context.Context, in control.CreateLoginIn) (control.SignupRequestOut, error) {
	c.mu.Lock()
	c.creates++
	c.mu.Unlock()
	return control.SignupRequestOut{}, agentvault.Errorf(agentvault.CodeInvalidAPIKey, "the API key is not valid")
}

func (c *loginFailControl) SignupRequest(ctx context.Context, in control.SignupRequestIn) (control.SignupRequestOut, error) {
	return control.SignupRequestOut{}, agentvault.Errorf(agentvault.CodeInvalidAPIKey, "the API key is not valid")
}

func (c *loginFailControl) WaitSignup(ctx context.Context, in control.SignupRequestIn) (control.SignupRequestOut, error) {
	return control.SignupRequestOut{}, agentvault.Errorf(agentvault.CodeInvalidAPIKey, "the API key is not valid")
}

func (c *loginFailControl) SetLoginUsername(ctx context.Context, in control.LoginUsernameIn) (control.DoneOut, error) {
	c.mu.Lock()
	c.usernames++
	c.mu.Unlock()
	return control.DoneOut{}, agentvault.Errorf(agentvault.CodeInvalidAPIKey, "the API key is not valid")
}

func (c *loginFailControl) RotateLoginPassword(ctx context.Context, in control.LoginRotateIn) (control.DoneOut, error) {
	c.mu.Lock()
	c.rotate++
	c.mu.Unlock()
	return control.DoneOut{}, agentvault.Errorf(agentvault.CodeWriteOutcomeUnknown, "the change may or may not have been stored: do not retry it blind")
}

func (c *loginFailControl) counts() (int, int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.creates, c.usernames, c.rotate
}

// TestP24_ToolFailureNotReplayed: a login write that failed inside the tool
// (invalid_api_key) is not kept: sent again with the same JSON-RPC id (and,
// for the first call, the same idempotency key) it runs again, on the
// session the first call started. A write whose outcome is unknown is
// kept and given again without running (P20).
func TestP24_ToolFailureNotReplayed(t *testing.T) {
	var lf *loginFailControl
	h := newHostedHarnessWrap(t, HostedConfig{}, nil, func(c *hostedControl) Control {
		lf = &loginFailControl{hostedControl: c}
		return lf
	})
	idem := callProof{meta: "b7c1d0e2-login-retry-4a5f9e3c"}
	args := map[string]any{"website": "example.com", "email": "agent@example.org"}
	first := h.rawCallWith(t, keyA, 7, "create_login", args, idem)
	if !strings.HasPrefix(first, "status=error code=invalid_api_key") {
		t.Fatalf("create_login: %q", first)
	}
	s := regexp.MustCompile(`session: (s_[a-z2-7]+)`).FindStringSubmatch(first)
	if s == nil {
		t.Fatalf("a login write that failed names no session: %q", first)
	}
	again := h.rawCallWith(t, keyA, 7, "create_login", args, idem)
	if creates, _, _ := lf.counts(); creates != 2 || !strings.HasPrefix(again, "status=error code=invalid_api_key") {
		t.Fatalf("the retransmitted create_login reached proxyd %d times in all: %q", creates, again)
	}
	if !strings.Contains(again, "session: "+s[1]) || h.ctl.creates() != 1 {
		t.Fatalf("the retransmission started another session (%d): %q", h.ctl.creates(), again)
	}

	// On the session: the same.
	set := map[string]any{"session": s[1], "label": "example", "username": "ada"}
	h.rawCall(t, keyA, 8, "set_login_username", set)
	h.rawCall(t, keyA, 8, "set_login_username", set)
	if _, usernames, _ := lf.counts(); usernames != 2 {
		t.Fatalf("set_login_username failed inside the tool and its retransmission ran %d times in all", usernames)
	}
	// An unknown outcome is kept.
	rot := map[string]any{"session": s[1], "label": "example"}
	r1 := h.rawCall(t, keyA, 9, "rotate_login_password", rot)
	r2 := h.rawCall(t, keyA, 9, "rotate_login_password", rot)
	if _, _, rotations := lf.counts(); rotations != 1 || r1 != r2 || !strings.HasPrefix(r1, "status=error code=write_outcome_unknown") {
		t.Fatalf("a write of unknown outcome ran %d times: %q / %q", rotations, r1, r2)
	}
}

// TestP24_IdempotencyKeyProvesTheClient: the same first call with the same
// JSON-RPC id gets its first answer again only under the same idempotency
// key (the header and _meta are one key); under another key, or none, it
// runs and starts a session of its own. A malformed key is refused before
// anything runs.
func TestP24_IdempotencyKeyProvesTheClient(t *testing.T) {
	h := newHostedHarness(t, HostedConfig{}, nil)
	args := map[string]any{"url": h.site.CheckoutURL()}
	const mine, theirs = "client-a-7d0f6b5c-2a41-4f0e", "client-b-91c3e0aa-55d2-4b7e"
	handle := func(txt string) string {
		t.Helper()
		m := regexp.MustCompile(`session: (s_[a-z2-7]+)`).FindStringSubmatch(txt)
		if m == nil {
			t.Fatalf("no session in %q", txt)
		}
		return m[1]
	}
	first := h.rawCallWith(t, keyA, 1, "open_page", args, callProof{header: mine})
	own := handle(first)
	other := h.rawCallWith(t, keyA, 1, "open_page", args, callProof{header: theirs})
	if handle(other) == own || h.ctl.creates() != 2 {
		t.Fatalf("another key was given the first answer: %q", other)
	}
	none := h.rawCall(t, keyA, 1, "open_page", args)
	if handle(none) == own || h.ctl.creates() != 3 {
		t.Fatalf("no key was given the first answer: %q", none)
	}
	if again := h.rawCallWith(t, keyA, 1, "open_page", args, callProof{meta: mine}); again != first || h.ctl.creates() != 3 {
		t.Fatalf("the same key (in _meta) ran the call again (%d sessions): %q, first %q", h.ctl.creates(), again, first)
	}
	for _, bad := range []callProof{{header: "short"}, {meta: mine + " x"}, {header: mine, meta: theirs}} {
		txt := h.rawCallWith(t, keyA, 1, "open_page", args, bad)
		if !strings.HasPrefix(txt, "status=error code=invalid_params") || !strings.Contains(txt, "idempotency key") || h.ctl.creates() != 3 {
			t.Fatalf("key %+v: %q (%d sessions)", bad, txt, h.ctl.creates())
		}
	}
}

// keyRecorder records the API key each login write and recipe call reaches
// proxyd with.
type keyRecorder struct {
	*hostedControl
	mu   sync.Mutex
	keys []string
}

func (k *keyRecorder) saw(key string) {
	k.mu.Lock()
	k.keys = append(k.keys, key)
	k.mu.Unlock()
}

func (k *keyRecorder) seen() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.keys...)
}

func (k *keyRecorder) CreateLogin(ctx context.Context, in control.CreateLoginIn) (control.SignupRequestOut, error) {
	k.saw(in.APIKey)
	return control.SignupRequestOut{RequestID: "sr_1", Status: "pending", ExpiresAt: time.Unix(0, 0)}, nil
}

func (k *keyRecorder) SignupRequest(ctx context.Context, in control.SignupRequestIn) (control.SignupRequestOut, error) {
	k.saw(in.APIKey)
	return control.SignupRequestOut{RequestID: in.RequestID, Status: "pending"}, nil
}

func (k *keyRecorder) WaitSignup(ctx context.Context, in control.SignupRequestIn) (control.SignupRequestOut, error) {
	k.saw(in.APIKey)
	return control.SignupRequestOut{RequestID: in.RequestID, Status: "pending"}, nil
}

func (k *keyRecorder) SetLoginUsername(ctx context.Context, in control.LoginUsernameIn) (control.DoneOut, error) {
	k.saw(in.APIKey)
	return control.DoneOut{Done: true}, nil
}

func (k *keyRecorder) RotateLoginPassword(ctx context.Context, in control.LoginRotateIn) (control.DoneOut, error) {
	k.saw(in.APIKey)
	return control.DoneOut{Done: true}, nil
}

func (k *keyRecorder) Recipes(ctx context.Context, pageURL string) (json.RawMessage, error) {
	return json.RawMessage(`{"merchant":null,"platform":null,"signup":null,"signupPlatform":null}`), nil
}

func (k *keyRecorder) SubmitRecipe(ctx context.Context, req control.SubmitRecipeRequest) (control.RecipeSubmission, error) {
	k.saw(req.APIKey)
	return control.RecipeSubmission{ID: "rs_1", Status: "needs_human", Verdict: "Passed screening."}, nil
}

func (k *keyRecorder) RecipeSubmission(ctx context.Context, apiKey, id string, wait time.Duration) (control.RecipeSubmission, error) {
	k.saw(apiKey)
	return control.RecipeSubmission{ID: id, Status: "needs_human", Verdict: "Passed screening."}, nil
}

// TestP24_HostedCallsActWithTheConnectionsKey: on the hosted server a
// login write and a recipe submission reach proxyd with the key the client
// connected with, never mcpd's own (which would act for whoever that key
// belongs to, or answer invalid_api_key inside the tool when mcpd has none).
func TestP24_HostedCallsActWithTheConnectionsKey(t *testing.T) {
	var kr *keyRecorder
	h := newHostedHarnessWrap(t, HostedConfig{}, nil, func(c *hostedControl) Control {
		kr = &keyRecorder{hostedControl: c}
		return kr
	})
	b := h.client(keyB)
	txt, r := call(t, b, "create_login", map[string]any{"website": "example.com", "email": "agent@example.org"})
	if r.IsError {
		t.Fatalf("create_login: %q", txt)
	}
	s := handleOf(t, r)
	call(t, b, "set_login_username", map[string]any{"session": s, "label": "example", "username": "ada"})
	call(t, b, "get_signup_request", map[string]any{"session": s, "requestId": "sr_1"})
	if txt, r := call(t, b, "submit_checkout_recipe", map[string]any{"recipe": map[string]any{"id": "shop.example.com", "kind": "merchant"}}); r.IsError {
		t.Fatalf("submit_checkout_recipe without a session: %q", txt)
	}
	seen := kr.seen()
	if len(seen) < 4 {
		t.Fatalf("%d calls reached proxyd", len(seen))
	}
	for _, k := range seen {
		if k != keyB {
			t.Fatalf("a call of the connection on %s reached proxyd with another key (%d chars)", keyB[:8], len(k))
		}
	}
}
