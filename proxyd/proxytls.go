package proxyd

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/intercept"
	"github.com/agentvault/agentvault/internal/failguard"
)

// proxyListener wraps the bound proxy listener in TLS when
// listen.proxy_tls is on (an HTTPS proxy). Only HTTP/1.1 is offered: the
// proxy speaks CONNECT over HTTP/1.1, and a browser offered h2 would open
// its tunnels as h2 streams instead.
func proxyListener(l net.Listener, cfg ListenConfig, ca *intercept.CA) (net.Listener, error) {
	if !cfg.ProxyTLS {
		return l, nil
	}
	var get func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	if cfg.ProxyCertFile != "" {
		oc, err := newOwnerCert(expandHome(cfg.ProxyCertFile), expandHome(cfg.ProxyKeyFile), nil)
		if err != nil {
			return nil, err
		}
		get = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return oc.get(), nil }
	} else {
		lc, err := newCALeafCert(ca, proxyCertNames(cfg), nil)
		if err != nil {
			return nil, err
		}
		get = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return lc.get() }
	}
	return tls.NewListener(tlsOnlyListener{l}, &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}, GetCertificate: get}), nil
}

// tlsOnlyListener answers a client that speaks plain text to the TLS proxy
// (a browser given http:// instead of the https:// proxy URL) with a
// refusal it can read, instead of a handshake error that closes silently.
type tlsOnlyListener struct{ net.Listener }

func (l tlsOnlyListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &tlsOnlyConn{Conn: c, r: bufio.NewReaderSize(c, 512)}, nil
}

// tlsOnlyConn looks at the first byte the client sends, on the server's
// goroutine (its first Read, from the TLS handshake), never in Accept.
type tlsOnlyConn struct {
	net.Conn
	r       *bufio.Reader
	checked bool
}

func (c *tlsOnlyConn) Read(p []byte) (int, error) {
	if !c.checked {
		first, err := c.r.Peek(1)
		if err != nil {
			return 0, err
		}
		c.checked = true
		if first[0] != 0x16 { // not a TLS handshake record
			err := agentvault.Errorf(agentvault.CodeMalformedRequest, "this proxy speaks TLS: use the https:// proxy URL the session gave (proxyURL)")
			body := agentvault.ErrorJSON(err)
			status := agentvault.HTTPStatus(agentvault.CodeMalformedRequest)
			_, _ = fmt.Fprintf(c.Conn, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n%s: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
				status, http.StatusText(status), agentvault.CodeHeader, agentvault.ErrorCode(err), len(body), body)
			return 0, err
		}
	}
	return c.r.Read(p)
}

// proxyAuthGuard is the limit on wrong proxy credentials per client
// address when the proxy faces a network (nil otherwise: on loopback every
// browser is mcpd's on this machine, and one that keeps a closed session's
// credentials must not slow the others down).
func proxyAuthGuard(c Config) intercept.AuthGuard {
	if !c.Listen.ProxyNetwork {
		return nil
	}
	return failguard.Clients{Guard: failguard.New(failguard.Config{First: 10 * time.Second, Max: 15 * time.Minute}), Free: c.Limits.ProxyAuthFailures}
}

// ownerCert is the owner's certificate for the proxy listener
// (listen.proxy_cert_file and proxy_key_file), re-read when either file
// changes (a renewal by the owner's own tooling), checked at most once a
// minute; a pair that does not load keeps the one served.
type ownerCert struct {
	certFile, keyFile string
	now               func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]time.Time // the files' modification times when cert was read
	checked time.Time
}

func newOwnerCert(certFile, keyFile string, now func() time.Time) (*ownerCert, error) {
	if now == nil {
		now = time.Now
	}
	c := &ownerCert{certFile: certFile, keyFile: keyFile, now: now}
	if err := c.load(); err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInvalidInput, err,
			"listen.proxy_cert_file and proxy_key_file do not hold a certificate and its key (PEM)")
	}
	return c, nil
}

func (c *ownerCert) load() error {
	st, err := c.stamps()
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return err
	}
	c.cert, c.stamp, c.checked = &cert, st, c.now()
	return nil
}

func (c *ownerCert) stamps() ([2]time.Time, error) {
	var st [2]time.Time
	for i, f := range []string{c.certFile, c.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return st, err
		}
		st[i] = fi.ModTime()
	}
	return st, nil
}

func (c *ownerCert) get() *tls.Certificate {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.now(); now.Sub(c.checked) >= time.Minute {
		c.checked = now
		if st, err := c.stamps(); err == nil && st != c.stamp {
			_ = c.load() // a half-written pair fails here and is tried again later
		}
	}
	return c.cert
}
