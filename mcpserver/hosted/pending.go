package mcpserver

import (
	"context"
	"fmt"
	"strings"
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

// flight is one running call: the answer it will have, and the owner wait
// it reports while it runs.
type flight struct {
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

func newFlight(tool string, now time.Time, req *mcp.CallToolRequest) *flight {
	return &flight{tool: tool, started: now, done: make(chan struct{}), changed: make(chan struct{}), listener: req}
}

// complete records the call's answer; the first one wins (a hard timeout
// answers before the call itself returns).
func (f *flight) complete(res *mcp.CallToolResult, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.res != nil {
		return false
	}
	f.res, f.ended = res, now
	close(f.done)
	return true
}

func (f *flight) result() *mcp.CallToolResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.res
}

type flightKey struct{}

func withFlight(ctx context.Context, f *flight) context.Context {
	return context.WithValue(ctx, flightKey{}, f)
}

func flightOf(ctx context.Context) *flight {
	f, _ := ctx.Value(flightKey{}).(*flight)
	return f
}

// ownerWaiting is called by waitOwner when the proxy reports that the
// call waits on the owner.
func (c *callState) ownerWaiting(p *control.Pending) {
	if c == nil || c.flight == nil || p == nil {
		return
	}
	f := c.flight
	f.mu.Lock()
	cp := *p
	f.owner, f.ownerDone = &cp, false
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// ownerWaitEnded is called when that wait ended (approved, refused, or
// stopped), while the call may keep running.
func (c *callState) ownerWaitEnded() {
	if c == nil || c.flight == nil {
		return
	}
	f := c.flight
	f.mu.Lock()
	if f.owner != nil {
		f.ownerDone = true
	}
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// progressReq is the request progress notifications go to now.
func (c *callState) progressReq() *mcp.CallToolRequest {
	if c.flight == nil {
		return c.req
	}
	c.flight.mu.Lock()
	defer c.flight.mu.Unlock()
	return c.flight.listener
}

// pendingFields is what a pending answer carries, in its status line and
// its structuredContent.
type pendingFields struct {
	Wait           string `json:"wait"`
	WaitingOnOwner bool   `json:"waiting_on_owner"`
	Reason         string `json:"reason,omitempty"`
	Site           string `json:"site,omitempty"`
	ExpiresAt      string `json:"expires_at,omitempty"`
	NewRequest     bool   `json:"new_request,omitempty"`
}

func (p *pendingFields) pairs() [][2]string {
	out := [][2]string{{"wait", p.Wait}, {"waiting_on_owner", fmt.Sprint(p.WaitingOnOwner)}}
	if p.Reason != "" {
		out = append(out, [2]string{"reason", p.Reason})
	}
	if p.NewRequest {
		out = append(out, [2]string{"new_request", "true"})
	}
	return out
}

// ownerReason is the seed's reason for an owner wait.
func ownerReason(p *control.Pending) string {
	switch p.Kind {
	case "new_destination", "cvv_entry":
		return p.Kind
	case "signup":
		return "signup_approval"
	case "totp_replace":
		// The seed's reasons are a closed list; the owner approving an
		// agent's write to a login is signup_approval's kind of question.
		return "signup_approval"
	case "challenge", "challenge_handoff":
		return "challenge_handoff"
	case "purchase":
		switch p.Reason {
		case "", "purchase":
			return "over_threshold"
		case "cvv_again":
			// The second yes for a security code whose authorization was
			// spent is a purchase approval asked whatever the amount:
			// the seed's every_purchase (its list has no other name).
			return "every_purchase"
		}
		return sanitizeValue(p.Reason)
	}
	return sanitizeValue(p.Kind)
}

// ownerSentence says what the owner is asked, where, and until when: one
// sentence per kind of wait.
func ownerSentence(tool string, p *control.Pending) string {
	site := p.Site
	var what, email string
	switch p.Kind {
	case "new_destination":
		what = fmt.Sprintf("approve a new site (%s)", site)
		email = "Authorize new site: " + site
	case "purchase":
		amt := ""
		if p.Amount != nil {
			amt = " of " + p.Amount.Currency + " " + p.Amount.Amount
		}
		what = fmt.Sprintf("approve a purchase%s on %s (%s)", amt, site, ownerReason(p))
		email = "Approve a purchase on " + site
	case "cvv_entry":
		what = fmt.Sprintf("enter the card's security code for a purchase on %s", site)
		email = "Enter the security code for " + site
	case "signup":
		what = fmt.Sprintf("approve a signup on %s", site)
		email = "Approve a signup on " + site
	case "totp_replace":
		what = "approve " + replaceWhat(p.Login, site)
		email = "Authenticator replacement: " + site
	default:
		what = fmt.Sprintf("complete a challenge on %s", site)
		email = "Complete a step on " + site
	}
	// The email is named only when proxyd says one goes out: telling the
	// user to look for a message that never comes sends them the wrong way.
	where := "the banner on their Agent Vault dashboard (its Approvals page)"
	if p.Email {
		where = fmt.Sprintf("the email titled '%s' or the banner on their Agent Vault dashboard", email)
	}
	s := fmt.Sprintf("%s is waiting for the account owner to %s. Tell the user now: they can approve it from %s.", tool, what, where)
	if !p.ExpiresAt.IsZero() && p.Kind != "signup" {
		s += " It expires at " + p.ExpiresAt.UTC().Format(time.RFC3339) + "."
	}
	return s
}

// pendingAnswer builds the pending answer for f (assigning its wait id on
// the connection when it has none yet).
func (s *Server) pendingAnswer(c *conn, f *flight) *mcp.CallToolResult {
	f.mu.Lock()
	if f.waitID == "" {
		f.waitID = randomHandle("w_", 12)
		c.addPending(f.waitID, f)
	}
	pf := &pendingFields{Wait: f.waitID}
	var text string
	switch {
	case f.owner != nil && !f.ownerDone:
		pf.WaitingOnOwner = true
		pf.Reason = ownerReason(f.owner)
		pf.Site = f.owner.Site
		if !f.owner.ExpiresAt.IsZero() && f.owner.Kind != "signup" {
			pf.ExpiresAt = f.owner.ExpiresAt.UTC().Format(time.RFC3339)
		}
		pf.NewRequest = f.named != "" && f.named != f.owner.WaitID
		text = ownerSentence(f.tool, f.owner)
		if pf.NewRequest {
			text = "NEW REQUEST: this is a separate request from the one named before; tell the user about it too. " + text
		}
		f.named = f.owner.WaitID
	case f.owner != nil:
		text = fmt.Sprintf("%s stopped waiting on the account owner and is still running; its answer will say what came of the request.", f.tool)
	default:
		text = fmt.Sprintf("%s is still running. No request to the account owner has been reported for this call: do not tell the user a new approval is waiting.", f.tool)
	}
	f.mu.Unlock()
	text += fmt.Sprintf(" Keep calling get_pending_result with wait=%s in this same turn to get its answer; do not repeat the call, that starts a second one.", pf.Wait)
	res := &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: status{State: "pending", Pending: pf}.line() + "\n" + text}},
		StructuredContent: pf,
	}
	f.mu.Lock()
	handle := f.handle
	f.mu.Unlock()
	return withSession(res, handle, false)
}

// awaitFlight waits for f's answer until the deadline (none when zero), or
// until the call reports an owner wait it has not named yet (when early),
// or until ctx ends; short of the answer it returns the pending answer.
func (s *Server) awaitFlight(ctx context.Context, c *conn, f *flight, deadline time.Duration, early bool) *mcp.CallToolResult {
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
			return s.fetched(f)
		}
		if early && fresh {
			return s.pendingAnswer(c, f)
		}
		select {
		case <-f.done:
			return s.fetched(f)
		case <-ch:
		case <-timeout:
			return s.pendingAnswer(c, f)
		case <-ctx.Done():
			return s.pendingAnswer(c, f)
		}
	}
}

func (s *Server) fetched(f *flight) *mcp.CallToolResult {
	f.mu.Lock()
	f.fetched = true
	f.mu.Unlock()
	return cloneResult(f.result())
}

type pendingIn struct {
	SessionArg
	Wait string `json:"wait" jsonschema:"The wait id (w_...) of a pending answer."`
}

func (s *Server) registerPending() {
	tool := &mcp.Tool{Name: "get_pending_result",
		Description: "Get the answer to a call that came back status=pending: pass its wait id. Waits up to about 25 seconds, and answers early when the proxy reports a new wait on the account owner. Still running: pending again with the same wait id, so call it again in the same turn. When the answer names a wait on the account owner, tell the user what to approve and where (as the answer says: the dashboard, and an email only when the answer names one), then keep polling.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}
	mcp.AddTool(s.mcp, tool, func(ctx context.Context, req *mcp.CallToolRequest, in pendingIn) (*mcp.CallToolResult, any, error) {
		c := s.connOf(req)
		f := c.pending(in.Wait)
		if f == nil {
			return statusError(agentvault.Errorf(agentvault.CodeNotFound,
				"No call is pending under wait %q on this connection: its answer was fetched more than 2 minutes ago, the server restarted, or the id belongs to another connection. Check the page or get_run_report before repeating anything.", truncate(in.Wait, 40)), nil), nil, nil
		}
		f.mu.Lock()
		f.listener = req
		f.mu.Unlock()
		return s.awaitFlight(ctx, c, f, s.callDeadline(), true), nil, nil
	})
}

func (s *Server) callDeadline() time.Duration {
	if s.cfg.Hosted != nil && s.cfg.Hosted.CallDeadline > 0 {
		return s.cfg.Hosted.CallDeadline
	}
	return defaultCallDeadline
}

// hardLimit is the longest a hosted call runs before it answers
// hard_timeout.
func (s *Server) hardLimit(tool string) time.Duration {
	h := s.cfg.Hosted
	if tool == "request_challenge_handoff" {
		if h != nil && h.HandoffLimit > 0 {
			return h.HandoffLimit
		}
		return defaultHandoffLimit
	}
	if h != nil && h.CallLimit > 0 {
		return h.CallLimit
	}
	return defaultCallLimit
}

// hardTimeout is the answer of a call past its limit; a login write's
// outcome is unknown and says so (P20: never retried blind).
func hardTimeout(tool string, limit time.Duration) *mcp.CallToolResult {
	d := limit.Round(time.Second).String()
	if limit%time.Minute == 0 {
		d = plural(int(limit/time.Minute), "minute", "minutes")
	}
	if loginWrites[tool] {
		return statusError(agentvault.Errorf(agentvault.CodeWriteOutcomeUnknown,
			"%s did not finish within %s. Whether the write landed is unknown: never retry it blind; check get_run_report's credentialWrites and the account holder's Logins page first.", tool, d), nil)
	}
	return statusError(agentvault.Errorf(agentvault.CodeHardTimeout,
		"%s did not finish within %s. Its outcome is unknown: check before repeating it. The call may still finish on the server: check the page or get_run_report first.", tool, d), nil)
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

// isPending reports whether r is a pending answer.
func isPending(r *mcp.CallToolResult) bool {
	if r == nil || len(r.Content) == 0 {
		return false
	}
	tc, ok := r.Content[0].(*mcp.TextContent)
	return ok && strings.HasPrefix(tc.Text, "status=pending")
}
