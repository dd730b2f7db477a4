package mcpserver

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
)

// appsControl plays proxyd's connected-apps list: it keeps each key's
// latest report and ends the proxy sessions the owner picked.
type appsControl struct {
	*hostedControl
	mu      sync.Mutex
	reports map[string]control.AppSessionsRequest // by API key
	end     map[string]bool                       // proxy session ids the owner ended
}

func (c *appsControl) ReportAppSessions(ctx context.Context, req control.AppSessionsRequest) (control.AppSessionsResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reports[req.APIKey] = req
	resp := control.AppSessionsResponse{Ended: []string{}}
	for _, s := range req.Sessions {
		if c.end[s.ID] {
			delete(c.end, s.ID)
			resp.Ended = append(resp.Ended, s.ID)
		}
	}
	return resp, nil
}

// ownerEnds closes the proxy session the way the dashboard's End does.
func (c *appsControl) ownerEnds(id string) {
	c.mu.Lock()
	c.end[id] = true
	c.mu.Unlock()
	_, _ = c.hostedControl.CloseSession(context.Background(), id)
}

func (c *appsControl) latest(key string) control.AppSessionsRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reports[key]
}

// TestHostedOwnerEndsSession: mcpd reports each connection's sessions
// (proxy session, handle prefix only, page host), and the call after the
// owner ended one on the dashboard is refused with the first ended-session
// message naming the owner, while the connection's other session goes on.
func TestHostedOwnerEndsSession(t *testing.T) {
	var apps *appsControl
	h := newHostedHarnessWrap(t, HostedConfig{}, nil, func(c *hostedControl) Control {
		apps = &appsControl{hostedControl: c, reports: map[string]control.AppSessionsRequest{}, end: map[string]bool{}}
		return apps
	})
	a := h.client(keyA)
	_, r := call(t, a, "open_page", map[string]any{"url": h.site.CheckoutURL()})
	first := handleOf(t, r)
	_, r = call(t, a, "open_page", map[string]any{"url": h.site.CheckoutURL()})
	second := handleOf(t, r)
	// A call naming a session reports first: both sessions are listed.
	// Reports after open_page also go out in the background and may land
	// after the call's own, with the list as it was then: the next call's
	// report lists both.
	var rep control.AppSessionsRequest
	waitUntil(t, 30*time.Second, "a connected-apps report that lists both sessions", func() bool {
		call(t, a, "count", map[string]any{"selector": "#email", "session": first})
		rep = apps.latest(keyA)
		return len(rep.Sessions) == 2
	})
	var firstID string
	for _, s := range rep.Sessions {
		if strings.Contains(s.HandlePrefix, first[2:]) || len(s.HandlePrefix) > 8 || !strings.HasPrefix(first, s.HandlePrefix) && !strings.HasPrefix(second, s.HandlePrefix) {
			t.Fatalf("the report carries more than a handle prefix: %+v", s)
		}
		if strings.HasPrefix(first, s.HandlePrefix) {
			firstID = s.ID
		}
		if s.PageHost == "" || strings.Contains(s.PageHost, "/") || s.Started.IsZero() || s.LastUsed.IsZero() {
			t.Fatalf("session row: %+v", s)
		}
	}
	if firstID == "" {
		t.Fatalf("no row for %s: %+v", first, rep)
	}

	apps.ownerEnds(firstID)
	txt, r := call(t, a, "count", map[string]any{"selector": "#email", "session": first})
	want := "This session has ended: the gateway closed it because " + reasonOwner + ". What its close found: "
	if !r.IsError || codeOf(r) != agentvault.CodeSessionEnded || !strings.Contains(txt, want) ||
		!strings.HasSuffix(txt, "Call open_page without `session` to start a new one.") {
		t.Fatalf("call after the owner ended it: %q", txt)
	}
	if txt, r := call(t, a, "count", map[string]any{"selector": "#email", "session": second}); r.IsError {
		t.Fatalf("the other session: %q", txt)
	}
	if rep := apps.latest(keyA); len(rep.Sessions) != 1 || strings.HasPrefix(first, rep.Sessions[0].HandlePrefix) {
		t.Fatalf("after the end, report: %+v", rep)
	}
}
