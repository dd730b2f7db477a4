package proxyd

import (
	"context"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/owner/dashboard"
)

// appRegistry is the hosted MCP server's open sessions as mcpd reports
// them (control.AppSessionsPath), per API key, for the dashboard's
// connected apps page. It lives in memory: a restart of either daemon
// forgets it, as it forgets the sessions themselves.
type appRegistry struct {
	broker *broker.Broker
	now    func() time.Time

	mu   sync.Mutex
	byID map[string]appEntry // proxy session id → its latest report
	// ended are the proxy sessions the owner ended, until mcpd is told.
	ended map[string]time.Time
}

type appEntry struct {
	keyID string
	s     control.AppSession
}

// appEndedKeep bounds how long an owner's End waits for mcpd to ask.
const appEndedKeep = time.Hour

func newAppRegistry(b *broker.Broker, now func() time.Time) *appRegistry {
	if now == nil {
		now = time.Now
	}
	return &appRegistry{broker: b, now: now, byID: map[string]appEntry{}, ended: map[string]time.Time{}}
}

// open reports whether the proxy session id is open (and its key).
func (a *appRegistry) open(id string) (string, bool) {
	bs, err := a.broker.Get(id)
	if err != nil || bs.Closed() {
		return "", false
	}
	return bs.Key.ID, true
}

// report keeps the reported sessions that are open and belong to the
// reporting key (a session reported by no one stays until its proxy
// session ends), and answers which of them the owner ended.
func (a *appRegistry) report(ctx context.Context, req control.AppSessionsRequest) (control.AppSessionsResponse, error) {
	key, err := a.broker.LookupKey(ctx, req.APIKey)
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
		if now.Sub(at) > appEndedKeep {
			delete(a.ended, id)
		}
	}
	for id := range a.byID {
		if _, ok := a.open(id); !ok {
			delete(a.byID, id)
		}
	}
	for _, s := range req.Sessions {
		if _, ok := a.ended[s.ID]; ok {
			resp.Ended = append(resp.Ended, s.ID)
			delete(a.ended, s.ID)
			continue
		}
		if k, ok := a.open(s.ID); !ok || k != key.ID {
			continue
		}
		if len(s.HandlePrefix) > 12 {
			s.HandlePrefix = s.HandlePrefix[:12]
		}
		if len(s.PageHost) > 253 {
			s.PageHost = s.PageHost[:253]
		}
		a.byID[s.ID] = appEntry{keyID: key.ID, s: s}
	}
	return resp, nil
}

// ConnectedApps lists the keys with open hosted sessions.
func (a *appRegistry) ConnectedApps() []dashboard.AppView {
	a.mu.Lock()
	defer a.mu.Unlock()
	byKey := map[string]*dashboard.AppView{}
	var keys []string
	for id, e := range a.byID {
		if _, ok := a.open(id); !ok {
			delete(a.byID, id)
			continue
		}
		v := byKey[e.keyID]
		if v == nil {
			v = &dashboard.AppView{KeyID: e.keyID}
			byKey[e.keyID] = v
			keys = append(keys, e.keyID)
		}
		v.Sessions = append(v.Sessions, dashboard.AppSessionView{ID: id, HandlePrefix: e.s.HandlePrefix,
			Started: e.s.Started, LastUsed: e.s.LastUsed, PageHost: e.s.PageHost})
	}
	out := make([]dashboard.AppView, 0, len(keys))
	for _, k := range keys {
		out = append(out, *byKey[k])
	}
	return out
}

// EndAppSession closes a listed session's proxy session and remembers
// that the owner ended it, for mcpd's next report.
func (a *appRegistry) EndAppSession(id string) error {
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
	_, _ = a.broker.Close(id)
	return nil
}

var _ dashboard.Apps = (*appRegistry)(nil)

// ReportAppSessions keeps a connection's hosted sessions for the
// dashboard (control.AppSessionReporter).
func (c *controlService) ReportAppSessions(ctx context.Context, req control.AppSessionsRequest) (control.AppSessionsResponse, error) {
	if c.apps == nil {
		return control.AppSessionsResponse{}, agentvault.Errorf(agentvault.CodeNotFound, "connected apps are not kept here")
	}
	return c.apps.report(ctx, req)
}

func (m *Main) appRegistry() *appRegistry {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.apps == nil {
		m.apps = newAppRegistry(m.Broker, m.Now)
	}
	return m.apps
}

// endedReports keeps the final report of each proxy session that ended
// (closed by mcpd or the owner, or expired), so mcpd can still read what
// it did: a replaced proxy session's record (earlierReports) and the close
// of a session the owner ended. Bounded in count and age; counts and kinds
// only, never a value.
type endedReports struct {
	now func() time.Time

	mu    sync.Mutex
	byID  map[string]endedReport
	order []string
}

type endedReport struct {
	rep broker.Report
	at  time.Time
}

const (
	endedReportsMax  = 1000
	endedReportsKeep = time.Hour
)

func newEndedReports(now func() time.Time) *endedReports {
	if now == nil {
		now = time.Now
	}
	return &endedReports{now: now, byID: map[string]endedReport{}}
}

func (e *endedReports) add(id string, rep broker.Report) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.byID[id]; !ok {
		e.order = append(e.order, id)
	}
	e.byID[id] = endedReport{rep: rep, at: e.now()}
	for len(e.order) > endedReportsMax {
		delete(e.byID, e.order[0])
		e.order = e.order[1:]
	}
}

// get is the final report of an ended session, when still kept.
func (e *endedReports) get(id string) (broker.Report, bool) {
	if e == nil {
		return broker.Report{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.byID[id]
	if !ok || e.now().Sub(r.at) > endedReportsKeep {
		return broker.Report{}, false
	}
	return r.rep, true
}
