package managedtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/net/websocket"
)

// solverOrigin is the Origin the solver's DevTools client sends; Chromium
// is started allowing it.
const solverOrigin = "http://127.0.0.1"

// cdpConn is a minimal DevTools protocol client over the browser's
// WebSocket (flattened sessions): enough for the solver to list pages,
// attach to them and evaluate script in them, as a provider's solver does
// from inside its own infrastructure.
type cdpConn struct {
	ws *websocket.Conn

	mu      sync.Mutex
	next    int
	pending map[int]chan cdpReply
	closed  bool
}

type cdpReply struct {
	Result json.RawMessage
	Err    error
}

func dialCDP(wsURL string) (*cdpConn, error) {
	cfg, err := websocket.NewConfig(wsURL, solverOrigin)
	if err != nil {
		return nil, err
	}
	ws, err := websocket.DialConfig(cfg)
	if err != nil {
		return nil, err
	}
	ws.MaxPayloadBytes = 64 << 20
	c := &cdpConn{ws: ws, pending: map[int]chan cdpReply{}}
	go c.read()
	return c, nil
}

func (c *cdpConn) read() {
	for {
		var msg struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := websocket.JSON.Receive(c.ws, &msg); err != nil {
			c.mu.Lock()
			c.closed = true
			for id, ch := range c.pending {
				ch <- cdpReply{Err: errors.New("devtools connection closed")}
				delete(c.pending, id)
			}
			c.mu.Unlock()
			return
		}
		if msg.ID == 0 {
			continue // an event: the solver asks, it does not listen
		}
		c.mu.Lock()
		ch := c.pending[msg.ID]
		delete(c.pending, msg.ID)
		c.mu.Unlock()
		if ch == nil {
			continue
		}
		if msg.Error != nil {
			ch <- cdpReply{Err: errors.New(msg.Error.Message)}
		} else {
			ch <- cdpReply{Result: msg.Result}
		}
	}
}

// call sends one command (to the browser when session is "", else to that
// attached target) and waits for its answer.
func (c *cdpConn) call(ctx context.Context, session, method string, params any) (json.RawMessage, error) {
	ch := make(chan cdpReply, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errors.New("devtools connection closed")
	}
	c.next++
	id := c.next
	c.pending[id] = ch
	c.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	if err := websocket.JSON.Send(c.ws, msg); err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return nil, err
	}
	select {
	case r := <-ch:
		return r.Result, r.Err
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}

func (c *cdpConn) close() { _ = c.ws.Close() }

// Page is a page the solver works in.
type Page struct {
	c       *cdpConn
	session string
}

// Eval runs expression in the page's main world and returns its value as
// JSON (Runtime.evaluate, returnByValue, promises awaited).
func (p *Page) Eval(ctx context.Context, expression string) (json.RawMessage, error) {
	raw, err := p.c.call(ctx, p.session, "Runtime.evaluate", map[string]any{
		"expression": expression, "returnByValue": true, "awaitPromise": true,
	})
	if err != nil {
		return nil, err
	}
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, err
	}
	if res.Exception != nil {
		return nil, fmt.Errorf("script threw: %s", res.Exception.Text)
	}
	return res.Result.Value, nil
}
