package mcpserver

import (
	"context"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentvault/agentvault/browser"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/redact"
)

// Session is one agent task: a proxyd session, its browser context, and
// what the safety rules need to remember between calls. Calls on a session
// run one at a time (mu). The handle is proxyd's session id, so the hosted
// server can route a `session` argument to it.
type Session struct {
	Handle string

	mu   sync.Mutex
	ctl  control.CreateSessionResponse
	page *browser.Session

	// gate closes for the rest of the session once a token is filled: no
	// snapshot, no frame list, selector and chord checks.
	gate redact.SnapshotGate
	// filled holds what was typed for tokens, only to scrub page text read
	// back (observe_page errorText). Never logged, never returned.
	filled []string
	cards  cardState
	// lastAction is the latest click or press target, exactly as passed.
	lastAction string
	// loginPassword is true after fill_login typed a password and no
	// checkout token was filled since (detect_challenge's ambiguousOnly).
	loginPassword bool
	orderTotal    *control.OrderTotal
	// events counts fill events still on their way to proxyd
	// (reportFill); a read of the report waits for them.
	events sync.WaitGroup
	// hints are the page hints declared on the current page (tools_hints.go).
	hints hintState

	// waits ends with close_session: a fill waiting on the owner holds mu,
	// so closing cancels this first, then takes mu.
	waits     context.Context
	stopWaits context.CancelFunc

	// ho is the challenge hand-off's state (tools_handoff.go).
	ho handoffFlags

	// replaced counts the proxy sessions open_page replaced in this run;
	// earlier holds the final reports of those that could be read, oldest
	// first (replace.go).
	// They and ctl change under both mu and seg; get_run_report reads
	// them under seg alone, so it answers while a fill holds mu.
	seg      sync.Mutex
	replaced int
	earlier  []control.Report

	// lostEgress is set once proxyd reported that the session's
	// residential egress was lost (egress.go).
	lostEgress atomic.Bool

	closed      bool
	closeAnswer control.CloseResponse
	closeErr    error
	teardownErr string
}

// newSession is a session over proxyd's answer to CreateSession.
func newSession(cs control.CreateSessionResponse) *Session {
	ss := &Session{Handle: cs.ID, ctl: cs}
	ss.waits, ss.stopWaits = context.WithCancel(context.Background())
	return ss
}

// ctlID is the current proxy session (open_page may replace it).
func (ss *Session) ctlID() string {
	ss.seg.Lock()
	defer ss.seg.Unlock()
	return ss.ctl.ID
}

// ctlExpires is when the current proxy session's credential lapses.
func (ss *Session) ctlExpires() time.Time {
	ss.seg.Lock()
	defer ss.seg.Unlock()
	return ss.ctl.ExpiresAt
}

// action records an action between a card number and its code: it spends
// the pending code authorization.
func (ss *Session) action() { ss.cards.action() }

// safeURL drops the query and fragment: they can carry anything a site put
// there, and an agent only needs to know where it is.
func safeURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		if raw == "about:blank" || raw == "" {
			return raw
		}
		return "(unparsable URL)"
	}
	u.RawQuery, u.Fragment, u.User = "", "", nil
	return u.String()
}
