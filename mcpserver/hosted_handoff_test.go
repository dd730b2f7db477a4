package mcpserver

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault/control"
)

// handoffHub plays proxyd's hand-off calls: the owner's decision is what
// the test sends on decide.
type handoffHub struct {
	*hostedControl
	started chan control.HandoffRequest
	decide  chan string
}

func (h *handoffHub) StartHandoff(ctx context.Context, sessionID string, req control.HandoffRequest) (control.HandoffStarted, error) {
	h.started <- req
	return control.HandoffStarted{ID: "ho_test"}, nil
}

func (h *handoffHub) HandoffFrame(ctx context.Context, id string, jpeg []byte, width, height int) error {
	return nil
}

func (h *handoffHub) HandoffEvents(ctx context.Context, id string, after int64, wait time.Duration) (control.HandoffEvents, error) {
	select {
	case d := <-h.decide:
		return control.HandoffEvents{Decision: d}, nil
	case <-time.After(wait):
		return control.HandoffEvents{}, nil
	case <-ctx.Done():
		return control.HandoffEvents{}, ctx.Err()
	}
}

func (h *handoffHub) EndHandoff(ctx context.Context, id string, end control.HandoffEnd) error {
	return nil
}

// TestSeed004_HostedHandoffAnswersPendingWithTheTool: on the hosted server
// request_challenge_handoff, once the owner has the page, answers pending
// at once naming a challenge_handoff wait on the page's site, and
// get_pending_result returns the hand-off's outcome once the owner
// decided. (mcpserver/hosted's TestSeed004_HostedHandoffAnswersPending
// holds the call layer's part: the 12-minute limit.)
func TestSeed004_HostedHandoffAnswersPendingWithTheTool(t *testing.T) {
	hub := &handoffHub{started: make(chan control.HandoffRequest, 1), decide: make(chan string, 1)}
	h := newHostedHarnessWrap(t, HostedConfig{}, nil, func(c *hostedControl) Control {
		hub.hostedControl = c
		return hub
	})
	a := h.client(keyA)
	_, r := openPage(t, a, h.site.Shop.URL+"/c/captcha", "")
	s := handleOf(t, r)
	txt, r := call(t, a, "request_challenge_handoff", map[string]any{"session": s})
	m := regexp.MustCompile(`^status=pending wait=(w_[a-z2-7]+) waiting_on_owner=true reason=challenge_handoff session=` + s + "\n").FindStringSubmatch(txt)
	if m == nil || !strings.Contains(txt, "request_challenge_handoff is waiting for the account owner to complete a challenge on 127.0.0.1") {
		t.Fatalf("the hand-off's first answer: %q", txt)
	}
	if req := <-hub.started; req.ChallengeType != "captcha" {
		t.Fatalf("hand-off started for %+v", req)
	}
	hub.decide <- control.HandoffFailed
	for i := 0; strings.HasPrefix(txt, "status=pending"); i++ {
		if i > 20 {
			t.Fatalf("the hand-off's answer never came: %q", txt)
		}
		txt, r = call(t, a, "get_pending_result", map[string]any{"wait": m[1]})
	}
	if r.IsError || !strings.Contains(txt, `"outcome":"failed"`) || !strings.Contains(txt, `"challengeType":"captcha"`) || handleOf(t, r) != s {
		t.Fatalf("the hand-off's outcome: %q", txt)
	}
}
