package intercept_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestRequestLineFields: every request line of a tunnel carries the
// tunnel's fields (session, host, port, proto; bound once per tunnel) and
// its own, on the second request of a keep-alive tunnel as on the first,
// for HTTP/1.1 and h2, and a refusal adds its code and reason.
func TestRequestLineFields(t *testing.T) {
	e := startProxy(t, nil)
	up := startUpstream(t, e.upCA, nil)
	port, _ := strconv.Atoi(up.port())
	type want struct {
		session, proto, decision string
		status                   int
	}
	var wants []want
	for _, h2 := range []bool{false, true} {
		s, pw := e.session()
		c := e.rawClient(s, pw, h2)
		proto := "HTTP/1.1"
		if h2 {
			proto = "HTTP/2.0"
		}
		for i := 0; i < 3; i++ {
			req, _ := http.NewRequest(http.MethodGet, hostURL(up, "shop.test", "/"), nil)
			w := want{s.ID, proto, "forwarded", 200}
			if i == 2 {
				req.Host = "evil.test:" + up.port() // not the tunnel's destination
				w.decision, w.status = "refused", 0
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if w.status == 0 {
				w.status = resp.StatusCode
			}
			wants = append(wants, w)
		}
	}
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(e.logs.String()))
	for sc.Scan() {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) == nil && l["msg"] == "proxy request" {
			lines = append(lines, l)
		}
	}
	if len(lines) != len(wants) {
		t.Fatalf("%d request lines for %d requests", len(lines), len(wants))
	}
	for i, l := range lines {
		w := wants[i]
		for k, v := range map[string]any{"session": w.session, "host": "shop.test", "port": float64(port), "proto": w.proto,
			"decision": w.decision, "method": "GET", "status": float64(w.status), "req_bytes": float64(0),
			"substitutions": float64(0), "content_type": ""} {
			if l[k] != v {
				t.Errorf("line %d: %s = %v, want %v", i, k, l[k], v)
			}
		}
		for _, k := range []string{"upstream", "total"} {
			if _, ok := l[k].(float64); !ok {
				t.Errorf("line %d: no %s duration", i, k)
			}
		}
		_, hasCode := l["code"]
		_, hasReason := l["reason"]
		if refused := w.decision == "refused"; hasCode != refused || hasReason != refused {
			t.Errorf("line %d (%s): code present %v, reason present %v", i, w.decision, hasCode, hasReason)
		}
	}
}
