package hosted

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Call deadlines (seed 004, "Call deadlines" and get_pending_result). A
// call runs in a flight of its own, detached from the request that started
// it. The request waits for the flight up to the call deadline (25 s on the
// hosted server), or until the proxy reports that the call waits on the
// owner; then it answers status=pending with a wait id, and the flight keeps
// running. get_pending_result waits on the same flight and returns its own
// answer once it is done.

const (
	// defaultCallDeadline is how long a hosted call answers in before it
	// answers pending; get_pending_result waits as long.
	defaultCallDeadline = 25 * time.Second
	// defaultCallLimit and defaultHandoffLimit bound a hosted call: past
	// them the call answers hard_timeout (seed 004: 4 minutes, 12 for
	// request_challenge_handoff).
	defaultCallLimit    = 4 * time.Minute
	defaultHandoffLimit = 12 * time.Minute
	// pendingKeep is how long a finished call's answer stays fetchable.
	pendingKeep = 2 * time.Minute
	// maxPending bounds the calls of one connection that answered pending
	// and whose answer nobody fetched yet.
	maxPending = 32
)

// Flight is one running call: the answer it will have, and the owner wait
// it reports while it runs.
type Flight struct {
	tool    string
	handle  string // the session the call runs on (set before it runs)
	started time.Time
	done    chan struct{}

	mu      sync.Mutex
	res     *mcp.CallToolResult
	ended   time.Time
	waitID  string // set when the call first answered pending
	owner   *control.Pending
	changed chan struct{} // closed and replaced when owner changes
	// named is the owner wait the latest answer named (new_request).
	named string
	// ownerDone is true once a reported owner wait ended while the call
	// keeps running.
	ownerDone bool
	// listener is the request whose progress token gets the call's
	// notifications now: the call's own, then each get_pending_result.
	listener *mcp.CallToolRequest
	fetched  bool
}

func newFlight(tool string, now time.Time, req *mcp.CallToolRequest) *Flight {
	return &Flight{tool: tool, started: now, done: make(chan struct{}), changed: make(chan struct{}), listener: req}
}

// complete records the call's answer; the first one wins (a hard timeout
// answers before the call itself returns).
func (f *Flight) complete(res *mcp.CallToolResult, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.res != nil {
		return false
	}
	f.res, f.ended = res, now
	close(f.done)
	return true
}

func (f *Flight) result() *mcp.CallToolResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.res
}

type flightKey struct{}

func withFlight(ctx context.Context, f *Flight) context.Context {
	return context.WithValue(ctx, flightKey{}, f)
}

// FlightOf is the running call ctx belongs to, nil when it runs in none.
func FlightOf(ctx context.Context) *Flight {
	f, _ := ctx.Value(flightKey{}).(*Flight)
	return f
}

// OwnerWaiting records that the call waits on the owner for p (the tool
// server's owner wait calls it when the proxy reports one): a waiting
// request then answers pending early, naming that wait. f may be nil.
func (f *Flight) OwnerWaiting(p *control.Pending) {
	if f == nil || p == nil {
		return
	}
	f.mu.Lock()
	cp := *p
	f.owner, f.ownerDone = &cp, false
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// OwnerWaitEnded records that the owner wait ended (approved, refused, or
// stopped) while the call may keep running. f may be nil.
func (f *Flight) OwnerWaitEnded() {
	if f == nil {
		return
	}
	f.mu.Lock()
	if f.owner != nil {
		f.ownerDone = true
	}
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// Listener is the request the call's progress notifications go to now: the
// call's own, then each get_pending_result that waits on it.
func (f *Flight) Listener() *mcp.CallToolRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.listener
}

// Pending is what a pending answer says: the call, its wait id, and the
// owner wait it reports. The tool server words it (Tools.Pending).
type Pending struct {
	Tool string
	Wait string
	// Owner is the owner wait the call reported, nil when none.
	Owner *control.Pending
	// OwnerDone: that wait ended and the call runs on.
	OwnerDone bool
	// NewRequest: Owner is another wait than the one the previous
	// pending answer for this call named.
	NewRequest bool
}

// pendingAnswer builds the pending answer for f (assigning its wait id on
// the connection when it has none yet).
func (cl *Calls) pendingAnswer(c *conn, f *Flight) *mcp.CallToolResult {
	f.mu.Lock()
	if f.waitID == "" {
		f.waitID = randomHandle("w_", 12)
		c.addPending(f.waitID, f)
	}
	p := Pending{Tool: f.tool, Wait: f.waitID}
	if f.owner != nil {
		cp := *f.owner
		p.Owner, p.OwnerDone = &cp, f.ownerDone
		if !f.ownerDone {
			p.NewRequest = f.named != "" && f.named != f.owner.WaitID
			f.named = f.owner.WaitID
		}
	}
	handle := f.handle
	f.mu.Unlock()
	return withSession(cl.tools, cl.tools.Pending(p), handle, false)
}

// awaitFlight waits for f's answer until the deadline (none when zero), or
// until the call reports an owner wait it has not named yet (when early),
// or until ctx ends; short of the answer it returns the pending answer.
func (cl *Calls) awaitFlight(ctx context.Context, c *conn, f *Flight, deadline time.Duration, early bool) *mcp.CallToolResult {
	var timeout <-chan time.Time
	if deadline > 0 {
		t := time.NewTimer(deadline)
		defer t.Stop()
		timeout = t.C
	}
	for {
		f.mu.Lock()
		ch := f.changed
		fresh := f.owner != nil && !f.ownerDone && f.owner.WaitID != f.named && f.owner.Kind != "signup"
		f.mu.Unlock()
		if f.result() != nil {
			return fetched(f)
		}
		if early && fresh {
			return cl.pendingAnswer(c, f)
		}
		select {
		case <-f.done:
			return fetched(f)
		case <-ch:
		case <-timeout:
			return cl.pendingAnswer(c, f)
		case <-ctx.Done():
			return cl.pendingAnswer(c, f)
		}
	}
}

func fetched(f *Flight) *mcp.CallToolResult {
	f.mu.Lock()
	f.fetched = true
	f.mu.Unlock()
	return cloneResult(f.result())
}

type pendingIn struct {
	SessionArg
	Wait string `json:"wait" jsonschema:"The wait id (w_...) of a pending answer."`
}

// RegisterPending adds get_pending_result to srv: the tool that fetches
// the answer of a call that answered pending on this connection.
func (cl *Calls) RegisterPending(srv *mcp.Server) {
	tool := &mcp.Tool{Name: "get_pending_result",
		Description: "Get the answer to a call that came back status=pending: pass its wait id. Waits up to about 25 seconds, and answers early when the proxy reports a new wait on the account owner. Still running: pending again with the same wait id, so call it again in the same turn. When the answer names a wait on the account owner, tell the user what to approve and where (as the answer says: the dashboard, and an email only when the answer names one), then keep polling.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}
	mcp.AddTool(srv, tool, func(ctx context.Context, req *mcp.CallToolRequest, in pendingIn) (*mcp.CallToolResult, any, error) {
		c := cl.connOf(req)
		f := c.pending(in.Wait)
		if f == nil {
			return cl.tools.Error(agentvault.Errorf(agentvault.CodeNotFound,
				"No call is pending under wait %q on this connection: its answer was fetched more than 2 minutes ago, the server restarted, or the id belongs to another connection. Check the page or get_run_report before repeating anything.", truncate(in.Wait, 40))), nil, nil
		}
		f.mu.Lock()
		f.listener = req
		f.mu.Unlock()
		return cl.awaitFlight(ctx, c, f, cl.callDeadline(), true), nil, nil
	})
}

// callDeadline is how long a hosted call answers in before it answers
// pending, and how long get_pending_result waits.
func (cl *Calls) callDeadline() time.Duration {
	if h := cl.table(); h != nil && h.cfg.CallDeadline > 0 {
		return h.cfg.CallDeadline
	}
	return defaultCallDeadline
}

// hardLimit is the longest a hosted call runs before it answers
// hard_timeout.
func (h *table) hardLimit(tool string) time.Duration {
	if tool == "request_challenge_handoff" {
		return durOr(h.cfg.HandoffLimit, defaultHandoffLimit)
	}
	return durOr(h.cfg.CallLimit, defaultCallLimit)
}

// hardTimeout is the error of a call past its limit; a login write's
// outcome is unknown and says so (P20: never retried blind).
func hardTimeout(tool string, limit time.Duration) error {
	d := limit.Round(time.Second).String()
	if n := int(limit / time.Minute); limit%time.Minute == 0 {
		d = fmt.Sprintf("%d minutes", n)
		if n == 1 {
			d = "1 minute"
		}
	}
	if loginWrites[tool] {
		return agentvault.Errorf(agentvault.CodeWriteOutcomeUnknown,
			"%s did not finish within %s. Whether the write landed is unknown: never retry it blind; check get_run_report's credentialWrites and the account holder's Logins page first.", tool, d)
	}
	return agentvault.Errorf(agentvault.CodeHardTimeout,
		"%s did not finish within %s. Its outcome is unknown: check before repeating it. The call may still finish on the server: check the page or get_run_report first.", tool, d)
}

func cloneResult(r *mcp.CallToolResult) *mcp.CallToolResult {
	if r == nil {
		return nil
	}
	out := *r
	out.Content = make([]mcp.Content, len(r.Content))
	for i, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			cp := *tc
			out.Content[i] = &cp
		} else {
			out.Content[i] = c
		}
	}
	return &out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
