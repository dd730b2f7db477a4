package dashboard_test

import (
	"context"
	"encoding/json"
	"io"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/owner/dashboard"
)

type fakeNotifs struct {
	mu sync.Mutex
	p  owner.NotifyPrefs
	ch dashboard.NotifyChannels
}

func (f *fakeNotifs) NotifyPrefs() owner.NotifyPrefs { f.mu.Lock(); defer f.mu.Unlock(); return f.p }
func (f *fakeNotifs) SetNotifyPrefs(_ context.Context, p owner.NotifyPrefs) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.p = p
	return nil
}
func (f *fakeNotifs) NotifyChannels() dashboard.NotifyChannels { return f.ch }

// TestNotif_SettingsPageAndLiveApprovals: the owner turns channels and the
// seed's hand-off switch on and off on /notifications (a channel the
// deployment did not configure keeps its switch); the Approvals page runs
// its one script under a CSP that allows only it and same-origin polling,
// keeps a meta refresh for browsers without script, and /approvals/live
// lists what waits, for the signed-in owner only.
func TestNotif_SettingsPageAndLiveApprovals(t *testing.T) {
	n := &fakeNotifs{p: owner.DefaultNotifyPrefs, ch: dashboard.NotifyChannels{Webhook: true}}
	e := newEnv(t, func(c *dashboard.Config) { c.Notifications = n })
	ctx := context.Background()
	if _, body := e.get("/approvals/live"); strings.Contains(body, `"pending"`) {
		t.Fatal("/approvals/live answered without sign-in")
	}
	e.signIn(ownerPW)
	code, body := e.get("/notifications")
	if code != 200 || !strings.Contains(body, "A checkout needs me to clear a bank or verification step") ||
		!strings.Contains(body, "not configured: set <code>notify.smtp</code>") {
		t.Fatalf("notifications page: %d\n%s", code, body)
	}
	// Challenges and browser off, webhook on; email not configured: kept.
	if code, body := e.post("/notifications", "/notifications", url.Values{"webhook": {"on"}}); code != 200 || !strings.Contains(body, "saved") {
		t.Fatalf("save: %d", code)
	}
	if got := n.NotifyPrefs(); got != (owner.NotifyPrefs{Webhook: true, Email: true}) {
		t.Fatalf("saved switches: %+v", got)
	}
	// Without a CSRF token nothing changes.
	if code, _ := e.do("POST", "/notifications", url.Values{"challenges": {"on"}}); code == 200 || n.NotifyPrefs().Challenges {
		t.Fatalf("a POST without CSRF token changed the switches (%d)", code)
	}

	a, err := e.svc.RequestApproval(ctx, owner.ApprovalRequest{Kind: owner.KindNewDestination, Reason: "new_destination", Site: "tickets.example.org"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.client.Get(e.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("approvals CSP: %s", csp)
	}
	for _, want := range []string{`<script src="/approvals.js"></script>`, `<noscript><meta http-equiv="refresh" content="15"></noscript>`, `id="approvals-live"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the Approvals page lacks %s", want)
		}
	}
	if resp, err := e.client.Get(e.srv.URL + "/cards"); err == nil {
		if strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src") {
			t.Error("another page allows script")
		}
		resp.Body.Close()
	}
	if code, js := e.get("/approvals.js"); code != 200 || !strings.Contains(js, "Notification") {
		t.Errorf("approvals.js: %d", code)
	}
	code, body = e.get("/approvals/live")
	var st struct {
		Pending []struct{ ID, Kind, Site string }
		Browser bool
	}
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil || len(st.Pending) != 1 || st.Pending[0].ID != a.ID ||
		st.Pending[0].Site != "tickets.example.org" || st.Browser {
		t.Fatalf("live: %d %s %v", code, body, err)
	}
}
