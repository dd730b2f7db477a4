// Package agentvault holds the domain vocabulary every other package shares:
// the one error type with a stable code. It imports nothing but the standard
// library, and it must never import HTTP, MCP, goproxy or playwright. The
// mapping of codes to HTTP statuses is here (HTTPStatus, a table of
// numbers, used by the control API and the proxy), and to MCP results in
// package mcpserver, exactly once each.
package agentvault

import (
	"errors"
	"fmt"
)

// Code is a stable, machine-readable reason. Agents and tests branch on it, so
// a code never changes meaning once it has shipped.
type Code string

// The codes. Names follow the MCP tool reference (seed 004) where it has one.
const (
	CodeInternal      Code = "internal"
	CodeInvalidInput  Code = "invalid_input"
	CodeInvalidParams Code = "invalid_params"
	CodeNotFound      Code = "not_found"
	CodeConflict      Code = "conflict"
	CodeSealed        Code = "sealed"
	CodeUnauthorized  Code = "unauthorized"

	// Destinations and scope (P1, P2, P3, P4, P16).
	CodeDestinationUnauthorized Code = "destination_unauthorized"
	CodeScopeDenied             Code = "scope_denied"
	CodeInsecureSite            Code = "insecure_site"
	CodeInsecurePage            Code = "insecure_page"
	CodePrivateDestination      Code = "private_destination"
	CodeProxyLoop               Code = "proxy_loop"
	CodeMerchantBlocked         Code = "merchant_blocked"
	CodeCardPaused              Code = "card_paused"

	// Substitution and the wire (P8, P9, P12, P14).
	CodeUnknownToken     Code = "unknown_token"
	CodeTokenNotAllowed  Code = "token_not_authorized"
	CodeSubstitution     Code = "substitution_failed"
	CodeBodyTooLarge     Code = "body_too_large"
	CodeTooManyTunnels   Code = "too_many_tunnels"
	CodeMalformedRequest Code = "malformed_request"
	CodeAuditUnavailable Code = "audit_unavailable"
	CodeUpstream         Code = "upstream_error"
	CodeUpstreamTLS      Code = "upstream_tls"
	CodeTimeout          Code = "timeout"
	CodeProxyAuth        Code = "proxy_auth_required"
	// A grant ended (P21): its time ran out, or a card grant was spent on a
	// purchase the site accepted. The agent fills again to authorize anew.
	CodeGrantExpired    Code = "grant_expired"
	CodeGrantUsed       Code = "grant_used"
	CodeGrantInUse      Code = "grant_in_use"
	CodeTooManySessions Code = "too_many_sessions"
	// The agent sent its own Signature, Signature-Input or Signature-Agent
	// header: the agent's identity on the wire is proxyd's to sign, for the
	// sites the owner chose (package botauth), never the agent's.
	CodeSignatureHeaders Code = "signature_headers_refused"

	// Keys and rates.
	CodeInvalidAPIKey Code = "invalid_api_key"
	CodeKeyRevoked    Code = "key_revoked"
	CodeRateLimited   Code = "rate_limited"

	// Credential writes (seed 004, create_login): the key may not create logins.
	CodeSignupNotEnabled Code = "signup_not_enabled"

	// Spending and approvals (P18).
	CodeLimitReached         Code = "limit_reached"
	CodeDailyLimit           Code = "daily_limit"
	CodeMonthlyLimit         Code = "monthly_limit"
	CodeAmountMismatch       Code = "amount_mismatch"
	CodeAmountUnknown        Code = "amount_unknown"
	CodeAmountUnconvertible  Code = "amount_unconvertible"
	CodeCheckoutTotalUnknown Code = "checkout_total_unknown"
	CodeApprovalDenied       Code = "approval_denied"
	CodeApprovalExpired      Code = "approval_expired"
	CodeApprovalPending      Code = "approval_pending" // asked, not answered yet: the control API answers 202
	CodeCVVEntryRequired     Code = "cvv_entry_required"

	// The browser tools (P19).
	CodeSensitiveDataBlocked Code = "sensitive_data_blocked"
	CodeClipboardBlocked     Code = "clipboard_blocked"
	CodeNoPage               Code = "no_page"
	CodeUnknownTarget        Code = "unknown_target"
	CodeFieldOrder           Code = "card_field_order"
	CodeFieldNotFound        Code = "field_not_found"
	CodeChallengeRequired    Code = "challenge_required"
	CodeInvalidHint          Code = "invalid_hint"
	CodeSessionEnded         Code = "session_ended"

	// The hosted MCP server (seed 004, "On the hosted server"): a call past
	// its per-call limit, too many answers nobody collected, a write whose
	// outcome is unknown (never retried blind, P20), the server restarting.
	CodeHardTimeout         Code = "hard_timeout"
	CodeTooManyPending      Code = "too_many_pending"
	CodeWriteOutcomeUnknown Code = "write_outcome_unknown"
	CodeUnavailable         Code = "unavailable"
	// A hand-off refused before anyone was notified (seed 004): the only
	// evidence was a field that might be a code input, or the page scan did
	// not finish.
	CodeHandoffNotApplicable    Code = "handoff_not_applicable"
	CodeChallengeScanIncomplete Code = "challenge_scan_incomplete"

	// Residential egress (seed 004, issue 25): the upstream proxy the owner
	// routes through is not answering (nothing went out), or it dropped a
	// connection that was carrying a request.
	CodeEgressUnavailable Code = "egress_unavailable"
	CodeEgressLost        Code = "egress_lost"

	// Payment integrations (issue 17): the frame encrypts the card in its own
	// script before it leaves the browser, so no value can be substituted on
	// the wire; mcpd refuses the fill before anything is typed.
	CodeClientSideEncryption Code = "client_side_encryption"

	// Checkout recipes (seed 004, submit_checkout_recipe): the submission
	// breaks a registry rule; the agent fixes it rather than resending it.
	CodeInvalidRecipe Code = "invalid_recipe"

	// Portal credentials (seed 003, package credentials).
	CodeForbidden   Code = "forbidden"    // the caller's role or ownership does not allow it
	CodeLinkUsed    Code = "link_used"    // a one-time link was already opened or used
	CodeLinkExpired Code = "link_expired" // a one-time link is past its lifetime

	// Accounts (seed 004, Open an account): create_login and the login
	// writes. write_outcome_unknown means a write may have landed: never
	// retry it blind (P20).
	CodeInvalidPolicy      Code = "invalid_policy"
	CodePasswordTooShort   Code = "password_too_short"
	CodeInvalidWebsite     Code = "invalid_website"
	CodeInvalidEmail       Code = "invalid_email"
	CodeInvalidUsername    Code = "invalid_username"
	CodeLoginLimit         Code = "login_limit"
	CodeRequestNotFound    Code = "request_not_found"
	CodeUsernameAlreadySet Code = "username_already_set"
	CodeNotRotatable       Code = "not_rotatable"
	// (too_many_pending and write_outcome_unknown are the hosted server's
	// codes above: the same refusals.)
	// Page hints (seed 004, declare_page_hint).
	CodeHintUnresolved Code = "hint_unresolved"
	CodeHintUncertain  Code = "hint_uncertain"
	// login.totp_secret read a seed the page echoed from its own request
	// (its address, form, referrer or cookies): text the agent chose, not
	// one the site issued; nothing was stored (P24).
	CodeTOTPSeedUntrusted Code = "totp_seed_untrusted"
	// browser_login (seed 000): the login did not conclude. Category
	// unprocessable: a client must not retry them on its own (a retry
	// submits the password again); the model decides.
	CodeBrowserCaptchaPending Code = "browser.captcha_pending"
	CodeBrowserLoginTimeout   Code = "browser.login_timeout"
)

// Error is the project's one error type. Message is safe to show to an agent
// or an owner: it never holds a secret, a token's real value or a stack. Err is
// the internal cause, for logs only, and must not hold a secret either.
type Error struct {
	Code    Code
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an *Error with a public message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap attaches an internal cause to a coded error.
func Wrap(code Code, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: cause}
}

// ErrorCode returns the code of the first *Error in err's chain, or
// CodeInternal for any other non-nil error.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the public message of err. An error that is not an
// *Error is internal: its text might carry anything, so it is not shown.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		if e.Message != "" {
			return e.Message
		}
		return string(e.Code)
	}
	return "internal error"
}
