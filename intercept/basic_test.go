package intercept_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/vault"

	"github.com/agentvault/agentvault/internal/leakcheck"
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

func TestLiveCVVFromSessionMemory(t *testing.T) {
	e := startProxy(t, nil)
	up := startUpstream(t, e.upCA, nil)
	// A live-CVV card: the vault holds no code.
	e.vault.add(vault.Item{Kind: vault.KindCard, Label: "1", Card: &vault.CardMeta{AnySite: true}},
		map[vault.Field]string{vault.FieldNumber: "4242424242424242"})
	s, pw := e.session()
	page := "https://shop.test:" + up.port() + "/pay"
	if _, err := e.authorize(s, tok("card", "1", "cvv"), page); agentvault.ErrorCode(err) != agentvault.CodeCVVEntryRequired {
		t.Fatalf("before the owner typed it: %v", err)
	}
	item := e.vault.items[0]
	if err := e.sessions.SetLiveValue(s.ID, item.ID, vault.FieldCVV, vault.NewSecret([]byte("4321"))); err != nil {
		t.Fatal(err)
	}
	a, err := e.authorize(s, tok("card", "1", "cvv"), page)
	if err != nil || !a.StandIn || a.Value == "4321" || len(a.Value) != 4 {
		t.Fatalf("after: %v", err)
	}
	resp, err := e.client(s, pw, false).Post(hostURL(up, "shop.test", "/pay"), "application/x-www-form-urlencoded", strings.NewReader("cvc="+a.Value))
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp.Body)
	resp.Body.Close()
	if string(up.last().Body) != "cvc=4321" {
		t.Fatal("live CVV not substituted")
	}
	// The log's durations and byte counts are random digits: leakcheck
	// reads a short value only where request data sits.
	live := leakcheck.New(leakcheck.Value("live cvv", "4321"))
	live.Text(t, "the response", []byte(body))
	live.Logs(t, "the proxy's log", []byte(e.logs.String()))
	if _, err := e.sessions.Close(s.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.sessions.SetLiveValue(s.ID, item.ID, vault.FieldCVV, vault.NewSecret([]byte("1"))); err == nil {
		t.Fatal("live value accepted for a closed session")
	}
}

// TestServedCountsConnectsAndRequests: Served moves with every CONNECT and
// every request inside a tunnel, and stands still while nothing comes
// (proxyd reads that as idle and gives memory back).
func TestServedCountsConnectsAndRequests(t *testing.T) {
	e := startProxy(t, nil)
	up := startUpstream(t, e.upCA, nil)
	s, pw := e.session()
	before := e.srv.Served()
	c := e.client(s, pw, false)
	for range 3 {
		resp, err := c.Get(hostURL(up, "shop.test", "/hello"))
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp.Body)
		resp.Body.Close()
	}
	if got := e.srv.Served() - before; got != 4 { // one CONNECT (keep-alive), three requests
		t.Fatalf("Served moved by %d, want 4", got)
	}
	if e.srv.Served() != before+4 {
		t.Fatal("Served moved with nothing served")
	}
}
