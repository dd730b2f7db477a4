package browser

import (
	"fmt"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/mxschmitt/playwright-go"
)

// Page hints (seed 004, declare_page_hint): the agent points at where the
// order total is, never says what it is; the figure is read here, from the
// page, in the frame the hint names (cross-origin iframes included, through
// playwright's frame locator).
//
// A hint is the agent's word about where the total is, and the card's
// limits are checked against what it finds: a hint at a subtotal or at a
// figure the buyer does not see would let a purchase pass as a smaller one.
// So the page is read around the figure too (hintScanScript): a figure no
// one sees, or one the page contradicts with a larger total, is untrusted
// and the hint is dropped. For a hint into a frame the whole frame and the
// rest of the page are read, and a page too large to read within the
// seed's bounds drops the hint rather than trusting an unread part.

// Bounds of an order.total hint (seed 004).
const (
	MaxHintMatches   = 8
	MaxHintElemChars = 4000
	// MaxHintFrameText is the most text the hinted frame may hold;
	// MaxHintRestText the most the rest of the page may (the top
	// document's own text and every other frame's); MaxHintFrames the
	// most frames the page may have, the top document not counted.
	MaxHintFrameText = 20000
	MaxHintRestText  = 16384
	MaxHintFrames    = 32
	hintReadTimeout  = 2 * time.Second
	// hintScanTimeout bounds the read of every frame's text; a frame that
	// does not answer in time drops the hint (an unread part of the page
	// could hold a larger total).
	hintScanTimeout = 5 * time.Second
)

// Why a hinted figure is not trusted (HintRead.Untrusted; the tool answers
// these names).
const (
	// UntrustedHidden: the element whose text was read is not shown, so
	// it is not what the buyer is asked to pay.
	UntrustedHidden = "hidden"
	// UntrustedLargerTotal: the page names a larger total in the same
	// currency elsewhere, so the hint may point at a subtotal or a line.
	UntrustedLargerTotal = "larger_total_on_page"
)

// HintTarget is a declared hint's location and how to read it.
type HintTarget struct {
	Frame     string // CSS selector of the iframe; "" for the top document
	Selector  string
	Attribute string // "" reads the element's text
}

// HintRead is what reading a hint found. Accepted is false when the hint
// adds nothing and the caller drops it: Dropped says why (for the log),
// and Untrusted, when set, names why the figure was refused (for the
// agent).
type HintRead struct {
	Total     OrderTotal
	Accepted  bool
	Dropped   string
	Untrusted string
}

func dropped(why string) HintRead { return HintRead{Dropped: why} }

// hintScript reads one element's amount and currency the way totalScript
// reads a conventional total, from its text or one attribute, and whether
// the element is shown.
const hintScript = `(e, attr) => {
	const t = ((attr ? e.getAttribute(attr) : e.innerText) || '').trim();
	if (t.length > 4000) return {tooLong: true};
	const r = e.getBoundingClientRect();
	const shown = r.width > 0 && r.height > 0 && (!e.checkVisibility || e.checkVisibility({opacityProperty: true, visibilityProperty: true}));
	const sym = {'€': 'EUR', '$': 'USD', '£': 'GBP', '¥': 'JPY', 'CHF': 'CHF'};
	const m = t.match(/([A-Z]{3}|[€$£¥])?\s*(\d{1,3}(?:[ ,.]\d{3})*(?:[.,]\d{2})|\d+(?:[.,]\d{2})?)\s*([A-Z]{3}|[€$£¥])?/);
	if (!m) return {shown};
	let cur = m[1] || m[3] || '';
	cur = sym[cur] || cur;
	let a = m[2].replace(/[ ]/g, '');
	if (/,\d{2}$/.test(a)) a = a.replace(/\./g, '').replace(',', '.'); else a = a.replace(/,/g, '');
	return {amount: a, currency: cur, shown};
}`

// hintScanScript reads one frame's text: its length, and whether it names
// a total (a figure after "total", "amount due", "to pay"...) larger than
// the hinted one in the same currency (or in none). Only the length and
// that answer leave the page.
const hintScanScript = `(h) => {
	const text = document.body ? document.body.innerText || '' : '';
	const sym = {'€': 'EUR', '$': 'USD', '£': 'GBP', '¥': 'JPY', 'CHF': 'CHF'};
	const label = /\b(grand total|order total|total due|total to pay|total amount|total|amount due|amount to pay|balance due|to pay)\b/gi;
	const amt = /^[^\d€$£¥\n]{0,24}?([A-Z]{3}|[€$£¥])?\s*(\d{1,3}(?:[ ,.]\d{3})*(?:[.,]\d{2})|\d+(?:[.,]\d{2})?)\s*([A-Z]{3}|[€$£¥])?/;
	const want = parseFloat(h.amount);
	let larger = false, m;
	const scan = text.slice(0, 20001);
	while (!larger && (m = label.exec(scan)) !== null) {
		const n = scan.slice(label.lastIndex, label.lastIndex + 64).match(amt);
		if (!n) continue;
		let cur = n[1] || n[3] || '';
		cur = sym[cur] || cur;
		let a = n[2].replace(/[ ]/g, '');
		if (/,\d{2}$/.test(a)) a = a.replace(/\./g, '').replace(',', '.'); else a = a.replace(/,/g, '');
		if ((cur === h.currency || cur === '' || h.currency === '') && parseFloat(a) > want) larger = true;
	}
	return {len: text.length, larger};
}`

// ReadHintTotal reads the total a hint points at. The hint is dropped
// (Accepted false) when it matches more than 8 elements or an element over
// 4,000 characters; for a hint into a frame, when that frame holds over
// 20,000 characters of text, the rest of the page over 16,384, or the page
// more than 32 frames; and when the figure is untrusted (Untrusted).
// Nothing matching is hint_unresolved; matches that disagree, no figure,
// or an attribute naming no currency is hint_uncertain.
func (s *Session) ReadHintTotal(t HintTarget) (HintRead, error) {
	loc, p, err := s.locator(Target{Selector: t.Selector, Frame: t.Frame})
	if err != nil {
		return HintRead{}, err
	}
	n, err := loc.Count()
	if err != nil || n == 0 {
		return HintRead{}, agentvault.Errorf(agentvault.CodeHintUnresolved, "nothing on the page matches this hint")
	}
	if n > MaxHintMatches {
		return dropped(fmt.Sprintf("over %d matches", MaxHintMatches)), nil
	}
	var got *OrderTotal
	hidden := false
	for i := range n {
		v, err := loc.Nth(i).Evaluate(hintScript, t.Attribute, playwright.LocatorEvaluateOptions{Timeout: ms(hintReadTimeout)})
		if err != nil {
			return HintRead{}, agentvault.Errorf(agentvault.CodeHintUnresolved, "the hinted element could not be read")
		}
		m, _ := v.(map[string]any)
		if tl, _ := m["tooLong"].(bool); tl {
			return dropped(fmt.Sprintf("an element over %d characters", MaxHintElemChars)), nil
		}
		a, _ := m["amount"].(string)
		c, _ := m["currency"].(string)
		if a == "" {
			continue
		}
		if t.Attribute != "" && c == "" {
			return HintRead{}, agentvault.Errorf(agentvault.CodeHintUncertain, "the attribute's value names no currency")
		}
		if got != nil && (got.Amount != a || got.Currency != c) {
			return HintRead{}, agentvault.Errorf(agentvault.CodeHintUncertain, "the elements this hint matches show different figures")
		}
		got = &OrderTotal{Amount: a, Currency: c}
		// An attribute is read where the page keeps data (a meta tag's
		// content, a hidden input's value): only a text must be shown.
		hidden = hidden || (t.Attribute == "" && !b(m["shown"]))
	}
	if got == nil {
		return HintRead{}, agentvault.Errorf(agentvault.CodeHintUncertain, "the hinted element shows no amount")
	}
	if hidden {
		return HintRead{Dropped: "untrusted", Untrusted: UntrustedHidden}, nil
	}
	if r, ok := s.scanAroundHint(p, t, *got); !ok {
		return r, nil
	}
	return HintRead{Total: *got, Accepted: true}, nil
}

// scanAroundHint reads every frame of the page for the hint's bounds and
// for a larger total; ok is false when the hint is dropped (r says why).
func (s *Session) scanAroundHint(p playwright.Page, t HintTarget, total OrderTotal) (r HintRead, ok bool) {
	frames := p.Frames()
	if t.Frame != "" && len(frames)-1 > MaxHintFrames {
		return dropped(fmt.Sprintf("more than %d frames", MaxHintFrames)), false
	}
	var hinted playwright.Frame
	if t.Frame != "" {
		h, err := p.Locator(t.Frame).First().ElementHandle(playwright.LocatorElementHandleOptions{Timeout: ms(hintReadTimeout)})
		if err != nil {
			return dropped("the frame could not be read"), false
		}
		hinted, err = h.ContentFrame()
		go h.Dispose()
		if err != nil || hinted == nil {
			return dropped("the frame could not be read"), false
		}
	}
	type ans struct {
		f   playwright.Frame
		v   any
		err error
	}
	ch := make(chan ans, len(frames))
	arg := map[string]any{"amount": total.Amount, "currency": total.Currency}
	for _, f := range frames {
		go func() {
			v, err := f.Evaluate(hintScanScript, arg)
			ch <- ans{f, v, err}
		}()
	}
	timer := time.NewTimer(hintScanTimeout)
	defer timer.Stop()
	rest := 0
	for range frames {
		var a ans
		select {
		case a = <-ch:
		case <-timer.C:
			return dropped("a frame did not answer in time"), false
		}
		m, isMap := a.v.(map[string]any)
		if a.err != nil || !isMap {
			if frameGone(a.f) {
				continue // gone: nothing of it is on the page
			}
			return dropped("a frame could not be read"), false
		}
		n, _ := m["len"].(int) // playwright hands a whole number as an int
		switch {
		case hinted != nil && a.f == hinted:
			if n > MaxHintFrameText {
				return dropped(fmt.Sprintf("the frame holds over %d characters", MaxHintFrameText)), false
			}
		default:
			rest += n
		}
		if b(m["larger"]) {
			return HintRead{Dropped: "untrusted", Untrusted: UntrustedLargerTotal}, false
		}
	}
	if t.Frame != "" && rest > MaxHintRestText {
		return dropped(fmt.Sprintf("the rest of the page holds over %d characters", MaxHintRestText)), false
	}
	return HintRead{}, true
}

// DocumentKey names the current page's document: it changes with every
// navigation, a reload of the same address and a same-document one
// (history.pushState) included. Hints are kept per document (seed 004:
// any navigation of the page clears them).
func (s *Session) DocumentKey() (string, error) {
	p, err := s.page()
	if err != nil {
		return "", err
	}
	v, err := p.Evaluate(`() => String(performance.timeOrigin)`)
	if err != nil {
		return "", agentvault.Wrap(agentvault.CodeNoPage, err, "the page could not be read")
	}
	origin, _ := v.(string)
	return p.URL() + "#" + origin, nil
}
