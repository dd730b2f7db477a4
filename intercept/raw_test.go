package intercept_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault/broker"
)

// connect opens a raw CONNECT tunnel to authority and returns the
// connection after the proxy's answer, with that answer.
func (e *proxyEnv) connect(t testing.TB, s *broker.Session, pw, authority string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	auth := ""
	if s != nil {
		auth = "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(s.ID+":"+pw)) + "\r\n"
	}
	if _, err := io.WriteString(c, "CONNECT "+authority+" HTTP/1.1\r\nHost: "+authority+"\r\n"+auth+"\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	return c, br, resp
}

// tlsTunnel opens a CONNECT tunnel and a TLS session inside it with the
// given SNI, trusting the proxy CA, offering only HTTP/1.1.
func (e *proxyEnv) tlsTunnel(t testing.TB, s *broker.Session, pw, authority, sni string) (*tls.Conn, error) {
	t.Helper()
	c, _, resp := e.connect(t, s, pw, authority)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %d %s", authority, resp.StatusCode, codeOf(resp))
	}
	pool := x509.NewCertPool()
	pool.AddCert(e.ca.Certificate())
	tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: pool, NextProtos: []string{"http/1.1"}})
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	return tc, tc.Handshake()
}

// rawExchange writes raw bytes into a TLS tunnel and reads one response.
func rawExchange(t testing.TB, tc *tls.Conn, raw string) (*http.Response, *bufio.Reader) {
	t.Helper()
	if _, err := io.WriteString(tc, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(tc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	return resp, br
}

// getOverTunnel opens a TLS tunnel to authority as shop.test, sends one
// GET / and fails the test unless it is answered 200; it returns the
// tunnel, open and read to the end of that answer.
func (e *proxyEnv) getOverTunnel(t testing.TB, s *broker.Session, pw, authority string) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	tc, err := e.tlsTunnel(t, s, pw, authority, "shop.test")
	if err != nil {
		t.Fatal(err)
	}
	resp, br := rawExchange(t, tc, "GET / HTTP/1.1\r\nHost: "+authority+"\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("GET / over a tunnel to %s: %d %s", authority, resp.StatusCode, codeOf(resp))
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return tc, br
}

// closedAfter reports whether the server closed the connection after the
// response (reads hit EOF rather than more data or a timeout).
func closedAfter(resp *http.Response, br *bufio.Reader, tc *tls.Conn) bool {
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_ = tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := br.ReadByte()
	return err != nil && !strings.Contains(err.Error(), "timeout")
}
