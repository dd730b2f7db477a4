package proxyd_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/internal/leakcheck"
	"github.com/agentvault/agentvault/proxyd"
)

// connectProxy is a small HTTP CONNECT proxy on loopback standing for the
// owner's residential egress: it records what it was asked and the
// Proxy-Authorization it got, and tunnels to the target.
type connectProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	asked []string
	auth  []string
	conns []net.Conn
}

// shutdown stops the proxy: no new connection, and every tunnel cut.
func (p *connectProxy) shutdown() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

func startConnectProxy(t *testing.T) *connectProxy {
	t.Helper()
	return startConnectProxyAt(t, "127.0.0.1:0")
}

// startConnectProxyAt is startConnectProxy listening on addr.
func startConnectProxyAt(t *testing.T, addr string) *connectProxy {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &connectProxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, c)
			p.mu.Unlock()
			go p.serve(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return p
}

func (p *connectProxy) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		return
	}
	p.mu.Lock()
	p.asked = append(p.asked, req.Host)
	p.auth = append(p.auth, req.Header.Get("Proxy-Authorization"))
	p.mu.Unlock()
	up, err := net.Dial("tcp", req.Host)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	defer up.Close()
	io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	go io.Copy(up, br)
	io.Copy(c, up)
}

func (p *connectProxy) seen() (asked, auth []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.asked...), append([]string(nil), p.auth...)
}

// TestSeed004_ResidentialEgressFromConfig: egress.upstream_proxy in proxyd's
// config sends every upstream connection through the owner's proxy, with
// the credentials from their file going to that proxy and nowhere else;
// with the proxy gone, a request is refused with egress_unavailable.
func TestSeed004_ResidentialEgressFromConfig(t *testing.T) {
	const user, pass = "egress-user", "Egress-Pass-9f3c1a7e2b"
	up, roots := tlsUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != "" {
			w.WriteHeader(http.StatusTeapot)
		}
		io.WriteString(w, "hello through the egress")
	})
	ep := startConnectProxy(t)
	creds := filepath.Join(t.TempDir(), "egress-credentials")
	if err := os.WriteFile(creds, []byte(user+":"+pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, logs := startMain(t, roots, func(c *proxyd.Config) {
		c.Egress.UpstreamProxy = "http://" + ep.ln.Addr().String()
		c.Egress.UpstreamProxyCredentialsFile = creds
	})
	ctx := context.Background()
	c := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	s, err := c.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := proxyClient(m, s).Get(up.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "hello through the egress" {
		t.Fatalf("through the egress: %d %q", resp.StatusCode, body)
	}
	asked, auth := ep.seen()
	upHost := strings.TrimPrefix(up.URL, "https://")
	if len(asked) == 0 || asked[0] != upHost {
		t.Fatalf("the egress proxy was asked for %v, want %s", asked, upHost)
	}
	if want := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass)); auth[0] != want {
		t.Fatalf("the egress proxy got credentials %q", auth[0])
	}

	// The egress proxy goes away: the next request is refused with the
	// seed's code, and nothing reaches the site.
	ep.shutdown()
	resp, err = proxyClient(m, s).Get(up.URL + "/again")
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("X-Agentvault-Code") != "egress_unavailable" && !strings.Contains(string(b), "egress_unavailable") {
			t.Fatalf("with the egress down: %d %q", resp.StatusCode, b)
		}
	} else if !strings.Contains(err.Error(), "503") {
		t.Fatalf("with the egress down: %v", err)
	}
	l := leakcheck.New(leakcheck.Value("egress proxy password", pass))
	l.Logs(t, "proxyd logs", []byte(logs.String()))
}

// TestP17_EgressProxyConfig: the egress proxy's URL and credentials file are
// checked at start, with a message that says what to write.
func TestP17_EgressProxyConfig(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open-creds")
	if err := os.WriteFile(open, []byte("u:p\n"), 0o644); err != nil {
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
	for _, c := range []struct{ name, body, want string }{
		{"http", "egress:\n  upstream_proxy: http://10.0.0.9:3128\n", ""},
		{"socks5", "egress:\n  upstream_proxy: socks5://egress.internal:1080\n", ""},
		{"other scheme", "egress:\n  upstream_proxy: https://10.0.0.9:3128\n", "is not http or socks5"},
		{"credentials in the URL", "egress:\n  upstream_proxy: http://u:p@10.0.0.9:3128\n", "put user:password in upstream_proxy_credentials_file"},
		{"no port", "egress:\n  upstream_proxy: http://10.0.0.9\n", "host and port are required"},
		{"a path", "egress:\n  upstream_proxy: http://10.0.0.9:3128/x\n", "path"},
		{"credentials without a proxy", "egress:\n  upstream_proxy_credentials_file: " + open + "\n", "without egress.upstream_proxy"},
	} {
		err := load(c.body)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
	// A credentials file others can read stops the start.
	m := proxyd.NewMain()
	m.Config.DataDir = t.TempDir()
	m.Config.Listen = proxyd.ListenConfig{Proxy: "127.0.0.1:0", Control: "127.0.0.1:0", Admin: "127.0.0.1:0"}
	m.Config.Egress.UpstreamProxy = "http://127.0.0.1:9"
	m.Config.Egress.UpstreamProxyCredentialsFile = open
	if err := m.Open(context.Background()); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("credentials readable by others: %v", err)
	}
	m.Close()
}

// TestSeed004_EgressLostReportedToMcpd: with an upstream egress configured,
// the control API's session answer says the session is a residential
// egress one (mcpd then opens http:// as https://). When the egress proxy
// dies after the site's answer began, the browser's answer breaks, the
// session's report says egressLost (mcpd refuses every later call on it but
// the report and the close), the proxy refuses the session's next request
// with egress_lost, and closing the session still works.
func TestSeed004_EgressLostReportedToMcpd(t *testing.T) {
	half := strings.Repeat("the first half of a long page. ", 10<<10)
	began := make(chan struct{}, 1)
	release := make(chan struct{})
	up, roots := tlsUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, half)
		w.(http.Flusher).Flush()
		began <- struct{}{}
		select { // the rest never comes: the egress dies first
		case <-release:
		case <-time.After(30 * time.Second):
		}
	})
	t.Cleanup(func() { close(release) }) // before the upstream's Close waits for the handler
	ep := startConnectProxy(t)
	m, logs := startMain(t, roots, func(c *proxyd.Config) {
		c.Egress.UpstreamProxy = "http://" + ep.ln.Addr().String()
	})
	ctx := context.Background()
	c := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	s, err := c.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	if !s.ResidentialEgress {
		t.Fatal("the session answer does not say the session goes through the residential egress")
	}
	// HTTPS only: what the browser itself asks for over http:// (a link,
	// a form, a redirect's target) is refused, and the egress never asked.
	resp, err := proxyClient(m, s).Get("http://" + strings.TrimPrefix(up.URL, "https://") + "/plain")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if code := resp.Header.Get("X-Agentvault-Code"); code != "insecure_site" {
		t.Fatalf("plain http in a residential egress session: %d %q", resp.StatusCode, code)
	}
	if asked, _ := ep.seen(); len(asked) != 0 {
		t.Fatalf("the egress proxy was asked for %v for a plain http request", asked)
	}
	resp, err = proxyClient(m, s).Get(up.URL + "/page")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("before the drop: %d", resp.StatusCode)
	}
	first := make([]byte, 1024)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	if rep, err := c.Report(ctx, s.ID); err != nil || rep.EgressLost {
		t.Fatalf("report before the drop: %+v %v", rep, err)
	}
	<-began
	ep.shutdown()
	if rest, err := io.ReadAll(resp.Body); err == nil {
		t.Fatalf("the answer the egress dropped read as whole (%d bytes)", len(first)+len(rest))
	}
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rep, err := c.Report(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rep.EgressLost {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the report does not say the session's egress was lost")
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err = proxyClient(m, s).Get(up.URL + "/next")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("X-Agentvault-Code") != "egress_lost" {
		t.Fatalf("a lost session's next request: %d %q", resp.StatusCode, resp.Header.Get("X-Agentvault-Code"))
	}
	if asked, _ := ep.seen(); len(asked) != 1 {
		t.Fatalf("the egress proxy was asked for %d tunnels, want the first only", len(asked))
	}
	if _, err := c.CloseSession(ctx, s.ID); err != nil {
		t.Fatalf("closing a lost session: %v", err)
	}
	if !strings.Contains(logs.String(), "session egress lost") {
		t.Fatal("no log line says the session's egress was lost")
	}
}

// TestSeed004_EgressUnavailableRefusesFirstSession: with egress.required,
// proxyd starts, and while its upstream egress proxy is not answering the
// control API refuses to create a session with egress_unavailable (503)
// and a Retry-After in seconds, over its real listener, and creates
// nothing (the key's one-session limit is still free afterwards); once the
// proxy answers a session starts, and once it stops new sessions are
// refused again. Without any upstream proxy the refusal says so and names
// a longer wait.
func TestSeed004_EgressUnavailableRefusesFirstSession(t *testing.T) {
	// An address where no proxy listens: taken, then let go.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	m, logs := startMain(t, "", func(c *proxyd.Config) {
		c.Egress.UpstreamProxy = "http://" + addr
		c.Egress.Required = true
		c.Limits.MaxSessionsPerKey = 1
	})
	ctx := context.Background()
	c := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)

	// The wire: 503, the seed's code and a Retry-After in whole seconds.
	req, _ := http.NewRequest(http.MethodPost, "http://"+m.ControlAddr.String()+"/v1/sessions", strings.NewReader(`{"apiKey":"`+m.APIKey+`"}`))
	req.Header.Set("Authorization", "Bearer "+m.ControlToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"code":"egress_unavailable"`) {
		t.Fatalf("create-session with the required egress down: %d %s", resp.StatusCode, body)
	}
	if ra := resp.Header.Get("Retry-After"); ra != "10" {
		t.Fatalf("Retry-After %q, want 10", ra)
	}
	if !strings.Contains(string(body), "No session was started") || !strings.Contains(string(body), "not answering") {
		t.Fatalf("the refusal does not say what happened: %s", body)
	}
	// The Go client (mcpd's) keeps the wait.
	_, err = c.CreateSession(ctx, m.APIKey)
	var ra interface{ RetryAfterDuration() time.Duration }
	if agentvault.ErrorCode(err) != agentvault.CodeEgressUnavailable || !errors.As(err, &ra) || ra.RetryAfterDuration() != 10*time.Second {
		t.Fatalf("client: %v", err)
	}

	// A key that is not valid is told so, not the deployment's state.
	if _, err := c.CreateSession(ctx, "avk_not_a_key_of_this_deployment"); agentvault.ErrorCode(err) != agentvault.CodeInvalidAPIKey {
		t.Fatalf("an invalid key with the egress down: %v", err)
	}

	// The proxy comes back: within the probe's freshness a session starts,
	// the key's only one, so the refusals created none.
	ep := startConnectProxyAt(t, addr)
	deadline := time.Now().Add(30 * time.Second)
	var s control.CreateSessionResponse
	for {
		s, err = c.CreateSession(ctx, m.APIKey)
		if err == nil {
			break
		}
		if agentvault.ErrorCode(err) != agentvault.CodeEgressUnavailable || time.Now().After(deadline) {
			t.Fatalf("create-session once the egress answers: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !s.ResidentialEgress {
		t.Fatal("the session answer does not say residential egress")
	}
	if asked, _ := ep.seen(); len(asked) != 0 {
		t.Fatalf("the health look asked the egress proxy for tunnels: %v", asked)
	}
	if !strings.Contains(logs.String(), "the upstream egress proxy is not answering") {
		t.Fatal("no log line says the egress proxy was not answering")
	}
	if _, err := c.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}

	// The proxy stops: once the last look's answer is stale, new sessions
	// are refused again.
	ep.shutdown()
	deadline = time.Now().Add(30 * time.Second)
	for {
		s, err = c.CreateSession(ctx, m.APIKey)
		if err == nil {
			if _, err := c.CloseSession(ctx, s.ID); err != nil {
				t.Fatal(err)
			}
		} else if agentvault.ErrorCode(err) == agentvault.CodeEgressUnavailable {
			break
		} else {
			t.Fatalf("create-session after the egress stopped: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("new sessions still start after the egress proxy stopped")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Required with no upstream proxy at all: proxyd starts, and every new
	// session is refused, naming the owner's fix and a longer wait.
	m2, _ := startMain(t, "", func(c *proxyd.Config) { c.Egress.Required = true })
	_, err = control.NewClient("http://"+m2.ControlAddr.String(), m2.ControlToken, nil).CreateSession(ctx, m2.APIKey)
	if agentvault.ErrorCode(err) != agentvault.CodeEgressUnavailable || !errors.As(err, &ra) || ra.RetryAfterDuration() != 5*time.Minute ||
		!strings.Contains(agentvault.ErrorMessage(err), "egress.upstream_proxy") {
		t.Fatalf("required without an upstream proxy: %v", err)
	}
}
