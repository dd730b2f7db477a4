package handoff

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
)

// TestHandoff_HubRelaysOverControlAPI: mcpd's side of a hand-off goes
// through the real control handler and client, the owner's side through the
// hub's dashboard methods. Frames reach the owner, the owner's input
// reaches mcpd in order and is dropped once read, the decision ends the
// input, and the end is what the owner's view then shows.
func TestHandoff_HubRelaysOverControlAPI(t *testing.T) {
	hub := New(Config{})
	srv := httptest.NewServer(control.NewHandler(controlOver{hub: hub}, "tok", nil))
	defer srv.Close()
	ctl := control.NewClient(srv.URL, "tok", nil)
	ctx := context.Background()

	if _, err := ctl.StartHandoff(ctx, "s_1", control.HandoffRequest{ChallengeType: "nonsense"}); agentvault.ErrorCode(err) != agentvault.CodeInvalidInput {
		t.Errorf("unknown challenge type: %v", err)
	}
	st, err := ctl.StartHandoff(ctx, "s_1", control.HandoffRequest{ChallengeType: "three_ds", Site: "shop.example", TimeoutMs: 60000})
	if err != nil || st.ID == "" {
		t.Fatalf("start: %+v %v", st, err)
	}
	if open := hub.OpenHandoffs(); len(open) != 1 || open[0].ID != st.ID || open[0].Site != "shop.example" {
		t.Fatalf("open hand-offs: %+v", open)
	}
	if err := ctl.HandoffFrame(ctx, st.ID, []byte("not a jpeg"), 10, 10); agentvault.ErrorCode(err) != agentvault.CodeInvalidInput {
		t.Errorf("a frame that is not a JPEG: %v", err)
	}
	jpeg := []byte{0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3}
	if err := ctl.HandoffFrame(ctx, st.ID, jpeg, 1280, 900); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	f, err := hub.NextFrame(fctx, st.ID, 0)
	cancel()
	if err != nil || f.Seq != 1 || string(f.JPEG) != string(jpeg) || f.Width != 1280 || f.Height != 900 {
		t.Fatalf("owner's frame: seq %d, %d bytes, %dx%d, %v", f.Seq, len(f.JPEG), f.Width, f.Height, err)
	}
	// A frame request waits for the next frame.
	got := make(chan Frame, 1)
	go func() { f, _ := hub.NextFrame(context.Background(), st.ID, 1); got <- f }()
	if err := ctl.HandoffFrame(ctx, st.ID, jpeg, 1280, 900); err != nil {
		t.Fatal(err)
	}
	if f := <-got; f.Seq != 2 {
		t.Errorf("the waiting frame request got seq %d", f.Seq)
	}

	for _, bad := range []InputEvent{{Type: "key", Key: "F12"}, {Type: "text"}, {Type: "click", X: -1, Y: 3}, {Type: "click", X: 5000, Y: 3}, {Type: "eval"}} {
		if err := hub.HandoffInput(st.ID, bad); agentvault.ErrorCode(err) != agentvault.CodeInvalidInput {
			t.Errorf("input %+v: %v, want invalid_input", bad, err)
		}
	}
	for _, in := range []InputEvent{{Type: "click", X: 140, Y: 258}, {Type: "text", Text: "481516"}, {Type: "key", Key: "Enter"}} {
		if err := hub.HandoffInput(st.ID, in); err != nil {
			t.Fatal(err)
		}
	}
	ev, err := ctl.HandoffEvents(ctx, st.ID, 0, time.Second)
	if err != nil || len(ev.Inputs) != 3 || ev.Inputs[0].Type != "click" || ev.Inputs[1].Text != "481516" || ev.Inputs[2].Key != "Enter" || ev.Decision != control.HandoffOpen {
		t.Fatalf("mcpd's events: %+v %v", ev, err)
	}
	ev, _ = ctl.HandoffEvents(ctx, st.ID, ev.Inputs[2].Seq, 0)
	if len(ev.Inputs) != 0 {
		t.Errorf("input read once is still kept: %+v", ev.Inputs)
	}
	hub.mu.Lock()
	kept := len(hub.byID[st.ID].inputs)
	hub.mu.Unlock()
	if kept != 0 {
		t.Errorf("the hub keeps %d inputs mcpd has read", kept)
	}
	// A long poll wakes on the owner's decision.
	evc := make(chan control.HandoffEvents, 1)
	go func() { ev, _ := ctl.HandoffEvents(ctx, st.ID, 3, 10*time.Second); evc <- ev }()
	// A head start, so that the poll is likely waiting when the decision
	// comes; nothing depends on it: a poll that starts after the decision
	// returns it at once, and the test passes either way.
	time.Sleep(50 * time.Millisecond)
	if err := hub.DecideHandoff(st.ID, control.HandoffDone); err != nil {
		t.Fatal(err)
	}
	if ev := <-evc; ev.Decision != control.HandoffDone {
		t.Errorf("decision seen by mcpd: %q", ev.Decision)
	}
	if err := hub.HandoffInput(st.ID, InputEvent{Type: "text", Text: "1"}); agentvault.ErrorCode(err) != agentvault.CodeConflict {
		t.Errorf("input after the decision: %v", err)
	}
	if err := hub.DecideHandoff(st.ID, control.HandoffAbandoned); agentvault.ErrorCode(err) != agentvault.CodeConflict {
		t.Errorf("a second decision: %v", err)
	}
	if err := ctl.EndHandoff(ctx, st.ID, control.HandoffEnd{Outcome: "solved", DurationMs: 1234}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	v, err := hub.WaitHandoff(wctx, st.ID)
	wcancel()
	if err != nil || !v.Ended || v.Outcome != "solved" || v.DurationMs != 1234 {
		t.Errorf("owner's view after the end: %+v %v", v, err)
	}
	if f, _ := hub.NextFrame(ctx, st.ID, 0); f.JPEG != nil {
		t.Error("a frame is still served after the end")
	}
	if len(hub.OpenHandoffs()) != 0 {
		t.Error("an ended hand-off is still offered to the owner")
	}
}

// TestHandoff_UnknownSessionRefused: a hand-off needs a live proxy session.
func TestHandoff_UnknownSessionRefused(t *testing.T) {
	hub := New(Config{SessionOpen: func(string) bool { return false }})
	if _, err := hub.StartHandoff(context.Background(), "s_gone", control.HandoffRequest{ChallengeType: "captcha"}); agentvault.ErrorCode(err) != agentvault.CodeSessionEnded {
		t.Errorf("start on a closed session: %v", err)
	}
}

// controlOver serves the hub's calls of the control API; any other call of
// the Service panics (the embedded interface is nil), so a test that
// reaches one fails loudly.
type controlOver struct {
	control.Service
	hub *Hub
}

func (c controlOver) StartHandoff(ctx context.Context, sessionID string, req control.HandoffRequest) (control.HandoffStarted, error) {
	return c.hub.StartHandoff(ctx, sessionID, req)
}

func (c controlOver) HandoffFrame(ctx context.Context, id string, jpeg []byte, w, h int) error {
	return c.hub.HandoffFrame(ctx, id, jpeg, w, h)
}

func (c controlOver) HandoffEvents(ctx context.Context, id string, after int64, wait time.Duration) (control.HandoffEvents, error) {
	return c.hub.HandoffEvents(ctx, id, after, wait)
}

func (c controlOver) EndHandoff(ctx context.Context, id string, end control.HandoffEnd) error {
	return c.hub.EndHandoff(ctx, id, end)
}
