package mcpserver

import (
	"context"
	"net"
	"net/url"

	"github.com/agentvault/agentvault"
)

// Residential egress (seed 004): when proxyd sends every connection to a
// site through the owner's upstream egress proxy, its session answer says
// so (control.CreateSessionResponse.ResidentialEgress). Such a session is
// HTTPS only, so open_page opens an http:// address as https://; pages the
// browser reaches by itself over http:// are refused by the proxy as
// always (P4). Once that egress dropped a request of the session, the proxy
// marks the session lost and its report says egressLost: every later call
// that reaches the browser is refused with egress_lost, and get_run_report
// and close_session still work. The proxy is the one home of both facts;
// mcpd only reads them. When the deployment requires residential egress
// (egress.required) and has none, or its upstream proxy is not answering,
// proxyd refuses to create the session (egress_unavailable, with a
// Retry-After): the first open_page returns that refusal before any
// browser starts, and statusError words the wait as it does for
// rate_limited. On the hosted server no session is kept and no handle
// comes back.

// residentialEgress reports whether ss's current proxy session goes
// through the deployment's residential egress.
func (ss *Session) residentialEgress() bool {
	ss.seg.Lock()
	defer ss.seg.Unlock()
	return ss.ctl.ResidentialEgress
}

// httpsOf is u with its scheme upgraded to https, on the same host (a
// port 80 written out is dropped: it was http's).
func httpsOf(u *url.URL) string {
	up := *u
	up.Scheme = "https"
	if up.Port() == "80" {
		up.Host = up.Hostname()
		if ip := net.ParseIP(up.Host); ip != nil && ip.To4() == nil {
			up.Host = "[" + up.Host + "]"
		}
	}
	return up.String()
}

// egressLost refuses a call that would reach ss's browser once its
// residential egress was lost. It asks proxyd (the session's report) on
// each call of a residential egress session until the answer is yes, which
// then stays; a session without one is never asked about, and a proxyd
// that cannot say lets the call run (the proxy still refuses the lost
// session's requests).
func (s *Server) egressLost(ss *Session) error {
	if !ss.residentialEgress() {
		return nil
	}
	if !ss.lostEgress.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
		rep, err := s.cfg.Control.Report(ctx, ss.ctlID())
		cancel()
		if err != nil || !rep.EgressLost {
			return nil
		}
		ss.lostEgress.Store(true)
	}
	return agentvault.Errorf(agentvault.CodeEgressLost,
		"This session's residential egress stopped working: the upstream proxy the deployment sends its traffic through dropped a request, so nothing more runs on this session's browser.")
}
