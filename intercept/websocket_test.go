package intercept_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/websocket"
)

func TestP10_WebSocketSubstitutedAndScrubbed(t *testing.T) {
	var mu sync.Mutex
	var serverGot []string
	var f *subFixture
	wsHandler := websocket.Handler(func(c *websocket.Conn) {
		for {
			var msg string
			if err := websocket.Message.Receive(c, &msg); err != nil {
				return
			}
			mu.Lock()
			serverGot = append(serverGot, msg)
			mu.Unlock()
			_ = websocket.Message.Send(c, "echo: "+msg+` {"card":"`+f.number+`"}`)
		}
	})
	f = newSubFixture(t, false, func(w http.ResponseWriter, r *http.Request) { wsHandler.ServeHTTP(w, r) })
	h := "shop.test:" + f.up.port()
	f.reauth(t)
	tc, err := f.e.tlsTunnel(t, f.s, f.pw, h, "shop.test")
	if err != nil {
		t.Fatal(err)
	}
	_ = tc.SetDeadline(time.Now().Add(20 * time.Second))
	cfg, _ := websocket.NewConfig("wss://"+h+"/ws", "https://"+h)
	ws, err := websocket.NewClient(cfg, tc)
	if err != nil {
		t.Fatalf("handshake through the proxy: %v", err)
	}
	if err := websocket.Message.Send(ws, `{"number":"`+f.numSI+`"}`); err != nil {
		t.Fatal(err)
	}
	var reply string
	if err := websocket.Message.Receive(ws, &reply); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := strings.Join(serverGot, "\n")
	mu.Unlock()
	if !strings.Contains(got, f.number) || strings.Contains(got, f.numSI) {
		t.Fatal("client frame not substituted")
	}
	if strings.Contains(reply, f.number) || !strings.Contains(reply, f.numSI) {
		t.Fatal("server frame not scrubbed")
	}
	// A message with a token the session never authorized ends the connection.
	_ = websocket.Message.Send(ws, "pay with "+tok("card", "7", "number"))
	if err := websocket.Message.Receive(ws, &reply); err == nil {
		t.Fatal("connection survived an unauthorized token")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, m := range serverGot {
		if strings.Contains(m, "av_card_7") {
			t.Fatal("unauthorized token reached the server")
		}
	}
}

// Seed 004, get_run_report: deniedCount counts the fills the proxy refused.
// A site that pushes one update over a WebSocket (carrying a value the
// proxy scrubs) before the browser goes away is a quiet run: the relay's end
// is no refusal, in the log or in the report, whichever way it closes.
func TestSeed004_DeniedCountCountsOnlyRefusedFills_WebSocketPush(t *testing.T) {
	for _, how := range []string{"browser drops the connection", "browser sends a close frame"} {
		t.Run(how, func(t *testing.T) {
			var f *subFixture
			release := make(chan struct{})
			defer close(release)
			wsHandler := websocket.Handler(func(c *websocket.Conn) {
				_ = websocket.Message.Send(c, `{"status":"paid","card":"`+f.number+`"}`)
				<-release // the site keeps the connection open and never answers a close
			})
			f = newSubFixture(t, false, func(w http.ResponseWriter, r *http.Request) { wsHandler.ServeHTTP(w, r) })
			h := "shop.test:" + f.up.port()
			before := f.s.Report().DeniedCount
			tc, err := f.e.tlsTunnel(t, f.s, f.pw, h, "shop.test")
			if err != nil {
				t.Fatal(err)
			}
			_ = tc.SetDeadline(time.Now().Add(20 * time.Second))
			cfg, _ := websocket.NewConfig("wss://"+h+"/ws", "https://"+h)
			ws, err := websocket.NewClient(cfg, tc)
			if err != nil {
				t.Fatalf("handshake through the proxy: %v", err)
			}
			var update string
			if err := websocket.Message.Receive(ws, &update); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(update, f.number) || !strings.Contains(update, f.numSI) {
				t.Fatal("the pushed update was not scrubbed")
			}
			if how == "browser sends a close frame" {
				_ = ws.Close()
			} else {
				_ = tc.Close()
			}
			deadline := time.Now().Add(15 * time.Second)
			for !strings.Contains(f.e.logs.String(), "websocket relay ended") {
				if time.Now().After(deadline) {
					t.Fatal("the relay did not end after the browser went away")
				}
				time.Sleep(10 * time.Millisecond)
			}
			logs := f.e.logs.String()
			for _, line := range strings.Split(logs, "\n") {
				if strings.Contains(line, `"decision":"refused"`) {
					t.Errorf("the relay's end was logged as a refusal: %s", line)
				}
			}
			if got := f.s.Report().DeniedCount - before; got != 0 {
				t.Fatalf("deniedCount rose by %d for a run with no refused fill", got)
			}
		})
	}
}
