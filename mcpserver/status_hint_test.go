package mcpserver

import (
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRefusalHintOnce: a refusal whose message already says what to do next
// does not repeat the hint (issue 13).
func TestRefusalHintOnce(t *testing.T) {
	for _, msg := range []string{"no page is open", "no page is open. Call open_page first.", "no page is open: call open_page first"} {
		res := statusError(agentvault.Errorf(agentvault.CodeNoPage, "%s", msg), nil)
		text := res.Content[0].(*mcp.TextContent).Text
		if n := strings.Count(strings.ToLower(text), "call open_page first"); n != 1 {
			t.Errorf("%q: the hint appears %d times in %q", msg, n, text)
		}
	}
}
