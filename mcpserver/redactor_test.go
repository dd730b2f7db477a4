package mcpserver

import (
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
)

// TestRedactorWiring checks the adapter over package redact on the cases
// the tools rely on (redact has its own exhaustive tables and fuzzers).
func TestRedactorWiring(t *testing.T) {
	r := redactPkg{}
	for _, c := range []struct {
		sel string
		ok  bool
	}{
		{"#card-number", true}, {"#err:not(:empty)", true}, {"text=Order placed", true}, {"aria-ref=e12", true},
		{"input[value^='4242']", false}, {"text=4242", false}, {"div:has-text('ending 4242')", false},
	} {
		err := r.CheckSelectorAfterFill(c.sel)
		if (err == nil) != c.ok {
			t.Errorf("%q: err=%v want ok=%v", c.sel, err, c.ok)
		}
		if err != nil && agentvault.ErrorCode(err) != agentvault.CodeSensitiveDataBlocked {
			t.Errorf("%q: code %s", c.sel, agentvault.ErrorCode(err))
		}
	}
	for _, k := range []string{"Control+c", "Meta+v", "Control+X"} {
		if agentvault.ErrorCode(r.CheckChordAfterFill(k)) != agentvault.CodeClipboardBlocked {
			t.Errorf("%s not refused", k)
		}
	}
	if err := r.CheckChordAfterFill("Enter"); err != nil {
		t.Errorf("Enter refused: %v", err)
	}
	got := r.ScrubErrorTexts([]string{"Card 4242 4242 4242 4242 was declined", "Your code Hunter2xyz is wrong", "a", "b", "c", "d"}, []string{"Hunter2xyz"})
	if len(got) > maxErrorTexts {
		t.Fatalf("%d texts", len(got))
	}
	for _, s := range got {
		if strings.Contains(s, "4242") || strings.Contains(s, "Hunter2xyz") {
			t.Errorf("scrubbed text still holds a sensitive string (%d chars)", len(s))
		}
	}
}
