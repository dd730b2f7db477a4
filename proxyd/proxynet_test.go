package proxyd_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/internal/webtls"
	"github.com/agentvault/agentvault/proxyd"
)

// TestP17_ProxyBeyondLoopbackIsAChoice: the proxy listener faces a network
// only when the config says so (listen.proxy_network), its TLS keys go
// together and name what a browser dials, and the proxy URL browsers are
// told matches the listener's scheme.
func TestP17_ProxyBeyondLoopbackIsAChoice(t *testing.T) {
	dir := t.TempDir()
	pemFile := filepath.Join(dir, "some.pem")
	if err := os.WriteFile(pemFile, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	load := func(body string) error {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := proxyd.LoadConfig(p)
		return err
	}
	for _, c := range []struct {
		name, body string
		want       string // "" accepted, else a part of the stable error
	}{
		{"loopback", "listen:\n  proxy: 127.0.0.1:7700\n", ""},
		{"localhost", "listen:\n  proxy: localhost:7700\n", ""},
		{"lan without the choice", "listen:\n  proxy: 10.0.0.5:7700\n",
			`config: listen.proxy must be a loopback address unless listen.proxy_network is true (docs/deploy.md: browsers on other machines), got "10.0.0.5:7700"`},
		{"every address without the choice", "listen:\n  proxy: 0.0.0.0:7700\n", "unless listen.proxy_network is true"},
		{"lan", "listen:\n  proxy: 10.0.0.5:7700\n  proxy_network: true\n", ""},
		{"every address, no proxy_url", "listen:\n  proxy: 0.0.0.0:7700\n  proxy_network: true\n", "set proxy_url to the address browsers on other machines dial"},
		{"every address with proxy_url", "listen:\n  proxy: 0.0.0.0:7700\n  proxy_network: true\nproxy_url: http://proxy.internal:7700\n", ""},
		{"every address, tls with a name", "listen:\n  proxy: \"[::]:7700\"\n  proxy_network: true\n  proxy_tls: true\n  proxy_names: [proxy.internal]\n", ""},
		{"every address, tls without names", "listen:\n  proxy: 0.0.0.0:7700\n  proxy_network: true\n  proxy_tls: true\n", "listen.proxy_names must name the hosts browsers dial"},
		{"tls on loopback", "listen:\n  proxy_tls: true\n", ""},
		{"names without tls", "listen:\n  proxy_names: [proxy.internal]\n", "are for listen.proxy_tls, which is false"},
		{"cert without tls", "listen:\n  proxy_cert_file: " + pemFile + "\n  proxy_key_file: " + pemFile + "\n", "are for listen.proxy_tls"},
		{"cert without key", "listen:\n  proxy_tls: true\n  proxy_cert_file: " + pemFile + "\n", "go together"},
		{"cert file missing", "listen:\n  proxy_tls: true\n  proxy_cert_file: /nonexistent/c.pem\n  proxy_key_file: " + pemFile + "\n", "is not readable"},
		{"cert with names", "listen:\n  proxy_tls: true\n  proxy_cert_file: " + pemFile + "\n  proxy_key_file: " + pemFile + "\n  proxy_names: [proxy.internal]\n", "names its own hosts"},
		{"owner cert, every address, proxy_url", "listen:\n  proxy: 0.0.0.0:7700\n  proxy_network: true\n  proxy_tls: true\n  proxy_cert_file: " + pemFile + "\n  proxy_key_file: " + pemFile + "\nproxy_url: https://proxy.example.com:7700\n", ""},
		{"owner cert, every address, no proxy_url", "listen:\n  proxy: 0.0.0.0:7700\n  proxy_network: true\n  proxy_tls: true\n  proxy_cert_file: " + pemFile + "\n  proxy_key_file: " + pemFile + "\n", "set proxy_url"},
		{"name with a port", "listen:\n  proxy_tls: true\n  proxy_names: [\"proxy.internal:7700\"]\n", "listen.proxy_names"},
		{"https proxy_url without tls", "proxy_url: https://proxy.internal:7700\n", "proxy_url must be an http:// URL"},
		{"http proxy_url with tls", "listen:\n  proxy_tls: true\nproxy_url: http://127.0.0.1:7700\n", "proxy_url must be an https:// URL"},
		{"proxy_url with credentials", "proxy_url: http://u:p@127.0.0.1:7700\n", "proxy_url must be"},
		{"no free failures", "listen:\n  proxy: 10.0.0.5:7700\n  proxy_network: true\nlimits:\n  proxy_auth_failures: 0\n", "limits.proxy_auth_failures must be at least 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := load(c.body)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (agentvault.ErrorCode(err) != agentvault.CodeInvalidInput || !strings.Contains(agentvault.ErrorMessage(err), c.want)):
				t.Fatalf("got %v, want an invalid_input error with %q", err, c.want)
			}
		})
	}
}

// proxyTLSConn dials proxyd's proxy listener over TLS, trusting only the
// deployment's CA (the session's caPEM), as a browser told the https://
// proxy URL does.
func proxyTLSConn(t *testing.T, s control.CreateSessionResponse) net.Conn {
	t.Helper()
	u, err := url.Parse(s.ProxyURL)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(s.CAPEM)) {
		t.Fatal("no CA in the session")
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", u.Host, &tls.Config{RootCAs: pool, ServerName: u.Hostname()})
	if err != nil {
		t.Fatalf("TLS to the proxy: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return c
}

// ask writes one raw request and reads the answer.
func ask(t *testing.T, c net.Conn, req string) *http.Response {
	t.Helper()
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read the proxy's answer: %v", err)
	}
	return resp
}

func basic(user, pass string) string {
	return "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass)) + "\r\n"
}

// TestP4_ProxyFacingTheNetwork runs proxyd with the proxy facing a network
// (listen.proxy_network) over TLS (listen.proxy_tls): the session's proxy
// URL is https://, a client that trusts only ca.pem goes through it with the
// session's credentials and reaches the site; everything else is refused
// with a clear answer and never reaches the site: plain text on the TLS
// port, no credentials (407), a plain-http request (insecure_site), a
// request that is not for a proxy (malformed_request), and, once one client
// spent its free wrong credentials, every CONNECT of that client (429
// rate_limited with a Retry-After), its right credentials included.
func TestP4_ProxyFacingTheNetwork(t *testing.T) {
	var hits atomic.Int64
	up, roots := tlsUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, "hello from the site")
	})
	m, _ := startMain(t, roots, func(c *proxyd.Config) {
		c.Listen.ProxyNetwork = true
		c.Listen.ProxyTLS = true
		c.Limits.ProxyAuthFailures = 3
	})
	ctx := context.Background()
	ctl := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	s, err := ctl.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	if want := "https://" + m.ProxyAddr.String(); s.ProxyURL != want {
		t.Fatalf("proxy URL %q, want %q", s.ProxyURL, want)
	}

	// A browser's way: the https:// proxy URL, ca.pem for both the proxy
	// and the site's MITM leaf.
	resp, err := proxyClient(m, s).Get(up.URL + "/")
	if err != nil {
		t.Fatalf("through the TLS proxy: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello from the site" {
		t.Fatalf("through the TLS proxy: %d %q", resp.StatusCode, body)
	}
	before := hits.Load()
	target := strings.TrimPrefix(up.URL, "https://")

	// Plain text on the TLS port: a refusal that says to use https://.
	raw, err := net.DialTimeout("tcp", m.ProxyAddr.String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(30 * time.Second))
	if r := ask(t, raw, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n"+basic(s.ProxyUser, s.ProxyPassword)+"\r\n"); r.StatusCode != http.StatusBadRequest ||
		r.Header.Get(agentvault.CodeHeader) != string(agentvault.CodeMalformedRequest) {
		t.Errorf("plain text to the TLS proxy: %d %q, want 400 malformed_request", r.StatusCode, r.Header.Get(agentvault.CodeHeader))
	} else if b, _ := io.ReadAll(r.Body); !strings.Contains(string(b), "https://") {
		t.Errorf("the refusal of plain text does not say to use https://: %s", b)
	}

	for _, c := range []struct {
		what, req string
		status    int
		code      agentvault.Code
	}{
		{"no credentials", "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n", http.StatusProxyAuthRequired, agentvault.CodeProxyAuth},
		{"plain-http proxying", "GET http://" + target + "/ HTTP/1.1\r\nHost: " + target + "\r\n" + basic(s.ProxyUser, s.ProxyPassword) + "\r\n",
			agentvault.HTTPStatus(agentvault.CodeInsecureSite), agentvault.CodeInsecureSite},
		{"not a proxy request", "GET / HTTP/1.1\r\nHost: " + m.ProxyAddr.String() + "\r\n\r\n", agentvault.HTTPStatus(agentvault.CodeMalformedRequest), agentvault.CodeMalformedRequest},
	} {
		r := ask(t, proxyTLSConn(t, s), c.req)
		if r.StatusCode != c.status || r.Header.Get(agentvault.CodeHeader) != string(c.code) {
			t.Errorf("%s: %d %q, want %d %q", c.what, r.StatusCode, r.Header.Get(agentvault.CodeHeader), c.status, c.code)
		}
	}

	connect := func(user, pass string) *http.Response {
		return ask(t, proxyTLSConn(t, s), "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n"+basic(user, pass)+"\r\n")
	}
	for i := range 3 {
		if r := connect(s.ProxyUser, "wrong"); r.StatusCode != http.StatusProxyAuthRequired {
			t.Fatalf("wrong credentials %d: status %d", i+1, r.StatusCode)
		}
	}
	r := connect(s.ProxyUser, s.ProxyPassword)
	if r.StatusCode != http.StatusTooManyRequests || r.Header.Get(agentvault.CodeHeader) != string(agentvault.CodeRateLimited) || r.Header.Get("Retry-After") == "" {
		t.Errorf("right credentials after 3 wrong ones: %d %q Retry-After %q, want 429 rate_limited with a Retry-After",
			r.StatusCode, r.Header.Get(agentvault.CodeHeader), r.Header.Get("Retry-After"))
	}
	if n := hits.Load() - before; n != 0 {
		t.Errorf("refused requests reached the site %d times", n)
	}
}

// TestProxyServesTheOwnersCertificate: with listen.proxy_cert_file and
// proxy_key_file the proxy listener presents the owner's certificate, and
// a client that trusts it (and the deployment's CA for the tunnel) goes
// through.
func TestProxyServesTheOwnersCertificate(t *testing.T) {
	own, err := webtls.SelfSigned([]string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "proxy.pem"), filepath.Join(dir, "proxy.key")
	der, err := x509.MarshalPKCS8PrivateKey(own.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: own.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	up, roots := tlsUpstream(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	m, _ := startMain(t, roots, func(c *proxyd.Config) {
		c.Listen.ProxyTLS = true
		c.Listen.ProxyCertFile, c.Listen.ProxyKeyFile = certFile, keyFile
	})
	s, err := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil).CreateSession(context.Background(), m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(s.CAPEM))
	pool.AddCert(own.Leaf)
	pu, _ := url.Parse(s.ProxyURL)
	pu.User = url.UserPassword(s.ProxyUser, s.ProxyPassword)
	var served []byte
	tc := &tls.Config{RootCAs: pool, VerifyConnection: func(cs tls.ConnectionState) error {
		if served == nil {
			served = cs.PeerCertificates[0].Raw // the first handshake is the proxy's
		}
		return nil
	}}
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: tc}}).Get(up.URL + "/")
	if err != nil {
		t.Fatalf("through the proxy with the owner's certificate: %v", err)
	}
	resp.Body.Close()
	if !bytes.Equal(served, own.Certificate[0]) {
		t.Error("the proxy did not present the owner's certificate")
	}
}
