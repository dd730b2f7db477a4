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

	mu    sync.Mutex
	byKey map[string][]control.AppSession // key id → open sessions
	// ended are the proxy sessions the owner ended, until mcpd is told.
	ended map[string]time.Time
}

// endedKeep bounds how long an owner's End waits for mcpd to ask.
const appEndedKeep = time.Hour

func newAppRegistry(b *broker.Broker, now func() time.Time) *appRegistry {
	if now == nil {
		now = time.Now
	}
	return &appRegistry{broker: b, now: now, byKey: map[string][]control.AppSession{}, ended: map[string]time.Time{}}
}

// report replaces a key's sessions with req's, keeping only the proxy
// sessions that are open and belong to that key, and answers which of
// them the owner ended.
func (a *appRegistry) report(ctx context.Context, req control.AppSessionsRequest) (control.AppSessionsResponse, error) {
	key, err := a.broker.LookupKey(ctx, req.APIKey)
	if err != nil {
		return control.AppSessionsResponse{}, err
	}
	if len(req.Sessions) > 1000 {
		return control.AppSessionsResponse{}, agentvault.Errorf(agentvault.CodeInvalidInput, "too many sessions in one report")
	}
	resp := control.AppSessionsResponse{Ended: []string{}}
	var open []control.AppSession
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	for id, at := range a.ended {
		if now.Sub(at) > appEndedKeep {
			delete(a.ended, id)
		}
	}
	for _, s := range req.Sessions {
		if _, ok := a.ended[s.ID]; ok {
			resp.Ended = append(resp.Ended, s.ID)
			delete(a.ended, s.ID)
			continue
		}
		bs, err := a.broker.Get(s.ID)
		if err != nil || bs.Key.ID != key.ID || bs.Closed() {
			continue
		}
		if len(s.HandlePrefix) > 12 {
			s.HandlePrefix = s.HandlePrefix[:12]
		}
		open = append(open, s)
	}
	if len(open) == 0 {
		delete(a.byKey, key.ID)
	} else {
		a.byKey[key.ID] = open
	}
	return resp, nil
}

// ConnectedApps lists the keys with open hosted sessions.
func (a *appRegistry) ConnectedApps() []dashboard.AppView {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []dashboard.AppView
	for k, ss := range a.byKey {
		v := dashboard.AppView{KeyID: k}
		for _, s := range ss {
			if bs, err := a.broker.Get(s.ID); err != nil || bs.Closed() {
				continue
			}
			v.Sessions = append(v.Sessions, dashboard.AppSessionView{ID: s.ID, HandlePrefix: s.HandlePrefix,
				Started: s.Started, LastUsed: s.LastUsed, PageHost: s.PageHost})
		}
		if len(v.Sessions) > 0 {
			out = append(out, v)
		}
	}
	return out
}

// EndAppSession closes a listed session's proxy session and remembers
// that the owner ended it, for mcpd's next report.
func (a *appRegistry) EndAppSession(id string) error {
	a.mu.Lock()
	listed := false
	for k, ss := range a.byKey {
		for i, s := range ss {
			if s.ID == id {
				listed = true
				a.byKey[k] = append(ss[:i:i], ss[i+1:]...)
				break
			}
		}
	}
	if listed {
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
	rep control.Report
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

func (e *endedReports) add(id string, rep control.Report) {
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
func (e *endedReports) get(id string) (control.Report, bool) {
	if e == nil {
		return control.Report{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.byID[id]
	if !ok || e.now().Sub(r.at) > endedReportsKeep {
		return control.Report{}, false
	}
	return r.rep, true
}
