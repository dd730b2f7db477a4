package dashboard_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/apps"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/owner/dashboard"
)

// fakeApps plays proxyd's list of hosted sessions.
type fakeApps struct {
	mu    sync.Mutex
	apps  []apps.View
	ended []string
	uses  map[string][]string
}

func (f *fakeApps) Choose(keyID string, uses []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, u := range uses {
		if !slices.Contains(control.AppUses, u) {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "unknown use %q", u)
		}
	}
	if f.uses == nil {
		f.uses = map[string][]string{}
	}
	f.uses[keyID] = append([]string{}, uses...)
	return nil
}

func (f *fakeApps) Uses(keyID string) ([]string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.uses[keyID]
	return u, ok
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

// TestSeed004_ConnectedAppsChooseWhatAKeyMayUse: the Connected apps page
// lists every live API key with what it may use on the hosted server, "not
// chosen yet" before a choice; saving (with the page's CSRF token only)
// records the ticked uses for that key, an unknown use is refused, and a
// key that is not live cannot be chosen for.
func TestSeed004_ConnectedAppsChooseWhatAKeyMayUse(t *testing.T) {
	fake := &fakeApps{}
	e := newEnv(t, func(c *dashboard.Config) { c.Apps = fake })
	e.signIn(ownerPW)
	k, _, err := e.svc.CreateAPIKey(t.Context(), "shopping agent", owner.Scope{AllCards: true, AllLogins: true})
	if err != nil {
		t.Fatal(err)
	}
	code, body := e.get("/apps")
	if code != 200 || !strings.Contains(body, `action="/apps/keys/`+k.ID+`/uses"`) || !strings.Contains(body, "Not chosen yet") {
		t.Fatalf("/apps before a choice: %d %q", code, body)
	}
	path := "/apps/keys/" + k.ID + "/uses"
	if code, _ := e.do(http.MethodPost, path, url.Values{"use": {control.AppUseCheckout}}); code != http.StatusForbidden {
		t.Fatalf("Save without CSRF: %d", code)
	}
	if _, chosen := fake.Uses(k.ID); chosen {
		t.Fatal("chosen without a token")
	}
	code, body = e.post("/apps", path, url.Values{"use": {control.AppUseCheckout}})
	if uses, chosen := fake.Uses(k.ID); code != 200 || !strings.Contains(body, "Saved.") || !chosen || !slices.Equal(uses, []string{control.AppUseCheckout}) {
		t.Fatalf("after Save: %d %v %v", code, uses, chosen)
	}
	if strings.Contains(body, "Not chosen yet") || !strings.Contains(body, `value="checkout" checked`) {
		t.Fatalf("the page after Save does not show the choice: %q", body)
	}
	if _, body = e.post("/apps", path, url.Values{"use": {"everything"}}); !strings.Contains(body, "unknown use") {
		t.Fatalf("an unknown use: %q", body)
	}
	if uses, _ := fake.Uses(k.ID); !slices.Equal(uses, []string{control.AppUseCheckout}) {
		t.Fatalf("an unknown use changed the choice: %v", uses)
	}
	if _, body = e.post("/apps", "/apps/keys/avk_0000000000000000/uses", url.Values{"use": {control.AppUseLogins}}); !strings.Contains(body, "No live API key") {
		t.Fatalf("an unknown key: %q", body)
	}
	if _, chosen := fake.Uses("avk_0000000000000000"); chosen {
		t.Fatal("a choice was recorded for an unknown key")
	}
}
