package hosted

import (
	"context"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
)

// Connected apps: mcpd reports each connection's open sessions to proxyd
// (control.AppSessionsPath), which lists them on the owner's dashboard with
// an End button. Ending one closes its proxy session there; proxyd names it
// in its answer to the next report, and mcpd ends the hosted session with
// reasonOwner. mcpd reports before every call that names a session, so the
// call after the owner's End is refused with the ended-session message,
// and after a session starts or ends so the page stays current.

// AppReporter keeps the dashboard's list of connected apps
// (control.Client implements it).
type AppReporter interface {
	ReportAppSessions(ctx context.Context, req control.AppSessionsRequest) (control.AppSessionsResponse, error)
}

var _ AppReporter = (*control.Client)(nil)

// appReportTimeout bounds a report: the dashboard's list is best effort,
// and a call waits on it only this long.
const appReportTimeout = 3 * time.Second

// handlePrefix is how much of a handle the dashboard shows.
func handlePrefix(h string) string {
	if len(h) > 8 {
		return h[:8]
	}
	return h
}

// syncApps reports c's open sessions and ends the ones the owner ended on
// the dashboard. Errors are logged and ignored: a call does not fail for
// the dashboard's list.
func (cl *Calls) syncApps(ctx context.Context, c *conn) {
	ar := cl.opts.Apps
	if ar == nil || cl.table() == nil {
		return
	}
	c.mu.Lock()
	key := c.apiKey
	byID := make(map[string]*hsession, len(c.live))
	req := control.AppSessionsRequest{Sessions: make([]control.AppSession, 0, len(c.live))}
	for _, hs := range c.live {
		byID[hs.ss.ProxyID()] = hs
	}
	c.mu.Unlock()
	if len(byID) == 0 {
		return
	}
	if key == "" {
		key = cl.opts.APIKey
	}
	req.APIKey = key
	for id, hs := range byID {
		if host, ok := hs.ss.PageHost(); ok {
			c.mu.Lock()
			hs.pageHost = host
			c.mu.Unlock()
		}
		c.mu.Lock()
		req.Sessions = append(req.Sessions, control.AppSession{ID: id, HandlePrefix: handlePrefix(hs.handle),
			Started: hs.started.UTC(), LastUsed: hs.lastUsed.UTC(), PageHost: hs.pageHost})
		c.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), appReportTimeout)
	defer cancel()
	resp, err := ar.ReportAppSessions(ctx, req)
	if err != nil {
		cl.log.Debug("connected apps report failed", "code", string(agentvault.ErrorCode(err)))
		return
	}
	cl.log.Debug("connected apps reported", "sessions", len(req.Sessions), "ended", len(resp.Ended))
	for _, id := range resp.Ended {
		if hs := byID[id]; hs != nil {
			cl.endSession(hs, reasonOwner)
		}
	}
}

// syncAppsLater reports c's sessions without holding up the caller.
func (cl *Calls) syncAppsLater(c *conn) {
	if cl.opts.Apps == nil || cl.table() == nil {
		return
	}
	go cl.syncApps(cl.opts.Stop, c)
}
