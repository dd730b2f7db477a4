package mcpserver

import (
	"context"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Seed 004 declare_page_hint: an order total that lives only in a
// cross-origin iframe is read where the hint points, and the card fill
// sends it with the authorize (no checkout_total_unknown); the seed's
// refusals each name their code.
func TestHintOrderTotalInCrossOriginFrame(t *testing.T) {
	h := newHarness(t)
	h.ok("open_page", map[string]any{"url": h.site.Shop.URL + "/overlay"})
	r, err := h.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_page_hint_kinds", Arguments: map[string]any{}})
	if err != nil || r.IsError || len(r.Content) != 2 {
		t.Fatalf("kinds: %v %+v", err, r)
	}
	// A JSON array: the status line is its own block, the array the next.
	if line := r.Content[0].(*mcp.TextContent).Text; line != "status=ok" {
		t.Fatalf("status block %q", line)
	}
	if arr := r.Content[1].(*mcp.TextContent).Text; !strings.HasPrefix(arr, "[") || !strings.Contains(arr, `"kind":"order.total"`) {
		t.Fatalf("kinds: %s", arr)
	}
	txt := h.ok("declare_page_hint", map[string]any{"kind": "order.total", "selector": ".grand", "frame": "#summary"})
	if !strings.Contains(txt, `"accepted":true`) || !strings.Contains(txt, `"amount":"49.99"`) || !strings.Contains(txt, `"currency":"EUR"`) {
		t.Fatalf("declare: %s", txt)
	}
	txt = h.ok("declare_page_hint", map[string]any{"kind": "order.total", "selector": ".grand", "frame": "#summary", "read": "attribute", "attribute": "aria-label"})
	if !strings.Contains(txt, `"amount":"49.99"`) {
		t.Fatalf("attribute: %s", txt)
	}
	t.Run("hint_unresolved", func(t *testing.T) {
		h.refused("declare_page_hint", map[string]any{"kind": "order.total", "selector": ".nothing", "frame": "#summary"}, agentvault.CodeHintUnresolved)
	})
	t.Run("hint_uncertain when matches disagree", func(t *testing.T) {
		h.refused("declare_page_hint", map[string]any{"kind": "order.total", "selector": ".dup", "frame": "#summary"}, agentvault.CodeHintUncertain)
	})
	t.Run("invalid_hint for a text selector", func(t *testing.T) {
		h.refused("declare_page_hint", map[string]any{"kind": "order.total", "selector": "text=Total"}, agentvault.CodeInvalidHint)
	})
	t.Run("invalid_hint for an unknown kind", func(t *testing.T) {
		h.refused("declare_page_hint", map[string]any{"kind": "order.tax", "selector": ".grand"}, agentvault.CodeInvalidHint)
	})
	t.Run("invalid_hint over 512 characters", func(t *testing.T) {
		h.refused("declare_page_hint", map[string]any{"kind": "order.total", "selector": "." + strings.Repeat("a", 600)}, agentvault.CodeInvalidHint)
	})
	// The card fill reads the hinted total and sends it with the authorize.
	ss, _ := h.srv.lookup("")
	ss.mu.Lock()
	got, ok := hintedTotal(ss)
	ss.mu.Unlock()
	if !ok || got.Amount != "49.99" || got.Currency != "EUR" {
		t.Fatalf("hinted total at the fill: %+v %v", got, ok)
	}
}
