package mcpserver

import (
	"net/url"
	"testing"
)

// Seed 004: a login.totp_secret hint is refused with insecure_page unless
// the page is https:// or a loopback http:// page.
func TestSeed004_TOTPHintNeedsASecurePage(t *testing.T) {
	for raw, want := range map[string]bool{
		"https://shop.example/2fa": true, "http://127.0.0.1:8080/2fa": true, "http://[::1]/2fa": true,
		"http://localhost/2fa": true, "http://shop.example/2fa": false, "http://10.0.0.1/2fa": false,
		"file:///tmp/2fa.html": false, "data:text/html,x": false,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := securePage(u); got != want {
			t.Errorf("securePage(%s) = %v, want %v", raw, got, want)
		}
	}
}
