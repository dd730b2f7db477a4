package intercept_test

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault/intercept"
)

func TestP7_HTTP2TerminatedOnBothLegs(t *testing.T) {
	f := newSubFixture(t, true, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "proto=%s", r.Proto)
	})
	req, _ := http.NewRequest("POST", f.url("/pay"), strings.NewReader("cc="+f.numSI))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("browser↔proxy spoke %s", resp.Proto)
	}
	if body != "proto=HTTP/2.0" {
		t.Fatalf("proxy↔site spoke %q", body)
	}
	// The stream went through substitution, not a frame relay.
	if got := f.up.last(); string(got.Body) != "cc="+f.number {
		t.Fatal("h2 request not substituted")
	}
	if !strings.Contains(f.e.logs.String(), `"proto":"HTTP/2.0"`) || !strings.Contains(f.e.logs.String(), `"decision":"substituted"`) {
		t.Fatal("h2 request did not go through the proxy's request path")
	}
}

func TestP14_TunnelCapAndSlowHeaders(t *testing.T) {
	e := startProxy(t, func(c *intercept.Config) {
		c.MaxTunnels = 2
		c.ReadHeaderTimeout = 300 * time.Millisecond
	})
	up := startUpstream(t, e.upCA, nil)
	s, pw := e.session()
	h := "shop.test:" + up.port()
	a, err := e.tlsTunnel(t, s, pw, h, "shop.test")
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.tlsTunnel(t, s, pw, h, "shop.test")
	if err != nil {
		t.Fatal(err)
	}
	_, _, resp := e.connect(t, s, pw, h)
	if resp.StatusCode != http.StatusTooManyRequests || codeOf(resp) != "too_many_tunnels" {
		t.Fatalf("third tunnel: %d %s", resp.StatusCode, codeOf(resp))
	}
	// Slow headers: half a request line, then nothing. The proxy must cut
	// the tunnel off (the read ends; no assertion on how long it took).
	_, _ = io.WriteString(a, "GET / HTTP/1.1\r\nHost: ")
	_ = a.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 1)
	if _, err := a.Read(buf); err == nil {
		// A 4xx answer is fine as long as the connection then closes.
		_, err = io.ReadAll(a)
		if err != nil && strings.Contains(err.Error(), "timeout") {
			t.Fatal("slow-header connection was not closed")
		}
	} else if strings.Contains(err.Error(), "timeout") {
		t.Fatal("slow-header connection was not closed")
	}
	a.Close()
	b.Close()
	// The slots free up again.
	waitFor(t, func() bool {
		_, _, r := e.connect(t, s, pw, h)
		return r.StatusCode == 200
	})
}

func TestP14_GoroutinesReturnToBaseline(t *testing.T) {
	e := startProxy(t, nil)
	up := startUpstream(t, e.upCA, nil)
	s, pw := e.session()
	base := runtime.NumGoroutine()
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	// A client's transport may finish a dial after the load (a request it
	// dialed for was served on another connection) and keep that connection
	// idle; that connection is the client's, so the wait closes idle
	// connections on every client each time it looks.
	var clients []*http.Client
	closeIdle := func() {
		for _, c := range clients {
			c.CloseIdleConnections()
		}
	}
	for round := 0; round < 3; round++ {
		for _, h2 := range []bool{false, true} {
			c := e.client(s, pw, h2)
			clients = append(clients, c)
			done := make(chan error, 20)
			for i := 0; i < 20; i++ {
				go func() {
					resp, err := c.Get(hostURL(up, "shop.test", "/"))
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
					done <- err
				}()
			}
			for i := 0; i < 20; i++ {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			c.CloseIdleConnections()
		}
	}
	waitFor(t, func() bool {
		closeIdle()
		e.srv.UpstreamTransport().CloseIdleConnections()
		up.CloseClientConnections()
		return runtime.NumGoroutine() <= base+5
	})
	// Memory returns too: the live heap after the load stays within a loose
	// bound of where it started (TLS session state, pools).
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grow := int64(after.HeapInuse) - int64(before.HeapInuse); grow > 32<<20 {
		t.Fatalf("heap grew by %d bytes after the load", grow)
	}
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			n := runtime.Stack(buf, true)
			t.Fatalf("condition never held; goroutines:\n%s", buf[:n])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestP15_MetricsStayBounded(t *testing.T) {
	f := newSubFixture(t, false, nil)
	// Hostile variety: many hosts, paths, methods, tokens, refusals.
	methods := []string{"GET", "POST", "PROPFIND", "X-CUSTOM", "DELETE"}
	for i := 0; i < 60; i++ {
		host := []string{"shop.test", "evil.test", "www.example.com"}[i%3]
		req, _ := http.NewRequest(methods[i%len(methods)], hostURL(f.up, host, fmt.Sprintf("/p%d?q=%s", i, f.numSI)), strings.NewReader("x="+tok("card", fmt.Sprint(i), "number")))
		resp, err := f.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
	}
	_, _, _ = f.e.connect(t, f.s, "badpw", "shop.test:1")
	m := metricsText(t, f.e)
	series := 0
	for _, line := range strings.Split(m, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		series++
		for _, bad := range []string{"shop.test", "evil.test", "example.com", f.numSI, f.number, "av_", f.s.ID, "PROPFIND", "X-CUSTOM", "/p"} {
			if strings.Contains(line, bad) {
				t.Fatalf("metric line holds a client-controlled value: %s", line)
			}
		}
	}
	// Fixed names × closed label sets (decisions 3, kinds ≤ 5, codes ≤ 22) plus histograms.
	if series > 120 {
		t.Fatalf("%d series after a hostile run", series)
	}
}

func TestP14_IdleTunnelTimesOut(t *testing.T) {
	e := startProxy(t, func(c *intercept.Config) { c.IdleTimeout = 300 * time.Millisecond })
	up := startUpstream(t, e.upCA, nil)
	s, pw := e.session()
	h := "shop.test:" + up.port()
	tc, br := e.getOverTunnel(t, s, pw, h)
	// Then stay silent: the proxy must close the idle tunnel on its own.
	_ = tc.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := br.ReadByte(); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("idle tunnel still open: %v", err)
	}
	waitFor(t, func() bool { return strings.Contains(metricsText(t, e), "agentvault_proxy_open_tunnels 0") })
}

// TestP14_IdleTunnelHoldsNoConnectHandler: an idle tunnel is served on a
// goroutine of its own; the CONNECT's net/http handler has returned, so
// its connection state (reader, writer, request) and stack are not kept
// for the tunnel's life.
func TestP14_IdleTunnelHoldsNoConnectHandler(t *testing.T) {
	e := startProxy(t, nil)
	up := startUpstream(t, e.upCA, nil)
	s, pw := e.session()
	h := "shop.test:" + up.port()
	for range 3 {
		e.getOverTunnel(t, s, pw, h)
	}
	stacks := func() string {
		buf := make([]byte, 1<<20)
		return string(buf[:runtime.Stack(buf, true)])
	}
	waitFor(t, func() bool { return strings.Count(stacks(), "intercept.(*Server).serveTunnel") >= 3 })
	for _, g := range strings.Split(stacks(), "\n\n") {
		if strings.Contains(g, "intercept.(*Server).serveTunnel") && strings.Contains(g, "net/http.(*conn).serve") {
			t.Fatalf("an idle tunnel runs inside the CONNECT handler:\n%s", g)
		}
	}
}
