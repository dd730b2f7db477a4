package mcpserver

import (
	"context"
	"fmt"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Open an account (seed 004): create_login, get_signup_request,
// wait_for_signup_approval, set_login_username, rotate_login_password.
// They need no browser; each runs on the call's session (starting one
// without a browser when there is none), so the run report lists the
// login writes. No answer holds a password: the vault generates it.

// AccountControl is the control API's account part (control.Client
// implements it).
type AccountControl interface {
	CreateLogin(ctx context.Context, in control.CreateLoginIn) (control.SignupRequestOut, error)
	SignupRequest(ctx context.Context, in control.SignupRequestIn) (control.SignupRequestOut, error)
	WaitSignup(ctx context.Context, in control.SignupRequestIn) (control.SignupRequestOut, error)
	SetLoginUsername(ctx context.Context, in control.LoginUsernameIn) (control.DoneOut, error)
	RotateLoginPassword(ctx context.Context, in control.LoginRotateIn) (control.DoneOut, error)
}

var _ AccountControl = (*control.Client)(nil)

// Waits of wait_for_signup_approval: the agent's timeout is clamped to
// 45 s (most MCP hosts give up on a call at about 60 s); each long poll of
// proxyd lasts at most signupPoll.
const (
	signupWaitMax = 45 * time.Second
	signupPoll    = 20 * time.Second
)

type passwordRulesIn struct {
	MinLength      int    `json:"minLength,omitempty" jsonschema:"The site's stated minimum password length, when longer than the default of 24. At most 64."`
	MaxLength      int    `json:"maxLength,omitempty" jsonschema:"The site's stated maximum password length. Below 12 is refused."`
	NoSymbols      bool   `json:"noSymbols,omitempty" jsonschema:"true only when the site rejects punctuation."`
	AllowedSymbols string `json:"allowedSymbols,omitempty" jsonschema:"The exact punctuation the site accepts; filtered to the vault's set !@#$*+-_=.?"`
	NoTripleRepeat bool   `json:"noTripleRepeat,omitempty" jsonschema:"true when the site rejects three identical characters in a row."`
}

func (r passwordRulesIn) wire() control.PasswordRules {
	return control.PasswordRules{MinLength: r.MinLength, MaxLength: r.MaxLength, NoSymbols: r.NoSymbols, AllowedSymbols: r.AllowedSymbols, NoTripleRepeat: r.NoTripleRepeat}
}

type createLoginIn struct {
	SessionArg
	Website  string `json:"website" jsonschema:"The site's registrable domain, e.g. example.com (not the signup URL). A bare suffix such as com is refused."`
	Email    string `json:"email" jsonschema:"A mailbox the agent controls. Never invent one: the owner sees it before deciding."`
	Username string `json:"username,omitempty" jsonschema:"The site's own handle, only when the site has already accepted it; otherwise set it later with set_login_username."`
	passwordRulesIn
}

type signupRequestIn struct {
	SessionArg
	RequestID string `json:"requestId" jsonschema:"The requestId create_login returned."`
}

type waitSignupIn struct {
	SessionArg
	RequestID string `json:"requestId" jsonschema:"The requestId create_login returned."`
	Timeout   int    `json:"timeout" jsonschema:"Milliseconds to wait, greater than 0; clamped to 45000. Call again to keep waiting."`
}

type setUsernameIn struct {
	SessionArg
	Label    string `json:"label" jsonschema:"The login's label (login.label from the approved request, or the token catalog)."`
	Username string `json:"username" jsonschema:"The handle the site has already accepted."`
}

type rotateIn struct {
	SessionArg
	Label string `json:"label" jsonschema:"The login's label."`
	passwordRulesIn
}

const (
	descCreateLogin = "Open an account on a site: files a signup request and answers {requestId, status, expiresAt, note}, never a credential. status pending: wait with wait_for_signup_approval (do not call create_login again, that opens a second request). status approved (a site the owner pre-approved for this email): read the tokens with get_signup_request now. " +
		"The vault generates the password (12 to 64 characters, 24 by default, lower, upper, digit and a symbol unless noSymbols); pass only rules the site's form states. Errors: signup_not_enabled, too_many_pending, login_limit, invalid_website, invalid_email, invalid_username, invalid_policy, password_too_short, rate_limited, write_outcome_unknown (never retry blind)."
	descGetSignup   = "Read a signup request once, without waiting. Answers JSON {status, ...}: pending (check back), approved (with login: the catalog entry whose tokens fill the signup form with fill_login, passwordPolicy and passwordOwnerManaged), denied or expired (tell the user and stop). Errors: request_not_found, scope_denied."
	descWaitSignup  = "Wait for the owner to decide on a signup request (timeout in ms, at most 45000). Answers JSON with status approved (as get_signup_request), denied, expired, still_pending (call again) or unknown (a poll failed: call again and check get_token_catalog), each with a note. Never call create_login again for the same site."
	descSetUsername = "Record the handle a site has already accepted on a login this key opened, last, after the site confirmed it. Once only: the same handle again succeeds, another is username_already_set. Errors: not_found, invalid_username, signup_not_enabled, daily_limit, rate_limited, write_outcome_unknown (re-send the same handle)."
	descRotate      = "Have the vault generate a new password for a login this key opened in the last 7 days, when the site rejected the generated one at signup or on a change form asking only for a new password (never one asking for the current password). The tokens stay the same: fill the password token again. Errors: not_rotatable, invalid_policy, password_too_short, signup_not_enabled, daily_limit, rate_limited, write_outcome_unknown (stop and hand it to the owner)."
)

func (s *Server) registerAccounts() {
	if _, ok := s.cfg.Control.(AccountControl); !ok {
		return
	}
	addTool(s, "create_login", descCreateLogin, false, s.createLogin)
	addTool(s, "get_signup_request", descGetSignup, true, s.getSignupRequest)
	addTool(s, "wait_for_signup_approval", descWaitSignup, true, s.waitForSignupApproval)
	addTool(s, "set_login_username", descSetUsername, false, s.setLoginUsername)
	addTool(s, "rotate_login_password", descRotate, false, s.rotateLoginPassword)
}

func (s *Server) accounts() AccountControl { return s.cfg.Control.(AccountControl) }

// accountSession is the call's session, started without a browser when
// there is none: the login writes land in its run report.
func (s *Server) accountSession(ctx context.Context, handle string) (string, error) {
	ss, err := s.ensureSession(ctx, handle)
	if err != nil {
		return "", err
	}
	return ss.ctl.ID, nil
}

func (s *Server) createLogin(ctx context.Context, in createLoginIn) (*mcp.CallToolResult, error) {
	sid, err := s.accountSession(ctx, in.Session)
	if err != nil {
		return nil, err
	}
	out, err := s.accounts().CreateLogin(ctx, control.CreateLoginIn{APIKey: s.apiKeyOf(ctx), Session: sid, Website: in.Website,
		Email: in.Email, Username: in.Username, PasswordRules: in.passwordRulesIn.wire()})
	if err != nil {
		return nil, err
	}
	note := "Nothing here is safe to type into a form. Wait for the owner with wait_for_signup_approval on this requestId; do not call create_login again."
	if out.Status == "approved" {
		note = "Pre-approved: the login exists. Call get_signup_request on this requestId now for its tokens; do not wait for a decision."
	}
	return jsonAnswer(okStatus(), struct {
		RequestID string    `json:"requestId"`
		Status    string    `json:"status"`
		ExpiresAt time.Time `json:"expiresAt"`
		Note      string    `json:"note"`
	}{out.RequestID, out.Status, out.ExpiresAt, note})
}

// signupAnswer is a request's wire answer for the agent.
type signupAnswer struct {
	RequestID            string                  `json:"requestId"`
	Status               string                  `json:"status"`
	Login                any                     `json:"login,omitempty"`
	PasswordPolicy       *control.PasswordPolicy `json:"passwordPolicy,omitempty"`
	PasswordOwnerManaged *bool                   `json:"passwordOwnerManaged,omitempty"`
	WaitedMs             *int64                  `json:"waitedMs,omitempty"`
	Reason               string                  `json:"reason,omitempty"`
	Note                 string                  `json:"note,omitempty"`
}

func answerOf(out control.SignupRequestOut) signupAnswer {
	a := signupAnswer{RequestID: out.RequestID, Status: out.Status}
	if out.Status == "approved" && len(out.Login) > 0 {
		a.Login, a.PasswordPolicy = out.Login, out.PasswordPolicy
		om := out.PasswordOwnerManaged
		a.PasswordOwnerManaged = &om
	}
	switch out.Status {
	case "approved":
		a.Note = "The login exists: fill login.tokens into the signup form with fill_login (the password token also fills a confirm-password field). Check which identifier tokens it carries."
	case "pending":
		a.Note = "The owner has not decided yet: check back, or wait with wait_for_signup_approval. Do not call create_login again."
	case "denied":
		a.Note = "The owner declined. Tell the user and stop."
	case "expired":
		a.Note = "The request expired before a decision. Tell the user; only a new create_login opens another."
	}
	return a
}

func (s *Server) getSignupRequest(ctx context.Context, in signupRequestIn) (*mcp.CallToolResult, error) {
	sid, err := s.accountSession(ctx, in.Session)
	if err != nil {
		return nil, err
	}
	out, err := s.accounts().SignupRequest(ctx, control.SignupRequestIn{APIKey: s.apiKeyOf(ctx), Session: sid, RequestID: in.RequestID})
	if err != nil {
		return nil, err
	}
	return jsonAnswer(okStatus(), answerOf(out))
}

// finalSignupCode reports whether a poll's refusal ends the wait: nothing
// a later poll could change (an unknown request, a scope removed, a key
// refused). Anything else (a dropped connection, 429, 5xx) is retried.
func finalSignupCode(c agentvault.Code) bool {
	switch c {
	case agentvault.CodeRequestNotFound, agentvault.CodeScopeDenied, agentvault.CodeInvalidAPIKey, agentvault.CodeKeyRevoked,
		agentvault.CodeSignupNotEnabled, agentvault.CodeInvalidInput:
		return true
	}
	return false
}

func (s *Server) waitForSignupApproval(ctx context.Context, in waitSignupIn) (*mcp.CallToolResult, error) {
	if in.Timeout <= 0 {
		return invalidParams("timeout must be greater than 0 (milliseconds, at most 45000); nothing was waited on"), nil
	}
	total := min(time.Duration(in.Timeout)*time.Millisecond, signupWaitMax)
	sid, err := s.accountSession(ctx, in.Session)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	deadline := start.Add(total)
	var lastErr error
	for {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		poll := min(left, signupPoll)
		pctx, cancel := context.WithTimeout(ctx, poll+5*time.Second)
		out, err := s.accounts().WaitSignup(pctx, control.SignupRequestIn{APIKey: s.apiKeyOf(ctx), Session: sid, RequestID: in.RequestID, TimeoutMs: int(poll / time.Millisecond)})
		cancel()
		if ctx.Err() != nil {
			return nil, agentvault.Wrap(agentvault.CodeTimeout, ctx.Err(), "the wait was cancelled; call wait_for_signup_approval again with the same requestId")
		}
		if err != nil {
			if finalSignupCode(agentvault.ErrorCode(err)) {
				return nil, err
			}
			lastErr = err
			// Do not spin on a refusal that answers at once.
			select {
			case <-ctx.Done():
			case <-time.After(min(time.Second, max(time.Until(deadline), 0))):
			}
			continue
		}
		lastErr = nil
		if out.Status != "pending" {
			return jsonAnswer(okStatus(), answerOf(out))
		}
	}
	waited := time.Since(start).Milliseconds()
	if lastErr != nil {
		return jsonAnswer(okStatus(), signupAnswer{RequestID: in.RequestID, Status: "unknown", WaitedMs: &waited,
			Reason: "the last poll failed: " + string(agentvault.ErrorCode(lastErr)),
			Note:   "The owner may already have approved. Call wait_for_signup_approval again with the same requestId, and check get_token_catalog."})
	}
	return jsonAnswer(okStatus(), signupAnswer{RequestID: in.RequestID, Status: "still_pending", WaitedMs: &waited,
		Note: "The request is still live. Call wait_for_signup_approval again with the same requestId; tell the user the owner has not decided yet."})
}

func (s *Server) setLoginUsername(ctx context.Context, in setUsernameIn) (*mcp.CallToolResult, error) {
	sid, err := s.accountSession(ctx, in.Session)
	if err != nil {
		return nil, err
	}
	if _, err := s.accounts().SetLoginUsername(ctx, control.LoginUsernameIn{APIKey: s.apiKeyOf(ctx), Session: sid, Label: in.Label, Username: in.Username}); err != nil {
		return nil, err
	}
	return prose(okStatus(), "Username recorded on login "+in.Label+"."), nil
}

func (s *Server) rotateLoginPassword(ctx context.Context, in rotateIn) (*mcp.CallToolResult, error) {
	sid, err := s.accountSession(ctx, in.Session)
	if err != nil {
		return nil, err
	}
	if _, err := s.accounts().RotateLoginPassword(ctx, control.LoginRotateIn{APIKey: s.apiKeyOf(ctx), Session: sid, Label: in.Label, PasswordRules: in.passwordRulesIn.wire()}); err != nil {
		return nil, err
	}
	return prose(okStatus(), "A new password was generated and stored for login "+in.Label+". Fill the same password token again: the new password goes in."), nil
}

// invalidParams refuses a call for its arguments before it runs, the way
// an MCP SDK answers a schema refusal, so the text is what seed 004 says a
// client sees: a tool error beginning "MCP error -32602" (the JSON-RPC
// invalid-params code), with no status line, as for the SDK's own refusals.
func invalidParams(format string, a ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{
		Text: fmt.Sprintf("MCP error %d: ", jsonrpc.CodeInvalidParams) + fmt.Sprintf(format, a...)}}}
}
