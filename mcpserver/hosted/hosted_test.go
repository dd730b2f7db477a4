package hosted

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// These tests run the call layer over its real HTTP transport with a tool
// server that has no browser (fakeTools): the rules of the session table,
// replay and the transport, in milliseconds. mcpserver's hosted tests run
// the same rules with the real tools and Chromium.

// fakeTools is a tool server whose sessions are records and whose answers
// carry a status line of the same shape as mcpserver's.
type fakeTools struct {
	mu     sync.Mutex
	opened []*fakeSession
	runs   map[string]int // by tool
	// fail makes a tool answer an error with this code (set before calls).
	fail map[string]agentvault.Code
	// noPage: sessions opened from now on have no page (HasPage).
	noPage bool
	// limit: Open refuses too_many_sessions while this many sessions are
	// open (0: no limit).
	limit int
	// report: the tool reports this owner wait as it starts (set before
	// calls).
	report map[string]*control.Pending
	// block: the tool runs until the channel is closed or its context
	// ends (set before calls); running gets the tool's name as it starts.
	block   map[string]chan struct{}
	running chan string
	// stubborn: a blocked tool ignores its context's end (a call the
	// server cannot stop).
	stubborn map[string]bool
	// pendings are the pending answers asked for, in order.
	pendings []Pending
}

type fakeSession struct {
	id     string
	noPage bool
	mu     sync.Mutex
	closed bool
}

func (s *fakeSession) ProxyID() string           { return s.id }
func (s *fakeSession) Expires() time.Time        { return time.Time{} }
func (s *fakeSession) HasPage() bool             { return !s.noPage }
func (s *fakeSession) PageHost() (string, bool)  { return "shop.example", true }
func (s *fakeSession) Found() *Found             { return &Found{Note: "fake close"} }
func (s *fakeSession) Close(ctx context.Context) { s.mu.Lock(); s.closed = true; s.mu.Unlock() }

func (s *fakeSession) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (f *fakeTools) Open(ctx context.Context, apiKey, handle string) (Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.limit > 0 {
		open := 0
		for _, s := range f.opened {
			if !s.isClosed() {
				open++
			}
		}
		if open >= f.limit {
			return nil, agentvault.Errorf(agentvault.CodeTooManySessions, "this API key has too many open sessions: close one first")
		}
	}
	s := &fakeSession{id: fmt.Sprintf("proxy%d", len(f.opened)+1), noPage: f.noPage}
	f.opened = append(f.opened, s)
	return s, nil
}

func answer(isError bool, text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: isError, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

func (f *fakeTools) Error(err error) *mcp.CallToolResult {
	return answer(true, "status=error code="+string(agentvault.ErrorCode(err))+"\n"+agentvault.ErrorMessage(err))
}

func (f *fakeTools) Pending(p Pending) *mcp.CallToolResult {
	f.mu.Lock()
	f.pendings = append(f.pendings, p)
	f.mu.Unlock()
	return answer(false, "status=pending wait="+p.Wait+"\n"+p.Tool+" is still running")
}

// lastPending is the latest pending answer asked for.
func (f *fakeTools) lastPending(t *testing.T) Pending {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.pendings) == 0 {
		t.Fatal("no pending answer was made")
	}
	return f.pendings[len(f.pendings)-1]
}

func (f *fakeTools) AddStatus(res *mcp.CallToolResult, pairs [][2]string) {
	tc := res.Content[0].(*mcp.TextContent)
	line, rest, _ := strings.Cut(tc.Text, "\n")
	for _, kv := range pairs {
		line += " " + kv[0] + "=" + kv[1]
	}
	tc.Text = line + "\n" + rest
}

func (f *fakeTools) Code(res *mcp.CallToolResult) agentvault.Code {
	line, _, _ := strings.Cut(res.Content[0].(*mcp.TextContent).Text, "\n")
	for _, kv := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(kv, "code="); ok {
			return agentvault.Code(v)
		}
	}
	return ""
}

func (f *fakeTools) ran(tool string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs[tool]++
	return f.runs[tool]
}

func (f *fakeTools) count(tool string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[tool]
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

const keyA, keyB = "avk_aaaa_secretA", "avk_bbbb_secretB"

type fakeIn struct {
	SessionArg
	Selector string `json:"selector,omitempty"`
}

type fakeHarness struct {
	calls *Calls
	tools *fakeTools
	url   string
	clock *fakeClock
}

func newFakeHarness(t *testing.T) *fakeHarness {
	t.Helper()
	return newFakeHarnessKeys(t, keyTable{keyA: "avk_aaaa", keyB: "avk_bbbb"})
}

// newFakeHarnessKeys is newFakeHarness with its own key check.
func newFakeHarnessKeys(t *testing.T, keys KeyChecker) *fakeHarness {
	t.Helper()
	return newFakeHarnessConfig(t, keys, Config{})
}

// newFakeHarnessConfig is newFakeHarnessKeys with the hosted limits of cfg
// (its clock and sweeper are the harness's).
func newFakeHarnessConfig(t *testing.T, keys KeyChecker, cfg Config) *fakeHarness {
	t.Helper()
	stop, cancel := context.WithCancel(context.Background())
	clock := &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	ft := &fakeTools{runs: map[string]int{}, fail: map[string]agentvault.Code{}, report: map[string]*control.Pending{},
		block: map[string]chan struct{}{}, running: make(chan string, 16)}
	cl := New(ft, Options{APIKey: "avk_local", Stop: stop})
	cfg.Now, cfg.SweepEvery = clock.now, -1
	cl.Enable(cfg)
	srv := mcp.NewServer(&mcp.Implementation{Name: "fake", Version: "0"}, nil)
	for _, name := range []string{"open_page", "click", "close_session", "get_checkout_recipes", "fill_checkout", "create_login",
		"get_token_catalog", "wait_for_signup_approval", "request_challenge_handoff"} {
		mcp.AddTool(srv, &mcp.Tool{Name: name}, func(ctx context.Context, req *mcp.CallToolRequest, in fakeIn) (*mcp.CallToolResult, any, error) {
			return cl.Dispatch(ctx, req, name, &in, func(ctx context.Context) *mcp.CallToolResult {
				n := ft.ran(name)
				ft.mu.Lock()
				p, block, stubborn := ft.report[name], ft.block[name], ft.stubborn[name]
				ft.mu.Unlock()
				if p != nil {
					FlightOf(ctx).OwnerWaiting(p)
				}
				if block != nil {
					ft.running <- name
					if stubborn {
						<-block
					}
					select {
					case <-block:
					case <-ctx.Done():
						return ft.Error(agentvault.Errorf(agentvault.CodeTimeout, "%s was stopped", name))
					}
				}
				if code := ft.fail[name]; code != "" {
					return ft.Error(agentvault.Errorf(code, "%s failed unexpectedly", name))
				}
				return answer(false, fmt.Sprintf("status=ok\n%s run %d on %s", name, n, in.Session))
			}), nil, nil
		})
	}
	cl.RegisterPending(srv)
	hs := httptest.NewServer(cl.Handler(srv, HTTPOptions{Keys: keys}))
	t.Cleanup(func() { hs.Close(); cancel() })
	return &fakeHarness{calls: cl, tools: ft, url: hs.URL, clock: clock}
}

// call posts one tools/call as JSON-RPC and returns the answer's text.
func (h *fakeHarness) call(t *testing.T, key string, id int, tool string, args map[string]any, idem string) string {
	t.Helper()
	return h.callHeader(t, key, id, tool, args, idem, nil)
}

// callHeader is call with more request headers.
func (h *fakeHarness) callHeader(t *testing.T, key string, id int, tool string, args map[string]any, idem string, hdr map[string]string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
	req, _ := http.NewRequest(http.MethodPost, h.url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	if idem != "" {
		req.Header.Set(IdempotencyHeader, idem)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Mcp-Session-Id") != "" {
		t.Errorf("%s: the answer carries an Mcp-Session-Id header", tool)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var msg struct {
			ID     int `json:"id"`
			Result *struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(strings.TrimPrefix(sc.Text(), "data: ")), &msg) != nil || msg.ID != id || msg.Result == nil {
			continue
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

var handleRE = regexp.MustCompile(`(?m)^session: (s_[a-z2-7]{16}) \(pass this as "session"`)

func handleIn(t *testing.T, txt string) string {
	t.Helper()
	m := handleRE.FindStringSubmatch(txt)
	if m == nil || !strings.Contains(strings.SplitN(txt, "\n", 2)[0], "session="+m[1]) {
		t.Fatalf("no handle line and session= status in %q", txt)
	}
	return m[1]
}

// TestHostedSessionTableWithoutABrowser: a first call starts a session and
// names its handle, a call on the handle runs on it, a handle is nobody's
// on another connection, DELETE closes nothing, and close_session ends the
// session with a record later calls read.
func TestHostedSessionTableWithoutABrowser(t *testing.T) {
	h := newFakeHarness(t)
	txt := h.call(t, keyA, 1, "open_page", nil, "")
	handle := handleIn(t, txt)
	if len(h.tools.opened) != 1 {
		t.Fatalf("sessions opened: %d", len(h.tools.opened))
	}
	if txt := h.call(t, keyA, 2, "click", map[string]any{"session": handle}, ""); !strings.Contains(txt, "click run 1 on "+handle) {
		t.Fatalf("click on the session: %q", txt)
	}
	if txt := h.call(t, keyA, 3, "click", nil, ""); !strings.HasPrefix(txt, "status=error code=no_page\n") || h.tools.count("click") != 1 {
		t.Fatalf("click without a session: %q", txt)
	}
	if txt := h.call(t, keyB, 4, "click", map[string]any{"session": handle}, ""); !strings.HasPrefix(txt, "status=error code=session_ended session_ended=true\n") ||
		!strings.Contains(txt, endedNoRecord) {
		t.Fatalf("A's handle on B: %q", txt)
	}
	req, _ := http.NewRequest(http.MethodDelete, h.url, nil)
	req.Header.Set("Authorization", "Bearer "+keyA)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || h.tools.opened[0].isClosed() {
		t.Fatalf("DELETE: %d, closed %v", resp.StatusCode, h.tools.opened[0].isClosed())
	}
	if txt := h.call(t, keyA, 5, "close_session", map[string]any{"session": handle}, ""); !strings.Contains(txt, "session_ended=true") {
		t.Fatalf("close_session: %q", txt)
	}
	want := "This session has ended: the gateway closed it because " + reasonClosed + `. What its close found: {"note":"fake close"}`
	if txt := h.call(t, keyA, 6, "click", map[string]any{"session": handle}, ""); !strings.Contains(txt, want) {
		t.Fatalf("after close_session: %q", txt)
	}
}

// TestP20_HostedRetransmissionRunsOnce: the same call on a session with
// the same JSON-RPC id gets the first answer without running; a new id
// runs it again.
func TestP20_HostedRetransmissionRunsOnce(t *testing.T) {
	h := newFakeHarness(t)
	handle := handleIn(t, h.call(t, keyA, 1, "open_page", nil, ""))
	args := map[string]any{"session": handle, "selector": "#pay"}
	first := h.call(t, keyA, 7, "click", args, "")
	if again := h.call(t, keyA, 7, "click", args, ""); again != first || h.tools.count("click") != 1 {
		t.Fatalf("retransmission ran %d times: %q / %q", h.tools.count("click"), first, again)
	}
	if txt := h.call(t, keyA, 8, "click", args, ""); !strings.Contains(txt, "click run 2") {
		t.Fatalf("a new id: %q", txt)
	}
}

// TestP20_RefusalBeforeTheToolNotKept: a call refused before its tool ran
// (a click with no session) is not kept for replay, even when the client
// proved it with an idempotency key: sent again, it is decided again. A
// call that ran is kept.
func TestP20_RefusalBeforeTheToolNotKept(t *testing.T) {
	h := newFakeHarness(t)
	const idem = "idem-0123456789abcdef"
	if txt := h.call(t, keyA, 20, "click", map[string]any{"selector": "#x"}, idem); !strings.HasPrefix(txt, "status=error code=no_page\n") {
		t.Fatalf("click without a session: %q", txt)
	}
	h.call(t, keyA, 21, "open_page", map[string]any{}, idem)
	h.calls.hosted.mu.Lock()
	c := h.calls.hosted.conns["avk_aaaa"]
	h.calls.hosted.mu.Unlock()
	if c.replay.get(flightKeyOf("click", `{"selector":"#x"}`, "", "20", idem), h.clock.now()) != nil {
		t.Fatal("a refusal made before the tool ran was kept")
	}
	if c.replay.get(flightKeyOf("open_page", `{}`, "", "21", idem), h.clock.now()) == nil {
		t.Fatal("a call that ran was not kept")
	}
}

// TestSeed004_CloseSessionInternalErrorStillCloses: a close_session that
// fails inside answers "close_session hit an internal error, but the
// session is closed." with what the close found; the session is closed
// and later calls on it read the ended message.
func TestSeed004_CloseSessionInternalErrorStillCloses(t *testing.T) {
	h := newFakeHarness(t)
	handle := handleIn(t, h.call(t, keyA, 1, "open_page", nil, ""))
	h.tools.fail["close_session"] = agentvault.CodeInternal
	txt := h.call(t, keyA, 2, "close_session", map[string]any{"session": handle}, "")
	if !strings.HasPrefix(txt, "status=error code=internal session="+handle+" session_ended=true\n") ||
		!strings.Contains(txt, `close_session hit an internal error, but the session is closed. What its close found: {"note":"fake close"}`) {
		t.Fatalf("close_session failing inside: %q", txt)
	}
	if !h.tools.opened[0].isClosed() {
		t.Fatal("the session's browser was not closed")
	}
	if txt := h.call(t, keyA, 3, "click", map[string]any{"session": handle}, ""); !strings.Contains(txt, "This session has ended: the gateway closed it because "+reasonClosed) {
		t.Fatalf("a call after the failed close: %q", txt)
	}
	if txt2 := h.call(t, keyA, 4, "close_session", map[string]any{"session": handle}, ""); txt2 != txt {
		t.Fatalf("close_session sent again: %q", txt2)
	}
}

// TestSeed004_CloseSessionRefusedForItsArgumentsClosesAnyway: a
// close_session whose arguments fail the schema is refused with a status
// line, still closes the session it names, and says "The session is
// closed anyway."
func TestSeed004_CloseSessionRefusedForItsArgumentsClosesAnyway(t *testing.T) {
	h := newFakeHarness(t)
	handle := handleIn(t, h.call(t, keyA, 1, "open_page", nil, ""))
	txt := h.call(t, keyA, 2, "close_session", map[string]any{"session": handle, "selector": 5}, "")
	if !strings.HasPrefix(txt, "status=error code=invalid_params session="+handle+" session_ended=true\n") || !strings.Contains(txt, "The session is closed anyway.") ||
		h.tools.count("close_session") != 0 {
		t.Fatalf("close_session with refused arguments: %q", txt)
	}
	if !h.tools.opened[0].isClosed() {
		t.Fatal("the session's browser was not closed")
	}
	if txt := h.call(t, keyA, 3, "click", map[string]any{"session": handle}, ""); !strings.Contains(txt, "This session has ended: the gateway closed it because "+reasonClosed) {
		t.Fatalf("a call after the refused close: %q", txt)
	}
}

// TestSeed004_OpenPageFailingWithoutAPageClosesTheSession: an open_page
// without a session that fails before a page opened closes the session it
// started and names no handle; the next open_page starts a new one.
func TestSeed004_OpenPageFailingWithoutAPageClosesTheSession(t *testing.T) {
	h := newFakeHarness(t)
	h.tools.noPage = true
	h.tools.fail["open_page"] = agentvault.CodeUnavailable
	txt := h.call(t, keyA, 1, "open_page", nil, "")
	if !strings.HasPrefix(txt, "status=error code=unavailable\n") || strings.Contains(txt, "session") {
		t.Fatalf("open_page failing without a page: %q", txt)
	}
	if len(h.tools.opened) != 1 {
		t.Fatalf("sessions opened: %d", len(h.tools.opened))
	}
	deadline := time.Now().Add(10 * time.Second)
	for !h.tools.opened[0].isClosed() {
		if time.Now().After(deadline) {
			t.Fatal("the session open_page started was not closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.calls.hosted.mu.Lock()
	c := h.calls.hosted.conns["avk_aaaa"]
	h.calls.hosted.mu.Unlock()
	c.mu.Lock()
	live := len(c.live)
	c.mu.Unlock()
	if live != 0 {
		t.Fatalf("%d sessions still live", live)
	}
	h.tools.noPage = false
	delete(h.tools.fail, "open_page")
	if handle := handleIn(t, h.call(t, keyA, 2, "open_page", nil, "")); handle == "" || len(h.tools.opened) != 2 {
		t.Fatalf("the next open_page: %q, %d sessions", handle, len(h.tools.opened))
	}
}

// TestSeed004_EndedSessionRecordLastsAnHourAndTheLast100: a connection
// keeps the record of its last 100 ended sessions for an hour: the 101st
// most recent, or one ended over an hour ago, reads as the message with no
// record.
func TestSeed004_EndedSessionRecordLastsAnHourAndTheLast100(t *testing.T) {
	h := newFakeHarness(t)
	var handles []string
	for i := 0; i < endedMax+1; i++ {
		hd := handleIn(t, h.call(t, keyA, 1000+2*i, "open_page", nil, ""))
		h.call(t, keyA, 1001+2*i, "close_session", map[string]any{"session": hd}, "")
		handles = append(handles, hd)
	}
	withRecord := "This session has ended: the gateway closed it because " + reasonClosed
	if txt := h.call(t, keyA, 1, "click", map[string]any{"session": handles[0]}, ""); !strings.Contains(txt, endedNoRecord) {
		t.Fatalf("the 101st most recent ended session: %q", txt)
	}
	if txt := h.call(t, keyA, 2, "click", map[string]any{"session": handles[1]}, ""); !strings.Contains(txt, withRecord) {
		t.Fatalf("the 100th most recent ended session: %q", txt)
	}
	last := handles[len(handles)-1]
	h.clock.add(endedKeep - time.Minute)
	if txt := h.call(t, keyA, 3, "click", map[string]any{"session": last}, ""); !strings.Contains(txt, withRecord) {
		t.Fatalf("59 minutes after its end: %q", txt)
	}
	h.clock.add(2 * time.Minute)
	if txt := h.call(t, keyA, 4, "click", map[string]any{"session": last}, ""); !strings.Contains(txt, endedNoRecord) {
		t.Fatalf("61 minutes after its end: %q", txt)
	}
}
