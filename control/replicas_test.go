package control

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
)

// TestClientMovesToAReplicaThatAnswers: with several proxyd replicas
// listed, a replica that cannot be reached is skipped and the one that
// answered is kept for the next requests; a request that may have reached
// a replica (the connection broke after it was sent) is not sent to
// another unless it only reads.
func TestClientMovesToAReplicaThatAnswers(t *testing.T) {
	// A port nobody listens on: the dial is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()

	var liveHits, brokenHits atomic.Int32
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		liveHits.Add(1)
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"s_1","proxyUrl":"http://127.0.0.1:1","proxyUser":"s_1","proxyPassword":"p"}`))
	}))
	defer live.Close()
	// A replica that takes the request and dies before answering.
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		brokenHits.Add(1)
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	}))
	defer broken.Close()

	c := NewClient(dead+", "+live.URL+"/", "tok", nil)
	ctx := context.Background()
	if _, err := c.CreateSession(ctx, "avk_x"); err != nil {
		t.Fatalf("first replica down: %v", err)
	}
	if c.base() != live.URL {
		t.Fatalf("the client did not keep the replica that answered: %s", c.base())
	}
	if _, err := c.CreateSession(ctx, "avk_x"); err != nil || liveHits.Load() != 2 {
		t.Fatalf("second request: %v (%d hits)", err, liveHits.Load())
	}

	// A POST that reached the broken replica is not retried elsewhere.
	c = NewClient(broken.URL+","+live.URL, "tok", nil)
	liveHits.Store(0)
	_, err = c.CreateSession(ctx, "avk_x")
	if err == nil || agentvault.ErrorCode(err) != agentvault.CodeUpstream || brokenHits.Load() != 1 || liveHits.Load() != 0 {
		t.Fatalf("a POST that may have landed was sent again: err=%v broken=%d live=%d", err, brokenHits.Load(), liveHits.Load())
	}
	// A read is.
	var out map[string]any
	if err := c.do(ctx, http.MethodGet, SessionsPath, nil, &out); err != nil || liveHits.Load() != 1 {
		t.Fatalf("a GET was not retried on the next replica: %v (%d)", err, liveHits.Load())
	}
}

// TestClientMovesOnAFailedHandshake: a replica whose certificate the
// client does not trust never saw the request, so the client goes on to
// the next one, even for a write.
func TestClientMovesOnAFailedHandshake(t *testing.T) {
	var untrustedHits, liveHits atomic.Int32
	// httptest's TLS servers share one certificate: this one gets its own.
	untrusted := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { untrustedHits.Add(1) }))
	untrusted.TLS = &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}}
	untrusted.StartTLS()
	defer untrusted.Close()
	live := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		liveHits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"s_1","proxyUrl":"http://127.0.0.1:1","proxyUser":"s_1","proxyPassword":"p"}`))
	}))
	defer live.Close()
	pool := x509.NewCertPool()
	pool.AddCert(live.Certificate())
	hc := &http.Client{Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: pool}}}
	c := NewClient(untrusted.URL+","+live.URL, "tok", hc)
	if _, err := c.CreateSession(context.Background(), "avk_x"); err != nil {
		t.Fatalf("a write past a failed handshake: %v", err)
	}
	if untrustedHits.Load() != 0 || liveHits.Load() != 1 || c.base() != live.URL {
		t.Fatalf("hits: untrusted %d, live %d; now at %s", untrustedHits.Load(), liveHits.Load(), c.base())
	}
}

// selfSigned is a throwaway certificate for 127.0.0.1 nobody trusts.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
