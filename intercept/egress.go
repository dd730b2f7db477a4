package intercept

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/broker"
	"golang.org/x/net/proxy"
)

// UpstreamProxy is the egress the owner routes every upstream connection
// through (a residential or corporate proxy, seed 004 "residential egress").
// Its address is the operator's choice and may be private; the destination
// asked of it is still vetted here first (P3) and handed to it as the vetted
// IP address, so the proxy's own resolver cannot be steered to another one.
type UpstreamProxy struct {
	// Scheme is "http" (HTTP CONNECT, RFC 9110 section 9.3.6) or "socks5"
	// (RFC 1928, username/password per RFC 1929).
	Scheme string
	Addr   string // host:port
	// Username and Password are sent to the upstream proxy only, never to a
	// site; empty Username: no credentials.
	Username string
	Password string
}

// LogValue keeps the credentials out of every log line.
func (u *UpstreamProxy) LogValue() slog.Value {
	return slog.GroupValue(slog.String("scheme", u.Scheme), slog.String("addr", u.Addr),
		slog.Bool("credentials", u.Username != ""))
}

// EgressRetryAfter is what egress_unavailable tells a caller to wait, here
// and in proxyd's refusal of a new session: long enough for a proxy
// restart, short enough to keep a task alive.
const EgressRetryAfter = 10 * time.Second

func errEgressUnavailable(cause error, why string) error {
	return agentvault.Wrap(agentvault.CodeEgressUnavailable, cause,
		"the upstream proxy this deployment sends its traffic through %s; nothing was sent to the site: try again in %d seconds, or ask the owner to check egress.upstream_proxy",
		why, int(EgressRetryAfter/time.Second))
}

// ProbeEgress asks whether the upstream proxy answers at all: a TCP
// connection to it within timeout, closed at once (no tunnel is asked
// for, so no site is named to it). nil without an upstream proxy; else
// nil or egress_unavailable. It does not tell whether the proxy will
// accept the credentials or reach a site: the first request says that.
func (s *Server) ProbeEgress(ctx context.Context, timeout time.Duration) error {
	if s.dialer.Upstream == nil {
		return nil
	}
	return s.dialer.probeUpstream(ctx, timeout)
}

// probeUpstream is the one way the proxy checks that its upstream proxy
// is there, without a request to carry.
func (d *Dialer) probeUpstream(ctx context.Context, timeout time.Duration) error {
	nd := net.Dialer{Timeout: timeout}
	c, err := nd.DialContext(ctx, "tcp", d.Upstream.Addr)
	if err != nil {
		return errEgressUnavailable(err, "is not answering")
	}
	c.Close()
	return nil
}

func errEgressLost(cause error) error {
	return agentvault.Wrap(agentvault.CodeEgressLost, cause,
		"the upstream proxy dropped the connection to the site while a request was on it: the request may or may not have reached the site; check before sending it again")
}

// dialUpstreamProxy connects to ap through d.Upstream. A proxy that does not
// answer or refuses our credentials is egress_unavailable; a proxy that
// answers but cannot reach the site is the site's failure (upstream_error).
func (d *Dialer) dialUpstreamProxy(ctx context.Context, nd *net.Dialer, ap netip.AddrPort) (net.Conn, error) {
	up := d.Upstream
	target := net.JoinHostPort(ap.Addr().String(), strconv.Itoa(int(ap.Port())))
	c, err := nd.DialContext(ctx, "tcp", up.Addr)
	if err != nil {
		return nil, errEgressUnavailable(err, "is not answering")
	}
	var out net.Conn
	switch up.Scheme {
	case "socks5":
		out, err = d.socks5Handshake(ctx, c, target)
	default:
		out, err = httpConnect(ctx, nd.Timeout, c, target, up)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return &egressConn{Conn: out, d: d}, nil
}

// httpConnect asks an HTTP proxy on c for a tunnel to target.
func httpConnect(ctx context.Context, timeout time.Duration, c net.Conn, target string, up *UpstreamProxy) (net.Conn, error) {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.SetDeadline(deadline)
	var b strings.Builder
	b.WriteString("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n")
	if up.Username != "" {
		b.WriteString("Proxy-Authorization: Basic " +
			base64.StdEncoding.EncodeToString([]byte(up.Username+":"+up.Password)) + "\r\n")
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(c, b.String()); err != nil {
		return nil, errEgressUnavailable(err, "closed the connection")
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return nil, errEgressUnavailable(err, "did not answer a tunnel request")
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusProxyAuthRequired:
		return nil, errEgressUnavailable(nil, "refused the configured credentials")
	case resp.StatusCode/100 != 2:
		return nil, agentvault.Errorf(agentvault.CodeUpstream,
			"the site could not be reached through the upstream proxy (it answered %d)", resp.StatusCode)
	}
	_ = c.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		// The site's first bytes came with the proxy's answer.
		return &bufConn{Conn: c, r: br}, nil
	}
	return c, nil
}

// socks5Handshake runs the SOCKS5 handshake on the already connected c.
func (d *Dialer) socks5Handshake(ctx context.Context, c net.Conn, target string) (net.Conn, error) {
	var auth *proxy.Auth
	if d.Upstream.Username != "" {
		auth = &proxy.Auth{User: d.Upstream.Username, Password: d.Upstream.Password}
	}
	sd, err := proxy.SOCKS5("tcp", d.Upstream.Addr, auth, connectedDialer{c})
	if err != nil {
		return nil, errEgressUnavailable(err, "is misconfigured")
	}
	out, err := sd.(proxy.ContextDialer).DialContext(ctx, "tcp", target)
	if err != nil {
		// x/net/proxy names a failed sub-negotiation (RFC 1929) and an
		// unacceptable method in its error; any other failure is the
		// proxy's reply about the site (RFC 1928 section 6).
		msg := err.Error()
		if strings.Contains(msg, "authentication") {
			return nil, errEgressUnavailable(nil, "refused the configured credentials")
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(msg, "reset") {
			return nil, errEgressUnavailable(err, "closed the connection")
		}
		return nil, agentvault.Wrap(agentvault.CodeUpstream, err, "the site could not be reached through the upstream proxy")
	}
	return out, nil
}

// connectedDialer hands x/net/proxy the connection already made to the
// upstream proxy, so its dial error and its handshake error stay apart.
type connectedDialer struct{ c net.Conn }

func (cd connectedDialer) Dial(network, addr string) (net.Conn, error) { return cd.c, nil }

func (cd connectedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return cd.c, nil
}

// egressConn is a connection to a site through the upstream proxy. When it
// ends abruptly (a reset, or an end of stream while the proxy no longer
// answers), the read says egress_lost, so the request on it is refused with
// that code rather than as the site's failure.
type egressConn struct {
	net.Conn
	d *Dialer
}

func (c *egressConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && c.lost(err) {
		return n, errEgressLost(err)
	}
	return n, err
}

func (c *egressConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil && c.lost(err) {
		return n, errEgressLost(err)
	}
	return n, err
}

// lost tells a dropped egress from an ordinary end: a timeout or our own
// close is not a loss, and an end of stream counts only when the proxy
// itself stopped answering (a site closing its side looks the same on the
// wire).
func (c *egressConn) lost(err error) bool {
	var ne net.Error
	if errors.Is(err, net.ErrClosed) || (errors.As(err, &ne) && ne.Timeout()) {
		return false
	}
	if !errors.Is(err, io.EOF) {
		return true
	}
	return c.d.probeUpstream(context.Background(), 2*time.Second) != nil
}

// A session whose egress dropped a request (egress_lost, before or after the
// site's answer began) stays lost: the path its requests take is broken, and
// a request that may or may not have reached the site must not be followed
// by others as if nothing happened. The proxy refuses every later request of
// the session with egress_lost, and proxyd's control API reports it to mcpd
// (the report's egressLost), which refuses every later call on the session
// but the report and the close (seed 004). The mark is this process's: it
// ends with the session (NewServer's OnClose).

// ResidentialEgress reports whether every connection to a site goes through
// the owner's upstream proxy: every session is then HTTPS only, and an
// http:// address an agent asks for is opened as https:// (seed 004).
func (s *Server) ResidentialEgress() bool { return s.dialer.Upstream != nil }

// EgressLost reports whether the session's egress was lost.
func (s *Server) EgressLost(sessionID string) bool {
	_, ok := s.lost.Load(sessionID)
	return ok
}

// markEgressLost records that sess's egress dropped a request.
func (s *Server) markEgressLost(sess *broker.Session, host string) {
	if _, was := s.lost.LoadOrStore(sess.ID, struct{}{}); !was {
		s.log.LogAttrs(context.Background(), slog.LevelWarn, "session egress lost",
			slog.String("session", sess.ID), slog.String("host", host),
			slog.String("code", string(agentvault.CodeEgressLost)))
	}
}

func errEgressLostEarlier() error {
	return agentvault.Errorf(agentvault.CodeEgressLost,
		"this session's upstream egress was lost on an earlier request; nothing was sent: read the run report, close the session and open a new one")
}

// egressBody watches the site's answer as it comes through the upstream
// proxy: a read that fails with egress_lost (the proxy dropped the
// connection after the answer's headers) marks the session lost. The error
// goes on, so the HTTP/1.1 loop and serveH2 break the answer (no last
// chunk, a short body, an h2 stream reset) rather than end it as if whole.
type egressBody struct {
	io.ReadCloser
	s    *Server
	t    *tunnel
	seen bool
}

func (b *egressBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.seen && agentvault.ErrorCode(err) == agentvault.CodeEgressLost {
		b.seen = true
		b.s.markEgressLost(b.t.sess, b.t.dest.Host)
		b.s.metrics.refusal(err)
	}
	return n, err
}

// countWriter counts the bytes of an HTTP/1.1 answer that reached the
// client, so an answer the egress dropped before any did is refused whole
// (serveH1).
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
