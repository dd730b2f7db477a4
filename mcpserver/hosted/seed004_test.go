package hosted

import (
	"regexp"
	"strings"
	"testing"
	"time"
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
