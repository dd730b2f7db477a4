package policy_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentvault/agentvault/policy"
)

// TestP11_ShownPageDropsQueryFragmentAndUser: the page an approval shows
// keeps scheme, host and path only, and is bounded.
func TestP11_ShownPageDropsQueryFragmentAndUser(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://shop.example/checkout/pay?email=a%40b.c&order=77#card", "https://shop.example/checkout/pay"},
		{"https://user:pw@shop.example:8443/a%20b/?x=1", "https://shop.example:8443/a%20b/"},
		{"https://pay.example", "https://pay.example"},
		{"not a url", ""},
		{"/relative/path?q=1", ""},
		{"", ""},
	} {
		if got := policy.ShownPage(c.in); got != c.want {
			t.Errorf("ShownPage(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	long := policy.ShownPage("https://bücher.example/" + strings.Repeat("é", 300) + "?q=secret")
	if len(long) > policy.MaxPageLen || !utf8.ValidString(long) || strings.Contains(long, "secret") || !strings.HasPrefix(long, "https://bücher.example/%C3%A9") || strings.LastIndexByte(long, '%') >= len(long)-2 {
		t.Errorf("long page shown as %q (%d bytes)", long, len(long))
	}
}
