package e2e

import (
	"strings"
	"testing"
)

// TestNetworkLog_ReducedAfterFill (seed 004 get_network_log): off unless
// mcpd is started with it; on, it lists the page's requests with host and
// path, never a query; once a vault value was filled, hosts are only "this
// site" / "another site" and no path is shown.
func TestNetworkLog_ReducedAfterFill(t *testing.T) {
	requireE2E(t, true)
	ap := startAppliance(t)
	bin := buildCmd(t, "mcpd")
	args, env := ap.mcpdArgs()

	off := startAgent(t, bin, args, env)
	off.must("open_page", map[string]any{"url": ap.m.Shop.URL + "/products/trail-shoes?ref=secret-query"})
	if r := off.must("get_network_log", map[string]any{}); !strings.Contains(r.text, "not available") {
		t.Errorf("get_network_log without the switch: %q", r.status())
	}
	off.must("close_session", map[string]any{})
	off.close()

	on := startAgent(t, bin, append(append([]string{}, args...), "--network-log"), env)
	cat := on.must("get_token_catalog", map[string]any{"url": ap.m.Shop.URL + "/checkout"})
	emailTok := findToken(cat.text, "identity", "email")
	on.must("open_page", map[string]any{"url": ap.m.Shop.URL + "/products/trail-shoes?ref=secret-query"})
	r := on.must("get_network_log", map[string]any{})
	if !strings.Contains(r.text, "GET ") || !strings.Contains(r.text, "/products/trail-shoes") || !strings.Contains(r.text, " 200 ") {
		t.Errorf("network log before a fill does not show the page's request: %q", r.text)
	}
	if strings.Contains(r.text, "secret-query") {
		t.Error("the network log shows a query string")
	}
	on.must("click", map[string]any{"selector": "#add-to-cart"})
	on.must("wait_for_selector", map[string]any{"selector": "#checkout", "timeout": 30000})
	on.must("click", map[string]any{"selector": "#checkout"})
	on.must("wait_for_selector", map[string]any{"selector": "#email", "timeout": 30000})
	on.must("fill_checkout", map[string]any{"fields": []map[string]any{{"selector": "#email", "value": emailTok}}, "timeout": 5000})
	r = on.must("get_network_log", map[string]any{})
	if !strings.Contains(r.text, "this site") || strings.Contains(r.text, "/checkout") || strings.Contains(r.text, "localhost") || strings.Contains(r.text, "127.0.0.1") {
		t.Errorf("network log after a fill is not reduced: %q", r.text)
	}
	on.must("close_session", map[string]any{})
	on.close()
}
