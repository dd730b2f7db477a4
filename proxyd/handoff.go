package proxyd

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/owner/dashboard"
)

// Challenge hand-offs (seed 004, docs/handoff.md). mcpd drives the browser;
// the owner's dashboard is served here. The hub is the meeting point: mcpd
// registers a hand-off and pushes screencast frames over the control API,
// the signed-in owner's dashboard reads the frames and queues clicks and
// keys, and mcpd long-polls that input and replays it on the page. The hub
// keeps only the latest frame and the input not yet replayed, in memory:
// nothing of it is logged or stored, and no MCP answer ever carries it.

const (
	// maxHandoffInputs bounds the input queue of one hand-off.
	maxHandoffInputs = 2000
	// maxHandoffText bounds one text input (the owner types a code, not a
	// novel).
	maxHandoffText = 256
	// handoffKeep is how long an ended hand-off stays listed, so the
	// owner's view can show how it ended.
	handoffKeep = 10 * time.Minute
	// defaultHandoffTimeout is the owner's time when mcpd names none.
	defaultHandoffTimeout = 10 * time.Minute
	maxHandoffTimeout     = 30 * time.Minute
)

// handoffKeys are the non-text keys the owner may send.
var handoffKeys = map[string]bool{
	"Enter": true, "Tab": true, "Backspace": true, "Delete": true, "Escape": true, "Space": true,
	"ArrowLeft": true, "ArrowRight": true, "ArrowUp": true, "ArrowDown": true, "Home": true, "End": true,
}

type handoff struct {
	id, session, challengeType, site string
	created, expires                 time.Time

	frame          []byte
	frameW, frameH int
	frameSeq       int64

	inputs   []control.HandoffInput // not yet read past by mcpd
	inputSeq int64
	decision string

	ended      bool
	endedAt    time.Time
	outcome    string
	durationMs int64
}

// handoffHub holds the open hand-offs of this process.
type handoffHub struct {
	now func() time.Time
	// sessionOpen reports whether a proxy session exists.
	sessionOpen func(id string) bool
	// viewURL is the dashboard address of a hand-off's live view.
	viewURL func(id string) string
	// announce tells the owner (notifications); nil: the dashboard only.
	announce func(ctx context.Context, h dashboard.HandoffView)

	mu      sync.Mutex
	byID    map[string]*handoff
	changed chan struct{} // closed and replaced on every change
}

func newHandoffHub(now func() time.Time) *handoffHub {
	if now == nil {
		now = time.Now
	}
	return &handoffHub{now: now, byID: map[string]*handoff{}, changed: make(chan struct{})}
}

// bump wakes every waiter; mu must be held.
func (hub *handoffHub) bump() {
	close(hub.changed)
	hub.changed = make(chan struct{})
}

// sweep drops hand-offs that ended long ago and ends those past their
// time; mu must be held.
func (hub *handoffHub) sweep() {
	now := hub.now()
	for id, h := range hub.byID {
		if h.ended && now.Sub(h.endedAt) > handoffKeep {
			delete(hub.byID, id)
			continue
		}
		// mcpd ends its own wait at expires; a hand-off mcpd never closed
		// (it crashed) stops being offered to the owner a minute later.
		if !h.ended && now.After(h.expires.Add(time.Minute)) {
			h.ended, h.endedAt, h.outcome = true, now, "abandoned"
			h.frame = nil
		}
	}
}

func newHandoffID() string {
	b := make([]byte, 15)
	_, _ = rand.Read(b)
	return "ho_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// ---- the control API side (mcpd) ----

func (hub *handoffHub) start(ctx context.Context, sessionID string, req control.HandoffRequest) (control.HandoffStarted, error) {
	if hub.sessionOpen != nil && !hub.sessionOpen(sessionID) {
		return control.HandoffStarted{}, agentvault.Errorf(agentvault.CodeSessionEnded, "no such session")
	}
	switch req.ChallengeType {
	case "three_ds", "otp", "captcha", "blocked":
	default:
		return control.HandoffStarted{}, agentvault.Errorf(agentvault.CodeInvalidInput, "unknown challenge type")
	}
	timeout := time.Duration(req.TimeoutMs) * time.Millisecond
	if timeout <= 0 {
		timeout = defaultHandoffTimeout
	}
	timeout = min(timeout, maxHandoffTimeout)
	now := hub.now()
	h := &handoff{id: newHandoffID(), session: sessionID, challengeType: req.ChallengeType, site: req.Site,
		created: now, expires: now.Add(timeout), decision: control.HandoffOpen}
	hub.mu.Lock()
	hub.sweep()
	hub.byID[h.id] = h
	hub.bump()
	view := viewOf(h)
	hub.mu.Unlock()
	if hub.announce != nil {
		hub.announce(ctx, view)
	}
	out := control.HandoffStarted{ID: h.id}
	if hub.viewURL != nil {
		out.ViewURL = hub.viewURL(h.id)
	}
	return out, nil
}

func (hub *handoffHub) get(id string) (*handoff, error) {
	h, ok := hub.byID[id]
	if !ok {
		return nil, agentvault.Errorf(agentvault.CodeNotFound, "no such hand-off")
	}
	return h, nil
}

func (hub *handoffHub) frame(id string, jpeg []byte, w, ht int) error {
	if len(jpeg) < 3 || jpeg[0] != 0xFF || jpeg[1] != 0xD8 {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "a frame must be a JPEG")
	}
	hub.mu.Lock()
	defer hub.mu.Unlock()
	h, err := hub.get(id)
	if err != nil {
		return err
	}
	if h.ended {
		return agentvault.Errorf(agentvault.CodeConflict, "the hand-off has ended")
	}
	h.frame, h.frameW, h.frameH = jpeg, w, ht
	h.frameSeq++
	hub.bump()
	return nil
}

func (hub *handoffHub) events(ctx context.Context, id string, after int64, wait time.Duration) (control.HandoffEvents, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		hub.mu.Lock()
		h, err := hub.get(id)
		if err != nil {
			hub.mu.Unlock()
			return control.HandoffEvents{}, err
		}
		// What mcpd has read is dropped: the owner's typing is kept no
		// longer than it takes to replay it.
		i := 0
		for i < len(h.inputs) && h.inputs[i].Seq <= after {
			i++
		}
		h.inputs = h.inputs[i:]
		ev := control.HandoffEvents{Inputs: append([]control.HandoffInput{}, h.inputs...), Decision: h.decision}
		ch := hub.changed
		hub.mu.Unlock()
		if len(ev.Inputs) > 0 || ev.Decision != control.HandoffOpen || wait <= 0 {
			return ev, nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return ev, nil
		case <-ctx.Done():
			return ev, nil
		}
	}
}

func (hub *handoffHub) end(id string, end control.HandoffEnd) error {
	hub.mu.Lock()
	defer hub.mu.Unlock()
	h, err := hub.get(id)
	if err != nil {
		return err
	}
	if !h.ended {
		h.ended, h.endedAt, h.outcome, h.durationMs = true, hub.now(), end.Outcome, end.DurationMs
		h.frame, h.inputs = nil, nil
		hub.bump()
	}
	return nil
}

// ---- the dashboard side (the signed-in owner) ----

func viewOf(h *handoff) dashboard.HandoffView {
	return dashboard.HandoffView{ID: h.id, Session: h.session, ChallengeType: h.challengeType, Site: h.site,
		Created: h.created, Expires: h.expires, Decision: h.decision, Ended: h.ended, Outcome: h.outcome, DurationMs: h.durationMs}
}

// OpenHandoffs lists the hand-offs waiting for the owner, oldest first.
func (hub *handoffHub) OpenHandoffs() []dashboard.HandoffView {
	hub.mu.Lock()
	defer hub.mu.Unlock()
	hub.sweep()
	var out []dashboard.HandoffView
	for _, h := range hub.byID {
		if !h.ended && h.decision == control.HandoffOpen {
			out = append(out, viewOf(h))
		}
	}
	sortViews(out)
	return out
}

func sortViews(v []dashboard.HandoffView) {
	for i := 1; i < len(v); i++ {
		for j := i; j > 0 && v[j].Created.Before(v[j-1].Created); j-- {
			v[j], v[j-1] = v[j-1], v[j]
		}
	}
}

// Handoff returns one hand-off.
func (hub *handoffHub) Handoff(id string) (dashboard.HandoffView, bool) {
	hub.mu.Lock()
	defer hub.mu.Unlock()
	h, ok := hub.byID[id]
	if !ok {
		return dashboard.HandoffView{}, false
	}
	return viewOf(h), true
}

// NextFrame waits until a frame newer than after exists, the hand-off ends,
// or ctx is done.
func (hub *handoffHub) NextFrame(ctx context.Context, id string, after int64) (dashboard.HandoffFrame, error) {
	for {
		hub.mu.Lock()
		h, err := hub.get(id)
		if err != nil {
			hub.mu.Unlock()
			return dashboard.HandoffFrame{}, err
		}
		if h.ended || h.decision != control.HandoffOpen || (h.frame != nil && h.frameSeq > after) {
			f := dashboard.HandoffFrame{Seq: h.frameSeq, Width: h.frameW, Height: h.frameH, View: viewOf(h)}
			if !h.ended && h.decision == control.HandoffOpen {
				f.JPEG = h.frame
			}
			hub.mu.Unlock()
			return f, nil
		}
		ch := hub.changed
		hub.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return dashboard.HandoffFrame{}, ctx.Err()
		}
	}
}

// HandoffInput queues one owner action for mcpd to replay.
func (hub *handoffHub) HandoffInput(id string, in dashboard.HandoffInputEvent) error {
	ev := control.HandoffInput{Type: in.Type}
	switch in.Type {
	case "click":
		ev.X, ev.Y = in.X, in.Y
	case "text":
		if in.Text == "" || len(in.Text) > maxHandoffText || !utf8.ValidString(in.Text) {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "text input is empty or too long")
		}
		ev.Text = in.Text
	case "key":
		if !handoffKeys[in.Key] {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "that key cannot be sent")
		}
		ev.Key = in.Key
	default:
		return agentvault.Errorf(agentvault.CodeInvalidInput, "unknown input type")
	}
	hub.mu.Lock()
	defer hub.mu.Unlock()
	h, err := hub.get(id)
	if err != nil {
		return err
	}
	if h.ended || h.decision != control.HandoffOpen {
		return agentvault.Errorf(agentvault.CodeConflict, "this hand-off has ended")
	}
	if in.Type == "click" && (ev.X < 0 || ev.Y < 0 || (h.frameW > 0 && ev.X > float64(h.frameW)) || (h.frameH > 0 && ev.Y > float64(h.frameH))) {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "the click is outside the page")
	}
	if len(h.inputs) >= maxHandoffInputs {
		return agentvault.Errorf(agentvault.CodeRateLimited, "too much input at once; wait for the page to catch up")
	}
	h.inputSeq++
	ev.Seq = h.inputSeq
	h.inputs = append(h.inputs, ev)
	hub.bump()
	return nil
}

// DecideHandoff records the owner's decision: done, failed or abandoned.
func (hub *handoffHub) DecideHandoff(id, decision string) error {
	switch decision {
	case control.HandoffDone, control.HandoffFailed, control.HandoffAbandoned:
	default:
		return agentvault.Errorf(agentvault.CodeInvalidInput, "unknown decision")
	}
	hub.mu.Lock()
	defer hub.mu.Unlock()
	h, err := hub.get(id)
	if err != nil {
		return err
	}
	if h.ended || h.decision != control.HandoffOpen {
		return agentvault.Errorf(agentvault.CodeConflict, "this hand-off has already ended")
	}
	h.decision = decision
	hub.bump()
	return nil
}

// WaitHandoff waits until the hand-off ended (mcpd gave the agent its
// outcome) or ctx is done, and returns it.
func (hub *handoffHub) WaitHandoff(ctx context.Context, id string) (dashboard.HandoffView, error) {
	for {
		hub.mu.Lock()
		h, err := hub.get(id)
		if err != nil {
			hub.mu.Unlock()
			return dashboard.HandoffView{}, err
		}
		v := viewOf(h)
		ch := hub.changed
		hub.mu.Unlock()
		if v.Ended {
			return v, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return v, ctx.Err()
		}
	}
}

var _ dashboard.Handoffs = (*handoffHub)(nil)

// The control service's hand-off calls go to the hub.

func (c *controlService) StartHandoff(ctx context.Context, sessionID string, req control.HandoffRequest) (control.HandoffStarted, error) {
	return c.handoffs.start(ctx, sessionID, req)
}

func (c *controlService) HandoffFrame(ctx context.Context, id string, jpeg []byte, w, h int) error {
	return c.handoffs.frame(id, jpeg, w, h)
}

func (c *controlService) HandoffEvents(ctx context.Context, id string, after int64, wait time.Duration) (control.HandoffEvents, error) {
	return c.handoffs.events(ctx, id, after, wait)
}

func (c *controlService) EndHandoff(ctx context.Context, id string, end control.HandoffEnd) error {
	return c.handoffs.end(id, end)
}

// handoffHub returns the process's hub, built on first use.
func (m *Main) handoffHub() *handoffHub {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.handoffs == nil {
		hub := newHandoffHub(m.Now)
		hub.sessionOpen = func(id string) bool { _, err := m.Broker.Get(id); return err == nil }
		hub.viewURL = func(id string) string {
			if m.Config.Dashboard.Domain != "" {
				return "https://" + m.Config.Dashboard.Domain + "/handoffs/" + id
			}
			if m.DashboardAddr != nil {
				return "https://" + m.DashboardAddr.String() + "/handoffs/" + id
			}
			return ""
		}
		if m.notify != nil {
			hub.announce = m.announceHandoff(m.notify, hub.viewURL)
		}
		m.handoffs = hub
	}
	return m.handoffs
}
