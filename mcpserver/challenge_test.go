package mcpserver

import (
	"testing"

	"github.com/agentvault/agentvault/browser"
)

// TestChallengeAmbiguousOnly: a field that only might be a code input is
// reported only right after a login password was typed, and then as
// ambiguousOnly; real evidence is reported as is.
func TestChallengeAmbiguousOnly(t *testing.T) {
	weak := browser.Challenge{Types: []string{"otp"}, OTPWeak: true, Reason: "a field might be a code input"}
	if a := challengeFrom(weak, false); a.Detected || len(a.Types) != 0 {
		t.Fatalf("weak otp without a login: %+v", a)
	}
	if a := challengeFrom(weak, true); !a.Detected || a.Type != "otp" || !a.AmbiguousOnly {
		t.Fatalf("weak otp after a login password: %+v", a)
	}
	strong := browser.Challenge{Types: []string{"otp"}, DeliveredCode: true}
	if a := challengeFrom(strong, false); !a.Detected || a.AmbiguousOnly || !a.DeliveredCode {
		t.Fatalf("delivered code: %+v", a)
	}
	mixed := browser.Challenge{Types: []string{"captcha", "otp"}, OTPWeak: true}
	if a := challengeFrom(mixed, true); a.Type != "captcha" || a.AmbiguousOnly {
		t.Fatalf("captcha with a weak otp: %+v", a)
	}
	blocked := browser.Challenge{Types: []string{"blocked"}, Signature: "error_reference"}
	if a := challengeFrom(blocked, false); a.Type != "blocked" || a.Signature != "error_reference" {
		t.Fatalf("blocked: %+v", a)
	}
}
