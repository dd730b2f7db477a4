package control

import (
	"encoding/json"
	"time"

	"github.com/agentvault/agentvault"
)

// Paths of the control API. Session paths take the session id after
// SessionsPath.
const (
	SessionsPath = "/v1/sessions"
	CatalogPath  = "/v1/catalog"
	// IntegrationsPath is the payment integrations proxyd recognises: the
	// shipped list merged with the owner's policy.payment_integrations, as
	// a JSON array of policy.Integration. mcpd reads it to refuse a fill
	// into a client-side-encryption frame the owner listed.
	IntegrationsPath = "/v1/payment-integrations"
)

// Event types accepted by POST /v1/sessions/{id}/events.
const (
	EventConfirmation = "confirmation"
	EventFill         = "fill"
	EventCredential   = "credential_write"
	// EventLoginDiagnostic says browser_login kept a masked diagnostic
	// capture of a sign-in that did not succeed (seed 000): the event
	// carries its reference, never the capture (CheckLoginDiagnostic).
	EventLoginDiagnostic = "login_diagnostic"
)

// CreateSessionRequest opens a browser session under an API key.
type CreateSessionRequest struct {
	APIKey string `json:"apiKey"`
}

// CreateSessionResponse tells the browser how to reach the proxy and which CA
// to trust for the MITM leaves.
type CreateSessionResponse struct {
	ID            string `json:"id"`
	ProxyURL      string `json:"proxyURL"`
	ProxyUser     string `json:"proxyUser"`
	ProxyPassword string `json:"proxyPassword"`
	// CASPKI is the base64 SHA-256 of the CA's SubjectPublicKeyInfo (the
	// value Chromium's --ignore-certificate-errors-spki-list takes).
	CASPKI string `json:"caSPKI"`
	CAPEM  string `json:"caPEM"`
	// ExpiresAt, when set, is when the session's credential lapses (the
	// proxy's age limit for a session); the hosted MCP server ends the
	// session a minute before.
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// ResidentialEgress says the deployment sends every connection to a
	// site through the owner's upstream egress proxy: the session is HTTPS
	// only, and open_page opens an http:// address as https:// (seed 004).
	ResidentialEgress bool `json:"residentialEgress,omitempty"`
}

// OrderTotal is a checkout total as the page shows it. Amount is a decimal
// string ("12.34") so that no float rounding happens on the way.
type OrderTotal struct {
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

// AuthorizeRequest asks proxyd to bind a token to the page about to be
// filled. PageURL is the top-level page, FrameURL the frame holding the
// field when it differs (payment iframes).
type AuthorizeRequest struct {
	Token      string      `json:"token"`
	PageURL    string      `json:"pageURL"`
	FrameURL   string      `json:"frameURL,omitempty"`
	OrderTotal *OrderTotal `json:"orderTotal,omitempty"`
	// CVVSpent, on a card's security code, says the authorization its
	// number gave was spent by an action in between (a click, another
	// field, a wait that returned): the owner approves the purchase again.
	CVVSpent bool `json:"cvvSpent,omitempty"`
}

// AuthorizeResponse says what to type. For secret fields (card number, CVV,
// password, TOTP) Value is a format-preserving stand-in and StandIn is true;
// proxyd swaps it for the real value on the wire. For identity, address and
// login identifiers Value is the real value.
type AuthorizeResponse struct {
	Value   string `json:"value"`
	Kind    string `json:"kind"`
	Field   string `json:"field"`
	StandIn bool   `json:"standIn"`
}

// EventRequest reports something the browser side observed.
type EventRequest struct {
	Type       string      `json:"type"`
	OrderTotal *OrderTotal `json:"orderTotal,omitempty"`
	Kinds      []string    `json:"kinds,omitempty"`
	// Site is the registrable domain of a credential write event, the
	// sign-in page's host of a login diagnostic, the confirmation page's
	// host of a confirmation that carries a receipt.
	Site string `json:"site,omitempty"`
	// Login, Outcome and Artifact are a login diagnostic's: the stored
	// login's label, how the sign-in ended (LoginOutcomes) and the
	// capture's reference (NewLoginArtifact).
	Login    string `json:"login,omitempty"`
	Outcome  string `json:"outcome,omitempty"`
	Artifact string `json:"artifact,omitempty"`
	// Receipt, on a confirmation, is the reference of the masked receipt
	// image mcpd kept for a session that filled no token (seed 004,
	// get_session_outcome; NewReceiptArtifact), never the image.
	Receipt string `json:"receipt,omitempty"`
}

// EventResponse is the empty answer to an event.
type EventResponse struct{}

// Report summarises a session. It never holds a value, only kinds and counts.
type Report struct {
	FilledFieldKinds     []string    `json:"filledFieldKinds"`
	DeniedCount          int         `json:"deniedCount"`
	ConfirmationDetected bool        `json:"confirmationDetected"`
	OrderTotal           *OrderTotal `json:"orderTotal"`
	CredentialWrites     []string    `json:"credentialWrites"`
	// Ended says the proxy session has ended (closed or expired) and this
	// is its final report: its proxy credential no longer works.
	Ended bool `json:"ended,omitempty"`
	// EgressLost says the upstream egress proxy dropped a request of this
	// session: the proxy refuses its every later request, and mcpd every
	// later call on it but the report and the close (seed 004 egress_lost).
	EgressLost bool `json:"egressLost,omitempty"`
}

// CloseResponse is the answer to DELETE /v1/sessions/{id}.
type CloseResponse struct {
	Status string `json:"status"`
	Report Report `json:"report"`
}

// ErrorBody is every error answer: a stable code and a public message
// (agentvault.ErrorBody, which the proxy's refusals carry too).
type ErrorBody = agentvault.ErrorBody

// WaitsPath is where a pending authorization is waited on:
// GET /v1/waits/{id}?timeout=25s.
const WaitsPath = "/v1/waits"

// Pending is the 202 answer of authorize when the owner must decide first
// (a new site, a purchase over a threshold, a live CVV), and of a TOTP take
// that would replace a login's seed. The client returns it inside an
// approval_pending error (see PendingOf); wait on WaitID, then authorize
// (or take with the WaitID) again once the status is approved.
type Pending struct {
	Pending bool        `json:"pending"`
	WaitID  string      `json:"waitId"`
	Kind    string      `json:"kind"`
	Reason  string      `json:"reason"`
	Site    string      `json:"site"`
	Amount  *OrderTotal `json:"amount,omitempty"`
	// Login is the label of the login a totp_replace approval is about.
	Login     string    `json:"login,omitempty"`
	ExpiresAt time.Time `json:"expiresAt"`
	// Email is true when the owner is sent an email about this request
	// (notify.smtp is set up and the owner left email on): only then may
	// the agent tell the user to look for one.
	Email bool `json:"email,omitempty"`
}

func (p *Pending) Error() string { return "waiting for the owner: " + p.WaitID }

// WaitAnswer is the answer of GET /v1/waits/{id}: the approval's status
// (pending, approved, denied, expired) and, when it ended without a yes, the
// refusal code the fill gets.
type WaitAnswer struct {
	Status    string      `json:"status"`
	WaitID    string      `json:"waitId"`
	Kind      string      `json:"kind"`
	Reason    string      `json:"reason"`
	Site      string      `json:"site"`
	Amount    *OrderTotal `json:"amount,omitempty"`
	ExpiresAt time.Time   `json:"expiresAt"`
	Code      string      `json:"code,omitempty"`
	Message   string      `json:"message,omitempty"`
}

// Recipe registry paths (seed 004's get_checkout_recipes,
// submit_checkout_recipe, get_recipe_submission):
//
//	GET  /v1/recipes?url=..                        → the four-slot lookup
//	POST /v1/recipes/submissions                   SubmitRecipeRequest → RecipeSubmission
//	GET  /v1/recipes/submissions/{id}?apiKey=..&wait=15s → RecipeSubmission
const (
	RecipesPath     = "/v1/recipes"
	SubmissionsPath = "/v1/recipes/submissions"
)

// SubmitRecipeRequest is an agent's recipe submission. Recipe is the
// recipe body as the agent wrote it; proxyd checks it strictly.
type SubmitRecipeRequest struct {
	APIKey                string          `json:"apiKey"`
	Recipe                json.RawMessage `json:"recipe"`
	Note                  string          `json:"note,omitempty"`
	VerificationRequested bool            `json:"verificationRequested,omitempty"`
}

// RecipeSubmission is a submission's state as agents see it: its id, its
// status (pending, approved, merged, rejected, needs_human) and the
// verdict, empty while pending.
type RecipeSubmission struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Verdict string `json:"verdict"`
}

// KeysAuthenticatePath checks an agent's API key: POST {apiKey}, answered
// with the key's KeyInfo or invalid_api_key / key_revoked. The hosted MCP
// server authenticates its bearer keys with it, so that it never opens the
// owner's store.
const KeysAuthenticatePath = "/v1/keys/authenticate"

// AuthenticateKeyRequest is the body of KeysAuthenticatePath.
type AuthenticateKeyRequest struct {
	APIKey string `json:"apiKey"`
}

// KeyInfo is an API key as the owner set it up: its id and name, and what
// it may use. Never its secret.
type KeyInfo struct {
	ID              string   `json:"id"`
	Name            string   `json:"name"`
	AllCards        bool     `json:"allCards"`
	CardIDs         []string `json:"cardIds,omitempty"`
	AllLogins       bool     `json:"allLogins"`
	LoginIDs        []string `json:"loginIds,omitempty"`
	CanCreateLogins bool     `json:"canCreateLogins"`
	// AppChosen is whether the account holder has chosen on the
	// dashboard's Connected apps page what this key may use on the hosted
	// MCP server, and AppUses what they chose (AppUseCheckout,
	// AppUseLogins). Until a choice the hosted server runs only
	// get_checkout_recipes for the key (seed 004).
	AppChosen bool     `json:"appChosen"`
	AppUses   []string `json:"appUses,omitempty"`
}

// What a connection (an API key on the hosted MCP server) may use, as the
// account holder chooses it on Connected apps.
const (
	// AppUseCheckout: the browser and checkout tools (pages, the catalog,
	// fill_checkout, recipes).
	AppUseCheckout = "checkout"
	// AppUseLogins: the browser and the login tools (create_login and the
	// other account writes, fill_login).
	AppUseLogins = "logins"
)

// AppUses is every use a holder can choose, in the order the dashboard
// shows them.
var AppUses = []string{AppUseCheckout, AppUseLogins}
