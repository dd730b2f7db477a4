package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hintPages serves the pages of the page-hint rules on two origins (the
// summary frame is cross-origin, as an overlay checkout's is). httptest's
// TLS servers share one certificate, which the harness's Chromium trusts.
func hintPages(t *testing.T) (shop string) {
	t.Helper()
	pay := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// /sum?text=N: the overlay's summary, its text padded to about N
		// characters.
		n, _ := strconv.Atoi(r.URL.Query().Get("text"))
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><body><p class="grand">Total €49.99</p><p>%s</p></body></html>`, strings.Repeat("a", n))
	}))
	t.Cleanup(pay.Close)
	mux := http.NewServeMux()
	page := func(w http.ResponseWriter, body string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!doctype html><html><body><h1>Checkout</h1>"+body+"</body></html>")
	}
	mux.HandleFunc("/many", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		page(w, strings.Repeat(`<p class="amt">€10.00</p>`, n))
	})
	mux.HandleFunc("/four", func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		for i := 1; i <= 5; i++ {
			fmt.Fprintf(&b, `<p id="t%d" data-testid="total">Total €10.00</p>`, i)
		}
		page(w, b.String()+`<label for="email">Email</label><input id="email" type="email">`)
	})
	mux.HandleFunc("/long", func(w http.ResponseWriter, r *http.Request) {
		page(w, `<p class="total">Total €10.00</p><p class="big">Total €10.00 `+strings.Repeat("x", 4000)+`</p>`)
	})
	mux.HandleFunc("/framed", func(w http.ResponseWriter, r *http.Request) {
		// text: the summary frame's text; rest: the page's own text;
		// frames: how many frames the page has, the summary included.
		q := r.URL.Query()
		rest, _ := strconv.Atoi(q.Get("rest"))
		frames, _ := strconv.Atoi(q.Get("frames"))
		var b strings.Builder
		fmt.Fprintf(&b, `<p>%s</p><iframe id="sum" src="%s/sum?text=%s"></iframe>`, strings.Repeat("b", rest), pay.URL, q.Get("text"))
		for i := 1; i < frames; i++ {
			b.WriteString(`<iframe srcdoc="<p>ad</p>" style="width:10px;height:10px"></iframe>`)
		}
		page(w, b.String())
	})
	mux.HandleFunc("/hidden", func(w http.ResponseWriter, r *http.Request) {
		page(w, `<p class="t" style="display:none">Total €4.99</p><p class="shown">Total €4.99</p><meta itemprop="price" content="EUR 4.99">`)
	})
	mux.HandleFunc("/larger", func(w http.ResponseWriter, r *http.Request) {
		page(w, `<p class="sub">Subtotal €49.99</p><p>Shipping €5.00</p><p class="grand">Total €54.99</p>`)
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestSeed004_PageHints: declare_page_hint's bounds and the figures it
// refuses, each a rule of seed 004, through the MCP transport in Chromium.
func TestSeed004_PageHints(t *testing.T) {
	h := newHarness(t)
	shop := hintPages(t)
	declare := func(args map[string]any) map[string]any {
		t.Helper()
		args["kind"] = "order.total"
		return jsonOf(t, h.ok("declare_page_hint", args))
	}
	accepted := func(t *testing.T, got map[string]any, want bool) {
		t.Helper()
		if got["accepted"] != want || got["checked"] != true {
			t.Fatalf("want accepted=%v checked=true: %v", want, got)
		}
	}

	t.Run("list_page_hint_kinds answers a JSON array", func(t *testing.T) {
		h.ok("open_page", map[string]any{"url": shop + "/four"})
		r, err := h.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_page_hint_kinds", Arguments: map[string]any{}})
		if err != nil || r.IsError || len(r.Content) != 2 {
			t.Fatalf("kinds: %v %+v", err, r)
		}
		// The status line is a block of its own, so the next block
		// parses as it is.
		if line := r.Content[0].(*mcp.TextContent).Text; line != "status=ok" {
			t.Fatalf("status block %q", line)
		}
		var kinds []map[string]any
		if err := json.Unmarshal([]byte(r.Content[1].(*mcp.TextContent).Text), &kinds); err != nil || len(kinds) == 0 || kinds[0]["kind"] != "order.total" {
			t.Fatalf("not a JSON array of kinds: %v %v", err, kinds)
		}
	})

	t.Run("an order.total selector matching more than 8 elements adds nothing", func(t *testing.T) {
		h.ok("open_page", map[string]any{"url": shop + "/many?n=8"})
		accepted(t, declare(map[string]any{"selector": ".amt"}), true)
		h.ok("open_page", map[string]any{"url": shop + "/many?n=9"})
		got := declare(map[string]any{"selector": ".amt"})
		accepted(t, got, false)
		if _, ok := got["amount"]; ok {
			t.Fatalf("a dropped hint names a figure: %v", got)
		}
	})

	t.Run("an element over 4,000 characters adds nothing", func(t *testing.T) {
		h.ok("open_page", map[string]any{"url": shop + "/long"})
		accepted(t, declare(map[string]any{"selector": ".total"}), true)
		accepted(t, declare(map[string]any{"selector": ".big"}), false)
	})

	t.Run("a page holds at most 4 hints of a kind until it navigates", func(t *testing.T) {
		h.ok("open_page", map[string]any{"url": shop + "/four"})
		for i := 1; i <= 4; i++ {
			accepted(t, declare(map[string]any{"selector": fmt.Sprintf("#t%d", i)}), true)
		}
		// Repeating one does not count.
		accepted(t, declare(map[string]any{"selector": "#t2"}), true)
		txt := h.refused("declare_page_hint", map[string]any{"kind": "order.total", "selector": "#t5"}, agentvault.CodeInvalidHint)
		if !strings.Contains(txt, "4 order.total hints") {
			t.Fatalf("the refusal does not say why: %q", txt)
		}
		// A reload of the same address is a navigation: the count starts
		// again.
		h.ok("open_page", map[string]any{"url": shop + "/four"})
		accepted(t, declare(map[string]any{"selector": "#t5"}), true)
	})

	t.Run("frame limits", func(t *testing.T) {
		cases := []struct {
			name, query string
			want        bool
		}{
			{"a small overlay", "text=100&rest=100&frames=1", true},
			{"the frame may hold up to 20,000 characters", "text=19000&rest=100&frames=1", true},
			{"over 20,000 characters in the frame", "text=20100&rest=100&frames=1", false},
			{"over 16,384 counting the page's own text", "text=100&rest=17000&frames=1", false},
			{"32 frames", "text=100&rest=100&frames=32", true},
			{"more than 32 frames", "text=100&rest=100&frames=33", false},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				h.ok("open_page", map[string]any{"url": shop + "/framed?" + c.query})
				h.ok("wait_for_selector", map[string]any{"selector": ".grand", "frame": "#sum", "timeout": 30000})
				got := declare(map[string]any{"selector": ".grand", "frame": "#sum"})
				accepted(t, got, c.want)
				if c.want && (got["amount"] != "49.99" || got["currency"] != "EUR") {
					t.Fatalf("figure: %v", got)
				}
				if !c.want && got["untrusted"] != nil {
					t.Fatalf("a hint dropped for size is not an untrusted figure: %v", got)
				}
			})
		}
	})

	t.Run("untrusted names why a figure was refused", func(t *testing.T) {
		h.ok("open_page", map[string]any{"url": shop + "/hidden"})
		got := declare(map[string]any{"selector": ".t"})
		accepted(t, got, false)
		if got["untrusted"] != "hidden" {
			t.Fatalf("hidden element: %v", got)
		}
		accepted(t, declare(map[string]any{"selector": ".shown"}), true)
		// An attribute is read where the page keeps data, never shown.
		accepted(t, declare(map[string]any{"selector": "meta[itemprop=price]", "read": "attribute", "attribute": "content"}), true)

		h.ok("open_page", map[string]any{"url": shop + "/larger"})
		got = declare(map[string]any{"selector": ".sub"})
		accepted(t, got, false)
		if got["untrusted"] != "larger_total_on_page" {
			t.Fatalf("subtotal: %v", got)
		}
		if got := declare(map[string]any{"selector": ".grand"}); got["accepted"] != true || got["amount"] != "54.99" {
			t.Fatalf("the total itself: %v", got)
		}
		// A dropped hint is not kept for the card fill either.
		ss, _ := h.srv.lookup("")
		ss.mu.Lock()
		n := len(ss.hints.totals)
		ss.mu.Unlock()
		if n != 1 {
			t.Fatalf("hints kept: %d, want only the trusted one", n)
		}
	})

	// Last: a token fill closes the page's data for the rest of the
	// session.
	t.Run("after a token fill a hint is kept, not read back", func(t *testing.T) {
		h.ok("open_page", map[string]any{"url": shop + "/four"})
		h.ok("fill_checkout", map[string]any{"fields": []map[string]any{{"selector": "#email", "value": "av_identity_1_email_u7x2k"}}})
		got := declare(map[string]any{"selector": "#t1"})
		if got["accepted"] != true || got["checked"] != false || got["amount"] != nil {
			t.Fatalf("after a fill: %v", got)
		}
		// A selector that compares an attribute's value could test what
		// the page shows: refused after a fill.
		h.refused("declare_page_hint", map[string]any{"kind": "order.total", "selector": `[data-testid="total"]`}, agentvault.CodeInvalidHint)
		// The kept hint is read at the card fill.
		ss, _ := h.srv.lookup("")
		ss.mu.Lock()
		total, ok := hintedTotal(ss)
		ss.mu.Unlock()
		if !ok || total.Amount != "10.00" || total.Currency != "EUR" {
			t.Fatalf("the kept hint at the card fill: %+v %v", total, ok)
		}
	})
}
