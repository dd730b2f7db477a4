package mcpserver

import (
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
)

func TestStrictRedactorSelectors(t *testing.T) {
	r := strictRedactor{}
	cases := []struct {
		sel string
		ok  bool
	}{
		{"#card-number", true},
		{".error", true},
		{"input[name='cvc']", true},
		{"[type=email]", true},
		{"text=Order placed", true},
		{"aria-ref=e12", true},
		{"input[value^='4242']", false},
		{"input:invalid", false},
		{"text=4242", false},
		{"div:has-text('ending 4242')", false},
		{"xpath=//input[@value='1']", false},
		{"internal:text=\"1\"i", false},
	}
	for _, c := range cases {
		err := r.CheckSelectorAfterFill(c.sel)
		if (err == nil) != c.ok {
			t.Errorf("%q: err=%v want ok=%v", c.sel, err, c.ok)
		}
		if err != nil && agentvault.ErrorCode(err) != agentvault.CodeSensitiveDataBlocked {
			t.Errorf("%q: code %s", c.sel, agentvault.ErrorCode(err))
		}
	}
}

func TestStrictRedactorChords(t *testing.T) {
	r := strictRedactor{}
	for _, k := range []string{"Control+c", "Meta+v", "Control+X", "ControlOrMeta+c", "Shift+Insert"} {
		if agentvault.ErrorCode(r.CheckChordAfterFill(k)) != agentvault.CodeClipboardBlocked {
			t.Errorf("%s not refused", k)
		}
	}
	for _, k := range []string{"Enter", "Tab", "c", "Shift+A", "Control+a"} {
		if err := r.CheckChordAfterFill(k); err != nil {
			t.Errorf("%s refused: %v", k, err)
		}
	}
}

func TestStrictRedactorScrub(t *testing.T) {
	got := strictRedactor{}.ScrubErrorTexts([]string{
		"Card 4242 4242 4242 4242 was declined",
		"Email jane@example.com is taken",
		"Call +49 30 1234567",
		"Token av_card_1_number_u7x2k rejected",
		"Your code Hunter2xyz is wrong",
	}, []string{"Hunter2xyz"})
	for _, s := range got {
		for _, bad := range []string{"4242", "jane@", "1234567", "av_card", "Hunter2xyz"} {
			if strings.Contains(s, bad) {
				t.Errorf("scrubbed text still holds a %d-char sensitive string", len(bad))
			}
		}
	}
}
