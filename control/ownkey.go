package control

import (
	"context"
	"net/http"
	"strings"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/authz"
)

// OwnKeyService is the optional part of a Service that admits an agent
// driving its own browser (docs/byob.md): it makes the calls authz marks
// OwnKey itself, its API key as the bearer instead of mcpd's control
// token. The handler binds each such call to that key (ownKeyBindings):
// the key a call names must be the bearer's, and a session or a wait must
// be one of the key's own.
type OwnKeyService interface {
	KeyAuthenticator
	// SessionKeyID is the id of the API key that opened the session (an
	// ended session's too while its final report is kept), or not_found.
	SessionKeyID(ctx context.Context, sessionID string) (string, error)
	// WaitKeyID is the id of the API key whose fill waits on the approval,
	// or not_found.
	WaitKeyID(ctx context.Context, waitID string) (string, error)
}

// binding is how a call an agent makes with its own key is tied to it.
type binding int

const (
	// bindKeyParam: the call names an API key (the body's or the query's
	// apiKey): the bearer's, or none, which reads as the bearer's
	// (apiKeyOf).
	bindKeyParam binding = iota + 1
	// bindSession: {id} is a session the key opened.
	bindSession
	// bindWait: {id} is an approval a fill of the key waits on.
	bindWait
)

// ownKeyBindings ties every call authz marks OwnKey to the bearer's key.
// A route authz admits with an agent's own key but missing here is
// refused: no call runs unbound (TestOwnKeyBindingsMatchAuthz holds the
// two lists together).
var ownKeyBindings = map[string]binding{
	"POST /v1/sessions":                bindKeyParam,
	"GET /v1/catalog":                  bindKeyParam,
	"POST /v1/sessions/{id}/authorize": bindSession,
	"POST /v1/sessions/{id}/events":    bindSession,
	"GET /v1/sessions/{id}/report":     bindSession,
	"DELETE /v1/sessions/{id}":         bindSession,
	"GET /v1/waits/{id}":               bindWait,
}

// caller is who sent a control request: mcpd (the control token) or an
// agent with its own key.
type caller struct {
	sub    authz.Subject
	apiKey string // the bearer, for an agent's own key
	keyID  string
}

type callerKey struct{}

func callerOf(ctx context.Context) caller {
	if c, ok := ctx.Value(callerKey{}).(caller); ok {
		return c
	}
	return caller{sub: authz.AgentCaller}
}

// ownKeyCaller authenticates a bearer that is not the control token as an
// agent's API key. ok is false when it does not look like one (the caller
// then gets the control token's refusal).
func ownKeyCaller(ctx context.Context, svc OwnKeyService, bearer string) (c caller, ok bool, err error) {
	if svc == nil || !strings.HasPrefix(bearer, "avk_") {
		return caller{}, false, nil
	}
	info, err := svc.AuthenticateKey(ctx, bearer)
	if err != nil {
		return caller{}, true, err
	}
	return caller{sub: authz.AgentKeyCaller, apiKey: bearer, keyID: info.ID}, true, nil
}

// bind checks that a call an agent makes with its own key stays within
// that key, before the route runs.
func (c caller) bind(r *http.Request, pattern string, svc OwnKeyService) error {
	notFound := func(what string) error { return agentvault.Errorf(agentvault.CodeNotFound, "no such %s", what) }
	switch ownKeyBindings[pattern] {
	case bindKeyParam:
		return nil // the route reads its key through apiKeyOf
	case bindSession:
		id, err := svc.SessionKeyID(r.Context(), r.PathValue("id"))
		if err != nil || id != c.keyID {
			return notFound("session") // another key's session reads as unknown
		}
		return nil
	case bindWait:
		id, err := svc.WaitKeyID(r.Context(), r.PathValue("id"))
		if err != nil || id != c.keyID {
			return notFound("wait")
		}
		return nil
	}
	return agentvault.Errorf(agentvault.CodeForbidden, "this call is not bound to an agent's own key; it goes through mcpd")
}

// apiKeyOf is the API key a call names: what it gave, or, for an agent
// calling with its own key, the bearer (a call may leave it out; another
// key is refused).
func apiKeyOf(r *http.Request, given string) (string, error) {
	c := callerOf(r.Context())
	if c.sub.Kind != authz.AgentKeyKind {
		return given, nil
	}
	if given != "" && given != c.apiKey {
		return "", agentvault.Errorf(agentvault.CodeForbidden, "the apiKey of the call must be the one in its Authorization header (or left out)")
	}
	return c.apiKey, nil
}
