package mcpserver

import (
	"context"
	"net/url"
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

// appReporter is the optional part of Control that keeps the dashboard's
// list (control.Client implements it).
type appReporter interface {
	ReportAppSessions(ctx context.Context, req control.AppSessionsRequest) (control.AppSessionsResponse, error)
}

var _ appReporter = (*control.Client)(nil)

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

// pageHostOf is the host of the page ss shows, when the session is free
// to be read (a running call holds ss.mu; then the last host seen stays).
func pageHostOf(ss *Session) (string, bool) {
	if !ss.mu.TryLock() {
		return "", false
	}
	defer ss.mu.Unlock()
	if ss.page == nil || ss.closed {
		return "", true
	}
	u, err := url.Parse(ss.page.URL())
	if err != nil {
		return "", true
	}
	return u.Hostname(), true
}

// syncApps reports c's open sessions and ends the ones the owner ended on
// the dashboard. Errors are logged and ignored: a call does not fail for
// the dashboard's list.
func (s *Server) syncApps(ctx context.Context, c *conn) {
	ar, ok := s.cfg.Control.(appReporter)
	if !ok || s.hosted == nil {
		return
	}
	c.mu.Lock()
	key := c.apiKey
	byID := make(map[string]*hsession, len(c.live))
	req := control.AppSessionsRequest{Sessions: make([]control.AppSession, 0, len(c.live))}
	for _, hs := range c.live {
		byID[hs.ss.ctl.ID] = hs
	}
	c.mu.Unlock()
	if len(byID) == 0 {
		return
	}
	if key == "" {
		key = s.cfg.APIKey
	}
	req.APIKey = key
	for id, hs := range byID {
		if host, ok := pageHostOf(hs.ss); ok {
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
		s.log.Debug("connected apps report failed", "code", string(agentvault.ErrorCode(err)))
		return
	}
	s.log.Debug("connected apps reported", "sessions", len(req.Sessions), "ended", len(resp.Ended))
	for _, id := range resp.Ended {
		if hs := byID[id]; hs != nil {
			s.endSession(hs, reasonOwner)
		}
	}
}

// syncAppsLater reports c's sessions without holding up the caller.
func (s *Server) syncAppsLater(c *conn) {
	if _, ok := s.cfg.Control.(appReporter); !ok || s.hosted == nil {
		return
	}
	go s.syncApps(s.stopCtx, c)
}
