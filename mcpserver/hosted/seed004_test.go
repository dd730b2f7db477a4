package hosted

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault/control"
)

// Seed 004's hosted-server rules, one test each, over the real streamable
// HTTP transport with the browserless tool server (fakeTools).

var anyHandleRE = regexp.MustCompile(`s_[a-z2-7]{16}`)

// TestSeed004_HostedOpenPageNamesTheOtherOpenBrowsers: an open_page that
// starts a new browser names the connection's other open browsers by the
// site their page is on and how long ago they were opened and last used,
// before the session line (which stays last). It names no handle (P24: two
// clients on one key are two, and a handle is what lets a client act on a
// session), nor a session with no page, nor another connection's browser;
// an open_page on a session it already has names none.
func TestSeed004_HostedOpenPageNamesTheOtherOpenBrowsers(t *testing.T) {
	h := newFakeHarness(t)
	first := h.call(t, keyA, 1, "open_page", nil, "")
	mine := handleIn(t, first)
	if strings.Contains(first, "other open browser") {
		t.Fatalf("the first open_page names others: %q", first)
	}
	h.tools.noPage = true
	noPage := handleIn(t, h.call(t, keyA, 2, "create_login", nil, ""))
	h.tools.noPage = false
	otherKey := handleIn(t, h.call(t, keyB, 3, "open_page", nil, ""))
	h.clock.add(3 * time.Minute)
	h.call(t, keyA, 4, "click", map[string]any{"session": mine}, "")
	h.clock.add(2 * time.Minute)

	// A second client on the same key: the same connection.
	second := h.call(t, keyA, 1, "open_page", nil, "")
	theirs := handleIn(t, second)
	want := "This connection already has 1 other open browser: one on shop.example (opened 5 minutes ago, last used 2 minutes ago)."
	if !strings.Contains(second, want) || !strings.Contains(second, "`session`") || !strings.Contains(second, "close_session") {
		t.Fatalf("the second open_page does not name the first browser: %q", second)
	}
	for _, hd := range anyHandleRE.FindAllString(second, -1) {
		if hd != theirs {
			t.Fatalf("the second open_page names another session's handle %s (mine %s, no page %s, other key %s): %q", hd, mine, noPage, otherKey, second)
		}
	}
	line := strings.Index(second, want)
	if sl := strings.LastIndex(second, "session: "+theirs); sl < line || !strings.HasSuffix(second, `(pass this as "session" on every later call in this task)`) {
		t.Fatalf("the session line is not last: %q", second)
	}
	if again := h.call(t, keyA, 5, "open_page", map[string]any{"session": mine, "selector": "x"}, ""); strings.Contains(again, "other open browser") {
		t.Fatalf("an open_page on a session it has names others: %q", again)
	}
}

// conn is the harness's connection of key id (avk_aaaa, avk_bbbb).
func (h *fakeHarness) conn(id string) *conn {
	h.calls.hosted.mu.Lock()
	defer h.calls.hosted.mu.Unlock()
	return h.calls.hosted.conns[id]
}

func (h *fakeHarness) live(id string) int {
	c := h.conn(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.live)
}

// TestSeed004_SlotReasonNoCallInTwoMinutes: at the account's session limit,
// a session of another connection that no call used since it started is
// closed to make room once it is 2 minutes old, not before, and a call on
// it reads that reason; one a later call used is never taken for another
// connection.
func TestSeed004_SlotReasonNoCallInTwoMinutes(t *testing.T) {
	h := newFakeHarness(t)
	h.tools.limit = 1
	theirs := handleIn(t, h.call(t, keyB, 1, "open_page", nil, ""))
	h.clock.add(slotGrace - time.Second)
	if txt := h.call(t, keyA, 2, "open_page", nil, ""); !strings.HasPrefix(txt, "status=error code=too_many_sessions\n") || h.tools.opened[0].isClosed() {
		t.Fatalf("at the limit, a session younger than 2 minutes was taken: %q", txt)
	}
	h.clock.add(time.Second)
	mine := handleIn(t, h.call(t, keyA, 3, "open_page", nil, ""))
	if !h.tools.opened[0].isClosed() {
		t.Fatal("the other connection's unused session was not closed")
	}
	want := "This session has ended: the gateway closed it because " + reasonLimitOther + ". What its close found:"
	if txt := h.call(t, keyB, 4, "click", map[string]any{"session": theirs}, ""); !strings.Contains(txt, want) {
		t.Fatalf("a call on the session closed for the slot: %q", txt)
	}
	// A session a call used after the one that started it keeps its slot,
	// however old.
	h.call(t, keyA, 5, "click", map[string]any{"session": mine}, "")
	h.clock.add(10 * time.Minute)
	if txt := h.call(t, keyB, 6, "open_page", nil, ""); !strings.HasPrefix(txt, "status=error code=too_many_sessions\n") || h.tools.opened[1].isClosed() {
		t.Fatalf("at the limit, a session a call used was taken: %q", txt)
	}
}

// TestSeed004_LongCallRunsIntoTheHardLimit: the age check skips a session
// while a call runs on it, so a call on a browser near its age limit keeps
// running and answers hard_timeout at the call limit; once the call has
// left, the age check ends the session.
func TestSeed004_LongCallRunsIntoTheHardLimit(t *testing.T) {
	h := newFakeHarnessConfig(t, keyTable{keyA: "avk_aaaa"}, Config{CallLimit: 300 * time.Millisecond})
	handle := handleIn(t, h.call(t, keyA, 1, "open_page", nil, ""))
	h.clock.add(55 * time.Minute)
	release := make(chan struct{})
	h.tools.stubborn = map[string]bool{"click": true}
	h.tools.block["click"] = release
	txt := h.call(t, keyA, 2, "click", map[string]any{"session": handle}, "")
	if !strings.HasPrefix(txt, "status=error code=hard_timeout session="+handle+"\n") || !strings.Contains(txt, "click did not finish within") {
		close(release)
		t.Fatalf("the long call: %q", txt)
	}
	// The call still runs on the server, past the browser's age limit.
	h.clock.add(2 * time.Minute)
	h.calls.Sweep()
	if h.tools.opened[0].isClosed() || h.calls.Running(handle) != 1 {
		close(release)
		t.Fatalf("the age check ended a session with a call in flight (closed %v, running %d)", h.tools.opened[0].isClosed(), h.calls.Running(handle))
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for h.calls.Running(handle) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the call did not leave the session")
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.calls.Sweep()
	if txt := h.call(t, keyA, 3, "click", map[string]any{"session": handle}, ""); !strings.Contains(txt, "the gateway closed it because "+reasonAge) {
		t.Fatalf("after the call left: %q", txt)
	}
}

// TestSeed004_HandleFromMcpSessionIdHeaderStartsANewSession: a handle that
// came only in the Mcp-Session-Id request header, on a tool that can start a
// session, starts a new one when it names an ended session, and the answer
// adds what the earlier one's close found when a record is left; a live
// handle there is used; a page tool with an ended one is refused.
func TestSeed004_HandleFromMcpSessionIdHeaderStartsANewSession(t *testing.T) {
	h := newFakeHarness(t)
	old := handleIn(t, h.call(t, keyA, 1, "open_page", nil, ""))
	h.call(t, keyA, 2, "close_session", map[string]any{"session": old}, "")
	hdr := func(v string) map[string]string { return map[string]string{"Mcp-Session-Id": v} }

	txt := h.callHeader(t, keyA, 3, "open_page", nil, "", hdr(old))
	fresh := handleIn(t, txt)
	if fresh == old || len(h.tools.opened) != 2 {
		t.Fatalf("a header naming an ended session did not start a new one: %q", txt)
	}
	if !strings.Contains(txt, "The earlier session") || !strings.Contains(txt, reasonClosed) || !strings.Contains(txt, `{"note":"fake close"}`) {
		t.Fatalf("no line about the earlier session: %q", txt)
	}
	if txt := h.callHeader(t, keyA, 4, "open_page", nil, "", hdr(fresh)); !strings.Contains(txt, "open_page run 3 on "+fresh) || len(h.tools.opened) != 2 {
		t.Fatalf("a header naming a live session: %q", txt)
	}
	if txt := h.callHeader(t, keyA, 5, "get_token_catalog", nil, "", hdr("s_aaaaaaaaaaaaaaaa")); strings.Contains(txt, "The earlier session") || handleIn(t, txt) == "" || len(h.tools.opened) != 3 {
		t.Fatalf("a header naming a session with no record: %q", txt)
	}
	if txt := h.callHeader(t, keyA, 6, "click", nil, "", hdr(old)); !strings.HasPrefix(txt, "status=error code=session_ended session_ended=true\n") || len(h.tools.opened) != 3 {
		t.Fatalf("a page tool with an ended handle in the header: %q", txt)
	}
}

// TestSeed004_FirstCallThatFailsStartsNoSession: a first call (not a login
// write) that fails names no handle, and the session it started is closed.
func TestSeed004_FirstCallThatFailsStartsNoSession(t *testing.T) {
	h := newFakeHarness(t)
	h.tools.fail["get_token_catalog"] = "unavailable"
	txt := h.call(t, keyA, 1, "get_token_catalog", nil, "")
	if !strings.HasPrefix(txt, "status=error code=unavailable\n") || strings.Contains(txt, "session") {
		t.Fatalf("a failed first call: %q", txt)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !h.tools.opened[0].isClosed() {
		if time.Now().After(deadline) {
			t.Fatal("the session the failed first call started was not closed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := h.live("avk_aaaa"); n != 0 {
		t.Fatalf("%d sessions live after a failed first call", n)
	}
}

// waitIn is the wait id of a pending answer's status line.
func waitIn(t *testing.T, txt string) string {
	t.Helper()
	m := regexp.MustCompile(`^status=pending wait=(w_[a-z2-7]{12})`).FindStringSubmatch(txt)
	if m == nil {
		t.Fatalf("not a pending answer: %q", txt)
	}
	return m[1]
}

// TestSeed004_SignupWaitKeepsTheCallDeadline: a call the proxy reports as
// waiting on a signup approval does not answer pending early: it answers
// at the call deadline, naming the signup wait.
func TestSeed004_SignupWaitKeepsTheCallDeadline(t *testing.T) {
	const deadline = time.Second
	h := newFakeHarnessConfig(t, keyTable{keyA: "avk_aaaa"}, Config{CallDeadline: deadline})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	h.tools.block["wait_for_signup_approval"] = release
	h.tools.report["wait_for_signup_approval"] = &control.Pending{Pending: true, WaitID: "wt_signup", Kind: "signup", Site: "shop.example"}
	start := time.Now()
	txt := h.call(t, keyA, 1, "wait_for_signup_approval", nil, "")
	took := time.Since(start)
	waitIn(t, txt)
	if took < deadline {
		t.Fatalf("a signup wait answered pending after %v, before the %v deadline", took, deadline)
	}
	if p := h.tools.lastPending(t); p.Owner == nil || p.Owner.Kind != "signup" || p.OwnerDone {
		t.Fatalf("the pending answer does not name the signup wait: %+v", p)
	}
}

// TestSeed004_PendingSaysWhetherAnOwnerWaitIsReported: until the call
// reports an owner wait its pending answer names none; once one is
// reported, get_pending_result answers at once naming it; once it ended
// while the call runs on, the answer says the call stopped waiting on the
// owner; then the call's own answer. (mcpserver's
// TestSeed004_PendingAnswerWording holds the words of each.)
func TestSeed004_PendingSaysWhetherAnOwnerWaitIsReported(t *testing.T) {
	h := newFakeHarnessConfig(t, keyTable{keyA: "avk_aaaa"}, Config{CallDeadline: 300 * time.Millisecond})
	handle := handleIn(t, h.call(t, keyA, 1, "open_page", nil, ""))
	release := make(chan struct{})
	h.tools.block["fill_checkout"] = release
	wait := waitIn(t, h.call(t, keyA, 2, "fill_checkout", map[string]any{"session": handle}, ""))
	if p := h.tools.lastPending(t); p.Owner != nil || p.OwnerDone {
		close(release)
		t.Fatalf("before any owner wait: %+v", p)
	}
	f := h.conn("avk_aaaa").pending(wait)
	f.OwnerWaiting(&control.Pending{Pending: true, WaitID: "wt_site", Kind: "new_destination", Site: "shop.example"})
	waitIn(t, h.call(t, keyA, 3, "get_pending_result", map[string]any{"wait": wait}, ""))
	if p := h.tools.lastPending(t); p.Owner == nil || p.Owner.WaitID != "wt_site" || p.OwnerDone {
		close(release)
		t.Fatalf("once the wait is reported: %+v", p)
	}
	f.OwnerWaitEnded()
	waitIn(t, h.call(t, keyA, 4, "get_pending_result", map[string]any{"wait": wait}, ""))
	if p := h.tools.lastPending(t); p.Owner == nil || !p.OwnerDone {
		close(release)
		t.Fatalf("once the wait ended: %+v", p)
	}
	close(release)
	for i := 5; ; i++ {
		txt := h.call(t, keyA, i, "get_pending_result", map[string]any{"wait": wait}, "")
		if strings.HasPrefix(txt, "status=ok") {
			if !strings.Contains(txt, "fill_checkout run 1") {
				t.Fatalf("the call's answer: %q", txt)
			}
			break
		}
		if i > 100 {
			t.Fatalf("the call's answer never came: %q", txt)
		}
	}
}

// TestSeed004_HostedHandoffAnswersPending: request_challenge_handoff on
// the hosted server answers pending as soon as it reports its wait on the
// owner, runs on past the 4-minute call limit up to its own, and
// get_pending_result fetches its outcome.
func TestSeed004_HostedHandoffAnswersPending(t *testing.T) {
	h := newFakeHarnessConfig(t, keyTable{keyA: "avk_aaaa"}, Config{CallDeadline: 200 * time.Millisecond, CallLimit: 50 * time.Millisecond, HandoffLimit: time.Minute})
	handle := handleIn(t, h.call(t, keyA, 1, "open_page", nil, ""))
	release := make(chan struct{})
	h.tools.block["request_challenge_handoff"] = release
	h.tools.report["request_challenge_handoff"] = &control.Pending{Pending: true, WaitID: "ho_1", Kind: "challenge_handoff", Site: "shop.example"}
	txt := h.call(t, keyA, 2, "request_challenge_handoff", map[string]any{"session": handle}, "")
	wait := waitIn(t, txt)
	if !strings.Contains(txt, "session: "+handle) {
		close(release)
		t.Fatalf("the pending answer names no session: %q", txt)
	}
	if p := h.tools.lastPending(t); p.Owner == nil || p.Owner.Kind != "challenge_handoff" {
		close(release)
		t.Fatalf("the pending answer does not name the hand-off: %+v", p)
	}
	// get_pending_result waits its 200 ms deadline: past the 50 ms limit
	// of other calls, the hand-off is still running.
	if txt := h.call(t, keyA, 3, "get_pending_result", map[string]any{"wait": wait}, ""); waitIn(t, txt) != wait {
		close(release)
		t.Fatalf("get_pending_result while the owner has the page: %q", txt)
	}
	close(release)
	for i := 4; ; i++ {
		txt = h.call(t, keyA, i, "get_pending_result", map[string]any{"wait": wait}, "")
		if !strings.HasPrefix(txt, "status=pending") {
			break
		}
		if i > 100 {
			t.Fatalf("the hand-off's answer never came: %q", txt)
		}
	}
	if !strings.HasPrefix(txt, "status=ok session="+handle+"\n") || !strings.Contains(txt, "request_challenge_handoff run 1") {
		t.Fatalf("get_pending_result after the hand-off ended: %q", txt)
	}
}
