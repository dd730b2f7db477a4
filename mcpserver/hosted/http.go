package hosted

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The hosted server's HTTP face: streamable HTTP without sessions of its
// own (no Mcp-Session-Id response header: a client takes it as its
// connection's id and DELETEs it on reconnect, which used to close the
// browser mid-task), DELETE answered 405, API keys as bearer tokens, and
// the JSON-RPC id of each call handed to the tool layer for the retry rules.

const (
	// rpcIDHeader carries a tools/call's JSON-RPC id from the HTTP layer to
	// the tool layer (the SDK does not expose it). A client's own value is
	// dropped first.
	rpcIDHeader = "X-Agentvault-Rpc-Id"
	// TokenInfo.Extra keys of an authenticated connection.
	tokenInfoKey  = "apiKey"
	tokenInfoName = "name"
	tokenInfoUses = "appUses" // connUses: what the holder chose, nil before a choice
	// maxPeek bounds how much of a request body is read to find its id.
	maxPeek = 1 << 20
	// keyCacheFor is how long a checked key is trusted without asking
	// proxyd again: a revoked key's calls are refused within it, as its
	// grants are at proxyd (P21: within a second).
	keyCacheFor = time.Second
)

// KeyChecker checks an agent's API key (control.Client implements it).
type KeyChecker interface {
	AuthenticateKey(ctx context.Context, apiKey string) (control.KeyInfo, error)
}

var _ KeyChecker = (*control.Client)(nil)

// HTTPOptions configures Handler.
type HTTPOptions struct {
	// Keys, when set, requires an API key as the bearer token of every
	// request; each key is a connection of its own. nil: no keys, one
	// connection (loopback only).
	Keys KeyChecker
}

// Handler serves srv, whose tools run through cl, as the hosted server
// over streamable HTTP. It turns on the hosted rules (Enable) with zero
// settings if they are not on yet.
func (cl *Calls) Handler(srv *mcp.Server, opts HTTPOptions) http.Handler {
	cl.Enable(Config{})
	cl.closeAnywayOnce.Do(func() { srv.AddReceivingMiddleware(cl.closeAnyway) })
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	var inner http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(rpcIDHeader)
		if r.Method == http.MethodPost && r.Body != nil {
			head, _ := io.ReadAll(io.LimitReader(r.Body, maxPeek))
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(head, &msg) == nil && msg.Method == "tools/call" && len(msg.ID) > 0 {
				var id bytes.Buffer
				if json.Compact(&id, msg.ID) == nil && id.Len() <= 256 {
					r.Header.Set(rpcIDHeader, id.String())
				}
			}
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
		}
		h.ServeHTTP(noSessionID{w}, r)
	})
	if opts.Keys != nil {
		kc := &keyCache{keys: opts.Keys, seen: map[[32]byte]keySeen{}}
		inner = auth.RequireBearerToken(kc.verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(inner)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			// A DELETE closes nothing: a session ends with close_session,
			// idle, or at a limit.
			w.Header().Set("Allow", "POST")
			http.Error(w, "DELETE closes nothing on this server: end a session with the close_session tool.", http.StatusMethodNotAllowed)
			return
		}
		inner.ServeHTTP(w, r)
	})
}

// noSessionID drops any Mcp-Session-Id response header.
type noSessionID struct{ http.ResponseWriter }

func (w noSessionID) WriteHeader(code int) {
	w.Header().Del("Mcp-Session-Id")
	w.ResponseWriter.WriteHeader(code)
}

func (w noSessionID) Write(b []byte) (int, error) {
	w.Header().Del("Mcp-Session-Id")
	return w.ResponseWriter.Write(b)
}

func (w noSessionID) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w noSessionID) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// keyCache checks bearer keys through proxyd's control API, remembering a
// good answer for keyCacheFor. Keys are remembered by their hash.
type keyCache struct {
	keys KeyChecker
	now  func() time.Time // nil: time.Now
	mu   sync.Mutex
	seen map[[32]byte]keySeen
}

type keySeen struct {
	info control.KeyInfo
	at   time.Time
}

func (k *keyCache) verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	sum := sha256.Sum256([]byte(token))
	k.mu.Lock()
	e, ok := k.seen[sum]
	k.mu.Unlock()
	now := time.Now
	if k.now != nil {
		now = k.now
	}
	if !ok || now().Sub(e.at) >= keyCacheFor {
		info, err := k.keys.AuthenticateKey(ctx, token)
		if err != nil {
			switch agentvault.ErrorCode(err) {
			case agentvault.CodeInvalidAPIKey, agentvault.CodeKeyRevoked, agentvault.CodeUnauthorized:
				return nil, fmt.Errorf("%w: %s", auth.ErrInvalidToken, agentvault.ErrorMessage(err))
			}
			return nil, errors.New("the API key could not be checked right now; try again")
		}
		e = keySeen{info: info, at: now()}
		k.mu.Lock()
		if len(k.seen) > 4096 {
			clear(k.seen)
		}
		k.seen[sum] = e
		k.mu.Unlock()
	}
	extra := map[string]any{tokenInfoKey: token, tokenInfoName: e.info.Name}
	if e.info.AppChosen {
		extra[tokenInfoUses] = append([]string{}, e.info.AppUses...)
	}
	return &auth.TokenInfo{UserID: e.info.ID, Extra: extra}, nil
}
