package intercept_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestProxyForwardsHTTPS(t *testing.T) {
	e := startProxy(t, nil)
	up := startUpstream(t, e.upCA, nil)
	s, pw := e.session()
	for _, h2 := range []bool{false, true} {
		c := e.client(s, pw, h2)
		resp, err := c.Get(hostURL(up, "shop.test", "/hello?a=b"))
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("h2=%v status %d body %q code %s", h2, resp.StatusCode, body, codeOf(resp))
		}
		if got := up.last(); got.RequestURI != "/hello?a=b" || !strings.HasPrefix(got.Host, "shop.test:") {
			t.Fatalf("upstream saw %+v", got)
		}
	}
}

func TestProxyAuthRequired(t *testing.T) {
	e := startProxy(t, nil)
	up := startUpstream(t, e.upCA, nil)
	s, _ := e.session()
	c := e.client(s, "wrong", false)
	_, err := c.Get(hostURL(up, "shop.test", "/"))
	if err == nil || !strings.Contains(err.Error(), "Proxy Authentication Required") {
		t.Fatalf("err = %v", err)
	}
	if up.accepts.Load() != 0 {
		t.Fatal("upstream was contacted without proxy credentials")
	}
	_ = http.StatusOK
}

func TestHeadAndNoContentThroughScrubbingSession(t *testing.T) {
	f := newSubFixture(t, false, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/204" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Length", "12")
		if r.Method != http.MethodHead {
			_, _ = w.Write([]byte("hello world!"))
		}
	})
	for _, h2 := range []bool{false, true} {
		c := f.e.client(f.s, f.pw, h2)
		for _, tc := range []struct{ method, path string }{{"HEAD", "/"}, {"GET", "/204"}, {"GET", "/"}} {
			req, _ := http.NewRequest(tc.method, f.url(tc.path), nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode >= 400 {
				t.Fatalf("%s %s h2=%v: %d %s", tc.method, tc.path, h2, resp.StatusCode, codeOf(resp))
			}
		}
	}
}

func TestClosedSessionTunnelsRefuse(t *testing.T) {
	e := startProxy(t, nil)
	up := startUpstream(t, e.upCA, nil)
	s, pw := e.session()
	c := e.client(s, pw, false)
	resp, err := c.Get(hostURL(up, "shop.test", "/"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v", err)
	}
	resp.Body.Close()
	if _, err := e.sessions.Close(s.ID); err != nil {
		t.Fatal(err)
	}
	before := up.count()
	resp, err = c.Get(hostURL(up, "shop.test", "/")) // reuses the open tunnel
	if err == nil {
		resp.Body.Close()
		if codeOf(resp) != "session_ended" {
			t.Fatalf("open tunnel of a closed session: %d %s", resp.StatusCode, codeOf(resp))
		}
	}
	if up.count() != before {
		t.Fatal("a closed session's request reached the upstream")
	}
}
