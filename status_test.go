package agentvault_test

import (
	"net/http"
	"testing"

	"github.com/agentvault/agentvault"
)

// TestHTTPStatus: the one code → status table, held against net/http's
// names for the numbers it writes.
func TestHTTPStatus(t *testing.T) {
	for code, want := range map[agentvault.Code]int{
		agentvault.CodeInvalidInput:            http.StatusBadRequest,
		agentvault.CodeKeyRevoked:              http.StatusUnauthorized,
		agentvault.CodeProxyAuth:               http.StatusProxyAuthRequired,
		agentvault.CodeSessionEnded:            http.StatusNotFound,
		agentvault.CodeConflict:                http.StatusConflict,
		agentvault.CodeBrowserLoginTimeout:     http.StatusUnprocessableEntity,
		agentvault.CodeBodyTooLarge:            http.StatusRequestEntityTooLarge,
		agentvault.CodeRateLimited:             http.StatusTooManyRequests,
		agentvault.CodeUpstreamTLS:             http.StatusBadGateway,
		agentvault.CodeTimeout:                 http.StatusGatewayTimeout,
		agentvault.CodeAuditUnavailable:        http.StatusServiceUnavailable,
		agentvault.CodeSubstitution:            http.StatusInternalServerError,
		agentvault.CodeAmountMismatch:          http.StatusForbidden,
		agentvault.CodeDestinationUnauthorized: http.StatusForbidden,
	} {
		if got := agentvault.HTTPStatus(code); got != want {
			t.Errorf("%s: %d, want %d", code, got, want)
		}
	}
}
