package dashboard

import "net/http"

// acceptKey is replaced by the consent work (credentials: a person accepts
// an API key offered to them); until it lands, accepting is refused.
func (h *Handler) acceptKey(w http.ResponseWriter, r *http.Request) {
	h.fail(w, r, http.StatusNotImplemented, "accepting API keys is not available yet")
}
