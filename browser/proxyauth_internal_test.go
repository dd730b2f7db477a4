package browser

import "testing"

// TestProxyAuthAnswers: the credential goes to a challenge from the
// session's proxy alone (its address as the host-name normaliser has it,
// the scheme's port when none is named), once per request.
func TestProxyAuthAnswers(t *testing.T) {
	ch := func(src, origin string) map[string]any { return map[string]any{"source": src, "origin": origin} }
	for _, tc := range []struct {
		server, src, origin string
		give                bool
	}{
		{"http://127.0.0.1:7700", "Proxy", "http://127.0.0.1:7700", true},
		{"https://Proxy.Example", "Proxy", "https://proxy.example:443", true},
		{"http://[::1]:7700", "Proxy", "http://[::1]:7700", true},
		{"http://127.0.0.1:7700", "Server", "http://127.0.0.1:7700", false}, // a site at the proxy's address
		{"http://127.0.0.1:7700", "Proxy", "http://127.0.0.1:7701", false},  // another proxy
		{"http://127.0.0.1:7700", "Proxy", "https://shop.example", false},   // another host
		{"not a url\x7f", "Proxy", "http://127.0.0.1:7700", false},
	} {
		a := newProxyAuth(&Proxy{Server: tc.server, Username: "s_1", Password: "pw"})
		got := a.answer("r1", ch(tc.src, tc.origin))["response"] == "ProvideCredentials"
		if got != tc.give {
			t.Errorf("%s, %s challenge from %s: credential given %v", tc.server, tc.src, tc.origin, got)
		}
		if tc.give {
			if again := a.answer("r1", ch(tc.src, tc.origin))["response"]; again != "CancelAuth" {
				t.Errorf("%s: the same request challenged twice got %v", tc.server, again)
			}
			if other := a.answer("r2", ch(tc.src, tc.origin))["response"]; other != "ProvideCredentials" {
				t.Errorf("%s: another request got %v", tc.server, other)
			}
		}
	}
}
