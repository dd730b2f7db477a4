package mcpserver

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault/control"
)

// TestSeed004_PendingNewRequestSecondSecurityCodeApproval: a fill that
// waited on a purchase approval and then waits on the second approval of
// the security code answers, over the hosted transport, a pending answer
// that opens with "NEW REQUEST", says new_request=true, and names the wait
// with a reason from the seed's closed list (every_purchase, not the
// proxy's internal cvv_again).
func TestSeed004_PendingNewRequestSecondSecurityCodeApproval(t *testing.T) {
	h := newHostedHarness(t, HostedConfig{CallDeadline: 8 * time.Second, CallLimit: 60 * time.Second}, nil)
	a := h.client(keyA)
	_, r := call(t, a, "open_page", map[string]any{"url": h.site.CheckoutURL()})
	s := handleOf(t, r)
	exp := time.Now().Add(time.Hour)
	script := &ownerScript{field: "number", answers: []string{"pending"},
		pending:   control.Pending{WaitID: "apr_1", Kind: "purchase", Reason: "every_purchase", Site: "127.0.0.1", ExpiresAt: exp},
		next:      &control.Pending{WaitID: "apr_2", Kind: "purchase", Reason: "cvv_again", Site: "127.0.0.1", ExpiresAt: exp},
		nextField: "cvv"}
	h.ctl.owner = script
	call(t, a, "wait_for_selector", map[string]any{"session": s, "selector": "#number", "frame": payFrame, "timeout": 30000})
	txt, _ := call(t, a, "fill_checkout", map[string]any{"session": s, "fields": []map[string]any{
		{"selector": "#number", "frame": payFrame, "value": num1},
		{"selector": "#cvc", "frame": payFrame, "value": cvv1},
	}})
	m := regexp.MustCompile(`^status=pending wait=(w_[a-z2-7]+) waiting_on_owner=true reason=every_purchase `).FindStringSubmatch(txt)
	if m == nil || strings.Contains(txt, "NEW REQUEST") || strings.Contains(txt, "new_request") {
		t.Fatalf("first wait: %q", txt)
	}
	wait := m[1]
	script.mu.Lock()
	script.answers = []string{"approved"}
	script.mu.Unlock()
	deadline := time.Now().Add(45 * time.Second)
	for {
		txt, r = call(t, a, "get_pending_result", map[string]any{"wait": wait})
		if strings.Contains(txt, "NEW REQUEST") || !strings.HasPrefix(txt, "status=pending") || time.Now().After(deadline) {
			break
		}
	}
	if !strings.HasPrefix(txt, "status=pending wait="+wait+" waiting_on_owner=true reason=every_purchase ") ||
		!strings.Contains(strings.SplitN(txt, "\n", 2)[0], "new_request=true") {
		t.Fatalf("second wait's status line: %q", txt)
	}
	if body := strings.SplitN(txt, "\n", 2)[1]; !strings.HasPrefix(body, "NEW REQUEST") {
		t.Fatalf("second wait's text does not open with NEW REQUEST: %q", body)
	}
	if strings.Contains(txt, "cvv_again") {
		t.Fatalf("the proxy's internal reason reached the agent: %q", txt)
	}
	sc, _ := json.Marshal(r.StructuredContent)
	if !strings.Contains(string(sc), `"new_request":true`) || !strings.Contains(string(sc), `"reason":"every_purchase"`) {
		t.Fatalf("structuredContent %s", sc)
	}
	// The same wait named again is no longer new.
	txt, _ = call(t, a, "get_pending_result", map[string]any{"wait": wait})
	if strings.Contains(txt, "NEW REQUEST") {
		t.Fatalf("the same request named twice is not new: %q", txt)
	}
	script.mu.Lock()
	script.answers = []string{"approved"}
	script.mu.Unlock()
	for strings.HasPrefix(txt, "status=pending") && time.Now().Before(deadline) {
		txt, _ = call(t, a, "get_pending_result", map[string]any{"wait": wait})
	}
	if !strings.HasPrefix(txt, "status=ok filled=2/2") {
		t.Fatalf("the fill's own answer: %q", txt)
	}
}
