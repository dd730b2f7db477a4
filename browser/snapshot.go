package browser

import (
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/mxschmitt/playwright-go"
)

// MaxSnapshotDepth is the deepest accessibility walk a caller may ask for.
const MaxSnapshotDepth = 30

// Field is one fillable element of a snapshot and where to reach it by CSS.
type Field struct {
	Ref      string `json:"ref"`
	Role     string `json:"role"`
	Selector string `json:"selector,omitempty"`
	// Frame is the CSS selector of the iframe holding the field ("" for the
	// top document). Nested iframes are chained with Playwright's
	// enter-frame separator.
	Frame string `json:"frame,omitempty"`
}

// Snapshot is the accessibility tree of the current page with refs, values
// removed, and the CSS selectors of its fields.
type Snapshot struct {
	YAML   string
	Fields []Field
}

// fieldRoles are the roles a fill can target; their inline values are cut
// from the YAML and they get a CSS selector.
var fieldRoles = map[string]bool{
	"textbox": true, "searchbox": true, "spinbutton": true, "combobox": true,
	"checkbox": true, "radio": true, "slider": true, "switch": true, "listbox": true,
}

// snapLine splits "  - role "name" [attr] [ref=e5]: value".
var snapLine = regexp.MustCompile(`^(\s*)- ([a-z]+)((?: "(?:[^"\\]|\\.)*")?(?: \[[^\]]*\])*)(:.*)?$`)
var refAttr = regexp.MustCompile(`\[ref=([a-z0-9]+)\]`)

// Snapshot captures the accessibility tree (Playwright's AI mode: refs, and
// the content of iframes, cross-origin ones included). Field values are
// removed: a snapshot shows names and structure, never what is typed.
func (s *Session) Snapshot(depth int) (Snapshot, error) {
	p, err := s.page()
	if err != nil {
		return Snapshot{}, err
	}
	if depth <= 0 || depth > MaxSnapshotDepth {
		depth = MaxSnapshotDepth
	}
	raw, err := p.AriaSnapshot(playwright.PageAriaSnapshotOptions{
		Mode:    playwright.AriaSnapshotModeAi,
		Depth:   playwright.Int(depth),
		Timeout: ms(10 * time.Second),
	})
	if err != nil {
		return Snapshot{}, agentvault.Wrap(agentvault.CodeInternal, err, "accessibility snapshot failed (the page may be navigating: ask again)")
	}
	yaml, fields, frames := stripValues(raw)
	s.resolveSelectors(p, fields, frames)
	return Snapshot{YAML: yaml, Fields: fields}, nil
}

type frameRef struct {
	ref      string // the iframe element's ref
	parent   string // ref of the enclosing iframe, "" at top
	selector string
}

// stripValues drops the inline value of every field line and collects the
// field and iframe refs, with each field's enclosing iframe.
func stripValues(raw string) (string, []Field, map[string]*frameRef) {
	lines := strings.Split(raw, "\n")
	type open struct {
		indent int
		ref    string
	}
	var stack []open // enclosing iframes
	frames := map[string]*frameRef{}
	var fields []Field
	out := make([]string, 0, len(lines))
	for _, ln := range lines {
		m := snapLine.FindStringSubmatch(ln)
		if m == nil {
			// Continuation lines (multi-line text) of a field value cannot be
			// told apart reliably; a field's value is always inline in AI mode.
			out = append(out, ln)
			continue
		}
		indent := len(m[1])
		for len(stack) > 0 && indent <= stack[len(stack)-1].indent {
			stack = stack[:len(stack)-1]
		}
		role, attrs, rest := m[2], m[3], m[4]
		ref := ""
		if r := refAttr.FindStringSubmatch(attrs); r != nil {
			ref = r[1]
		}
		enclosing := ""
		if len(stack) > 0 {
			enclosing = stack[len(stack)-1].ref
		}
		switch {
		case role == "iframe" && ref != "":
			frames[ref] = &frameRef{ref: ref, parent: enclosing}
			stack = append(stack, open{indent: indent, ref: ref})
		case fieldRoles[role]:
			if rest != "" && rest != ":" {
				rest = "" // the value: never shown
			}
			ln = m[1] + "- " + role + attrs + rest
			if ref != "" {
				fields = append(fields, Field{Ref: ref, Role: role, Frame: enclosing})
			}
		}
		out = append(out, ln)
	}
	return strings.Join(out, "\n"), fields, frames
}

// cssOf computes a short CSS selector unique in the element's document:
// id, then a distinguishing attribute, then an nth-of-type path. It never
// reads the element's value.
const cssOf = `(el) => {
	const doc = el.ownerDocument;
	const esc = (v) => CSS.escape(v);
	const uniq = (s) => { try { const l = doc.querySelectorAll(s); return l.length === 1 && l[0] === el; } catch (e) { return false; } };
	const tag = el.tagName.toLowerCase();
	if (el.id && uniq('#' + esc(el.id))) return '#' + esc(el.id);
	for (const a of ['name', 'data-testid', 'autocomplete', 'title', 'aria-label', 'placeholder', 'type']) {
		const v = el.getAttribute(a);
		if (!v || v.length > 80) continue;
		const s = tag + '[' + a + '="' + v.replace(/["\\]/g, '\\$&') + '"]';
		if (uniq(s)) return s;
	}
	const parts = [];
	let e = el;
	while (e && e.nodeType === 1 && e !== doc.documentElement) {
		if (e !== el && e.id && uniq('#' + esc(e.id))) { parts.unshift('#' + esc(e.id)); return parts.join(' > '); }
		let p = e.tagName.toLowerCase();
		const par = e.parentElement;
		if (par) {
			const same = Array.from(par.children).filter((c) => c.tagName === e.tagName);
			if (same.length > 1) p += ':nth-of-type(' + (same.indexOf(e) + 1) + ')';
		}
		parts.unshift(p);
		e = par;
	}
	return parts.join(' > ');
}`

const enterFrame = " >> internal:control=enter-frame >> "

// resolveSelectors fills in Selector and Frame. The lookups run in parallel:
// each is a round trip to the driver.
func (s *Session) resolveSelectors(p playwright.Page, fields []Field, frames map[string]*frameRef) {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	eval := func(ref string, dst *string) {
		defer wg.Done()
		sem <- struct{}{}
		defer func() { <-sem }()
		v, err := p.Locator("aria-ref="+ref).Evaluate(cssOf, nil, playwright.LocatorEvaluateOptions{Timeout: ms(2 * time.Second)})
		if err == nil {
			if str, ok := v.(string); ok {
				*dst = str
			}
		}
	}
	for _, f := range frames {
		wg.Add(1)
		go eval(f.ref, &f.selector)
	}
	for i := range fields {
		wg.Add(1)
		go eval(fields[i].Ref, &fields[i].Selector)
	}
	wg.Wait()
	chain := func(ref string) string {
		var parts []string
		for ref != "" {
			f := frames[ref]
			if f == nil || f.selector == "" {
				return ""
			}
			parts = append([]string{f.selector}, parts...)
			ref = f.parent
		}
		return strings.Join(parts, enterFrame)
	}
	for i := range fields {
		if fields[i].Frame != "" {
			fields[i].Frame = chain(fields[i].Frame)
		}
	}
}
