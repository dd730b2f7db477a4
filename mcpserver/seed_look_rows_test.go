package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/browser"
)

// TestSeed004_InconclusiveOnlyWhenScanUnfinished: detect_challenge's and
// observe_page's answers carry inconclusive: true when the page scan did
// not finish, and omit the key (never false) when it did, whatever else
// the scan found.
func TestSeed004_InconclusiveOnlyWhenScanUnfinished(t *testing.T) {
	h := newHarness(t)
	answer := func(v any) string {
		t.Helper()
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	for name, c := range map[string]struct {
		detect  browser.Challenge
		observe browser.PageSignals
	}{
		"nothing found":    {},
		"something found":  {detect: browser.Challenge{Types: []string{"captcha"}, Reason: "a captcha widget"}, observe: browser.PageSignals{PasswordField: true, Error: true}},
		"an otp step":      {detect: browser.Challenge{Types: []string{"otp"}, DeliveredCode: true}, observe: browser.PageSignals{CodeSent: true}},
		"a blocked search": {detect: browser.Challenge{Types: []string{"blocked"}, Signature: "stalled_search"}},
	} {
		t.Run(name, func(t *testing.T) {
			for _, unfinished := range []bool{false, true} {
				d, o := c.detect, c.observe
				d.Incomplete, o.Incomplete = unfinished, unfinished
				for tool, got := range map[string]string{
					"detect_challenge": answer(challengeFrom(d, false)),
					"observe_page":     answer(h.srv.observeFrom(&Session{}, o)),
				} {
					has := strings.Contains(got, `"inconclusive":true`)
					if has != unfinished || strings.Contains(got, `"inconclusive":false`) {
						t.Errorf("%s, scan finished %v: %s", tool, !unfinished, got)
					}
				}
			}
		})
	}
}
