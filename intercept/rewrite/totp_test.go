package rewrite

import (
	"strings"
	"testing"
)

// Seed 004, login.totp_secret: the proxy reads the seed where the hint
// points in the document's bytes, and masks every form of it.
func TestSeed004_TOTPSecretReadWhereTheHintPoints(t *testing.T) {
	const sec = "JBSWY3DPEHPK3PXPJBSWY3DP"
	page := `<html><body><p id="intro">Scan the code ABCDEFGHIJKLMNOPQRST</p>
<div class="qr" data-uri="otpauth://totp/Shop:me?secret=` + sec + `&amp;digits=6&amp;period=30"></div>
<code id="secret">JBSW Y3DP EHPK 3PXP JBSW Y3DP</code><script>var s="` + sec + `";</script></body></html>`
	for _, tc := range []struct {
		name string
		loc  TOTPLocator
		want string
	}{
		{"by id, grouped text", TOTPLocator{ID: "secret"}, sec},
		{"by tag index, otpauth attribute", TOTPLocator{Tag: "div", Index: 0}, "otpauth://totp/Shop:me?secret=" + sec + "&digits=6&period=30"},
	} {
		got, ok := FindTOTPSeed([]byte(page), tc.loc)
		if !ok || got.Value != tc.want || got.Key != sec {
			t.Fatalf("%s: got ok=%v %q (key %q)", tc.name, ok, got.Value, got.Key)
		}
		out := string(MaskTOTP([]byte(page), got))
		if strings.Contains(out, sec) || strings.Contains(out, "JBSW Y3DP") {
			t.Fatalf("%s: the seed is still in the page sent to the browser", tc.name)
		}
		if !strings.Contains(out, TOTPMask) || !strings.Contains(out, "ABCDEFGHIJKLMNOPQRST") {
			t.Fatalf("%s: masked the wrong thing", tc.name)
		}
	}
	if _, ok := FindTOTPSeed([]byte(page), TOTPLocator{ID: "nope"}); ok {
		t.Fatal("a locator that matches nothing read a seed")
	}
	if _, ok := FindTOTPSeed([]byte(`<p id="x">short ABC234</p>`), TOTPLocator{ID: "x"}); ok {
		t.Fatal("a run under 80 bits was taken for a seed")
	}
}
