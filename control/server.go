package control

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/authz"
)

// Service is what the control API serves: proxyd implements it over the
// broker (sessions, grants, releases) and the owner's approvals. Every
// answer is one of this package's wire types.
type Service interface {
	CreateSession(ctx context.Context, apiKey string) (CreateSessionResponse, error)
	// Catalog is the token catalog (seed 004 shape) as JSON.
	Catalog(ctx context.Context, apiKey, pageURL string) (json.RawMessage, error)
	// Authorize answers what to type, or an error; a fill that waits for
	// the owner fails with an error whose chain holds a *Pending (202).
	Authorize(ctx context.Context, sessionID string, req AuthorizeRequest) (AuthorizeResponse, error)
	Event(ctx context.Context, sessionID string, ev EventRequest) error
	Report(ctx context.Context, sessionID string) (Report, error)
	CloseSession(ctx context.Context, sessionID string) (CloseResponse, error)
	// Wait long-polls an approval for at most timeout.
	Wait(ctx context.Context, waitID string, timeout time.Duration) (WaitAnswer, error)
	RecipeService
	// CredentialService is seed 003's portal credentials (credentials.go).
	CredentialService
	// AccountService is seed 004's create_login and login writes
	// (accounts.go).
	AccountService
	// HandoffService is seed 004's challenge hand-off (handoff.go).
	HandoffService
	// HintService is seed 004's page hint kinds and TOTP enrolment
	// (hints.go).
	HintService
}

// RecipeService is the checkout recipe registry as the control API serves
// it to mcpd, which never opens the store itself.
type RecipeService interface {
	// Recipes is the lookup for a page URL (the four-slot answer as JSON).
	// It needs no API key: the registry is open to every agent.
	Recipes(ctx context.Context, pageURL string) (json.RawMessage, error)
	// SubmitRecipe checks, budgets and screens a submission.
	SubmitRecipe(ctx context.Context, req SubmitRecipeRequest) (RecipeSubmission, error)
	// RecipeSubmission reads a submission of apiKey's, waiting up to wait
	// while its screening runs.
	RecipeSubmission(ctx context.Context, apiKey, id string, wait time.Duration) (RecipeSubmission, error)
}

// IntegrationsService is the optional part of a Service that lists the
// payment integrations the proxy recognises (IntegrationsPath).
type IntegrationsService interface {
	PaymentIntegrations(ctx context.Context) (json.RawMessage, error)
}

// KeyAuthenticator is the optional part of a Service that checks an
// agent's API key (KeysAuthenticatePath).
type KeyAuthenticator interface {
	AuthenticateKey(ctx context.Context, apiKey string) (KeyInfo, error)
}

// MaxWait caps a long poll, below common proxy and client timeouts.
const MaxWait = 25 * time.Second

// maxBody bounds control request bodies.
const maxBody = 64 << 10

// NewHandler serves the control API over svc. It must only ever listen on
// loopback; every request needs the bearer token (compared in constant
// time).
func NewHandler(svc Service, token string, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := newRouteMux()
	reply := func(w http.ResponseWriter, r *http.Request, v any, err error) {
		if err != nil {
			log.LogAttrs(r.Context(), slog.LevelWarn, "control request refused",
				slog.String("path", r.Pattern), slog.String("code", string(agentvault.ErrorCode(err))), slog.String("reason", agentvault.ErrorMessage(err)))
			var ra interface{ RetryAfterDuration() time.Duration }
			if errors.As(err, &ra) {
				w.Header().Set("Retry-After", strconv.Itoa(int((ra.RetryAfterDuration()+time.Second-1)/time.Second)))
			}
			WriteError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(v)
	}
	decode := func(r *http.Request, v any) error {
		dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "request body is not valid JSON for this call")
		}
		return nil
	}
	rt := routes{mux: mux, reply: reply, decode: decode}
	mux.HandleFunc("POST /v1/sessions", decoded(rt, false, func(r *http.Request, req CreateSessionRequest) (CreateSessionResponse, error) {
		key, err := apiKeyOf(r, req.APIKey)
		if err != nil {
			return CreateSessionResponse{}, err
		}
		return svc.CreateSession(r.Context(), key)
	}))
	mux.HandleFunc("GET /v1/catalog", func(w http.ResponseWriter, r *http.Request) {
		key, err := apiKeyOf(r, r.URL.Query().Get("apiKey"))
		if err != nil {
			reply(w, r, nil, err)
			return
		}
		cat, err := svc.Catalog(r.Context(), key, r.URL.Query().Get("url"))
		reply(w, r, cat, err)
	})
	mux.HandleFunc("POST /v1/sessions/{id}/authorize", decoded(rt, true, func(r *http.Request, req AuthorizeRequest) (AuthorizeResponse, error) {
		return svc.Authorize(r.Context(), r.PathValue("id"), req)
	}))
	mux.HandleFunc("POST /v1/sessions/{id}/events", decoded(rt, false, func(r *http.Request, ev EventRequest) (EventResponse, error) {
		return EventResponse{}, svc.Event(r.Context(), r.PathValue("id"), ev)
	}))
	mux.HandleFunc("GET /v1/sessions/{id}/report", func(w http.ResponseWriter, r *http.Request) {
		rep, err := svc.Report(r.Context(), r.PathValue("id"))
		reply(w, r, rep, err)
	})
	mux.HandleFunc("DELETE /v1/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		resp, err := svc.CloseSession(r.Context(), r.PathValue("id"))
		reply(w, r, resp, err)
	})
	mux.HandleFunc("GET /v1/waits/{id}", func(w http.ResponseWriter, r *http.Request) {
		timeout := MaxWait
		if v := r.URL.Query().Get("timeout"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				reply(w, r, nil, agentvault.Errorf(agentvault.CodeInvalidInput, "timeout is not a duration"))
				return
			}
			timeout = min(d, MaxWait)
		}
		a, err := svc.Wait(r.Context(), r.PathValue("id"), timeout)
		reply(w, r, a, err)
	})
	credentialRoutes(rt, svc)
	accountRoutes(rt, svc)
	handoffRoutes(rt, svc)
	hintRoutes(rt, svc)
	appRoutes(rt, svc)
	mux.HandleFunc("GET "+RecipesPath, func(w http.ResponseWriter, r *http.Request) {
		l, err := svc.Recipes(r.Context(), r.URL.Query().Get("url"))
		reply(w, r, l, err)
	})
	post(rt, SubmissionsPath, svc.SubmitRecipe)
	mux.HandleFunc("GET "+SubmissionsPath+"/{id}", func(w http.ResponseWriter, r *http.Request) {
		wait, err := waitParam(r.URL.Query().Get("wait"))
		if err != nil {
			reply(w, r, nil, err)
			return
		}
		s, err := svc.RecipeSubmission(r.Context(), r.URL.Query().Get("apiKey"), r.PathValue("id"), wait)
		reply(w, r, s, err)
	})
	if is, ok := svc.(IntegrationsService); ok {
		mux.HandleFunc("GET "+IntegrationsPath, func(w http.ResponseWriter, r *http.Request) {
			l, err := is.PaymentIntegrations(r.Context())
			reply(w, r, l, err)
		})
	}
	if ka, ok := svc.(KeyAuthenticator); ok {
		post(rt, KeysAuthenticatePath, func(ctx context.Context, req AuthenticateKeyRequest) (KeyInfo, error) {
			return ka.AuthenticateKey(ctx, req.APIKey)
		})
	}
	h := &handler{mux: mux, want: []byte("Bearer " + token)}
	if ok, is := svc.(OwnKeyService); is {
		h.keys, mux.keys = ok, ok
	}
	return h
}

// routes is what each group of control routes registers through: the mux,
// and the one way a request body is read and an answer written.
type routes struct {
	mux    *routeMux
	reply  func(http.ResponseWriter, *http.Request, any, error)
	decode func(*http.Request, any) error
}

// decoded is the handler of a call whose JSON body decodes into an In:
// call's answer is written back, and when waits is set a Pending in its
// error is answered 202 (writePending: authorize, a TOTP take).
func decoded[In, Out any](rt routes, waits bool, call func(*http.Request, In) (Out, error)) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		var in In
		if err := rt.decode(r, &in); err != nil {
			rt.reply(w, r, nil, err)
			return
		}
		out, err := call(r, in)
		if waits && writePending(w, err) {
			return
		}
		rt.reply(w, r, out, err)
	}
}

// post registers POST path for a call that needs nothing but its body.
func post[In, Out any](rt routes, path string, call func(context.Context, In) (Out, error)) {
	rt.mux.HandleFunc("POST "+path, decoded(rt, false, func(r *http.Request, in In) (Out, error) {
		return call(r.Context(), in)
	}))
}

// routeMux registers every control route with the rule package authz gives
// it (P24): a route authz's table does not name stops the handler from
// being built. The control token admits mcpd, which calls for an agent's
// key; an agent's own key as the bearer admits the calls authz marks
// OwnKey, each bound to that key (ownkey.go). The service behind each
// route checks the key, its scope and, for a call that acts for a person,
// that person's consent.
type routeMux struct {
	*http.ServeMux
	patterns []string
	keys     OwnKeyService // nil: the control token only
}

func newRouteMux() *routeMux { return &routeMux{ServeMux: http.NewServeMux()} }

func (m *routeMux) HandleFunc(pattern string, fn func(http.ResponseWriter, *http.Request)) {
	rule := authz.MustLookup(authz.Control, pattern)
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		c := callerOf(r.Context())
		if err := rule.Allows(c.sub); err != nil {
			WriteError(w, err)
			return
		}
		if c.sub.Kind == authz.AgentKeyKind {
			if err := c.bind(r, pattern, m.keys); err != nil {
				WriteError(w, err)
				return
			}
		}
		fn(w, r)
	})
}

// Routes lists the route patterns a handler from NewHandler serves, for
// the test that holds them against authz's table.
func Routes(h http.Handler) []string {
	ch, ok := h.(*handler)
	if !ok {
		return nil
	}
	return slices.Clone(ch.mux.patterns)
}

// handler is NewHandler's answer: the bearer check in front of the routes.
type handler struct {
	mux  *routeMux
	want []byte
	keys OwnKeyService // nil: the control token only
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	got := r.Header.Get("Authorization")
	if len(h.want) > len("Bearer ") && subtle.ConstantTimeCompare([]byte(got), h.want) == 1 {
		h.mux.ServeHTTP(w, r)
		return
	}
	bearer, _ := strings.CutPrefix(got, "Bearer ")
	c, isKey, err := ownKeyCaller(r.Context(), h.keys, bearer)
	switch {
	case !isKey:
		WriteError(w, agentvault.Errorf(agentvault.CodeUnauthorized, "control token required (or an agent's own API key, for the calls docs/byob.md lists)"))
	case err != nil:
		WriteError(w, err)
	default:
		h.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	}
}

// waitParam reads an optional long-poll duration, capped at MaxWait.
func waitParam(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, agentvault.Errorf(agentvault.CodeInvalidInput, "wait is not a duration")
	}
	return min(d, MaxWait), nil
}

// WriteError answers an HTTP request with the coded error.
func WriteError(w http.ResponseWriter, err error) {
	body := agentvault.ErrorJSON(err)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set(agentvault.CodeHeader, string(agentvault.ErrorCode(err)))
	w.WriteHeader(agentvault.HTTPStatus(agentvault.ErrorCode(err)))
	_, _ = w.Write(body)
}

// writePending answers 202 with the Pending in err's chain, when there is
// one: a call that waits on the owner (authorize, a TOTP take).
func writePending(w http.ResponseWriter, err error) bool {
	var p *Pending
	if err == nil || !errors.As(err, &p) {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(p)
	return true
}
