package intercept

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/broker"
)

// Hop-by-hop headers (RFC 9110 section 7.6.1), never forwarded.
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// hopByHopLens has bit n set when a name in hopByHop is n bytes long.
var hopByHopLens = func() (m uint64) {
	for _, h := range hopByHop {
		m |= 1 << len(h)
	}
	return m
}()

func isHopByHop(k string) bool {
	// Most names are ruled out by their length alone. Only for ASCII:
	// EqualFold matches some non-ASCII runes (the Kelvin sign) to ASCII
	// letters of another byte length.
	if (len(k) >= 64 || hopByHopLens&(1<<len(k)) == 0) && isASCII(k) {
		return false
	}
	for _, h := range hopByHop {
		if strings.EqualFold(h, k) {
			return true
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// checkDestination enforces P2 inside the tunnel: the Host (or :authority)
// and any absolute-form URL must name the CONNECT destination.
func checkDestination(t *tunnel, req *http.Request) error {
	if req.URL.Scheme != "" || req.URL.Host != "" {
		if req.URL.Scheme != "https" {
			return agentvault.Errorf(agentvault.CodeInsecureSite, "plain http is refused: use https")
		}
		if req.URL.User != nil {
			return agentvault.Errorf(agentvault.CodeDestinationUnauthorized, "URL carries credentials")
		}
		u, err := NormalizeDestination(req.URL.Host, 443)
		if err != nil || u != t.dest {
			return agentvault.Errorf(agentvault.CodeDestinationUnauthorized, "request URL does not match the tunnel's destination")
		}
	}
	if last := t.host.Load(); last == nil || *last != req.Host {
		h, err := NormalizeDestination(req.Host, 443)
		if err != nil || h != t.dest {
			return agentvault.Errorf(agentvault.CodeDestinationUnauthorized, "Host does not match the tunnel's destination")
		}
		host := req.Host
		t.host.Store(&host)
	}
	if strings.Contains(strings.ToLower(strings.Join(req.Header.Values("Upgrade"), ",")), "h2c") || req.Header.Get("Http2-Settings") != "" {
		return agentvault.Errorf(agentvault.CodeInsecureSite, "h2c upgrade is refused")
	}
	if req.Header.Get("Upgrade") != "" && !isWebSocket(req) {
		return agentvault.Errorf(agentvault.CodeMalformedRequest, "protocol upgrades other than WebSocket are not supported")
	}
	return nil
}

// readBody reads the request body, refusing more than the cap (P14). A
// large body of a declared length comes in a pooled buffer (bodybuf.go),
// returned too: the caller releases it.
func (s *Server) readBody(req *http.Request) ([]byte, *bodyBuf, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil, nil
	}
	if req.ContentLength > s.cfg.MaxBodyBytes {
		return nil, nil, agentvault.Errorf(agentvault.CodeBodyTooLarge, "request body is over the limit")
	}
	if req.ContentLength >= 0 {
		// A declared length is read into one exact buffer (the server
		// enforces it): no doubling growth holding twice the body.
		pb := getBodyBuf(req.ContentLength)
		var b []byte
		if pb != nil {
			b = pb.bytes()
		} else {
			b = make([]byte, req.ContentLength)
		}
		if _, err := io.ReadFull(req.Body, b); err != nil {
			pb.release()
			return nil, nil, agentvault.Wrap(agentvault.CodeMalformedRequest, err, "request body could not be read")
		}
		return b, pb, nil
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, s.cfg.MaxBodyBytes+1))
	if err != nil {
		return nil, nil, agentvault.Wrap(agentvault.CodeMalformedRequest, err, "request body could not be read")
	}
	if int64(len(b)) > s.cfg.MaxBodyBytes {
		return nil, nil, agentvault.Errorf(agentvault.CodeBodyTooLarge, "request body is over the limit")
	}
	return b, nil, nil
}

// outcome is what the canonical log line reports.
type outcome struct {
	decision string
	err      error
	status   int
	reqBytes int
	upstream time.Duration
	subs     int
}

// handle runs one request from inside a tunnel: checks, substitution,
// upstream, scrubbing. It always returns a response; refusals are marked
// Close so the HTTP/1.1 loop drops the connection (P8).
func (s *Server) handle(t *tunnel, req *http.Request, proto string) *http.Response {
	start := time.Now()
	s.served.Add(1)
	ctx := req.Context()
	oc := outcome{decision: DecisionForwarded}
	resp, err := s.forward(ctx, t, req, proto, &oc)
	if err != nil {
		oc.decision, oc.err = DecisionRefused, err
		if agentvault.ErrorCode(err) == agentvault.CodeEgressLost {
			s.markEgressLost(t.sess, t.dest.Host)
		}
		resp = errorResponse(req, err)
		s.metrics.refusal(err)
		t.sess.Denied()
	}
	oc.status = resp.StatusCode
	s.metrics.request(oc.decision)
	s.logRequest(ctx, t, req, proto, &oc, start)
	return resp
}

// logRequest writes handle's line. It is a function of its own so that
// its record (over a kilobyte on the stack) is not in handle's frame while
// forward runs: an h2 stream's goroutine starts with a small stack, and
// each doubling of it on the way down copies it whole.
func (s *Server) logRequest(ctx context.Context, t *tunnel, req *http.Request, proto string, oc *outcome, start time.Time) {
	err := oc.err
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
	}
	h := s.log.Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	now := time.Now()
	// Logger.LogAttrs would walk the stack for the caller's PC on every
	// request (a tenth of the line's cost, issue 12), for a source no
	// handler here prints. session, host, port and proto are the tunnel's
	// and were formatted once for all its requests (tunnel.logHandler).
	r := slog.NewRecord(now, level, "proxy request", 0)
	r.AddAttrs(
		slog.String("decision", oc.decision),
		slog.String("method", methodClass(req.Method)),
		slog.Int("status", oc.status),
		slog.Int("req_bytes", oc.reqBytes),
		slog.Int("substitutions", oc.subs),
		slog.Duration("upstream", oc.upstream),
		slog.Duration("total", now.Sub(start)),
		slog.String("content_type", headerForLog(req.Header.Get("Content-Type"))),
	)
	if err != nil {
		r.AddAttrs(slog.String("code", string(agentvault.ErrorCode(err))), slog.String("reason", agentvault.ErrorMessage(err)))
	}
	_ = t.logHandler(h, proto).Handle(ctx, r)
}

// logHandler is h with the attributes every request line of the tunnel
// shares (session, host, port, proto) bound to it: a handler formats them
// once, when the tunnel logs its first request, not on every line. h is
// the server's handler (fixed for its life) and proto the tunnel's (ALPN
// chose it), so one handler serves all of the tunnel's requests; h2
// streams that race to make it each make an equal one.
func (t *tunnel) logHandler(h slog.Handler, proto string) slog.Handler {
	if th := t.reqLog.Load(); th != nil {
		return *th
	}
	th := h.WithAttrs([]slog.Attr{
		slog.String("session", t.sess.ID),
		slog.String("host", t.dest.Host),
		slog.Int("port", t.dest.Port),
		slog.String("proto", proto),
	})
	t.reqLog.Store(&th)
	return th
}

// methodClass keeps the method label closed.
func methodClass(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect:
		return m
	}
	return "OTHER"
}

// headerForLog keeps only a media type's essence: no parameters (a boundary
// or charset is harmless, but the rule is allowlist, not judgement).
func headerForLog(v string) string {
	if i := strings.IndexByte(v, ';'); i >= 0 {
		v = v[:i]
	}
	v = strings.TrimSpace(v)
	if len(v) > 64 {
		v = v[:64]
	}
	return v
}

// refuse counts and logs a refusal that happens outside handle.
func (s *Server) refuse(sess *broker.Session, err error, method, host string) {
	s.metrics.refusal(err)
	s.metrics.request(DecisionRefused)
	attrs := []slog.Attr{
		slog.String("decision", DecisionRefused),
		slog.String("code", string(agentvault.ErrorCode(err))),
		slog.String("reason", agentvault.ErrorMessage(err)),
		slog.String("method", methodClass(method)),
	}
	if sess != nil {
		sess.Denied()
		attrs = append(attrs, slog.String("session", sess.ID))
	}
	if host != "" {
		attrs = append(attrs, slog.String("host", host))
	}
	s.log.LogAttrs(context.Background(), slog.LevelWarn, "proxy request", attrs...)
}

func (s *Server) forward(ctx context.Context, t *tunnel, req *http.Request, proto string, oc *outcome) (*http.Response, error) {
	start := time.Now()
	if !s.broker.Alive(t.sess) {
		return nil, agentvault.Errorf(agentvault.CodeSessionEnded, "the session has ended")
	}
	s.broker.Touch(t.sess)
	if s.EgressLost(t.sess.ID) {
		return nil, errEgressLostEarlier()
	}
	if err := checkDestination(t, req); err != nil {
		return nil, err
	}
	body, pb, err := s.readBody(req)
	if err != nil {
		return nil, err
	}
	// forward's hold on a pooled body; the upstream transport takes one of
	// its own when the body goes out in the same buffer.
	defer pb.release()
	oc.reqBytes = len(body)
	// The upstream request outlives the browser's (the answer streams on
	// after handle returns) and ends when its body is closed; every return
	// below that does not hand cancel on calls it.
	base := ctx
	if ctx.Done() != nil {
		base = context.WithoutCancel(ctx)
	}
	uctx, cancel := context.WithCancel(base)
	// The upstream URL and the answer's body wrapper live as long as each
	// other: one allocation for both.
	call := &upstreamCall{url: url.URL{Scheme: "https", Host: t.authority, Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery}}
	// Build the outbound request from parts we vetted, never from the
	// client's framing. It gets its context here, not once it is built:
	// WithContext copies the request, and the literal it copies then
	// stays on the stack (one request allocated, not two).
	out := (&http.Request{
		Method:     req.Method,
		URL:        &call.url,
		Host:       t.authority,
		Header:     make(http.Header, len(req.Header)),
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
	}).WithContext(uctx)
	// One backing array for every copied value: a header rewrite must not
	// reach the client's request (its Content-Type is logged).
	nv := 0
	for _, vs := range req.Header {
		nv += len(vs)
	}
	vals := make([]string, 0, nv)
	for k, vs := range req.Header {
		if isHopByHop(k) || strings.EqualFold(k, "Expect") {
			continue
		}
		vals = append(vals, vs...)
		out.Header[k] = vals[len(vals)-len(vs) : len(vals) : len(vals)]
	}
	ws := isWebSocket(req) && proto == "HTTP/1.1"
	if ws {
		// No extensions: frames must stay readable for rewriting.
		out.Header.Del("Sec-Websocket-Extensions")
		out.Header.Set("Connection", "Upgrade")
		out.Header.Set("Upgrade", "websocket")
	}
	newBody, sb, err := s.substituteRequest(ctx, t.sess, t.dest, out, body)
	keepSB := false
	status := 0 // the site's answer, which settles the grants the request held (P21)
	if sb != nil {
		defer func() {
			sb.use.Done(status)
			if !keepSB {
				sb.wipe()
			}
		}()
	}
	if err != nil {
		cancel()
		return nil, err
	}
	if sb.count > 0 {
		oc.decision, oc.subs = DecisionSubstituted, sb.count
		for _, k := range sb.kinds {
			s.metrics.substitution(k)
		}
	}
	if len(newBody) > 0 {
		if pb.holds(newBody) {
			out.Body = pb.reader(newBody)
		} else {
			out.Body = nopBody(newBody)
		}
		out.ContentLength = int64(len(newBody))
		out.Header.Set("Content-Length", strconv.Itoa(len(newBody)))
	} else {
		out.Header.Del("Content-Length")
		if req.ContentLength == 0 || req.Body == nil || req.Body == http.NoBody || len(body) == 0 {
			out.Body = http.NoBody
		}
	}
	if err := s.signRequest(ctx, t, out, sb); err != nil {
		if out.Body != nil {
			_ = out.Body.Close() // a pooled body's buffer goes back
		}
		cancel()
		return nil, err
	}
	s.metrics.addedLatency(time.Since(start))
	upStart := time.Now()
	resp, err := s.upstream.RoundTrip(out)
	oc.upstream = time.Since(upStart)
	s.metrics.upstreamLatency(oc.upstream)
	if err != nil {
		cancel()
		return nil, upstreamError(err)
	}
	status = resp.StatusCode
	// P4: a redirect to plain http is refused like a plain-http request.
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		if loc := resp.Header.Get("Location"); loc != "" && !httpsRedirect(req.URL, loc) {
			resp.Body.Close()
			cancel()
			return nil, agentvault.Errorf(agentvault.CodeInsecureSite, "the site redirected to plain http")
		}
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		rwc, ok := resp.Body.(io.ReadWriteCloser)
		if !ws || !ok {
			resp.Body.Close()
			cancel()
			return nil, agentvault.Errorf(agentvault.CodeUpstream, "the site switched protocols unexpectedly")
		}
		keepSB = true
		sb.use.WS = true
		resp.Body = &wsBody{ReadWriteCloser: rwc, sb: sb, cancel: cancel}
		for _, h := range []string{"Proxy-Authenticate", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Sec-Websocket-Extensions"} {
			resp.Header.Del(h)
		}
		return resp, nil
	}
	// Not on a 101 above: the relay takes the upgraded connection itself.
	if s.dialer.Upstream != nil {
		resp.Body = &egressBody{ReadCloser: resp.Body, s: s, t: t}
	}
	if req.Method == http.MethodGet {
		tr := broker.TOTPRequest{Method: req.Method, Origin: t.dest, Path: req.URL.EscapedPath(), RawQuery: req.URL.RawQuery}
		if loc, ok := s.broker.TOTPCaptureFor(t.sess, tr); ok {
			tr.Body, tr.Referer, tr.Cookie = body, req.Header.Get("Referer"), strings.Join(req.Header.Values("Cookie"), "; ")
			if err := s.captureTOTP(t.sess, tr, loc, resp); err != nil {
				resp.Body.Close()
				cancel()
				return nil, err
			}
		}
	}
	scrubbed, err := s.scrubResponse(s.scrubberFor(ctx, t.sess, t.dest.Host), req.Method, resp)
	if err != nil {
		resp.Body.Close()
		cancel()
		return nil, err
	}
	call.body = cancelBody{ReadCloser: scrubbed.Body, cancel: cancel}
	scrubbed.Body = &call.body
	return scrubbed, nil
}

// upstreamAuthority is d as an upstream URL's host: the host alone on
// port 443, host:port otherwise, an IPv6 address in brackets.
func upstreamAuthority(d Destination) string {
	if d.Port != 443 {
		return d.String()
	}
	if strings.Contains(d.Host, ":") {
		return "[" + d.Host + "]"
	}
	return d.Host
}

// httpsRedirect reports whether a Location answer leads to https, read as
// a browser reads it (WHATWG URL): leading and trailing C0 controls and
// spaces are dropped and tabs and line breaks removed before parsing, so
// " http://x" is the plain-http redirect it looks like to the browser. A
// Location that does not parse is not trusted.
func httpsRedirect(base *url.URL, loc string) bool {
	loc = strings.TrimFunc(loc, func(r rune) bool { return r <= 0x20 })
	loc = strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, loc)
	if strings.HasPrefix(loc, "//") || strings.HasPrefix(loc, "\\\\") || strings.HasPrefix(loc, "/\\") || strings.HasPrefix(loc, "\\/") {
		return true // scheme-relative: keeps https
	}
	u, err := base.Parse(loc)
	if err != nil {
		return false
	}
	return u.Scheme == "" || strings.EqualFold(u.Scheme, "https")
}

// wsBody carries an upgraded upstream connection from forward to the
// HTTP/1.1 loop, with the request's substitution state kept alive.
type wsBody struct {
	io.ReadWriteCloser
	sb     *substitution
	cancel context.CancelFunc
}

// upstreamCall holds what one forwarded request allocates for its upstream
// leg and keeps until the answer is read: the request's URL and the
// wrapper that ends the request when the answer's body is closed.
type upstreamCall struct {
	url  url.URL
	body cancelBody
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

// WriteTo keeps the body's own WriteTo (a streamed scrub's) reachable
// through the wrapper.
func (c *cancelBody) WriteTo(w io.Writer) (int64, error) { return copyBody(w, c.ReadCloser) }

func (c *cancelBody) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// upstreamError keeps a coded error from the dialer (private destination,
// loop) and codes anything else as an upstream failure.
func upstreamError(err error) error {
	var ae *agentvault.Error
	if errors.As(err, &ae) {
		return ae
	}
	var ce *tls.CertificateVerificationError
	var ue x509.UnknownAuthorityError
	var he x509.HostnameError
	if errors.As(err, &ce) || errors.As(err, &ue) || errors.As(err, &he) {
		return agentvault.Wrap(agentvault.CodeUpstreamTLS, err, "the site's certificate did not verify")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return agentvault.Wrap(agentvault.CodeTimeout, err, "the site did not answer in time")
	}
	return agentvault.Wrap(agentvault.CodeUpstream, err, "the site could not be reached")
}
