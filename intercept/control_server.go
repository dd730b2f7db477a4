package intercept

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/tokens"
)

// ControlConfig configures the control API (docs/DESIGN.md, "Control API").
type ControlConfig struct {
	Sessions *Sessions
	CA       *CA
	Token    string // bearer token; compared in constant time
	ProxyURL string // what browsers use, e.g. http://127.0.0.1:7700
	Logger   *slog.Logger
	// Pending recognises an authorize refusal that waits for the owner and
	// returns the 202 body for it (owner.PendingOf in proxyd); nil: none.
	Pending func(err error) (any, bool)
	// Wait long-polls a pending approval (GET /v1/waits/{id}); nil: 404.
	Wait func(ctx context.Context, id string, timeout time.Duration) (any, error)
}

// maxWait caps a long poll, below common proxy and client timeouts.
const maxWait = 25 * time.Second

// maxControlBody bounds control request bodies.
const maxControlBody = 64 << 10

// NewControlHandler serves the control API over the session table. It must
// only ever listen on loopback; every request needs the bearer token.
func NewControlHandler(cfg ControlConfig) http.Handler {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ss := cfg.Sessions
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, r *http.Request, v any, err error) {
		if err != nil {
			log.LogAttrs(r.Context(), slog.LevelWarn, "control request refused",
				slog.String("path", r.Pattern), slog.String("code", string(agentvault.ErrorCode(err))), slog.String("reason", agentvault.ErrorMessage(err)))
			var rl *policy.RateLimitError
			if errors.As(err, &rl) {
				w.Header().Set("Retry-After", strconv.Itoa(int((rl.RetryAfter+time.Second-1)/time.Second)))
			}
			writeError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(v)
	}
	decode := func(r *http.Request, v any) error {
		dec := json.NewDecoder(io.LimitReader(r.Body, maxControlBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "request body is not valid JSON for this call")
		}
		return nil
	}
	session := func(r *http.Request) (*Session, error) { return ss.Get(r.PathValue("id")) }

	mux.HandleFunc("POST /v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		var req control.CreateSessionRequest
		if err := decode(r, &req); err != nil {
			reply(w, r, nil, err)
			return
		}
		s, pw, err := ss.Create(r.Context(), req.APIKey)
		if err != nil {
			reply(w, r, nil, err)
			return
		}
		reply(w, r, control.CreateSessionResponse{
			ID: s.ID, ProxyURL: cfg.ProxyURL, ProxyUser: s.ID, ProxyPassword: pw,
			CASPKI: cfg.CA.SPKIHash(), CAPEM: string(cfg.CA.CertPEM()),
		}, nil)
	})
	mux.HandleFunc("GET /v1/catalog", func(w http.ResponseWriter, r *http.Request) {
		key, err := ss.LookupKey(r.Context(), r.URL.Query().Get("apiKey"))
		if err != nil {
			reply(w, r, nil, err)
			return
		}
		items, err := ss.Vault.List(r.Context(), key.Org)
		if err != nil {
			reply(w, r, nil, err)
			return
		}
		scope := tokens.Scope{AllCards: true, AllLogins: true}
		if key.Scope != nil {
			scope = *key.Scope
		}
		reply(w, r, tokens.BuildCatalog(items, tokens.CatalogArgs{Suffix: key.Suffix, URL: r.URL.Query().Get("url"), Scope: scope}), nil)
	})
	mux.HandleFunc("POST /v1/sessions/{id}/authorize", func(w http.ResponseWriter, r *http.Request) {
		s, err := session(r)
		if err != nil {
			reply(w, r, nil, err)
			return
		}
		var req control.AuthorizeRequest
		if err := decode(r, &req); err != nil {
			reply(w, r, nil, err)
			return
		}
		resp, err := ss.Authorize(r.Context(), s, req)
		if err != nil && cfg.Pending != nil {
			if p, ok := cfg.Pending(err); ok {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusAccepted)
				_ = json.NewEncoder(w).Encode(p)
				return
			}
		}
		reply(w, r, resp, err)
	})
	mux.HandleFunc("POST /v1/sessions/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		s, err := session(r)
		if err != nil {
			reply(w, r, nil, err)
			return
		}
		var ev control.EventRequest
		if err := decode(r, &ev); err != nil {
			reply(w, r, nil, err)
			return
		}
		reply(w, r, control.EventResponse{}, s.Event(ev))
	})
	mux.HandleFunc("GET /v1/sessions/{id}/report", func(w http.ResponseWriter, r *http.Request) {
		s, err := session(r)
		if err != nil {
			reply(w, r, nil, err)
			return
		}
		reply(w, r, s.Report(), nil)
	})
	mux.HandleFunc("DELETE /v1/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		rep, err := ss.Close(r.PathValue("id"))
		reply(w, r, control.CloseResponse{Status: "Session closed", Report: rep}, err)
	})
	mux.HandleFunc("GET /v1/waits/{id}", func(w http.ResponseWriter, r *http.Request) {
		if cfg.Wait == nil {
			reply(w, r, nil, agentvault.Errorf(agentvault.CodeNotFound, "no approvals in this deployment"))
			return
		}
		timeout := maxWait
		if v := r.URL.Query().Get("timeout"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				reply(w, r, nil, agentvault.Errorf(agentvault.CodeInvalidInput, "timeout is not a duration"))
				return
			}
			timeout = min(d, maxWait)
		}
		a, err := cfg.Wait(r.Context(), r.PathValue("id"), timeout)
		reply(w, r, a, err)
	})
	want := []byte("Bearer " + cfg.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if cfg.Token == "" || subtle.ConstantTimeCompare(got, want) != 1 {
			writeError(w, agentvault.Errorf(agentvault.CodeUnauthorized, "control token required"))
			return
		}
		mux.ServeHTTP(w, r)
	})
}
