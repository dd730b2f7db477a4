package browser

import (
	"time"

	"github.com/agentvault/agentvault"
	"github.com/mxschmitt/playwright-go"
)

// Page hints (seed 004, declare_page_hint): the agent points at where the
// order total is, never says what it is; the figure is read here, from the
// page, in the frame the hint names (cross-origin iframes included, through
// playwright's frame locator).

// Bounds of an order.total hint (seed 004).
const (
	MaxHintMatches   = 8
	MaxHintElemChars = 4000
	hintReadTimeout  = 2 * time.Second
)

// HintTarget is a declared hint's location and how to read it.
type HintTarget struct {
	Frame     string // CSS selector of the iframe; "" for the top document
	Selector  string
	Attribute string // "" reads the element's text
}

// hintScript reads one element's amount and currency the way totalScript
// reads a conventional total, from its text or one attribute.
const hintScript = `(e, attr) => {
	const t = ((attr ? e.getAttribute(attr) : e.innerText) || '').trim();
	if (t.length > 4000) return {tooLong: true};
	const sym = {'€': 'EUR', '$': 'USD', '£': 'GBP', '¥': 'JPY', 'CHF': 'CHF'};
	const m = t.match(/([A-Z]{3}|[€$£¥])?\s*(\d{1,3}(?:[ ,.]\d{3})*(?:[.,]\d{2})|\d+(?:[.,]\d{2})?)\s*([A-Z]{3}|[€$£¥])?/);
	if (!m) return {};
	let cur = m[1] || m[3] || '';
	cur = sym[cur] || cur;
	let a = m[2].replace(/[ ]/g, '');
	if (/,\d{2}$/.test(a)) a = a.replace(/\./g, '').replace(',', '.'); else a = a.replace(/,/g, '');
	return {amount: a, currency: cur};
}`

// ReadHintTotal reads the total a hint points at. accepted is false when
// the hint adds nothing (more than 8 matches, an element over 4,000
// characters): the caller drops it. Nothing matching is hint_unresolved;
// matches that disagree, no figure, or an attribute naming no currency is
// hint_uncertain.
func (s *Session) ReadHintTotal(t HintTarget) (total OrderTotal, accepted bool, err error) {
	loc, _, err := s.locator(Target{Selector: t.Selector, Frame: t.Frame})
	if err != nil {
		return OrderTotal{}, false, err
	}
	n, err := loc.Count()
	if err != nil || n == 0 {
		return OrderTotal{}, false, agentvault.Errorf(agentvault.CodeHintUnresolved, "nothing on the page matches this hint")
	}
	if n > MaxHintMatches {
		return OrderTotal{}, false, nil
	}
	var got *OrderTotal
	for i := range n {
		v, err := loc.Nth(i).Evaluate(hintScript, t.Attribute, playwright.LocatorEvaluateOptions{Timeout: ms(hintReadTimeout)})
		if err != nil {
			return OrderTotal{}, false, agentvault.Errorf(agentvault.CodeHintUnresolved, "the hinted element could not be read")
		}
		m, _ := v.(map[string]any)
		if tl, _ := m["tooLong"].(bool); tl {
			return OrderTotal{}, false, nil
		}
		a, _ := m["amount"].(string)
		c, _ := m["currency"].(string)
		if a == "" {
			continue
		}
		if t.Attribute != "" && c == "" {
			return OrderTotal{}, false, agentvault.Errorf(agentvault.CodeHintUncertain, "the attribute's value names no currency")
		}
		if got != nil && (got.Amount != a || got.Currency != c) {
			return OrderTotal{}, false, agentvault.Errorf(agentvault.CodeHintUncertain, "the elements this hint matches show different figures")
		}
		got = &OrderTotal{Amount: a, Currency: c}
	}
	if got == nil {
		return OrderTotal{}, false, agentvault.Errorf(agentvault.CodeHintUncertain, "the hinted element shows no amount")
	}
	return *got, true, nil
}
