package mcpserver

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/mcpserver/hosted"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Every tool call runs through package hosted's call layer (s.calls): the
// retry rules, the call deadlines and, on the hosted server, the session
// table, its limits and the HTTP transport. This file is the seam: the
// tools' sessions and answers as hosted.Tools sees them, and the call
// layer's names as the rest of this package and its callers use them.

type (
	// HostedConfig tunes the hosted server's limits (hosted.Config).
	HostedConfig = hosted.Config
	// HTTPOptions configures HTTPHandler (hosted.HTTPOptions).
	HTTPOptions = hosted.HTTPOptions
	// KeyChecker checks an agent's API key (hosted.KeyChecker).
	KeyChecker = hosted.KeyChecker
	// SessionArg is the optional session handle every tool accepts
	// (hosted.SessionArg).
	SessionArg = hosted.SessionArg
)

// EnableHosted turns on the hosted server's rules (mcpd over HTTP). Call
// it before serving.
func (s *Server) EnableHosted(cfg HostedConfig) { s.calls.Enable(cfg) }

// HTTPHandler serves the hosted server over streamable HTTP. It turns on
// the hosted rules (EnableHosted) with zero settings if they are not on
// yet.
func (s *Server) HTTPHandler(opts HTTPOptions) http.Handler { return s.calls.Handler(s.mcp, opts) }

// apiKeyOf is the API key a call's proxyd sessions and catalog use: the
// connection's own on the hosted server, the configured one otherwise.
func (s *Server) apiKeyOf(ctx context.Context) string { return s.calls.APIKey(ctx) }

// hostedReplaced updates the hosted session's credential lifetime and
// browser age after its proxy session was replaced. Call it without ss.mu
// (the connection's lock comes first).
func (s *Server) hostedReplaced(ctx context.Context, handle string, expires time.Time) {
	s.calls.Replaced(ctx, handle, expires)
}

// ownerWaiting is called by waitOwner when the proxy reports that the
// call waits on the owner: a call that may answer pending does so.
func (c *callState) ownerWaiting(p *control.Pending) {
	if c != nil {
		c.flight.OwnerWaiting(p)
	}
}

// ownerWaitEnded is called when that wait ended (approved, refused, or
// stopped), while the call may keep running.
func (c *callState) ownerWaitEnded() {
	if c != nil {
		c.flight.OwnerWaitEnded()
	}
}

// progressReq is the request progress notifications go to now: the
// call's own, then each get_pending_result that waits on it.
func (c *callState) progressReq() *mcp.CallToolRequest {
	if c.flight == nil {
		return c.req
	}
	return c.flight.Listener()
}

// hostedTools is the server as the call layer sees it.
type hostedTools struct{ s *Server }

var _ hosted.Tools = hostedTools{}

// Open opens a proxyd session under apiKey and the session on it, known
// by handle.
func (t hostedTools) Open(ctx context.Context, apiKey, handle string) (hosted.Session, error) {
	cs, err := t.s.cfg.Control.CreateSession(ctx, apiKey)
	if err != nil {
		return nil, err
	}
	ss := newSession(cs)
	ss.Handle = handle
	t.s.mu.Lock()
	t.s.sessions[handle] = ss
	t.s.mu.Unlock()
	return toolSession{t.s, ss}, nil
}

func (hostedTools) Error(err error) *mcp.CallToolResult          { return statusError(err, nil) }
func (hostedTools) Pending(p hosted.Pending) *mcp.CallToolResult { return pendingAnswer(p) }
func (hostedTools) AddStatus(res *mcp.CallToolResult, pairs [][2]string) {
	addStatus(res, pairs)
}
func (hostedTools) Code(res *mcp.CallToolResult) agentvault.Code { return codeOf(res) }

// toolSession is a session as the hosted session table sees it.
type toolSession struct {
	s  *Server
	ss *Session
}

var _ hosted.Session = toolSession{}

func (t toolSession) ProxyID() string {
	t.ss.seg.Lock()
	defer t.ss.seg.Unlock()
	return t.ss.ctl.ID
}

func (t toolSession) Expires() time.Time { return t.ss.ctlExpires() }

func (t toolSession) HasPage() bool {
	t.ss.mu.Lock()
	defer t.ss.mu.Unlock()
	return t.ss.page != nil
}

// PageHost is the host of the page the session shows, when it is free to
// be read (a running call holds ss.mu; then the last host seen stays).
func (t toolSession) PageHost() (string, bool) {
	ss := t.ss
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

func (t toolSession) Close(ctx context.Context) { _, _ = t.s.closeSession(ctx, t.ss) }

const noReportNote = hosted.NoReportNote

// Found is what the session's close found, for the hosted server's
// ended-session message.
func (t toolSession) Found() *hosted.Found {
	ss := t.ss
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if !ss.closed {
		return &hosted.Found{Note: "The close had not finished: a call was still running on the session. Do NOT read this as nothing having been filled."}
	}
	if ss.closeErr != nil {
		f := &hosted.Found{Note: noReportNote, TeardownError: ss.teardownErr}
		if len(ss.earlier) > 0 {
			no := false
			f.Reports, f.CoversWholeRun, f.VaultWrites = append([]control.Report(nil), ss.earlier...), &no, writesOf(ss.earlier)
		}
		return f
	}
	r := normReport(ss.closeAnswer.Report)
	whole := ss.replaced == 0
	reports := append(append([]control.Report(nil), ss.earlier...), r)
	return &hosted.Found{Reports: reports, CoversWholeRun: &whole, VaultWrites: append(writesOf(ss.earlier), r.CredentialWrites...), TeardownError: ss.teardownErr}
}
