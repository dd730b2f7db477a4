package mcpserver

import (
	"strings"
	"testing"

	"github.com/agentvault/agentvault/control"
)

// TestOwnerSentenceNamesTheEmailOnlyWhenOneGoesOut: the agent is told the
// owner can approve "from the email" only when proxyd says an email goes
// out; otherwise the dashboard is named (issue 26).
func TestOwnerSentenceNamesTheEmailOnlyWhenOneGoesOut(t *testing.T) {
	for _, kind := range []string{"new_destination", "purchase", "cvv_entry", "signup", "challenge"} {
		without := ownerSentence("fill_checkout", &control.Pending{Kind: kind, Site: "shop.example"})
		with := ownerSentence("fill_checkout", &control.Pending{Kind: kind, Site: "shop.example", Email: true})
		if strings.Contains(strings.ToLower(without), "email") || !strings.Contains(without, "dashboard") {
			t.Errorf("%s without email: %q", kind, without)
		}
		if !strings.Contains(with, "the email titled") || !strings.Contains(with, "dashboard") {
			t.Errorf("%s with email: %q", kind, with)
		}
	}
}
