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
