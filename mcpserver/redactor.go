package mcpserver

import (
	"regexp"
	"strings"

	"github.com/agentvault/agentvault"
)

// Redactor is what mcpserver needs from package redact (declared here, at
// the consumer). Every method fails closed.
type Redactor interface {
	// ScrubErrorTexts removes filled values and card-, email-, phone- and
	// token-shaped strings from page text.
	ScrubErrorTexts(texts []string, filled []string) []string
	// CheckSelectorAfterFill refuses (sensitive_data_blocked) a selector
	// that tests a field's value or carries a digit in a text match.
	CheckSelectorAfterFill(selector string) error
	// CheckChordAfterFill refuses (clipboard_blocked) copy, cut and paste.
	CheckChordAfterFill(key string) error
}

// strictRedactor is a small, conservative stand-in used until package
// redact is wired in through Config.Redactor. It refuses more than redact
// needs to; it never lets more through.
type strictRedactor struct{}

var (
	reToken = regexp.MustCompile(`av_[a-z]+_[a-z0-9-]+_[a-z_0-9]+`)
	reCard  = regexp.MustCompile(`\d(?:[ \-.]?\d){11,18}`)
	reEmail = regexp.MustCompile(`[^\s@<>()"']+@[^\s@<>()"']+\.[^\s@<>()"']+`)
	rePhone = regexp.MustCompile(`\+?\d(?:[ \-.()]*\d){6,}`)
	reDigit = regexp.MustCompile(`[0-9]`)
)

func (strictRedactor) ScrubErrorTexts(texts []string, filled []string) []string {
	out := make([]string, 0, len(texts))
	for _, t := range texts {
		for _, v := range filled {
			if len(v) >= 3 {
				t = strings.ReplaceAll(t, v, "[filled]")
			}
		}
		t = reToken.ReplaceAllString(t, "[token]")
		t = reCard.ReplaceAllString(t, "[card]")
		t = reEmail.ReplaceAllString(t, "[email]")
		t = rePhone.ReplaceAllString(t, "[phone]")
		out = append(out, t)
	}
	return out
}

var valueTests = []string{"[value", "@value", ":valid", ":invalid", ":user-invalid", ":user-valid", ":placeholder-shown",
	":in-range", ":out-of-range", ":checked", ":indeterminate", "internal:attr=[value", "value="}

var textMatches = []string{"text=", ":has-text(", ":text(", ":text-is(", ":text-matches(", "internal:text=", "internal:has-text=",
	"internal:has-not-text=", "internal:label=", "text()", "contains(", "internal:role=", "internal:attr="}

func (strictRedactor) CheckSelectorAfterFill(sel string) error {
	low := strings.ToLower(sel)
	for _, v := range valueTests {
		if strings.Contains(low, v) {
			return agentvault.Errorf(agentvault.CodeSensitiveDataBlocked, "after a token fill a selector may not test a field's value; point with an id, class, [name=...] or [type=...]")
		}
	}
	if strings.HasPrefix(low, "xpath=") || strings.HasPrefix(low, "//") {
		if reDigit.MatchString(sel) {
			return agentvault.Errorf(agentvault.CodeSensitiveDataBlocked, "after a token fill an XPath selector may not carry digits")
		}
	}
	for _, m := range textMatches {
		if i := strings.Index(low, m); i >= 0 && reDigit.MatchString(sel[i:]) {
			return agentvault.Errorf(agentvault.CodeSensitiveDataBlocked, "after a token fill a text match may not contain digits")
		}
	}
	return nil
}

func (strictRedactor) CheckChordAfterFill(key string) error {
	parts := strings.Split(strings.ToLower(key), "+")
	if len(parts) < 2 {
		return nil
	}
	last := parts[len(parts)-1]
	mods := parts[:len(parts)-1]
	has := func(m ...string) bool {
		for _, p := range mods {
			for _, x := range m {
				if p == x {
					return true
				}
			}
		}
		return false
	}
	if has("control", "meta", "controlormeta", "ctrl", "cmd", "command") && (last == "c" || last == "v" || last == "x" || last == "insert") {
		return agentvault.Errorf(agentvault.CodeClipboardBlocked, "copy, cut and paste chords are refused after a token fill")
	}
	if has("shift") && (last == "insert" || last == "delete") {
		return agentvault.Errorf(agentvault.CodeClipboardBlocked, "copy, cut and paste chords are refused after a token fill")
	}
	return nil
}

var _ Redactor = strictRedactor{}
