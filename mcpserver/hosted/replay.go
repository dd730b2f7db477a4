package hosted

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Repeated and retried calls (seed 004, "Repeated and retried calls"; P20),
// given only to the client that made the call (issue 22, P24).
//
//   - The same call while it runs (same tool and arguments, from the same
//     client) joins the running flight instead of running twice.
//   - A call that changes something is kept for replayKeep: the same call
//     again from the same client with the same JSON-RPC id gets the first
//     answer and does not run. A new id runs it again.
//   - The same client: on the hosted server, one API key is one connection
//     and any number of clients may share it, so the JSON-RPC id (each new
//     client counts from 1) proves nothing. A call on a session is proved
//     by its handle, a secret only the client it was given to holds. A
//     first call (no session yet) is proved only by an idempotency key the
//     client chose (idempotencyKeyOf); without one it is never replayed or
//     joined: it runs, and starts a session of its own. On stdio the
//     process is one client.
//   - Kept are answers that say the call finished, and those that say its
//     outcome is unknown (keepsAnswer). A refusal made before the tool ran
//     and a failure inside the tool are not kept: sent again, the call runs.
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

// flightKeyOf names a call for joining (no id) or for replay (with the
// id): handle and idem are the proof of the client (see above).
func flightKeyOf(tool, args, handle, rpcID, idem string) string {
	return strings.Join([]string{tool, handle, rpcID, idem, args}, "\x00")
}

// A call's idempotency key: chosen by the client, sent as the
// Idempotency-Key HTTP header (streamable HTTP) or in the call's _meta
// under IdempotencyMeta (any transport). Unguessable by another client on
// the same API key, it is what lets a retransmitted first call get its
// first answer. A client may send one key per call or one for all its calls
// (the JSON-RPC id tells those apart).
const (
	IdempotencyHeader = "Idempotency-Key"
	IdempotencyMeta   = "agentvault.io/idempotency-key"
	minIdempotencyKey = 16
	maxIdempotencyKey = 200
)

// idempotencyKeyOf is the idempotency key a call carries ("" when none),
// or an invalid_params error for one too short to be a secret, too long,
// not printable ASCII, or different in the header and in _meta.
func idempotencyKeyOf(req *mcp.CallToolRequest) (string, error) {
	if req == nil {
		return "", nil
	}
	var header, meta string
	if req.Extra != nil && req.Extra.Header != nil {
		header = req.Extra.Header.Get(IdempotencyHeader)
	}
	if req.Params != nil {
		if v, ok := req.Params.Meta[IdempotencyMeta]; ok {
			str, isStr := v.(string)
			if !isStr {
				return "", agentvault.Errorf(agentvault.CodeInvalidParams, "_meta %q must be a string: a random value your client chose, such as a UUID.", IdempotencyMeta)
			}
			meta = str
		}
	}
	if header != "" && meta != "" && header != meta {
		return "", agentvault.Errorf(agentvault.CodeInvalidParams, "the %s header and _meta %q differ: send one idempotency key for the call.", IdempotencyHeader, IdempotencyMeta)
	}
	key := cmp.Or(meta, header)
	if key == "" {
		return "", nil
	}
	printable := !strings.ContainsFunc(key, func(r rune) bool { return r <= ' ' || r > '~' })
	if len(key) < minIdempotencyKey || len(key) > maxIdempotencyKey || !printable {
		return "", agentvault.Errorf(agentvault.CodeInvalidParams,
			"an idempotency key must be %d to %d printable ASCII characters without spaces: a random value your client chose, such as a UUID.", minIdempotencyKey, maxIdempotencyKey)
	}
	return key, nil
}

// keepsAnswer reports whether a finished answer of a kept call is given
// again to a retransmission: one that succeeded, or one whose outcome is
// unknown (a login write says write_outcome_unknown, any call past its
// limit hard_timeout: either may have changed something, and P20 forbids
// running it again blind). Any other failure is not given again: sent
// again, the call runs, and may succeed.
func keepsAnswer(t Tools, res *mcp.CallToolResult) bool {
	if res == nil {
		return false
	}
	if !res.IsError {
		return true
	}
	switch t.Code(res) {
	case agentvault.CodeWriteOutcomeUnknown, agentvault.CodeHardTimeout:
		return true
	}
	return false
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

// Transport is t handing each tools/call's JSON-RPC id to the call layer,
// for a transport without HTTP (stdio), the way the HTTP layer does with
// rpcIDHeader, so a retransmitted call is recognised there too (P20). The
// id is put in the request's Extra, which never comes from the wire.
func Transport(t mcp.Transport) mcp.Transport { return idTransport{t} }

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
