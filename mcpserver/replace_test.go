package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// deadControl plays proxyd ending proxy sessions under a run: a dead
// session's Report is its final one marked ended; an unreadable one fails.
type deadControl struct {
	*hostedControl
	mu         sync.Mutex
	dead       map[string]control.Report
	unreadable map[string]bool
}

func (c *deadControl) Report(ctx context.Context, id string) (control.Report, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.dead[id]; ok {
		r.Ended = true
		return r, nil
	}
	if c.unreadable[id] {
		return control.Report{}, agentvault.Errorf(agentvault.CodeUnavailable, "the proxy did not answer")
	}
	return c.hostedControl.Report(ctx, id)
}

func (c *deadControl) CloseSession(ctx context.Context, id string) (control.CloseResponse, error) {
	c.mu.Lock()
	bad := c.unreadable[id]
	c.mu.Unlock()
	if bad {
		return control.CloseResponse{}, agentvault.Errorf(agentvault.CodeUnavailable, "the proxy did not answer")
	}
	return c.hostedControl.CloseSession(ctx, id)
}

// TestHostedOpenPageReplacesDeadProxySession: open_page on a run whose
// proxy session ended starts a new one on the same handle, and
// get_run_report and close_session then carry earlierReports,
// earlierReportsNote and coversWholeRun false (seed 004, "After a
// restart"), down to the currentReport: null form when the current proxy
// session cannot be read.
func TestHostedOpenPageReplacesDeadProxySession(t *testing.T) {
	var ctl *deadControl
	h := newHostedHarnessWrap(t, HostedConfig{}, nil, func(c *hostedControl) Control {
		ctl = &deadControl{hostedControl: c, dead: map[string]control.Report{}, unreadable: map[string]bool{}}
		return ctl
	})
	a := h.client(keyA)
	_, r := call(t, a, "open_page", map[string]any{"url": h.site.CheckoutURL()})
	handle := handleOf(t, r)
	txt, _ := call(t, a, "get_run_report", map[string]any{"session": handle})
	if !strings.Contains(txt, `"coversWholeRun":true`) || strings.Contains(txt, "earlierReports") {
		t.Fatalf("report before any replacement: %q", txt)
	}
	// proxyd ended s_proxy1 after a card went in.
	ctl.mu.Lock()
	ctl.dead["s_proxy1"] = control.Report{FilledFieldKinds: []string{"card", "cvv"}, DeniedCount: 1, CredentialWrites: []string{"shop:created"}}
	ctl.mu.Unlock()
	txt, r = call(t, a, "open_page", map[string]any{"url": h.site.CheckoutURL(), "session": handle})
	if r.IsError || handleOf(t, r) != handle || h.ctl.creates() != 2 {
		t.Fatalf("open_page after the proxy session died: %q, %d proxy sessions", txt, h.ctl.creates())
	}
	if txt, r := call(t, a, "count", map[string]any{"selector": "#email", "session": handle}); r.IsError {
		t.Fatalf("the page after the replacement: %q", txt)
	}
	txt, _ = call(t, a, "get_run_report", map[string]any{"session": handle})
	var rep map[string]json.RawMessage
	if err := json.Unmarshal([]byte(txt), &rep); err != nil {
		t.Fatalf("%v: %q", err, txt)
	}
	var earlier []map[string]json.RawMessage
	_ = json.Unmarshal(rep["earlierReports"], &earlier)
	if string(rep["coversWholeRun"]) != "false" || len(earlier) != 1 || string(earlier[0]["filledFieldKinds"]) != `["card","cvv"]` ||
		string(earlier[0]["deniedCount"]) != "1" || string(earlier[0]["credentialWrites"]) != `["shop:created"]` || earlier[0]["ended"] != nil ||
		!strings.HasPrefix(string(rep["earlierReportsNote"]), `"Earlier proxy sessions in this run, replaced partway through`) ||
		rep["filledFieldKinds"] == nil || rep["note"] == nil {
		t.Fatalf("get_run_report after the replacement: %q", txt)
	}
	for _, k := range []string{"confirmationDetected", "orderTotal"} {
		if _, ok := earlier[0][k]; !ok {
			t.Fatalf("earlier report lacks %s: %q", k, txt)
		}
	}

	// The current proxy session cannot be read: the earlier segments
	// still count.
	ctl.mu.Lock()
	ctl.unreadable["s_proxy2"] = true
	ctl.mu.Unlock()
	txt, r = call(t, a, "get_run_report", map[string]any{"session": handle})
	rep = nil
	if err := json.Unmarshal([]byte(txt), &rep); err != nil || r.IsError {
		t.Fatalf("%v: %q", err, txt)
	}
	if string(rep["currentReport"]) != "null" || string(rep["coversWholeRun"]) != "false" || rep["earlierReports"] == nil ||
		rep["currentReportNote"] == nil || string(rep["credentialWrites"]) != `["shop:created"]` || rep["filledFieldKinds"] != nil {
		t.Fatalf("get_run_report with the current session unreadable: %q", txt)
	}
	ctl.mu.Lock()
	delete(ctl.unreadable, "s_proxy2")
	ctl.mu.Unlock()

	txt, _ = call(t, a, "close_session", map[string]any{"session": handle})
	rep = nil
	if err := json.Unmarshal([]byte(txt), &rep); err != nil {
		t.Fatalf("%v: %q", err, txt)
	}
	if string(rep["status"]) != `"Session closed"` || rep["report"] == nil || string(rep["coversWholeRun"]) != "false" ||
		rep["earlierReports"] == nil || rep["earlierReportsNote"] == nil {
		t.Fatalf("close_session after the replacement: %q", txt)
	}
	// The ended-session message counts every segment.
	txt, _ = call(t, a, "count", map[string]any{"selector": "#email", "session": handle})
	if !strings.Contains(txt, `"coversWholeRun":false`) || !strings.Contains(txt, `"vaultWrites":["shop:created"]`) || strings.Count(txt, "filledFieldKinds") != 2 {
		t.Fatalf("ended-session message: %q", txt)
	}
}

// TestHostedCloseWhileCallRuns: a call still running when close_session
// closed the session finishes afterwards, and the close's reply says so
// with what the final close found; a close with nothing running does not.
func TestHostedCloseWhileCallRuns(t *testing.T) {
	h := newHostedHarness(t, HostedConfig{}, nil)
	a := h.client(keyA)
	_, r := call(t, a, "open_page", map[string]any{"url": h.site.CheckoutURL()})
	busy := handleOf(t, r)
	_, r = call(t, a, "open_page", map[string]any{"url": h.site.CheckoutURL()})
	quiet := handleOf(t, r)

	inFlight := h.srv.calls.Running
	waited := make(chan string, 1)
	go func() {
		r, err := a.CallTool(context.Background(), &mcp.CallToolParams{Name: "wait_for_selector",
			Arguments: map[string]any{"selector": "#never-on-this-page", "timeout": 3000, "session": busy}})
		if err != nil {
			waited <- err.Error()
			return
		}
		waited <- text(r)
	}()
	waitUntil(t, 30*time.Second, "wait_for_selector to run on the busy session", func() bool { return inFlight(busy) >= 1 })
	txt, r := call(t, a, "close_session", map[string]any{"session": busy})
	if !strings.HasPrefix(txt, `{"_status":"ok"`) || len(r.Content) != 3 {
		t.Fatalf("close_session while a call ran: %d items, %q", len(r.Content), txt)
	}
	line := r.Content[1].(*mcp.TextContent).Text
	if !strings.HasPrefix(line, "Calls still running when the session closed finished afterwards. What the final close found: {\"reports\":[") {
		t.Fatalf("close_session's line: %q", line)
	}
	if w := <-waited; w == "" {
		t.Fatal("the running call gave no answer")
	}
	_, r = call(t, a, "close_session", map[string]any{"session": quiet})
	for _, c := range r.Content {
		if strings.Contains(c.(*mcp.TextContent).Text, "finished afterwards") {
			t.Fatalf("a close with nothing running: %q", c.(*mcp.TextContent).Text)
		}
	}
}
