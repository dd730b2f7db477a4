package proxyd

import (
	"crypto/tls"
	"sync"
	"time"

	"github.com/agentvault/agentvault/intercept"
)

// caLeafCert keeps the leaf of a listener the deployment's CA vouches for:
// the control API's (listen.control_tls) and the proxy's own
// (listen.proxy_tls). Every replica shares the CA, so mcpd and browsers
// trust one CA (ca.pem) for all of them. The leaf lives a day like a MITM
// leaf; a handshake past half its life signs the next one, so a replica
// never serves an expired leaf and needs no timer.
type caLeafCert struct {
	ca    *intercept.CA
	names []string
	now   func() time.Time

	mu   sync.Mutex
	leaf *tls.Certificate
}

func newCALeafCert(ca *intercept.CA, names []string, now func() time.Time) (*caLeafCert, error) {
	if now == nil {
		now = time.Now
	}
	c := &caLeafCert{ca: ca, names: names, now: now}
	if _, err := c.get(); err != nil { // a CA that cannot sign fails start-up
		return nil, err
	}
	return c, nil
}

func (c *caLeafCert) get() (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leaf != nil {
		l := c.leaf.Leaf
		if c.now().Before(l.NotBefore.Add(l.NotAfter.Sub(l.NotBefore) / 2)) {
			return c.leaf, nil
		}
	}
	leaf, err := c.ca.ServerLeaf(c.names)
	if err != nil {
		if c.leaf != nil && c.now().Before(c.leaf.Leaf.NotAfter) {
			return c.leaf, nil // still valid: try again at the next handshake
		}
		return nil, err
	}
	c.leaf = leaf
	return leaf, nil
}

// tlsConfig is the listener's: TLS 1.2 at least (Go negotiates 1.3 with
// every client that offers it), Go's default cipher suites.
func (c *caLeafCert) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return c.get() },
	}
}
