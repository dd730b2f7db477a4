package mcpserver

import (
	"context"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
)

// ownerHub is the stand-in control with proxyd's hand-off calls: the
// owner's decision is what the test puts on decide before the hand-off;
// once broken is set, every poll for the owner's input fails.
type ownerHub struct {
	*standInControl
	started chan control.HandoffRequest
	decide  chan string
	broken  atomic.Bool
	ended   chan control.HandoffEnd
	// refuse: StartHandoff records the request and refuses it, so a
	// hand-off that should not have started does not wait for an owner.
	refuse bool
}

func (h *ownerHub) StartHandoff(ctx context.Context, sessionID string, req control.HandoffRequest) (control.HandoffStarted, error) {
	h.started <- req
	if h.refuse {
		return control.HandoffStarted{}, agentvault.Errorf(agentvault.CodeInternal, "stand-in: no hand-off expected")
	}
	return control.HandoffStarted{ID: "ho_test"}, nil
}

func (h *ownerHub) HandoffFrame(ctx context.Context, id string, jpeg []byte, width, height int) error {
	return nil
}

func (h *ownerHub) HandoffEvents(ctx context.Context, id string, after int64, wait time.Duration) (control.HandoffEvents, error) {
	if h.broken.Load() {
		return control.HandoffEvents{}, agentvault.Errorf(agentvault.CodeUpstream, "control API unreachable")
	}
	select {
	case d := <-h.decide:
		return control.HandoffEvents{Decision: d}, nil
	case <-time.After(wait):
		return control.HandoffEvents{}, nil
	case <-ctx.Done():
		return control.HandoffEvents{}, ctx.Err()
	}
}

func (h *ownerHub) EndHandoff(ctx context.Context, id string, end control.HandoffEnd) error {
	h.ended <- end
	return nil
}

var handoffPending = regexp.MustCompile(`^status=pending wait=(w_[a-z2-7]+)`)

// handoff calls request_challenge_handoff and, when it answers pending,
// get_pending_result until the hand-off's own answer comes.
func (h *harness) handoff() (string, bool) {
	h.t.Helper()
	txt, isErr := h.call("request_challenge_handoff", nil)
	for i := 0; ; i++ {
		m := handoffPending.FindStringSubmatch(txt)
		if m == nil {
			return txt, isErr
		}
		if i > 60 {
			h.t.Fatalf("the hand-off never answered: %q", txt)
		}
		txt, isErr = h.call("get_pending_result", map[string]any{"wait": m[1]})
	}
}

// TestSeed004_HandoffOutcomes: with a challenge on the page, the hand-off
// answers failed when the owner says it failed, released_unsolved when the
// owner released the page and the challenge is still showing, and completed
// when the proxy could not follow the hand-off to the end; on a page with no
// challenge it is refused unknown_target ("No challenge is present")
// without notifying anyone.
func TestSeed004_HandoffOutcomes(t *testing.T) {
	hub := &ownerHub{standInControl: &standInControl{}, started: make(chan control.HandoffRequest, 4),
		decide: make(chan string, 1), ended: make(chan control.HandoffEnd, 4)}
	h := newControlHarness(t, hub, hub.standInControl)

	h.ok("open_page", map[string]any{"url": h.site.Shop.URL + "/c/plain"})
	txt, isErr := h.handoff()
	if !isErr || !strings.HasPrefix(txt, "status=error code=unknown_target") || !strings.Contains(txt, "No challenge is present on this page") {
		t.Fatalf("a hand-off on a page without a challenge: %q", txt)
	}

	h.ok("open_page", map[string]any{"url": h.site.Shop.URL + "/c/captcha"})
	for _, c := range []struct{ decision, want string }{
		{control.HandoffFailed, "failed"},
		{control.HandoffDone, "released_unsolved"},
		{"", "completed"}, // the owner's input cannot be read any more
	} {
		if c.decision == "" {
			hub.broken.Store(true)
		} else {
			hub.decide <- c.decision
		}
		txt, isErr := h.handoff()
		if isErr || !strings.Contains(txt, `"outcome":"`+c.want+`"`) || !strings.Contains(txt, `"challengeType":"captcha"`) {
			t.Fatalf("owner's decision %q: %q, want outcome %s", c.decision, txt, c.want)
		}
		if req := <-hub.started; req.ChallengeType != "captcha" {
			t.Fatalf("hand-off started for %+v", req)
		}
		if end := <-hub.ended; end.Outcome != c.want {
			t.Fatalf("the hand-off's end was recorded as %q, want %q", end.Outcome, c.want)
		}
	}
	select {
	case req := <-hub.started:
		t.Fatalf("a refused hand-off notified the owner: %+v", req)
	default:
	}
}

// TestSeed004_HandoffRefusesAmbiguousOnly: right after fill_login typed a
// password, a field that only might be a code input is detected as
// ambiguousOnly, and request_challenge_handoff refuses it with
// handoff_not_applicable without notifying the owner.
func TestSeed004_HandoffRefusesAmbiguousOnly(t *testing.T) {
	hub := &ownerHub{standInControl: &standInControl{}, started: make(chan control.HandoffRequest, 1),
		decide: make(chan string, 1), ended: make(chan control.HandoffEnd, 1), refuse: true}
	h := newControlHarness(t, hub, hub.standInControl)
	h.ok("open_page", map[string]any{"url": h.site.LoginURL()})
	h.ok("fill_login", map[string]any{"usernameSelector": "#identifier", "usernameToken": "av_login_shop_email_u7x2k"})
	h.ok("click", map[string]any{"selector": "#next"})
	h.ok("fill_login", map[string]any{"passwordSelector": "#password", "passwordToken": "av_login_shop_password_u7x2k"})
	h.ok("open_page", map[string]any{"url": h.site.Shop.URL + "/c/maybe"})
	if d := jsonOf(t, h.ok("detect_challenge", nil)); d["ambiguousOnly"] != true || d["type"] != "otp" {
		t.Fatalf("detect_challenge after a login password: %v", d)
	}
	txt, isErr := h.handoff()
	if !isErr || !strings.HasPrefix(txt, "status=error code=handoff_not_applicable") {
		t.Fatalf("a hand-off of an ambiguousOnly detection: %q", txt)
	}
	select {
	case req := <-hub.started:
		t.Fatalf("a refused hand-off notified the owner: %+v", req)
	default:
	}
}

// TestSeed004_HandoffScanIncomplete: when the re-detection before a hand-off
// cannot finish its scan (the Playwright driver died under the page), the
// hand-off is refused challenge_scan_incomplete and nobody is notified.
func TestSeed004_HandoffScanIncomplete(t *testing.T) {
	hub := &ownerHub{standInControl: &standInControl{}, started: make(chan control.HandoffRequest, 1),
		decide: make(chan string, 1), ended: make(chan control.HandoffEnd, 1), refuse: true}
	h := newControlHarness(t, hub, hub.standInControl)
	h.ok("open_page", map[string]any{"url": h.site.Shop.URL + "/c/captcha"})
	killDriver(t)
	txt, isErr := h.handoff()
	if !isErr || !strings.HasPrefix(txt, "status=error code=challenge_scan_incomplete") || !strings.Contains(txt, "nobody was notified") {
		t.Fatalf("a hand-off whose scan could not finish: %q", txt)
	}
	select {
	case req := <-hub.started:
		t.Fatalf("a refused hand-off notified the owner: %+v", req)
	default:
	}
}

// TestSeed004_HandoffPageGone: a hand-off asked for on a popup that has
// closed itself since the agent last acted (its script held until the
// agent was on it, then let go) is refused unknown_target "Unknown pageId"
// and nobody is notified.
func TestSeed004_HandoffPageGone(t *testing.T) {
	site, spki, gate := gatedPopupSite(t)
	hub := &ownerHub{standInControl: &standInControl{}, started: make(chan control.HandoffRequest, 1),
		decide: make(chan string, 1), ended: make(chan control.HandoffEnd, 1), refuse: true}
	h := newControlHarness(t, hub, hub.standInControl, spki)
	h.ok("open_page", map[string]any{"url": site.URL + "/p/opener"})
	h.ok("click", map[string]any{"selector": "#held"})
	if got := h.ok("wait_for_popup", map[string]any{"timeout": 30000}); !strings.Contains(got, "/p/held") {
		t.Fatalf("wait_for_popup: %q", got)
	}
	close(gate.release)
	select {
	case <-gate.notes: // the opener saw the popup close
	case <-time.After(time.Minute):
		t.Fatal("the popup did not close itself")
	}
	txt, isErr := h.handoff()
	if !isErr || !strings.HasPrefix(txt, "status=error code=unknown_target") || !strings.Contains(txt, "Unknown pageId") || !strings.Contains(txt, "nobody was notified") {
		t.Fatalf("a hand-off on a popup that closed: %q", txt)
	}
	select {
	case req := <-hub.started:
		t.Fatalf("a hand-off on a page that was gone notified the owner: %+v", req)
	default:
	}
}
