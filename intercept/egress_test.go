package intercept_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentvault/agentvault/intercept"
)

// egressProxy is a real upstream proxy on loopback (HTTP CONNECT or SOCKS5)
// that records the credentials and targets it was given and can be killed.
type egressProxy struct {
	l       net.Listener
	scheme  string
	tunnels atomic.Int64
	mu      sync.Mutex
	auths   []string // Proxy-Authorization values, or "user:pass" for SOCKS5
	targets []string
	conns   []net.Conn
}

func startEgressProxy(t *testing.T, scheme string) *egressProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &egressProxy{l: l, scheme: scheme}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, c)
			p.mu.Unlock()
			go p.serve(c)
		}
	}()
	t.Cleanup(p.kill)
	return p
}

// kill closes the listener and every connection, as a crashed proxy does.
func (p *egressProxy) kill() {
	p.l.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

func (p *egressProxy) record(auth, target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.auths = append(p.auths, auth)
	p.targets = append(p.targets, target)
}

func (p *egressProxy) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	var target string
	if p.scheme == "socks5" {
		var hdr [2]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return
		}
		methods := make([]byte, hdr[1])
		io.ReadFull(br, methods)
		auth := ""
		if strings.IndexByte(string(methods), 2) >= 0 {
			c.Write([]byte{5, 2})
			var v [2]byte
			io.ReadFull(br, v[:])
			u := make([]byte, v[1])
			io.ReadFull(br, u)
			var pl [1]byte
			io.ReadFull(br, pl[:])
			pw := make([]byte, pl[0])
			io.ReadFull(br, pw)
			auth = string(u) + ":" + string(pw)
			c.Write([]byte{1, 0})
		} else {
			c.Write([]byte{5, 0})
		}
		var req [4]byte
		if _, err := io.ReadFull(br, req[:]); err != nil {
			return
		}
		var host string
		switch req[3] {
		case 1:
			var a [4]byte
			io.ReadFull(br, a[:])
			host = net.IP(a[:]).String()
		case 4:
			var a [16]byte
			io.ReadFull(br, a[:])
			host = net.IP(a[:]).String()
		default: // a name: this test proxy wants vetted addresses only
			c.Write([]byte{5, 8, 0, 1, 0, 0, 0, 0, 0, 0})
			return
		}
		var port [2]byte
		io.ReadFull(br, port[:])
		target = net.JoinHostPort(host, itoa(int(binary.BigEndian.Uint16(port[:]))))
		p.record(auth, target)
		c.Write([]byte{5, 0, 0, 1, 127, 0, 0, 1, 0, 0})
	} else {
		req, err := http.ReadRequest(br)
		if err != nil || req.Method != http.MethodConnect {
			return
		}
		target = req.Host
		p.record(req.Header.Get("Proxy-Authorization"), target)
		io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	}
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, up)
	p.mu.Unlock()
	p.tunnels.Add(1)
	defer up.Close()
	go func() { io.Copy(up, br); up.Close() }()
	io.Copy(c, up)
}

func itoa(n int) string { return fmtInt(n) }

func fmtInt(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

func TestEgress_ThroughUpstreamProxy(t *testing.T) {
	for _, scheme := range []string{"http", "socks5"} {
		t.Run(scheme, func(t *testing.T) {
			ep := startEgressProxy(t, scheme)
			e := startProxy(t, func(c *intercept.Config) {
				c.UpstreamProxy = &intercept.UpstreamProxy{Scheme: scheme, Addr: ep.l.Addr().String(), Username: "egress-user", Password: "egress-pass-7Q"}
			})
			up := startUpstream(t, e.upCA, nil)
			sess, pw := e.session()
			resp, err := e.client(sess, pw, false).Get(hostURL(up, "shop.test", "/"))
			if err != nil {
				t.Fatal(err)
			}
			if body := readAll(t, resp.Body); resp.StatusCode != 200 || body != "ok" {
				t.Fatalf("got %d %q", resp.StatusCode, body)
			}
			if ep.tunnels.Load() == 0 {
				t.Fatal("the request did not go through the upstream proxy")
			}
			ep.mu.Lock()
			auth, target := ep.auths[0], ep.targets[0]
			ep.mu.Unlock()
			if !strings.HasPrefix(target, "127.0.0.1:") {
				t.Fatalf("the proxy was asked for %q, not the vetted address", target)
			}
			if want := "egress-user:egress-pass-7Q"; scheme == "socks5" && auth != want || scheme == "http" && auth != "Basic ZWdyZXNzLXVzZXI6ZWdyZXNzLXBhc3MtN1E=" {
				t.Fatalf("upstream proxy got credentials %q", auth)
			}
			h := up.last().Header
			for k, vs := range h {
				for _, v := range vs {
					if strings.Contains(v, "ZWdyZXNz") || strings.Contains(v, "egress-pass") {
						t.Fatalf("site got the proxy's credentials in %s", k)
					}
				}
			}
			if strings.Contains(e.logs.String(), "egress-pass") {
				t.Fatal("a log line holds the upstream proxy's password")
			}
		})
	}
}

func TestEgress_ProxyDownIsEgressUnavailable(t *testing.T) {
	ep := startEgressProxy(t, "http")
	ep.kill()
	e := startProxy(t, func(c *intercept.Config) {
		c.UpstreamProxy = &intercept.UpstreamProxy{Scheme: "http", Addr: ep.l.Addr().String()}
	})
	up := startUpstream(t, e.upCA, nil)
	sess, pw := e.session()
	resp, err := e.client(sess, pw, false).Get(hostURL(up, "shop.test", "/"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if codeOf(resp) != "egress_unavailable" || resp.StatusCode != 503 {
		t.Fatalf("got %d %q, want 503 egress_unavailable", resp.StatusCode, codeOf(resp))
	}
	if up.count() != 0 {
		t.Fatal("the site was reached around the dead upstream proxy")
	}
}

func TestEgress_ProxyDiesMidRequestIsEgressLost(t *testing.T) {
	ep := startEgressProxy(t, "http")
	e := startProxy(t, func(c *intercept.Config) {
		c.UpstreamProxy = &intercept.UpstreamProxy{Scheme: "http", Addr: ep.l.Addr().String()}
	})
	arrived := make(chan struct{})
	release := make(chan struct{})
	up := startUpstream(t, e.upCA, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		select {
		case <-release:
		case <-time.After(30 * time.Second):
		}
	})
	t.Cleanup(func() { close(release) })
	sess, pw := e.session()
	go func() {
		<-arrived
		ep.kill()
	}()
	resp, err := e.client(sess, pw, false).Get(hostURL(up, "shop.test", "/"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if codeOf(resp) != "egress_lost" || resp.StatusCode != 502 {
		t.Fatalf("got %d %q, want 502 egress_lost", resp.StatusCode, codeOf(resp))
	}
}

func TestP3_EgressPrivateDestinationRefusedBeforeUpstreamProxy(t *testing.T) {
	ep := startEgressProxy(t, "http")
	e := startProxy(t, func(c *intercept.Config) {
		c.UnsafeAllowPrivateRanges = false
		c.UpstreamProxy = &intercept.UpstreamProxy{Scheme: "http", Addr: ep.l.Addr().String()}
	})
	up := startUpstream(t, e.upCA, nil)
	sess, pw := e.session()
	_, err := e.client(sess, pw, false).Get(hostURL(up, "shop.test", "/"))
	if err == nil || !strings.Contains(e.logs.String(), "private_destination") {
		t.Fatalf("a private destination was not refused: %v", err)
	}
	ep.mu.Lock()
	n := len(ep.targets)
	ep.mu.Unlock()
	if n != 0 || up.count() != 0 {
		t.Fatalf("the upstream proxy was asked for %d tunnels to a private destination", n)
	}
}

// TestSeed004_EgressLostMidBody: the upstream proxy dies after the site's
// answer began (headers and part of the body sent). The client must see a
// broken answer, never a short one that reads as whole: over HTTP/1.1 the
// connection ends without the last chunk or short of Content-Length, over
// h2 the stream is reset. The session is then lost: the proxy says so
// (EgressLost, which proxyd reports to mcpd), and refuses its next request
// with egress_lost without reaching the site.
func TestSeed004_EgressLostMidBody(t *testing.T) {
	// A sized answer up to 256 KiB is read whole before it goes on (to
	// scrub it), so its loss is refused as a whole answer: 502 egress_lost.
	// A longer one, or one of unknown length, is streamed and then broken.
	// The streamed halves are longer than what the proxy buffers before
	// it writes to the client (32 KiB), so the client has the headers and
	// the first bytes before the upstream proxy dies.
	// "h1-buffered": the site's headers and first bytes are still in the
	// proxy's HTTP/1.1 buffer when the drop comes (the proxy logged the
	// request as forwarded, nothing reached the client): the client gets
	// 502 egress_lost rather than an empty reply.
	const small, large = 4800, 300 << 10
	for _, tc := range []struct {
		name      string
		h2, sized bool
		half      int
	}{
		{"h1-chunked", false, false, large}, {"h1-sized-small", false, true, small}, {"h1-sized-large", false, true, large},
		{"h1-buffered", false, false, small},
		{"h2-chunked", true, false, large}, {"h2-sized-small", true, true, small}, {"h2-sized-large", true, true, large},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := startEgressProxy(t, "http")
			e := startProxy(t, func(c *intercept.Config) {
				c.UpstreamProxy = &intercept.UpstreamProxy{Scheme: "http", Addr: ep.l.Addr().String()}
			})
			half := strings.Repeat("first half of the page. ", tc.half/24)
			began := make(chan struct{})
			release := make(chan struct{})
			up := startUpstream(t, e.upCA, func(w http.ResponseWriter, r *http.Request) {
				if tc.sized {
					w.Header().Set("Content-Length", itoa(2*len(half)))
				}
				io.WriteString(w, half)
				w.(http.Flusher).Flush()
				close(began)
				select { // the rest never comes: the proxy dies first
				case <-release:
				case <-time.After(30 * time.Second):
				}
			})
			t.Cleanup(func() { close(release) })
			sess, pw := e.session()
			if tc.half == small {
				go func() {
					<-began
					deadline := time.Now().Add(10 * time.Second)
					for !tc.sized && !strings.Contains(e.logs.String(), `"decision":"forwarded"`) && time.Now().Before(deadline) {
						time.Sleep(5 * time.Millisecond)
					}
					ep.kill()
				}()
			}
			resp, err := e.client(sess, pw, tc.h2).Get(hostURL(up, "shop.test", "/page"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.half == small {
				// Refused whole (502 egress_lost), or cut short.
				body, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 && rerr == nil {
					t.Fatalf("the answer cut by the upstream proxy read as whole (%d bytes of %d)", len(body), 2*len(half))
				}
				if resp.StatusCode != 200 && (codeOf(resp) != "egress_lost" || resp.StatusCode != 502) {
					t.Fatalf("got %d %q, want 502 egress_lost", resp.StatusCode, codeOf(resp))
				}
			} else {
				if resp.StatusCode != 200 || tc.h2 != (resp.ProtoMajor == 2) {
					t.Fatalf("got %d %q over %s, want the site's 200", resp.StatusCode, codeOf(resp), resp.Proto)
				}
				first := make([]byte, 1024)
				if _, err := io.ReadFull(resp.Body, first); err != nil {
					t.Fatal(err)
				}
				<-began
				ep.kill()
				rest, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				if rerr == nil {
					t.Fatalf("the answer cut by the upstream proxy read as whole (%d bytes of %d)", len(first)+len(rest), 2*len(half))
				}
			}
			deadline := time.Now().Add(10 * time.Second)
			for !e.srv.EgressLost(sess.ID) {
				if time.Now().After(deadline) {
					t.Fatal("the session was not marked lost after its egress dropped mid-body")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if !strings.Contains(e.logs.String(), "session egress lost") {
				t.Fatal("no log line says the session's egress was lost")
			}
			n := up.count()
			resp, err = e.client(sess, pw, tc.h2).Get(hostURL(up, "shop.test", "/next"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if codeOf(resp) != "egress_lost" || resp.StatusCode != 502 {
				t.Fatalf("next request: got %d %q, want 502 egress_lost", resp.StatusCode, codeOf(resp))
			}
			if up.count() != n {
				t.Fatal("a request of a lost session reached the site")
			}
			other, opw := e.session()
			if e.srv.EgressLost(other.ID) {
				t.Fatal("another session was marked lost")
			}
			_ = opw
		})
	}
}
