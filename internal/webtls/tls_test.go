package webtls_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/agentvault/agentvault/internal/webtls"
)

func TestServeTLS(t *testing.T) {
	cert, err := webtls.SelfSigned([]string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- webtls.Serve(ctx, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }),
			webtls.TLSConfig{Certificate: &cert})
	}()
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	resp, err := client.Get("https://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok" || resp.TLS == nil || resp.ProtoMajor != 2 {
		t.Fatalf("served %q over %s", b, resp.Proto)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

// TestServeLocalCertificate: with no domain and no certificate, Serve
// issues its own for the configured hosts.
func TestServeLocalCertificate(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- webtls.Serve(ctx, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), webtls.TLSConfig{Hosts: []string{"127.0.0.1", "dash.local"}})
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true}) // inspecting the self-issued leaf
	if err != nil {
		t.Fatal(err)
	}
	leaf := conn.ConnectionState().PeerCertificates[0]
	conn.Close()
	if err := leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if err := leaf.VerifyHostname("dash.local"); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// ACME needs somewhere to keep its certificates.
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln2.Close()
	if err := webtls.Serve(context.Background(), ln2, http.NotFoundHandler(), webtls.TLSConfig{Domain: "dash.example.com"}); err == nil {
		t.Fatal("ACME without a data directory started")
	}
}

func TestLocalRootCovers(t *testing.T) {
	for h, want := range map[string]bool{"127.0.0.1": true, "10.1.2.3": true, "::1": true, "localhost": true, "agent.lan": true,
		"box.home.arpa": true, "8.8.8.8": false, "agent.example.org": false, "lan": true, "evil-lan.com": false} {
		if got := webtls.LocalRootCovers(h); got != want {
			t.Errorf("LocalRootCovers(%q) = %v", h, got)
		}
	}
}
