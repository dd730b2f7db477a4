package agentvault

import "encoding/json"

// HTTPStatus maps an error code to the HTTP status of a refusal, for the
// control API and the proxy alike: the one place this mapping lives. It is a
// table of numbers (RFC 9110 section 15); this package speaks no HTTP.
func HTTPStatus(code Code) int {
	switch code {
	case CodeInvalidInput, CodeInvalidParams, CodeMalformedRequest, CodeInvalidRecipe:
		return 400 // Bad Request
	case CodeUnauthorized, CodeInvalidAPIKey, CodeKeyRevoked:
		return 401 // Unauthorized
	case CodeProxyAuth:
		return 407 // Proxy Authentication Required
	case CodeNotFound, CodeSessionEnded:
		return 404 // Not Found
	case CodeConflict:
		return 409 // Conflict
	case CodeBrowserCaptchaPending, CodeBrowserLoginTimeout:
		// Unprocessable, not unavailable: nothing may retry a sign-in on
		// its own (seed 000).
		return 422 // Unprocessable Content
	case CodeBodyTooLarge:
		return 413 // Content Too Large
	case CodeTooManyTunnels, CodeRateLimited, CodeTooManySessions:
		return 429 // Too Many Requests
	case CodeUpstream, CodeUpstreamTLS, CodeEgressLost:
		return 502 // Bad Gateway
	case CodeTimeout:
		return 504 // Gateway Timeout
	case CodeSealed, CodeAuditUnavailable, CodeEgressUnavailable:
		return 503 // Service Unavailable
	case CodeInternal, CodeSubstitution:
		return 500 // Internal Server Error
	}
	// Every policy refusal (destination, scope, insecure, private, loop,
	// tokens, limits, approvals) is a 403.
	return 403 // Forbidden
}

// CodeHeader is the response header that names a refusal's code, beside
// the error body, on the control API and on the proxy's refusals.
const CodeHeader = "X-Agentvault-Code"

// ErrorBody is every error answer's body: the stable code and the public
// message.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ErrorJSON renders err as the error body. Only the public message goes
// out; the internal cause stays for logs.
func ErrorJSON(err error) []byte {
	b, _ := json.Marshal(ErrorBody{Code: string(ErrorCode(err)), Message: ErrorMessage(err)})
	return append(b, '\n')
}
