// Package handoff is the meeting point of a challenge hand-off (seed 004,
// docs/handoff.md): mcpd registers a hand-off and pushes screencast frames
// over the control API (the Hub is a control.HandoffService), the signed-in
// owner's dashboard reads the frames and queues clicks and keys (the Hub
// serves the dashboard's Handoffs interface), and mcpd long-polls that input
// and replays it on the page. The Hub keeps only the latest frame and the
// input not yet replayed, in memory: nothing of it is logged or stored, and
// no MCP answer ever carries it. It imports the control API's wire types and
// nothing of the owner's side, the vault or a store; proxyd wires it.
package handoff

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
)

// View is one hand-off as the owner sees it.
type View struct {
	ID, Session, ChallengeType, Site string
	Created, Expires                 time.Time
	// Decision is open until the owner chooses done, failed or abandoned.
	Decision string
	// Ended, Outcome and DurationMs are what the agent was told.
	Ended      bool
	Outcome    string
	DurationMs int64
}

// Frame is the latest frame of the page (JPEG) with the page's viewport in
// CSS pixels; JPEG is nil once the hand-off is decided.
type Frame struct {
	Seq           int64
	JPEG          []byte
	Width, Height int
	View          View
}

// InputEvent is one owner action: a click at (X, Y) in the page's CSS
// pixels, text typed, or a named key.
type InputEvent struct {
	Type string
	X, Y float64
	Text string
	Key  string
}

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

// Config is what the Hub is given by its wiring; every field may be left
// zero.
type Config struct {
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// SessionOpen reports whether a proxy session exists; nil: any session
	// is taken to exist.
	SessionOpen func(id string) bool
	// ViewURL is the dashboard address of a hand-off's live view; nil: none
	// is given to mcpd.
	ViewURL func(id string) string
	// Announce tells the owner (notifications); nil: the dashboard only.
	Announce func(ctx context.Context, v View)
}

// Hub holds the open hand-offs of this process.
type Hub struct {
	now         func() time.Time
	sessionOpen func(id string) bool
	viewURL     func(id string) string
	announce    func(ctx context.Context, v View)

	mu      sync.Mutex
	byID    map[string]*handoff
	changed chan struct{} // closed and replaced on every change
}

// New returns an empty hub.
func New(cfg Config) *Hub {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Hub{now: cfg.Now, sessionOpen: cfg.SessionOpen, viewURL: cfg.ViewURL, announce: cfg.Announce,
		byID: map[string]*handoff{}, changed: make(chan struct{})}
}

var _ control.HandoffService = (*Hub)(nil)

// bump wakes every waiter; mu must be held.
func (hub *Hub) bump() {
	close(hub.changed)
	hub.changed = make(chan struct{})
}

// sweep drops hand-offs that ended long ago and ends those past their
// time; mu must be held.
func (hub *Hub) sweep() {
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

// StartHandoff registers a hand-off on a live proxy session.
func (hub *Hub) StartHandoff(ctx context.Context, sessionID string, req control.HandoffRequest) (control.HandoffStarted, error) {
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

func (hub *Hub) get(id string) (*handoff, error) {
	h, ok := hub.byID[id]
	if !ok {
		return nil, agentvault.Errorf(agentvault.CodeNotFound, "no such hand-off")
	}
	return h, nil
}

// act applies an action of the owner's to hand-off id while the owner may
// still act on it (not ended, not decided), and tells the waiters when it
// changed something.
func (hub *Hub) act(id string, change func(h *handoff) error) error {
	hub.mu.Lock()
	defer hub.mu.Unlock()
	h, err := hub.get(id)
	if err != nil {
		return err
	}
	if h.ended || h.decision != control.HandoffOpen {
		return agentvault.Errorf(agentvault.CodeConflict, "this hand-off has ended")
	}
	if err := change(h); err != nil {
		return err
	}
	hub.bump()
	return nil
}

// HandoffFrame keeps the latest frame of the page (a JPEG) and its viewport.
func (hub *Hub) HandoffFrame(_ context.Context, id string, jpeg []byte, w, ht int) error {
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

// HandoffEvents waits up to wait for the owner's input after seq after or a
// decision, and drops the input mcpd has read.
func (hub *Hub) HandoffEvents(ctx context.Context, id string, after int64, wait time.Duration) (control.HandoffEvents, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	ev, err := watch(wctx, hub, id, func(h *handoff) (control.HandoffEvents, bool) {
		// What mcpd has read is dropped: the owner's typing is kept no
		// longer than it takes to replay it.
		i := 0
		for i < len(h.inputs) && h.inputs[i].Seq <= after {
			i++
		}
		h.inputs = h.inputs[i:]
		ev := control.HandoffEvents{Inputs: append([]control.HandoffInput{}, h.inputs...), Decision: h.decision}
		return ev, len(ev.Inputs) > 0 || ev.Decision != control.HandoffOpen || wait <= 0
	})
	if err != nil && err == wctx.Err() {
		// The wait ran out (or mcpd went away): what there is so far.
		return ev, nil
	}
	return ev, err
}

// watch reads hand-off id with read, under the lock, until read says it is
// done, waiting for the hub to change between reads. It answers read's last
// answer, with ctx's error when ctx ends first.
func watch[T any](ctx context.Context, hub *Hub, id string, read func(h *handoff) (T, bool)) (T, error) {
	for {
		hub.mu.Lock()
		h, err := hub.get(id)
		if err != nil {
			hub.mu.Unlock()
			var none T
			return none, err
		}
		v, done := read(h)
		ch := hub.changed
		hub.mu.Unlock()
		if done {
			return v, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return v, ctx.Err()
		}
	}
}

// EndHandoff closes a hand-off with the outcome the agent was given.
func (hub *Hub) EndHandoff(_ context.Context, id string, end control.HandoffEnd) error {
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

func viewOf(h *handoff) View {
	return View{ID: h.id, Session: h.session, ChallengeType: h.challengeType, Site: h.site,
		Created: h.created, Expires: h.expires, Decision: h.decision, Ended: h.ended, Outcome: h.outcome, DurationMs: h.durationMs}
}

// OpenHandoffs lists the hand-offs waiting for the owner, oldest first.
func (hub *Hub) OpenHandoffs() []View {
	hub.mu.Lock()
	defer hub.mu.Unlock()
	hub.sweep()
	var out []View
	for _, h := range hub.byID {
		if !h.ended && h.decision == control.HandoffOpen {
			out = append(out, viewOf(h))
		}
	}
	sortViews(out)
	return out
}

func sortViews(v []View) {
	for i := 1; i < len(v); i++ {
		for j := i; j > 0 && v[j].Created.Before(v[j-1].Created); j-- {
			v[j], v[j-1] = v[j-1], v[j]
		}
	}
}

// Handoff returns one hand-off.
func (hub *Hub) Handoff(id string) (View, bool) {
	hub.mu.Lock()
	defer hub.mu.Unlock()
	h, ok := hub.byID[id]
	if !ok {
		return View{}, false
	}
	return viewOf(h), true
}

// NextFrame waits until a frame newer than after exists, the hand-off ends,
// or ctx is done.
func (hub *Hub) NextFrame(ctx context.Context, id string, after int64) (Frame, error) {
	return watch(ctx, hub, id, func(h *handoff) (Frame, bool) {
		if !h.ended && h.decision == control.HandoffOpen && (h.frame == nil || h.frameSeq <= after) {
			return Frame{}, false
		}
		f := Frame{Seq: h.frameSeq, Width: h.frameW, Height: h.frameH, View: viewOf(h)}
		if !h.ended && h.decision == control.HandoffOpen {
			f.JPEG = h.frame
		}
		return f, true
	})
}

// HandoffInput queues one owner action for mcpd to replay.
func (hub *Hub) HandoffInput(id string, in InputEvent) error {
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
	return hub.act(id, func(h *handoff) error {
		if in.Type == "click" && (ev.X < 0 || ev.Y < 0 || (h.frameW > 0 && ev.X > float64(h.frameW)) || (h.frameH > 0 && ev.Y > float64(h.frameH))) {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "the click is outside the page")
		}
		if len(h.inputs) >= maxHandoffInputs {
			return agentvault.Errorf(agentvault.CodeRateLimited, "too much input at once; wait for the page to catch up")
		}
		h.inputSeq++
		ev.Seq = h.inputSeq
		h.inputs = append(h.inputs, ev)
		return nil
	})
}

// DecideHandoff records the owner's decision: done, failed or abandoned.
func (hub *Hub) DecideHandoff(id, decision string) error {
	switch decision {
	case control.HandoffDone, control.HandoffFailed, control.HandoffAbandoned:
	default:
		return agentvault.Errorf(agentvault.CodeInvalidInput, "unknown decision")
	}
	return hub.act(id, func(h *handoff) error {
		h.decision = decision
		return nil
	})
}

// WaitHandoff waits until the hand-off ended (mcpd gave the agent its
// outcome) or ctx is done, and returns it.
func (hub *Hub) WaitHandoff(ctx context.Context, id string) (View, error) {
	return watch(ctx, hub, id, func(h *handoff) (View, bool) {
		v := viewOf(h)
		return v, v.Ended
	})
}
