package intercept_test

import (
	"bufio"
	"encoding/base64"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/intercept"
	"github.com/agentvault/agentvault/internal/failguard"
)

// connectAs sends one CONNECT to the proxy with the given Proxy-Authorization
// (none when auth is empty) and returns the answer.
func connectAs(t *testing.T, proxyAddr, target, auth string) *http.Response {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxyAddr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if auth != "" {
		req += "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(auth)) + "\r\n"
	}
	if _, err := c.Write([]byte(req + "\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestProxyAuthGuardSlowsGuessing: with an AuthGuard, wrong credentials from
// one client are counted, and once its free failures are spent every
// CONNECT of that client, right credentials included, is refused with 429
// rate_limited and a Retry-After, before any credential is checked; the
// upstream is never dialled for it. A CONNECT without credentials (the
// browser's first, which asks for the 407 challenge) and the right password
// of a session that ended count nothing. When the wait has run out the
// right credentials get through again.
func TestProxyAuthGuardSlowsGuessing(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	guard := failguard.Clients{Guard: failguard.New(failguard.Config{First: time.Minute, Now: clock}), Free: 3}
	e := startProxy(t, func(c *intercept.Config) { c.AuthGuard = guard })
	up := startUpstream(t, e.upCA, nil)
	target := "shop.test:" + up.port()
	s, pw := e.session()

	expect := func(what, auth string, status int, code agentvault.Code) *http.Response {
		t.Helper()
		resp := connectAs(t, e.addr, target, auth)
		if resp.StatusCode != status || (code != "" && codeOf(resp) != string(code)) {
			t.Fatalf("%s: status %d code %q, want %d %q", what, resp.StatusCode, codeOf(resp), status, code)
		}
		return resp
	}
	for range 5 {
		expect("no credentials", "", http.StatusProxyAuthRequired, agentvault.CodeProxyAuth)
	}
	expect("right credentials before any guess", s.ID+":"+pw, http.StatusOK, "")
	for i := range 2 {
		expect("wrong password "+string(rune('1'+i)), s.ID+":wrong", http.StatusProxyAuthRequired, agentvault.CodeProxyAuth)
	}
	expect("unknown session (the third failure, the last free one)", "s_nosuchsession:x", http.StatusProxyAuthRequired, agentvault.CodeProxyAuth)
	accepts := up.accepts.Load()
	resp := expect("right credentials while the client waits", s.ID+":"+pw, http.StatusTooManyRequests, agentvault.CodeRateLimited)
	if ra := resp.Header.Get("Retry-After"); ra != "60" {
		t.Errorf("Retry-After = %q, want 60", ra)
	}
	expect("wrong credentials while the client waits", s.ID+":wrong", http.StatusTooManyRequests, agentvault.CodeRateLimited)
	expect("no credentials while the client waits", "", http.StatusTooManyRequests, agentvault.CodeRateLimited)
	if got := up.accepts.Load(); got != accepts {
		t.Errorf("the upstream was dialled %d times while the client waited", got-accepts)
	}
	if !strings.Contains(e.logs.String(), `"code":"rate_limited"`) {
		t.Error("the refusal while waiting was not logged with its code")
	}
	now = now.Add(time.Minute)
	expect("right credentials after the wait", s.ID+":"+pw, http.StatusOK, "")
}
