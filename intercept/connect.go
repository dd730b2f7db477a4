package intercept

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/hostname"
	"github.com/elazarl/goproxy"
	"golang.org/x/net/http2"
)

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
	s.served.Add(1)
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
	// A client that sent wrong credentials too often waits before any
	// credential of its is checked again, right ones included: a guesser
	// learns nothing while it waits.
	if g := s.cfg.AuthGuard; g != nil {
		if w := g.Wait(req.RemoteAddr); w > 0 {
			secs := int64((w + time.Second - 1) / time.Second)
			action, h := reject(agentvault.Errorf(agentvault.CodeRateLimited,
				"too many wrong proxy credentials from this address; retry after %ds", secs), nil)
			ctx.Resp.Header.Set("Retry-After", strconv.FormatInt(secs, 10))
			return action, h
		}
	}
	user, pass, ok := proxyCredentials(req.Header)
	if !ok {
		return reject(agentvault.Errorf(agentvault.CodeProxyAuth, msgCredentialsRequired), nil)
	}
	sess, ok := s.broker.Authenticate(user, pass)
	if !ok {
		// A right password of a session that expired is no guess; an
		// unknown session (a closed one too) or a wrong password counts.
		if sess == nil && s.cfg.AuthGuard != nil {
			s.cfg.AuthGuard.Failed(req.RemoteAddr)
		}
		return reject(agentvault.Errorf(agentvault.CodeProxyAuth, "proxy credentials rejected: use the proxyUser and proxyPassword of an open session (POST /v1/sessions)"), nil)
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
		// The tunnel gets a goroutine of its own and the CONNECT's handler
		// returns: net/http's connection state (its 4 KiB reader and 4 KiB
		// writer, the CONNECT request) and the handler's stack would
		// otherwise stay held for as long as the tunnel lives (P14: memory
		// per idle tunnel). The tunnel is counted before the handler
		// returns, so Shutdown waits for it.
		t := s.openTunnel(sess, dest, client)
		go s.serveTunnel(t)
	}}, host
}

// bufConn reads through a bufio.Reader that may hold peeked bytes, and
// from the connection itself once the reader is drained: the reader is
// let go then, so a tunnel idling for minutes does not keep its 4 KiB
// (P14: memory per idle tunnel). Only the TLS layer above reads it.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) {
	if c.r != nil {
		if c.r.Buffered() > 0 {
			return c.r.Read(p)
		}
		c.r = nil
	}
	return c.Conn.Read(p)
}

// openTunnel counts a hijacked CONNECT as a live tunnel (Shutdown closes
// it and waits for it); serveTunnel serves it and ends the count.
func (s *Server) openTunnel(sess *broker.Session, dest Destination, client net.Conn) *tunnel {
	t := &tunnel{sess: sess, dest: dest, conn: client, authority: upstreamAuthority(dest)}
	s.tunnelWG.Add(1)
	s.mu.Lock()
	s.live[t] = struct{}{}
	s.mu.Unlock()
	s.metrics.tunnel(1)
	return t
}

func (s *Server) serveTunnel(t *tunnel) {
	sess, dest, client := t.sess, t.dest, t.conn
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
