package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/apps"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/owner/dashboard"
)

// fakeApps plays proxyd's list of hosted sessions.
type fakeApps struct {
	mu    sync.Mutex
	apps  []apps.View
	ended []string
}

func (f *fakeApps) ConnectedApps() []apps.View {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]apps.View(nil), f.apps...)
}

func (f *fakeApps) EndAppSession(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, a := range f.apps {
		for j, s := range a.Sessions {
			if s.ID == id {
				f.apps[i].Sessions = append(a.Sessions[:j:j], a.Sessions[j+1:]...)
				f.ended = append(f.ended, id)
				return nil
			}
		}
	}
	return agentvault.Errorf(agentvault.CodeNotFound, "no such session")
}

// TestConnectedAppsListAndEnd: the connected apps page lists each app
// (API key, by its name) with its open sessions (handle prefix, page host,
// age, last use); End needs the page's CSRF token and ends that session
// only.
func TestConnectedAppsListAndEnd(t *testing.T) {
	fake := &fakeApps{}
	e := newEnv(t, func(c *dashboard.Config) { c.Apps = fake })
	e.signIn(ownerPW)
	k, _, err := e.svc.CreateAPIKey(t.Context(), "shopping agent", owner.Scope{AllCards: true, AllLogins: true})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 30, 9, 40, 0, 0, time.UTC) // the env clock is 10:00
	fake.apps = []apps.View{{KeyID: k.ID, Sessions: []apps.SessionView{
		{ID: "s_proxyone", HandlePrefix: "s_abc123", Started: start, LastUsed: start.Add(15 * time.Minute), PageHost: "shop.example"},
		{ID: "s_proxytwo", HandlePrefix: "s_def456", Started: start.Add(5 * time.Minute), LastUsed: start.Add(18 * time.Minute)},
	}}}
	code, body := e.get("/apps")
	if code != 200 {
		t.Fatalf("/apps: %d", code)
	}
	for _, want := range []string{"shopping agent", k.ID, "s_abc123…", "s_def456…", "shop.example", ">20m<", ">5m ago<", `action="/apps/sessions/s_proxyone/end"`} {
		if !strings.Contains(body, want) {
			t.Errorf("/apps lacks %q", want)
		}
	}
	// Without the token nothing ends.
	if code, _ := e.do(http.MethodPost, "/apps/sessions/s_proxyone/end", url.Values{}); code != http.StatusForbidden {
		t.Fatalf("End without CSRF: %d", code)
	}
	if len(fake.ended) != 0 {
		t.Fatalf("ended without a token: %v", fake.ended)
	}
	code, body = e.post("/apps", "/apps/sessions/s_proxyone/end", url.Values{})
	if code != 200 || !strings.Contains(body, "Session ended.") || strings.Contains(body, "s_abc123") || !strings.Contains(body, "s_def456") {
		t.Fatalf("after End: %d %q", code, body)
	}
	if len(fake.ended) != 1 || fake.ended[0] != "s_proxyone" {
		t.Fatalf("ended: %v", fake.ended)
	}
	if code, body = e.post("/apps", "/apps/sessions/s_proxyone/end", url.Values{}); code != 200 || !strings.Contains(body, "already ended") {
		t.Fatalf("End again: %d", code)
	}
}
