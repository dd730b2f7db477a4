package proxyd

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/apps"
	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/owner/dashboard"
	"github.com/agentvault/agentvault/vault"
)

var _ dashboard.Apps = (*apps.Registry)(nil)

// ReportAppSessions keeps a connection's hosted sessions for the
// dashboard (control.AppSessionReporter).
func (c *controlService) ReportAppSessions(ctx context.Context, req control.AppSessionsRequest) (control.AppSessionsResponse, error) {
	if c.apps == nil {
		return control.AppSessionsResponse{}, agentvault.Errorf(agentvault.CodeNotFound, "connected apps are not kept here")
	}
	return c.apps.Report(ctx, req)
}

// appUses is what the holder chose keyID may use on the hosted server
// (Connected apps); without a registry nothing is chosen.
func (c *controlService) appUses(keyID string) ([]string, bool) {
	if c.apps == nil {
		return nil, false
	}
	return c.apps.Uses(keyID)
}

// ConnectedApps is the registry behind the dashboard's Connected apps
// page (what each API key may use on the hosted server, and its open
// sessions), for a program that embeds Main, such as a test standing in
// for the holder's choice.
func (m *Main) ConnectedApps() *apps.Registry { return m.appRegistry() }

// appRegistry returns the process's registry of hosted sessions (package
// apps), over the broker's proxy sessions, built on first use.
func (m *Main) appRegistry() *apps.Registry {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.apps == nil {
		m.apps = apps.New(brokerSessions{m.Broker}, m.Now)
	}
	return m.apps
}

// appChoicesBlob is the vault blob holding the holder's Connected apps
// choices (apps.ChoiceStore), sealed like the owner's delegation.
const appChoicesBlob = "apps.choices"

// vaultChoices keeps the Connected apps choices in a sealed vault blob.
type vaultChoices struct {
	open func(ctx context.Context, name string) ([]byte, error)
	seal func(ctx context.Context, name string, data []byte) error
}

func (v vaultChoices) Load(ctx context.Context) (map[string][]string, error) {
	b, err := v.open(ctx, appChoicesBlob)
	if errors.Is(err, vault.ErrNotFound) {
		return map[string][]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	m := map[string][]string{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "the Connected apps choices in the vault do not parse")
	}
	return m, nil
}

func (v vaultChoices) Save(ctx context.Context, uses map[string][]string) error {
	b, err := json.Marshal(uses)
	if err != nil {
		return err
	}
	return v.seal(ctx, appChoicesBlob, b)
}

// brokerSessions gives the app registry the broker's proxy sessions.
type brokerSessions struct{ b *broker.Broker }

func (s brokerSessions) Owner(id string) (string, bool) {
	bs, err := s.b.Get(id)
	if err != nil || bs.Closed() {
		return "", false
	}
	return bs.Key.ID, true
}

func (s brokerSessions) KeyID(ctx context.Context, apiKey string) (string, error) {
	key, err := s.b.LookupKey(ctx, apiKey)
	return key.ID, err
}

func (s brokerSessions) Close(id string) { _, _ = s.b.Close(id) }

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
	rep   broker.Report
	keyID string // the API key that opened the session
	at    time.Time
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

func (e *endedReports) add(id, keyID string, rep broker.Report) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.byID[id]; !ok {
		e.order = append(e.order, id)
	}
	e.byID[id] = endedReport{rep: rep, keyID: keyID, at: e.now()}
	for len(e.order) > endedReportsMax {
		delete(e.byID, e.order[0])
		e.order = e.order[1:]
	}
}

// get is the final report of an ended session, when still kept.
func (e *endedReports) get(id string) (broker.Report, bool) {
	r, ok := e.kept(id)
	return r.rep, ok
}

// keyOf is the API key that opened an ended session, when still kept.
func (e *endedReports) keyOf(id string) (string, bool) {
	r, ok := e.kept(id)
	return r.keyID, ok
}

func (e *endedReports) kept(id string) (endedReport, bool) {
	if e == nil {
		return endedReport{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.byID[id]
	if !ok || e.now().Sub(r.at) > endedReportsKeep {
		return endedReport{}, false
	}
	return r, true
}
