package browser

import (
	"time"

	"github.com/agentvault/agentvault"
	"github.com/mxschmitt/playwright-go"
)

// TOTP enrolment hints (seed 004, declare_page_hint login.totp_secret). The
// browser only says where the element is: its id, or its tag and its index
// among that tag's elements in document order. It reads no text and no
// attribute value but the id; the proxy reads the seed from the document's
// bytes when the page is loaded again (Reload).

// ElementLocator is where an element sits in its document.
type ElementLocator struct {
	ID    string
	Tag   string
	Index int
}

const locatorScript = `el => {
  const tag = el.tagName.toLowerCase();
  const all = Array.from(el.ownerDocument.getElementsByTagName(tag));
  const id = el.id && el.ownerDocument.querySelectorAll('#' + CSS.escape(el.id)).length === 1 ? el.id : "";
  return {id, tag, index: all.indexOf(el)};
}`

// LocateElement finds the one element selector matches in the current
// page's main document: hint_unresolved when none or several do.
func (s *Session) LocateElement(selector string) (ElementLocator, error) {
	loc, _, err := s.locator(Target{Selector: selector})
	if err != nil {
		return ElementLocator{}, err
	}
	n, err := loc.Count()
	if err != nil || n == 0 {
		return ElementLocator{}, agentvault.Errorf(agentvault.CodeHintUnresolved, "nothing on the page matches this hint")
	}
	if n > 1 {
		return ElementLocator{}, agentvault.Errorf(agentvault.CodeHintUncertain, "this hint matches %d elements: point at one", n)
	}
	v, err := loc.Evaluate(locatorScript, nil, playwright.LocatorEvaluateOptions{Timeout: ms(hintReadTimeout)})
	if err != nil {
		return ElementLocator{}, agentvault.Errorf(agentvault.CodeHintUnresolved, "the hinted element could not be located")
	}
	m, _ := v.(map[string]any)
	out := ElementLocator{}
	out.ID, _ = m["id"].(string)
	out.Tag, _ = m["tag"].(string)
	switch i := m["index"].(type) {
	case int:
		out.Index = i
	case float64:
		out.Index = int(i)
	}
	if out.Tag == "" || out.Index < 0 {
		return ElementLocator{}, agentvault.Errorf(agentvault.CodeHintUnresolved, "the hinted element could not be located")
	}
	return out, nil
}

// Reload loads the current page again and waits for its load event.
func (s *Session) Reload(timeout time.Duration) error {
	p, err := s.page()
	if err != nil {
		return err
	}
	s.acted()
	resp, err := p.Reload(playwright.PageReloadOptions{Timeout: ms(timeout), WaitUntil: playwright.WaitUntilStateLoad})
	if err != nil {
		return navError(err)
	}
	return proxyRefusal(resp)
}
