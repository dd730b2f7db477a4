package control

import (
	"context"
	"net/http"
	"time"
)

// Connected apps (seed 004, "On the hosted server"): the hosted mcpd
// reports each connection's open sessions, so the owner's dashboard can list
// them and end one. mcpd never opens the store; proxyd keeps the list in
// memory. The answer names the proxy sessions the owner ended since: mcpd
// ends its hosted sessions on them at their next call.

// AppSessionsPath is where mcpd reports one connection's open sessions.
const AppSessionsPath = "/v1/apps/sessions"

// AppSession is one open hosted session as mcpd reports it. It never
// carries the whole handle: the prefix is enough for the owner to tell
// sessions apart, and the handle stays a secret of the connection.
type AppSession struct {
	// ID is the session's proxy session.
	ID           string    `json:"id"`
	HandlePrefix string    `json:"handlePrefix"`
	Started      time.Time `json:"started"`
	LastUsed     time.Time `json:"lastUsed"`
	// PageHost is the host of the page its browser shows (no path).
	PageHost string `json:"pageHost,omitempty"`
}

// AppSessionsRequest is open sessions of one connection. A session stays
// listed until its proxy session ends; a report updates the ones it names
// (several connections, or mcpd instances, may share a key).
type AppSessionsRequest struct {
	APIKey   string       `json:"apiKey"`
	Sessions []AppSession `json:"sessions"`
}

// AppSessionsResponse names the reported proxy sessions the owner ended on
// the dashboard.
type AppSessionsResponse struct {
	Ended []string `json:"ended"`
}

// AppSessionReporter is the optional part of a Service that keeps the
// hosted server's sessions for the dashboard (AppSessionsPath).
type AppSessionReporter interface {
	ReportAppSessions(ctx context.Context, req AppSessionsRequest) (AppSessionsResponse, error)
}

func appRoutes(rt routes, svc Service) {
	if ar, ok := svc.(AppSessionReporter); ok {
		post(rt, AppSessionsPath, ar.ReportAppSessions)
	}
}

// ReportAppSessions reports one connection's open hosted sessions and
// returns the ones the owner ended.
func (c *Client) ReportAppSessions(ctx context.Context, req AppSessionsRequest) (AppSessionsResponse, error) {
	return call[AppSessionsResponse](ctx, c, http.MethodPost, AppSessionsPath, req)
}
