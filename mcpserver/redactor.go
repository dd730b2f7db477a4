package mcpserver

import (
	"github.com/agentvault/agentvault/redact"
)

// Redactor is what mcpserver needs from package redact, declared at the
// consumer. Every method fails closed.
type Redactor interface {
	// ScrubErrorTexts removes filled values and card-, email-, phone- and
	// token-shaped strings from page text, keeping at most five entries of
	// at most 200 characters.
	ScrubErrorTexts(texts []string, filled []string) []string
	// CheckSelectorAfterFill refuses (sensitive_data_blocked) a selector
	// that tests a field's value or carries a digit in a text match.
	CheckSelectorAfterFill(selector string) error
	// CheckChordAfterFill refuses (clipboard_blocked) copy, cut and paste.
	CheckChordAfterFill(key string) error
}

// redactPkg adapts package redact's functions to Redactor.
type redactPkg struct{}

func (redactPkg) ScrubErrorTexts(texts []string, filled []string) []string {
	fb := make([][]byte, len(filled))
	for i, f := range filled {
		fb[i] = []byte(f)
	}
	return redact.ErrorTexts(texts, fb)
}

func (redactPkg) CheckSelectorAfterFill(sel string) error { return redact.CheckSelectorAfterFill(sel) }
func (redactPkg) CheckChordAfterFill(key string) error    { return redact.CheckChordAfterFill(key) }

var _ Redactor = redactPkg{}
