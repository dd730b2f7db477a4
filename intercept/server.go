package intercept

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/intercept/rewrite"
	"github.com/agentvault/agentvault/vault"
	"github.com/elazarl/goproxy"
	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
)

// Config is the proxy's configuration. Zero values take the defaults noted.
type Config struct {
	CA     *CA
	Broker *broker.Broker // sessions, grants and every release decision
	Logger *slog.Logger   // nil: discard
	// WireAmount configures the amount check on requests that carry a card
	// number (wire_amount.go). The zero value checks the common field names.
	WireAmount WireAmountConfig
	Metrics    *Metrics // nil: none
	// Signer signs requests for the sites the owner chose (sign.go).
	Signer RequestSigner

	// UnsafeAllowPrivateRanges lets upstreams be on loopback or private
	// addresses. Only for tests and local development (P3).
	UnsafeAllowPrivateRanges bool
	// ExtraRoots are trusted for upstream TLS on top of the system roots (P5).
	ExtraRoots []*x509.Certificate
	// EgressStrict refuses every CONNECT to a host outside AllowedHosts (P1).
	EgressStrict bool
	AllowedHosts []string

	MaxBodyBytes      int64         // default 10 MiB
	MaxTunnels        int           // default 512
	ReadHeaderTimeout time.Duration // default 10s
	IdleTimeout       time.Duration // default 90s
	UpstreamTimeout   time.Duration // default 60s (to response headers)
	Resolver          Resolver      // default net.DefaultResolver
}

// Server is the MITM proxy.
type Server struct {
	cfg       Config
	log       *slog.Logger
	metrics   *Metrics
	scrubHit  func(vault.Kind) // metrics.scrub, bound once: not per response
	ca        *CA
	broker    *broker.Broker
	caches    sync.Map    // *broker.Session → *sessionCache
	wireNames wireNameSet // from cfg.WireAmount, built once
	dialer    *Dialer
	upstream  *http.Transport
	gp        *goproxy.ProxyHttpServer
	h2        *http2.Server
	http      *http.Server

	egressMu sync.RWMutex
	tunnels  atomic.Int64
	closing  atomic.Bool
	mu       sync.Mutex
	live     map[*tunnel]struct{}
	tunnelWG sync.WaitGroup
}

// tunnel is one MITM'd CONNECT.
type tunnel struct {
	sess *broker.Session
	dest Destination
	conn net.Conn

	mu     sync.Mutex
	active bool
	// host is the last Host value seen to normalise to dest: a browser
	// sends the same one on every request of a tunnel, and normalising
	// (IDNA, IP forms) is a pure function of it, so an equal string needs
	// no second pass.
	host atomic.Pointer[string]
}

// NewServer builds the proxy from cfg.
func NewServer(cfg Config) (*Server, error) {
	if cfg.CA == nil || cfg.Broker == nil {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "proxy needs a CA and a session table")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 10 << 20
	}
	if cfg.MaxTunnels <= 0 {
		cfg.MaxTunnels = 512
	}
	if cfg.ReadHeaderTimeout <= 0 {
		cfg.ReadHeaderTimeout = 10 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 90 * time.Second
	}
	if cfg.UpstreamTimeout <= 0 {
		cfg.UpstreamTimeout = 60 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	for _, c := range cfg.ExtraRoots {
		roots.AddCert(c)
	}
	s := &Server{
		cfg: cfg, log: log, metrics: cfg.Metrics, ca: cfg.CA, broker: cfg.Broker,
		dialer: &Dialer{UnsafeAllowPrivateRanges: cfg.UnsafeAllowPrivateRanges, Resolver: cfg.Resolver},
		live:   map[*tunnel]struct{}{},
	}
	s.wireNames = wireNames(cfg.WireAmount)
	s.scrubHit = s.metrics.scrub
	s.ca.metrics = cfg.Metrics
	cfg.Broker.OnClose(func(sess *broker.Session) { s.caches.Delete(sess) })
	// Our own transport (P5): verified TLS against system + extra roots, no
	// proxy from the environment, every dial through the vetting dialer (P3).
	s.upstream = &http.Transport{
		Proxy:                 nil,
		DialContext:           s.dialer.DialContext,
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: cfg.UpstreamTimeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
	s.h2 = &http2.Server{IdleTimeout: cfg.IdleTimeout, MaxReadFrameSize: 1 << 20}

	gp := goproxy.NewProxyHttpServer()
	gp.Logger = discardLogger{}
	gp.Tr = s.upstream // never used to forward; set so no default transport exists
	gp.NonproxyHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.refuse(nil, agentvault.Errorf(agentvault.CodeMalformedRequest, "not a proxy request"), r.Method, "")
		writeError(w, agentvault.Errorf(agentvault.CodeMalformedRequest, "not a proxy request"))
	})
	gp.OnRequest().HandleConnectFunc(s.onConnect)
	// Absolute-form http:// requests: refused before anything goes upstream (P4).
	gp.OnRequest().DoFunc(func(r *http.Request, ctx *goproxy.ProxyCtx) (*http.Request, *http.Response) {
		err := agentvault.Errorf(agentvault.CodeInsecureSite, "plain http is refused: use https")
		s.refuse(nil, err, r.Method, "")
		return r, errorResponse(r, err)
	})
	s.gp = gp
	s.http = &http.Server{
		Handler:           gp,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return s, nil
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

// AddSelf tells the dialer about another of this process's listeners, so a
// request to it is refused as a loop (P16).
func (s *Server) AddSelf(a net.Addr) { s.dialer.AddSelf(a) }

// Serve accepts proxy connections on l until Shutdown.
func (s *Server) Serve(l net.Listener) error {
	s.dialer.AddSelf(l.Addr())
	err := s.http.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting, lets in-flight requests finish, closes idle
// tunnels, and force-closes what is left when ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	err := s.http.Shutdown(ctx)
	s.mu.Lock()
	for t := range s.live {
		t.mu.Lock()
		if !t.active {
			_ = t.conn.Close()
		}
		t.mu.Unlock()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.tunnelWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.mu.Lock()
		for t := range s.live {
			t.mu.Lock()
			_ = t.conn.Close()
			t.mu.Unlock()
		}
		s.mu.Unlock()
		<-done
	}
	s.upstream.CloseIdleConnections()
	return err
}

// UpstreamTransport is the proxy's upstream transport (for tests).
func (s *Server) UpstreamTransport() *http.Transport { return s.upstream }

// proxyCredentials reads Proxy-Authorization: Basic.
func proxyCredentials(h http.Header) (user, pass string, ok bool) {
	v := h.Get("Proxy-Authorization")
	const p = "Basic "
	if len(v) < len(p) || !strings.EqualFold(v[:len(p)], p) {
		return "", "", false
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v[len(p):]))
	if err != nil {
		return "", "", false
	}
	user, pass, ok = strings.Cut(string(dec), ":")
	return user, pass, ok
}

// SetEgress replaces the egress rule (P1) for new CONNECTs; a config
// reload calls it only after the new config validated (P17).
func (s *Server) SetEgress(strict bool, allowed []string) {
	s.egressMu.Lock()
	s.cfg.EgressStrict, s.cfg.AllowedHosts = strict, append([]string(nil), allowed...)
	s.egressMu.Unlock()
}

func (s *Server) egressStrict() bool {
	s.egressMu.RLock()
	defer s.egressMu.RUnlock()
	return s.cfg.EgressStrict
}

func (s *Server) hostAllowed(host string) bool {
	s.egressMu.RLock()
	defer s.egressMu.RUnlock()
	for _, a := range s.cfg.AllowedHosts {
		if n, err := hostname.Host(a); err == nil && hostname.Under(host, n) {
			return true
		}
	}
	return false
}

// onConnect decides a CONNECT: authentication, destination rules, tunnel
// cap; then hands the connection to our own TLS termination.
func (s *Server) onConnect(host string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
	req := ctx.Req
	reject := func(err error, sess *broker.Session) (*goproxy.ConnectAction, string) {
		// The log names the destination the operator must look at (a name
		// that does not resolve, a private address); an unparsable one is
		// logged as it came, cut short.
		logHost := host
		if d, derr := NormalizeDestination(host, 443); derr == nil {
			logHost = d.String()
		} else if len(logHost) > 80 {
			logHost = logHost[:80]
		}
		s.refuse(sess, err, http.MethodConnect, logHost)
		resp := errorResponse(req, err)
		if agentvault.ErrorCode(err) == agentvault.CodeProxyAuth {
			resp.Header.Set("Proxy-Authenticate", `Basic realm="agentvault"`)
		}
		ctx.Resp = resp
		return &goproxy.ConnectAction{Action: goproxy.ConnectReject}, host
	}
	user, pass, ok := proxyCredentials(req.Header)
	if !ok {
		return reject(agentvault.Errorf(agentvault.CodeProxyAuth, "proxy credentials required"), nil)
	}
	sess, ok := s.broker.Authenticate(user, pass)
	if !ok {
		return reject(agentvault.Errorf(agentvault.CodeProxyAuth, "proxy credentials rejected"), nil)
	}
	if s.closing.Load() {
		return reject(agentvault.Errorf(agentvault.CodeUpstream, "proxy is shutting down"), sess)
	}
	dest, err := NormalizeDestination(req.Host, 443)
	if err != nil {
		return reject(err, sess)
	}
	if s.egressStrict() && !s.hostAllowed(dest.Host) {
		return reject(agentvault.Errorf(agentvault.CodeDestinationUnauthorized, "destination is not in the egress allow list"), sess)
	}
	vctx, cancel := context.WithTimeout(req.Context(), 10*time.Second)
	_, err = s.dialer.Vet(vctx, dest)
	cancel()
	if err != nil {
		return reject(err, sess)
	}
	if n := s.tunnels.Add(1); n > int64(s.cfg.MaxTunnels) {
		s.tunnels.Add(-1)
		return reject(agentvault.Errorf(agentvault.CodeTooManyTunnels, "too many open tunnels"), sess)
	}
	return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: func(r *http.Request, client net.Conn, _ *goproxy.ProxyCtx) {
		s.serveTunnel(sess, dest, client)
	}}, host
}

// bufConn reads through a bufio.Reader that may hold peeked bytes.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (s *Server) serveTunnel(sess *broker.Session, dest Destination, client net.Conn) {
	t := &tunnel{sess: sess, dest: dest, conn: client}
	s.tunnelWG.Add(1)
	s.mu.Lock()
	s.live[t] = struct{}{}
	s.mu.Unlock()
	s.metrics.tunnel(1)
	defer func() {
		_ = client.Close()
		s.mu.Lock()
		delete(s.live, t)
		s.mu.Unlock()
		s.metrics.tunnel(-1)
		s.tunnels.Add(-1)
		s.tunnelWG.Done()
	}()
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	br := bufio.NewReaderSize(client, 4096)
	_ = client.SetReadDeadline(time.Now().Add(s.cfg.ReadHeaderTimeout))
	first, err := br.Peek(1)
	if err != nil {
		return
	}
	if first[0] != 0x16 { // not a TLS handshake record: plain text in the tunnel (P4)
		err := agentvault.Errorf(agentvault.CodeInsecureSite, "the tunnel must carry TLS")
		s.refuse(sess, err, "", dest.Host)
		_ = errorResponse(nil, err).Write(client)
		return
	}
	var sniErr error
	tconn := tls.Server(&bufConn{Conn: client, r: br}, &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			// P2: the SNI, when sent, must name the CONNECT destination.
			if hello.ServerName != "" {
				sni, err := NormalizeDestination(hello.ServerName, dest.Port)
				if err != nil || sni.Host != dest.Host {
					sniErr = agentvault.Errorf(agentvault.CodeDestinationUnauthorized, "TLS server name does not match the CONNECT destination")
					return nil, sniErr
				}
			}
			return s.ca.Leaf(dest.Host)
		},
	})
	hctx, cancel := context.WithTimeout(context.Background(), s.cfg.ReadHeaderTimeout)
	err = tconn.HandshakeContext(hctx)
	cancel()
	if err != nil {
		if sniErr != nil {
			s.refuse(sess, sniErr, "", dest.Host)
		}
		return
	}
	_ = client.SetReadDeadline(time.Time{})
	t.mu.Lock() // Shutdown reads conn from another goroutine
	t.conn = tconn
	t.mu.Unlock()
	if tconn.ConnectionState().NegotiatedProtocol == "h2" {
		// P7: our code terminates h2; every stream goes through handle.
		s.h2.ServeConn(tconn, &http2.ServeConnOpts{
			Context: context.Background(),
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				t.setActive(true)
				defer t.setActive(false)
				s.serveH2(t, w, r)
			}),
			BaseConfig: &http.Server{ReadHeaderTimeout: s.cfg.ReadHeaderTimeout, IdleTimeout: s.cfg.IdleTimeout},
		})
		return
	}
	s.serveH1(t, tconn)
}

func (t *tunnel) setActive(a bool) {
	t.mu.Lock()
	t.active = a
	t.mu.Unlock()
}

const maxHeaderBytes = 64 << 10

// serveH1 reads HTTP/1.1 requests from the decrypted tunnel one at a time.
// The raw header block is checked before Go parses it (P8), and any refusal
// closes the connection.
func (s *Server) serveH1(t *tunnel, conn net.Conn) {
	// The reader (68 KiB, a whole header block must fit for the raw check)
	// and the writer (32 KiB) are taken from pools for one request and
	// given back while the tunnel idles between requests: an idle
	// keep-alive tunnel holds neither (P14: memory per idle tunnel). A
	// reader still holding pipelined bytes is kept for the next request.
	var br *bufio.Reader
	first := &firstByte{r: conn}
	defer func() { putH1Reader(br) }()
	for !s.closing.Load() {
		_ = conn.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		if br == nil {
			// Wait for the next request's first byte without a buffer.
			if err := first.wait(); err != nil {
				return
			}
			br = h1Readers.Get().(*bufio.Reader)
			br.Reset(first)
		} else if _, err := br.Peek(1); err != nil {
			return
		}
		t.setActive(true)
		_ = conn.SetReadDeadline(time.Now().Add(s.cfg.ReadHeaderTimeout))
		if err := checkRawHeader(br); err != nil {
			s.refuse(t.sess, err, "", t.dest.Host)
			_ = errorResponse(nil, err).Write(conn)
			return
		}
		req, err := http.ReadRequest(br)
		if err != nil {
			err := agentvault.Wrap(agentvault.CodeMalformedRequest, err, "malformed request")
			s.refuse(t.sess, err, "", t.dest.Host)
			_ = errorResponse(nil, err).Write(conn)
			return
		}
		_ = conn.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
			req.Header.Del("Expect")
			_, _ = io.WriteString(conn, "HTTP/1.1 100 Continue\r\n\r\n")
		}
		resp := s.handle(t, req, "HTTP/1.1")
		if wb, ok := resp.Body.(*wsBody); ok {
			// 101: write the handshake answer, then relay frames.
			bw := getH1Writer(conn)
			resp.Header.Set("Connection", "Upgrade")
			resp.Header.Set("Upgrade", "websocket")
			_, _ = io.WriteString(bw, "HTTP/1.1 101 Switching Protocols\r\n")
			_ = resp.Header.Write(bw)
			_, _ = io.WriteString(bw, "\r\n")
			err := bw.Flush()
			putH1Writer(bw)
			if err != nil {
				wb.Close()
				return
			}
			_ = conn.SetReadDeadline(time.Time{})
			sc := s.scrubberFor(wb.sb.ctx, t.sess, t.dest.Host) // as forward gets it
			s.relayWebSocket(t, wb.sb, sc, br, conn, wb.ReadWriteCloser)
			wb.cancel()
			return
		}
		keep := !resp.Close && !req.Close
		resp.ProtoMajor, resp.ProtoMinor, resp.Proto = 1, 1, "HTTP/1.1"
		if resp.ContentLength < 0 && req.Method != http.MethodHead && resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotModified {
			resp.TransferEncoding = []string{"chunked"} // stream with a length known only at the end
		}
		bw := getH1Writer(conn)
		werr := resp.Write(bw)
		if werr == nil {
			werr = bw.Flush()
		}
		putH1Writer(bw)
		resp.Body.Close()
		// Drain what the client sent that we did not read, within reason.
		_, _ = io.CopyN(io.Discard, req.Body, 256<<10)
		req.Body.Close()
		t.setActive(false)
		if werr != nil || !keep {
			return
		}
		if br.Buffered() == 0 {
			putH1Reader(br)
			br = nil
		}
	}
}

var (
	h1Readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, maxHeaderBytes+4096) }}
	h1Writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 32<<10) }}
)

func getH1Writer(w io.Writer) *bufio.Writer {
	bw := h1Writers.Get().(*bufio.Writer)
	bw.Reset(w)
	return bw
}

// putH1Writer drops what bw did not write (after a failed flush) and
// pools it.
func putH1Writer(bw *bufio.Writer) {
	bw.Reset(nil)
	h1Writers.Put(bw)
}

// putH1Reader drops br's buffered bytes and pools it (nil: nothing).
func putH1Reader(br *bufio.Reader) {
	if br != nil {
		br.Reset(nil)
		h1Readers.Put(br)
	}
}

// firstByte reads a connection through one byte read ahead: wait blocks
// for the next byte without a buffer, and Read hands it out first.
type firstByte struct {
	r   io.Reader
	b   [1]byte
	has bool
}

func (f *firstByte) wait() error {
	for !f.has {
		n, err := f.r.Read(f.b[:])
		if n == 1 {
			f.has = true
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (f *firstByte) Read(p []byte) (int, error) {
	if f.has && len(p) > 0 {
		p[0], f.has = f.b[0], false
		return 1, nil
	}
	return f.r.Read(p)
}

// checkRawHeader looks at the raw header block before Go's parser
// normalises it away: obs-fold, bare LF, duplicate Content-Length, both
// Content-Length and Transfer-Encoding, a Transfer-Encoding other than
// chunked, and Connection naming an end-to-end header are refused (P8,
// RFC 9112 sections 5.2, 6.1 and 6.3; RFC 9110 section 7.6.1).
func checkRawHeader(br *bufio.Reader) error {
	bad := func(why string) error { return agentvault.Errorf(agentvault.CodeMalformedRequest, "%s", why) }
	var block []byte
	for n := 1; ; {
		b, err := br.Peek(n)
		if buffered := min(br.Buffered(), maxHeaderBytes); buffered > len(b) {
			b, _ = br.Peek(buffered) // scan all that has arrived
		}
		if i := indexHeaderEnd(b); i >= 0 {
			block = b[:i]
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) || n >= maxHeaderBytes {
			return bad("request header too large")
		}
		if err != nil {
			return agentvault.Wrap(agentvault.CodeTimeout, err, "request header not received")
		}
		n = min(len(b)+1, maxHeaderBytes)
	}
	cl, te := 0, 0
	rest := block[:len(block)-1]
	for i := 0; ; i++ {
		line, tail, more := bytes.Cut(rest, []byte("\n"))
		rest = tail
		if !bytes.HasSuffix(line, []byte("\r")) {
			return bad("bare LF in request header")
		}
		line = line[:len(line)-1]
		if i == 0 || len(line) == 0 {
			if !more {
				break
			}
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			return bad("obsolete header line folding")
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || len(name) == 0 || bytes.ContainsAny(name, " \t") {
			return bad("malformed header line")
		}
		value = bytes.TrimSpace(value)
		switch {
		case lowerIs(name, "content-length"):
			cl++
		case lowerIs(name, "transfer-encoding"):
			te++
			if !bytes.EqualFold(value, []byte("chunked")) {
				return bad("unsupported transfer encoding")
			}
		case lowerIs(name, "connection"):
			for _, tok := range strings.Split(string(value), ",") {
				switch strings.ToLower(strings.TrimSpace(tok)) {
				case "", "keep-alive", "close", "upgrade":
				default:
					return bad("Connection header names an end-to-end header")
				}
			}
		}
		if !more {
			break
		}
	}
	if cl > 1 || te > 1 || (cl > 0 && te > 0) {
		return bad("ambiguous message length")
	}
	return nil
}

// lowerIs reports whether strings.ToLower(string(name)) == lower, without
// the copy for an ASCII name. A name outside ASCII takes the Unicode path:
// "İ" lower-cases to "i" there, and the header check reads names as that.
func lowerIs(name []byte, lower string) bool {
	for _, c := range name {
		if c >= utf8.RuneSelf {
			return strings.ToLower(string(name)) == lower
		}
	}
	if len(name) != len(lower) {
		return false
	}
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// indexHeaderEnd returns the length of the header block including its
// final CRLF CRLF (or LF LF), or -1.
func indexHeaderEnd(b []byte) int {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\n' {
			if b[i+1] == '\n' {
				return i + 2
			}
			if i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n' {
				return i + 3
			}
		}
	}
	return -1
}

// serveH2 runs one h2 stream through the same path as HTTP/1.1.
func (s *Server) serveH2(t *tunnel, w http.ResponseWriter, r *http.Request) {
	resp := s.handle(t, r, "HTTP/2.0")
	defer resp.Body.Close()
	h := w.Header()
	for k, vs := range resp.Header {
		if isHopByHop(k) {
			continue
		}
		h[k] = vs
	}
	if resp.ContentLength >= 0 {
		h.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.WriteHeader(resp.StatusCode)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
		if err == io.EOF {
			// The site's trailers, scrubbed at the body's end (scrubResponse),
			// go on as h2 trailers.
			for k, vs := range resp.Trailer {
				if !isHopByHop(k) && len(vs) > 0 {
					h[http.TrailerPrefix+k] = vs
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// Hop-by-hop headers (RFC 9110 section 7.6.1), never forwarded.
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func isHopByHop(k string) bool {
	for _, h := range hopByHop {
		if strings.EqualFold(h, k) {
			return true
		}
	}
	return false
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

// readBody reads the request body, refusing more than the cap (P14).
func (s *Server) readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	if req.ContentLength > s.cfg.MaxBodyBytes {
		return nil, agentvault.Errorf(agentvault.CodeBodyTooLarge, "request body is over the limit")
	}
	if req.ContentLength >= 0 {
		// A declared length is read into one exact buffer (the server
		// enforces it): no doubling growth holding twice the body.
		b := make([]byte, req.ContentLength)
		if _, err := io.ReadFull(req.Body, b); err != nil {
			return nil, agentvault.Wrap(agentvault.CodeMalformedRequest, err, "request body could not be read")
		}
		return b, nil
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, s.cfg.MaxBodyBytes+1))
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeMalformedRequest, err, "request body could not be read")
	}
	if int64(len(b)) > s.cfg.MaxBodyBytes {
		return nil, agentvault.Errorf(agentvault.CodeBodyTooLarge, "request body is over the limit")
	}
	return b, nil
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
	ctx := req.Context()
	oc := outcome{decision: DecisionForwarded}
	resp, err := s.forward(ctx, t, req, proto, &oc)
	if err != nil {
		oc.decision, oc.err = DecisionRefused, err
		resp = errorResponse(req, err)
		s.metrics.refusal(err)
		t.sess.Denied()
	}
	oc.status = resp.StatusCode
	s.metrics.request(oc.decision)
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
	}
	h := s.log.Handler()
	if !h.Enabled(ctx, level) {
		return resp
	}
	now := time.Now()
	attrs := []slog.Attr{
		slog.String("decision", oc.decision),
		slog.String("session", t.sess.ID),
		slog.String("method", methodClass(req.Method)),
		slog.String("host", t.dest.Host),
		slog.Int("port", t.dest.Port),
		slog.String("proto", proto),
		slog.Int("status", oc.status),
		slog.Int("req_bytes", oc.reqBytes),
		slog.Int("substitutions", oc.subs),
		slog.Duration("upstream", oc.upstream),
		slog.Duration("total", now.Sub(start)),
		slog.String("content_type", headerForLog(req.Header.Get("Content-Type"))),
	}
	if err != nil {
		attrs = append(attrs, slog.String("code", string(agentvault.ErrorCode(err))), slog.String("reason", agentvault.ErrorMessage(err)))
	}
	// Logger.LogAttrs would walk the stack for the caller's PC on every
	// request (a tenth of the line's cost, issue 12), for a source no
	// handler here prints.
	r := slog.NewRecord(now, level, "proxy request", 0)
	r.AddAttrs(attrs...)
	_ = h.Handle(ctx, r)
	return resp
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
	if err := checkDestination(t, req); err != nil {
		return nil, err
	}
	body, err := s.readBody(req)
	if err != nil {
		return nil, err
	}
	oc.reqBytes = len(body)
	// Build the outbound request from parts we vetted, never from the
	// client's framing.
	out := &http.Request{
		Method:     req.Method,
		URL:        &url.URL{Scheme: "https", Host: t.dest.Host, Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery},
		Header:     make(http.Header, len(req.Header)),
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
	}
	if t.dest.Port != 443 {
		out.URL.Host = t.dest.String()
	}
	if strings.Contains(t.dest.Host, ":") && t.dest.Port == 443 {
		out.URL.Host = "[" + t.dest.Host + "]"
	}
	out.Host = out.URL.Host
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
		return nil, err
	}
	if sb.count > 0 {
		oc.decision, oc.subs = DecisionSubstituted, sb.count
		for _, k := range sb.kinds {
			s.metrics.substitution(k)
		}
	}
	if len(newBody) > 0 {
		out.Body = nopBody(newBody)
		out.ContentLength = int64(len(newBody))
		out.Header.Set("Content-Length", strconv.Itoa(len(newBody)))
	} else {
		out.Header.Del("Content-Length")
		if req.ContentLength == 0 || req.Body == nil || req.Body == http.NoBody || len(body) == 0 {
			out.Body = http.NoBody
		}
	}
	if err := s.signRequest(ctx, t, out, sb); err != nil {
		return nil, err
	}
	uctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	out = out.WithContext(uctx)
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
	scrubbed.Body = &cancelBody{ReadCloser: scrubbed.Body, cancel: cancel}
	return scrubbed, nil
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

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

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

// scrubResponse replaces every real value released in the session (and its
// encodings) by its stand-in (P10) in everything the client sees of the
// response: the reason phrase, header names and values, the body and the
// trailers. A body of known length up to smallBody is scrubbed whole
// (decoded, by media type, then as text) and keeps a length; when nothing
// matched it goes on exactly as the site sent it, compression included. A
// longer or unsized body is decoded and scrubbed as a stream and sent on as
// identity, chunked.
//
// Trailers are scrubbed, not dropped: browsers do not show them to pages
// today, but other clients (curl, gRPC over h2) read them and keep their
// meaning. An HTTP/1.1 client gets them only after a chunked body (Go drops
// them after a sized one, as before). They are scrubbed in place once the body has been read to its
// end, which is when the transport fills them in, and before Response.Write
// (HTTP/1.1, chunked) or serveH2 sends them.
func (s *Server) scrubResponse(sc *scrubber, method string, resp *http.Response) (*http.Response, error) {
	for _, h := range hopByHop {
		delete(resp.Header, h) // Header.Del, less canonicalising what already is
	}
	if sc == nil {
		return resp, nil
	}
	hit := s.scrubHit
	// HTTP/1.1 "HTTP/1.1 200 <reason>": Response.Write sends resp.Status on.
	// The reason goes in the header's one scan (headerClean): most answers
	// hold no value anywhere there, and then no field is scanned alone.
	if code, reason, ok := strings.Cut(resp.Status, " "); !headerClean(sc, resp.Header, reason) {
		if nr, n := sc.apply([]byte(reason), hit); ok && n > 0 {
			resp.Status = code + " " + string(nr)
		}
		scrubFields(sc, resp.Header, hit)
	}
	scrubHeader(sc, resp.Trailer, hit) // the names a site announced in Trailer
	if method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
		return resp, nil // no body: the headers were all there was to scrub
	}
	coding := strings.Join(resp.Header.Values("Content-Encoding"), ",")
	if resp.ContentLength >= 0 && resp.ContentLength <= smallBody {
		raw := make([]byte, resp.ContentLength)
		_, err := io.ReadFull(resp.Body, raw)
		if err == nil {
			// Read on to the end, where an h2 site's trailers arrive.
			err = readPastEnd(resp.Body)
		}
		resp.Body.Close()
		if err != nil {
			return nil, agentvault.Wrap(agentvault.CodeUpstream, err, "the site's response was cut short")
		}
		scrubHeader(sc, resp.Trailer, hit)
		plain, err := rewrite.Decode(coding, raw, s.cfg.MaxBodyBytes)
		if err != nil {
			return nil, err
		}
		out, n := sc.body(resp.Header.Get("Content-Type"), plain, s.cfg.MaxBodyBytes, hit)
		if n == 0 {
			resp.Body = nopBody(raw)
			return resp, nil
		}
		resp.Body = nopBody(out)
		resp.Header.Del("Content-Encoding")
		resp.ContentLength = int64(len(out))
		resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
		return resp, nil
	}
	dec, err := rewrite.NewDecoder(coding, resp.Body, s.cfg.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	scrubbed := sc.reader(dec, hit)
	atEnd := &onEOF{r: scrubbed, fn: func() { scrubHeader(sc, resp.Trailer, hit) }}
	resp.Body = &readCloser{Reader: atEnd, closers: []io.Closer{scrubbed, dec, resp.Body}}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	return resp, nil
}

// scrubHeader scrubs a header (or trailer) map in place (scrubFields), after
// one scan of the whole map finds a value in it (headerClean).
func scrubHeader(sc *scrubber, h http.Header, hit func(vault.Kind)) {
	if len(h) == 0 || headerClean(sc, h, "") {
		return
	}
	scrubFields(sc, h, hit)
}

// scrubFields scrubs a header (or trailer) map in place: each value as
// text, and each name. A field name is case-insensitive (RFC 9110 section
// 5.1) and Go hands it on canonicalised, so a name is also scanned
// upper-cased, against the upper-cased form every value has among its
// variants (rewrite.ScrubVariants). A renamed field keeps its values under
// the canonical form of the new name; one whose new name is not a valid
// field name, or still holds a value, is dropped.
func scrubFields(sc *scrubber, h http.Header, hit func(vault.Kind)) {
	type rename struct{ from, to string }
	var renames []rename
	for k, vs := range h {
		for i, v := range vs {
			if nv, n := sc.apply([]byte(v), hit); n > 0 {
				vs[i] = string(nv)
			}
		}
		name, n := sc.apply([]byte(k), hit)
		if up, m := sc.apply(bytes.ToUpper(name), hit); m > 0 {
			name, n = up, n+m
		}
		if n > 0 {
			renames = append(renames, rename{k, http.CanonicalHeaderKey(string(name))})
		}
	}
	for _, r := range renames {
		vs := h[r.from]
		delete(h, r.from)
		if !httpguts.ValidHeaderFieldName(r.to) || sc.m.Contains(bytes.ToUpper([]byte(r.to))) || sc.m.Contains([]byte(r.to)) {
			continue
		}
		h[r.to] = append(h[r.to], vs...)
	}
}

// headerClean reports whether scrubFields would find nothing in h, nor
// sc.apply in extra: one scan of one buffer holding extra, then each name,
// the name upper-cased and each value, a line each, instead of a scan per
// field. A line break bounds a short value's match as the edge of a field
// does (tokens: it is a delimiter and not a word byte), so whatever
// scrubFields would find in a field is found here too. No field holds a
// line break (HTTP/1.1 and h2 both refuse one), so no value is found across
// two of them unless it holds one itself, and then the false alarm only
// costs the per-field scan, which finds it in no single field, as before.
func headerClean(sc *scrubber, h http.Header, extra string) bool {
	bp := headerBufs.Get().(*[]byte)
	b := append((*bp)[:0], extra...)
	for k, vs := range h {
		b = append(append(b, '\n'), k...)
		b = appendUpper(append(b, '\n'), k)
		for _, v := range vs {
			b = append(append(b, '\n'), v...)
		}
	}
	clean := !sc.m.Contains(b)
	clear(b) // it may hold a real value: that is what it was scanned for
	if cap(b) <= maxHeaderBytes {
		*bp = b[:0]
		headerBufs.Put(bp)
	}
	return clean
}

var headerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// appendUpper appends bytes.ToUpper(s) to b, without a copy for the usual
// ASCII name.
func appendUpper(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return append(b, bytes.ToUpper([]byte(s))...)
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

// readPastEnd reads r up to one byte more, which it drops, or to its end:
// io.Copy(io.Discard, io.LimitReader(r, 1)) without the allocations.
func readPastEnd(r io.Reader) error {
	var b [1]byte
	for {
		n, err := r.Read(b[:])
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		case n > 0:
			return nil
		}
	}
}

// onEOF calls fn once, when r first reports io.EOF.
type onEOF struct {
	r    io.Reader
	fn   func()
	done bool
}

func (o *onEOF) Read(p []byte) (int, error) {
	n, err := o.r.Read(p)
	if err == io.EOF && !o.done {
		o.done = true
		o.fn()
	}
	return n, err
}

// smallBody is the size under which a response is scrubbed in one piece.
const smallBody = 256 << 10

type readCloser struct {
	io.Reader
	closers []io.Closer
}

func (r *readCloser) Close() error {
	var first error
	for _, c := range r.closers {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
