package browser

import "github.com/mxschmitt/playwright-go"

func RawAria(s *Session) (string, error) {
	p, _ := s.page()
	return p.AriaSnapshot(playwright.PageAriaSnapshotOptions{Mode: playwright.AriaSnapshotModeAi, Depth: playwright.Int(30)})
}

var MatchFieldsForTest = matchFields

type DomField = domField

func NewDomField(role, name, sel string) DomField { return domField{role, name, sel} }

var ChooseOptionForTest = chooseOption

func StripValuesForTest(raw string) (string, []Field) {
	y, f, _ := stripValues(raw)
	return y, f
}

// RefLookups is how many per-ref selector lookups snapshots have made.
func RefLookups() int64 { return refLookups.Load() }

// ParseDocFieldsForTest returns what parseDocFields keeps: ok, the field
// selectors, the iframe selectors by index and the document's own index.
func ParseDocFieldsForTest(v any, err error) (bool, []string, map[int]string, int) {
	d := parseDocFields(v, err)
	var sels []string
	for _, f := range d.fields {
		sels = append(sels, f.sel)
	}
	return d.ok, sels, d.frames, d.self
}

var FoldOptionsForTest = foldOptions
