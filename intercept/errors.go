package intercept

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
)

// httpStatus maps an error code to the HTTP status of a refusal. It is the
// one place this mapping lives (docs/DESIGN.md).
func httpStatus(code agentvault.Code) int {
	switch code {
	case agentvault.CodeInvalidInput, agentvault.CodeInvalidParams, agentvault.CodeMalformedRequest:
		return http.StatusBadRequest
	case agentvault.CodeUnauthorized, agentvault.CodeInvalidAPIKey, agentvault.CodeKeyRevoked:
		return http.StatusUnauthorized
	case agentvault.CodeProxyAuth:
		return http.StatusProxyAuthRequired
	case agentvault.CodeNotFound, agentvault.CodeSessionEnded:
		return http.StatusNotFound
	case agentvault.CodeConflict:
		return http.StatusConflict
	case agentvault.CodeBodyTooLarge:
		return http.StatusRequestEntityTooLarge
	case agentvault.CodeTooManyTunnels, agentvault.CodeRateLimited, agentvault.CodeTooManySessions:
		return http.StatusTooManyRequests
	case agentvault.CodeUpstream, agentvault.CodeUpstreamTLS:
		return http.StatusBadGateway
	case agentvault.CodeTimeout:
		return http.StatusGatewayTimeout
	case agentvault.CodeSealed, agentvault.CodeAuditUnavailable:
		return http.StatusServiceUnavailable
	case agentvault.CodeInternal, agentvault.CodeSubstitution:
		return http.StatusInternalServerError
	}
	// Every policy refusal (destination, scope, insecure, private, loop,
	// tokens, limits, approvals) is a 403.
	return http.StatusForbidden
}

// errorBody renders err as the control API's error JSON. Only the public
// message goes out; the internal cause stays for logs.
func errorBody(err error) []byte {
	b, _ := json.Marshal(control.ErrorBody{
		Code:    string(agentvault.ErrorCode(err)),
		Message: agentvault.ErrorMessage(err),
	})
	return append(b, '\n')
}

// writeError answers an HTTP handler's request with the coded error.
func writeError(w http.ResponseWriter, err error) {
	body := errorBody(err)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Agentvault-Code", string(agentvault.ErrorCode(err)))
	w.WriteHeader(httpStatus(agentvault.ErrorCode(err)))
	_, _ = w.Write(body)
}

// errorResponse builds a refusal as an *http.Response for the raw HTTP/1.1
// paths (CONNECT refusals, the tunnel loop). It always closes the connection.
func errorResponse(req *http.Request, err error) *http.Response {
	body := errorBody(err)
	status := httpStatus(agentvault.ErrorCode(err))
	resp := &http.Response{
		StatusCode:    status,
		Status:        strconv.Itoa(status) + " " + http.StatusText(status),
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{},
		ContentLength: int64(len(body)),
		Body:          nopBody(body),
		Close:         true,
		Request:       req,
	}
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Set("X-Agentvault-Code", string(agentvault.ErrorCode(err)))
	resp.Header.Set("Connection", "close")
	return resp
}
