package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Repeated and retried calls (seed 004, "Repeated and retried calls"; P20).
//
//   - The same call while it runs (same tool, arguments and session on one
//     connection) joins the running flight instead of running twice.
//   - A call that changes something is kept for replayKeep: the same call
//     again with the same JSON-RPC id gets the first answer and does not
//     run. A new id runs it again.
//   - A refusal made before the tool ran is not kept.
//   - At most replayMax answers per connection, a call that started a
//     session counting twice; past that the oldest are dropped early.

const (
	replayKeep = 2 * time.Minute
	replayMax  = 200
)

// keptTools change something: a retransmission gets the first answer.
var keptTools = map[string]bool{
	"open_page": true, "click": true, "press": true, "fill_checkout": true, "fill_login": true,
	"declare_page_hint": true, "close_popup": true, "wait_for_popup": true, "request_challenge_handoff": true,
	"create_login": true, "set_login_username": true, "rotate_login_password": true, "submit_checkout_recipe": true,
}

// loginWrites write to the credential store: when their outcome is
// unknown they say write_outcome_unknown, and a session they started is
// kept even when they fail (a write may have landed before the error).
var loginWrites = map[string]bool{"create_login": true, "set_login_username": true, "rotate_login_password": true}

// isKept reports whether a call of tool with these arguments is kept
// (get_session_outcome only when it confirms a checkout).
func isKept(tool string, args json.RawMessage) bool {
	if keptTools[tool] {
		return true
	}
	if tool == "get_session_outcome" {
		var a struct {
			ConfirmsCheckout bool `json:"confirmsCheckout"`
		}
		_ = json.Unmarshal(args, &a)
		return a.ConfirmsCheckout
	}
	return false
}

// canonicalArgs is the arguments as a stable string: object keys sorted,
// no insignificant space. Arguments that do not parse are kept as sent.
func canonicalArgs(raw json.RawMessage) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if len(bytes.TrimSpace(raw)) == 0 || dec.Decode(&v) != nil {
		return string(raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return string(raw)
	}
	return string(b)
}

// flightKeyOf names a call for joining (no id) or for replay (with the id).
func flightKeyOf(tool, args, handle, rpcID string) string {
	return strings.Join([]string{tool, handle, rpcID, args}, "\x00")
}

type replayEntry struct {
	key    string
	res    *mcp.CallToolResult
	at     time.Time
	weight int
}

// replayCache holds one connection's kept answers, oldest first.
type replayCache struct {
	mu      sync.Mutex
	entries []*replayEntry
	byKey   map[string]*replayEntry
	weight  int
}

func (r *replayCache) get(key string, now time.Time) *mcp.CallToolResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expire(now)
	e := r.byKey[key]
	if e == nil {
		return nil
	}
	return cloneResult(e.res)
}

func (r *replayCache) put(key string, res *mcp.CallToolResult, weight int, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byKey == nil {
		r.byKey = map[string]*replayEntry{}
	}
	r.expire(now)
	if old := r.byKey[key]; old != nil {
		return
	}
	e := &replayEntry{key: key, res: cloneResult(res), at: now, weight: weight}
	r.entries = append(r.entries, e)
	r.byKey[key] = e
	r.weight += weight
	for r.weight > replayMax && len(r.entries) > 0 {
		r.drop()
	}
}

func (r *replayCache) expire(now time.Time) {
	for len(r.entries) > 0 && now.Sub(r.entries[0].at) >= replayKeep {
		r.drop()
	}
}

func (r *replayCache) drop() {
	e := r.entries[0]
	r.entries[0] = nil
	r.entries = r.entries[1:]
	delete(r.byKey, e.key)
	r.weight -= e.weight
}

func (r *replayCache) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.weight
}

// idTransport hands each tools/call's JSON-RPC id to the tool layer on a
// transport without HTTP (stdio), the way the HTTP layer does with
// rpcIDHeader, so a retransmitted call is recognised there too (P20). The
// id is put in the request's Extra, which never comes from the wire.
type idTransport struct{ mcp.Transport }

func (t idTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return idConn{c}, nil
}

type idConn struct{ mcp.Connection }

func (c idConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok && err == nil && req.Method == "tools/call" && req.ID.IsValid() && req.Extra == nil {
		if id, jerr := json.Marshal(req.ID.Raw()); jerr == nil && len(id) <= 256 {
			req.Extra = &mcp.RequestExtra{Header: http.Header{rpcIDHeader: {string(id)}}}
		}
	}
	return msg, err
}
