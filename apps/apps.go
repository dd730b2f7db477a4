// Package apps keeps the hosted MCP server's open sessions as mcpd reports
// them (control.AppSessionsPath), per API key, for the dashboard's
// connected apps page (seed 004, "On the hosted server"), and remembers the
// sessions the owner ended there until mcpd is told, and what the holder
// chose each connection (API key) may use there (Choose). It lives in memory: a
// restart of either daemon forgets it, as it forgets the sessions
// themselves, except the choices, which a ChoiceStore keeps when the wiring
// gives one (proxyd: a sealed vault blob), so a restart does not refuse every
// connection until the holder chooses again. It reaches the proxy sessions only through the Sessions
// interface its wiring (proxyd, over the broker) gives it, and imports the
// control API's wire types and nothing of the owner's side or the vault.
package apps

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
)

// SessionView is one open hosted session of an app.
type SessionView struct {
	// ID is its proxy session (the End form names it).
	ID           string
	HandlePrefix string
	Started      time.Time
	LastUsed     time.Time
	PageHost     string
}

// View is one connected app: an API key with open hosted sessions.
type View struct {
	KeyID    string
	Sessions []SessionView
}

// Sessions is what the registry needs of the proxy sessions.
type Sessions interface {
	// Owner is the API key id of an open proxy session; ok is false when
	// the session is closed or unknown.
	Owner(id string) (keyID string, ok bool)
	// KeyID is the id of an API key, or the error that refuses the key.
	KeyID(ctx context.Context, apiKey string) (string, error)
	// Close ends a proxy session.
	Close(id string)
}

// Registry holds the reported sessions.
type Registry struct {
	sessions Sessions
	now      func() time.Time

	mu   sync.Mutex
	byID map[string]entry // proxy session id → its latest report
	// ended are the proxy sessions the owner ended, until mcpd is told.
	ended map[string]time.Time
	// uses is what the holder chose each key may use on the hosted
	// server, by key id (Choose); a key with no entry has no choice yet.
	uses map[string][]string
	// store keeps the choices across restarts (nil: memory only).
	store ChoiceStore
}

// ChoiceStore keeps the holder's choices (key id → uses) durably. Save
// writes the whole set; Load returns what was saved (empty when nothing).
type ChoiceStore interface {
	Load(ctx context.Context) (map[string][]string, error)
	Save(ctx context.Context, uses map[string][]string) error
}

// KeepChoices loads the saved choices and keeps every later Choose in st.
// A store that cannot be read is an error: the wiring must not start with
// the holder's choices silently forgotten.
func (a *Registry) KeepChoices(ctx context.Context, st ChoiceStore) error {
	saved, err := st.Load(ctx)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, u := range saved {
		var kept []string
		for _, x := range control.AppUses {
			if slices.Contains(u, x) {
				kept = append(kept, x)
			}
		}
		a.uses[k] = kept
	}
	a.store = st
	return nil
}

type entry struct {
	keyID string
	s     control.AppSession
}

// endedKeep bounds how long an owner's End waits for mcpd to ask.
const endedKeep = time.Hour

// New returns an empty registry over the proxy sessions; now nil is
// time.Now.
func New(s Sessions, now func() time.Time) *Registry {
	if now == nil {
		now = time.Now
	}
	return &Registry{sessions: s, now: now, byID: map[string]entry{}, ended: map[string]time.Time{}, uses: map[string][]string{}}
}

// Report keeps the reported sessions that are open and belong to the
// reporting key (a session reported by no one stays until its proxy
// session ends), and answers which of them the owner ended.
func (a *Registry) Report(ctx context.Context, req control.AppSessionsRequest) (control.AppSessionsResponse, error) {
	key, err := a.sessions.KeyID(ctx, req.APIKey)
	if err != nil {
		return control.AppSessionsResponse{}, err
	}
	if len(req.Sessions) > 1000 {
		return control.AppSessionsResponse{}, agentvault.Errorf(agentvault.CodeInvalidInput, "too many sessions in one report")
	}
	resp := control.AppSessionsResponse{Ended: []string{}}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	for id, at := range a.ended {
		if now.Sub(at) > endedKeep {
			delete(a.ended, id)
		}
	}
	for id := range a.byID {
		if _, ok := a.sessions.Owner(id); !ok {
			delete(a.byID, id)
		}
	}
	for _, s := range req.Sessions {
		if _, ok := a.ended[s.ID]; ok {
			resp.Ended = append(resp.Ended, s.ID)
			delete(a.ended, s.ID)
			continue
		}
		if k, ok := a.sessions.Owner(s.ID); !ok || k != key {
			continue
		}
		if len(s.HandlePrefix) > 12 {
			s.HandlePrefix = s.HandlePrefix[:12]
		}
		if len(s.PageHost) > 253 {
			s.PageHost = s.PageHost[:253]
		}
		a.byID[s.ID] = entry{keyID: key, s: s}
	}
	return resp, nil
}

// ConnectedApps lists the keys with open hosted sessions.
func (a *Registry) ConnectedApps() []View {
	a.mu.Lock()
	defer a.mu.Unlock()
	byKey := map[string]*View{}
	var keys []string
	for id, e := range a.byID {
		if _, ok := a.sessions.Owner(id); !ok {
			delete(a.byID, id)
			continue
		}
		v := byKey[e.keyID]
		if v == nil {
			v = &View{KeyID: e.keyID}
			byKey[e.keyID] = v
			keys = append(keys, e.keyID)
		}
		v.Sessions = append(v.Sessions, SessionView{ID: id, HandlePrefix: e.s.HandlePrefix,
			Started: e.s.Started, LastUsed: e.s.LastUsed, PageHost: e.s.PageHost})
	}
	out := make([]View, 0, len(keys))
	for _, k := range keys {
		out = append(out, *byKey[k])
	}
	return out
}

// EndAppSession closes a listed session's proxy session and remembers
// that the owner ended it, for mcpd's next report.
func (a *Registry) EndAppSession(id string) error {
	a.mu.Lock()
	_, listed := a.byID[id]
	if listed {
		delete(a.byID, id)
		a.ended[id] = a.now()
	}
	a.mu.Unlock()
	if !listed {
		return agentvault.Errorf(agentvault.CodeNotFound, "no such session")
	}
	a.sessions.Close(id)
	return nil
}

// Choose records what the holder lets the API key keyID use on the hosted
// server: a subset of control.AppUses, possibly empty (the key may then use
// nothing but get_checkout_recipes, as before a choice). An unknown use is
// refused with invalid_input.
func (a *Registry) Choose(keyID string, uses []string) error {
	if keyID == "" {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "no API key named: choose on the Connected apps page")
	}
	var kept []string
	for _, u := range control.AppUses {
		if slices.Contains(uses, u) {
			kept = append(kept, u)
		}
	}
	for _, u := range uses {
		if !slices.Contains(control.AppUses, u) {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "unknown use %q: choose among %s", u, strings.Join(control.AppUses, ", "))
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.store != nil {
		next := make(map[string][]string, len(a.uses)+1)
		for k, u := range a.uses {
			next[k] = u
		}
		next[keyID] = kept
		// Saved first: a choice the store refused is not in effect either.
		if err := a.store.Save(context.Background(), next); err != nil {
			return agentvault.Wrap(agentvault.CodeInternal, err, "the choice could not be saved; nothing changed: try again")
		}
	}
	a.uses[keyID] = kept
	return nil
}

// Uses is what the holder chose for keyID; chosen is false until they did.
func (a *Registry) Uses(keyID string) (uses []string, chosen bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	u, ok := a.uses[keyID]
	return slices.Clone(u), ok
}
