package browser

import (
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/mxschmitt/playwright-go"
)

// MaxSnapshotDepth is the deepest accessibility walk a caller may ask for.
const MaxSnapshotDepth = 30

// Field is one fillable element of a snapshot and where to reach it by CSS.
type Field struct {
	Ref  string `json:"ref"`
	Role string `json:"role"`
	// Name is the accessible name the snapshot shows.
	Name     string `json:"name,omitempty"`
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
var nameAttr = regexp.MustCompile(`^ ("(?:[^"\\]|\\.)*")`)

// snapName reads the quoted accessible name at the start of attrs.
func snapName(attrs string) string {
	m := nameAttr.FindStringSubmatch(attrs)
	if m == nil {
		return ""
	}
	var n string
	if err := json.Unmarshal([]byte(m[1]), &n); err != nil {
		return strings.Trim(m[1], `"`)
	}
	return n
}

// Snapshot captures the accessibility tree (Playwright's AI mode: refs, and
// the content of iframes, cross-origin ones included). Field values are
// removed: a snapshot shows names and structure, never what is typed.
//
// The field selectors cost no round trip after the tree: every document's
// field list is taken by one script per frame while the tree is captured,
// and each iframe of the tree is paired with its frame afterwards by the
// fields it shows (resolveSelectors).
func (s *Session) Snapshot(depth int) (Snapshot, error) {
	p, err := s.page()
	if err != nil {
		return Snapshot{}, err
	}
	if depth <= 0 || depth > MaxSnapshotDepth {
		depth = MaxSnapshotDepth
	}
	all := p.Frames()
	lists := make(chan frameDoc, len(all))
	for _, f := range all {
		go func() { lists <- frameDoc{f, parseDocFields(f.Evaluate(fieldsScript))} }()
	}
	raw, err := p.AriaSnapshot(playwright.PageAriaSnapshotOptions{
		Mode:    playwright.AriaSnapshotModeAi,
		Depth:   playwright.Int(depth),
		Timeout: ms(10 * time.Second),
	})
	if err != nil {
		return Snapshot{}, agentvault.Wrap(agentvault.CodeInternal, err, "accessibility snapshot failed (the page may have been navigating: ask again)")
	}
	// A frame whose script has not answered shortly after the tree (a
	// renderer busy with its own work) is resolved through refs instead.
	docs := map[playwright.Frame]docFields{}
	late := time.NewTimer(frameListWait)
	defer late.Stop()
collect:
	for range all {
		select {
		case d := <-lists:
			docs[d.frame] = d.doc
		case <-late.C:
			break collect
		}
	}
	yaml, fields, frames := stripValues(raw)
	s.resolveSelectors(p, fields, frames, docs)
	return Snapshot{YAML: yaml, Fields: fields}, nil
}

// frameListWait bounds how long a snapshot waits, after the tree, for a
// frame's field list.
const frameListWait = 2 * time.Second

type frameDoc struct {
	frame playwright.Frame
	doc   docFields
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
	// valueIndent is the indent of a field line whose value was cut; a
	// deeper line that is not an element (a YAML block scalar's text) is
	// part of that value and is dropped too. AI mode writes values inline,
	// so this is a second line of defence.
	valueIndent := -1
	for _, ln := range lines {
		m := snapLine.FindStringSubmatch(ln)
		if m == nil {
			if valueIndent >= 0 && len(ln)-len(strings.TrimLeft(ln, " ")) > valueIndent {
				continue
			}
			out = append(out, ln)
			continue
		}
		indent := len(m[1])
		valueIndent = -1
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
				valueIndent = indent
			}
			ln = m[1] + "- " + role + attrs + rest
			if ref != "" {
				fields = append(fields, Field{Ref: ref, Role: role, Name: snapName(attrs), Frame: enclosing})
			}
		}
		out = append(out, ln)
	}
	return strings.Join(foldOptions(out), "\n"), fields, frames
}

// plainOption is an option line with no ref and no children: a <select>'s
// option (a listbox's options that carry refs are left alone).
var plainOption = regexp.MustCompile(`^(\s*)- option((?: "(?:[^"\\]|\\.)*")?(?: \[(?:selected|disabled|checked)\])*)$`)

// foldOptions writes each run of two or more sibling plain options on one
// line, `- options: "A" [selected], "B", ...`: the same names and states in
// a fraction of the characters (a country or year list is most of a
// checkout's snapshot otherwise).
func foldOptions(lines []string) []string {
	out := lines[:0]
	for i := 0; i < len(lines); {
		m := plainOption.FindStringSubmatch(lines[i])
		if m == nil {
			out = append(out, lines[i])
			i++
			continue
		}
		j := i + 1
		items := []string{strings.TrimPrefix(m[2], " ")}
		for ; j < len(lines); j++ {
			n := plainOption.FindStringSubmatch(lines[j])
			if n == nil || n[1] != m[1] {
				break
			}
			items = append(items, strings.TrimPrefix(n[2], " "))
		}
		if j-i < 2 {
			out = append(out, lines[i])
		} else {
			out = append(out, m[1]+"- options: "+strings.Join(items, ", "))
		}
		i = j
	}
	return out
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

// fieldsScript describes one document without reading any value: its
// fields in document order (role, best-effort accessible name, unique CSS
// selector), its iframes (CSS selector and position in window.frames), and
// the document's own position in its parent's window.frames. Window
// identity is comparable across origins, so a frame and the iframe element
// holding it are paired exactly, whatever the tree shows or hides.
const fieldsScript = `() => {
	const cssOf = ` + cssOf + `;
	const doc = document;
	const norm = (t) => (t || '').replace(/\s+/g, ' ').trim();
	const textOf = (n, skip) => {
		let out = '';
		for (const c of n.childNodes) {
			if (c === skip) continue;
			if (c.nodeType === 3) out += c.textContent;
			else if (c.nodeType === 1 && !['INPUT', 'SELECT', 'TEXTAREA', 'BUTTON', 'SCRIPT', 'STYLE'].includes(c.tagName)) out += ' ' + textOf(c, skip) + ' ';
		}
		return out;
	};
	const nameOf = (el) => {
		const lb = el.getAttribute('aria-labelledby');
		if (lb) { const t = lb.split(/\s+/).map((id) => { const e = doc.getElementById(id); return e ? textOf(e, null) : ''; }).join(' '); if (norm(t)) return norm(t); }
		const al = el.getAttribute('aria-label'); if (norm(al)) return norm(al);
		const labels = el.labels ? Array.from(el.labels) : [];
		if (labels.length) { const t = labels.map((l) => textOf(l, el)).join(' '); if (norm(t)) return norm(t); }
		return norm(el.getAttribute('title')) || norm(el.getAttribute('placeholder'));
	};
	const roleOf = (el) => {
		const r = (el.getAttribute('role') || '').trim().split(/\s+/)[0];
		if (r) return r;
		const tag = el.tagName;
		if (tag === 'TEXTAREA') return 'textbox';
		if (tag === 'SELECT') return (el.multiple || el.size > 1) ? 'listbox' : 'combobox';
		if (tag !== 'INPUT') return el.isContentEditable ? 'textbox' : '';
		const t = (el.getAttribute('type') || 'text').toLowerCase();
		if (el.getAttribute('list') && ['text', 'search', 'tel', 'url', 'email'].includes(t)) return 'combobox';
		return ({text: 'textbox', email: 'textbox', tel: 'textbox', url: 'textbox', password: 'textbox', search: 'searchbox', number: 'spinbutton', checkbox: 'checkbox', radio: 'radio', range: 'slider'})[t] || '';
	};
	const shown = (el) => {
		if (el.closest('[aria-hidden=true],[inert]')) return false;
		return el.checkVisibility ? el.checkVisibility({visibilityProperty: true}) : true;
	};
	const out = [];
	for (const el of doc.querySelectorAll('input,select,textarea,[role],[contenteditable]')) {
		const role = roleOf(el);
		if (!role || !shown(el)) continue;
		out.push({role, name: nameOf(el), sel: cssOf(el)});
	}
	const frames = [];
	for (const el of doc.querySelectorAll('iframe,frame')) {
		const w = el.contentWindow;
		if (!w) continue;
		for (let i = 0; i < window.frames.length; i++) {
			if (window.frames[i] === w) { frames.push({idx: i, sel: cssOf(el)}); break; }
		}
	}
	let self = -1;
	try {
		const up = window.parent;
		if (up !== window) for (let i = 0; i < up.frames.length; i++) if (up.frames[i] === window) { self = i; break; }
	} catch (e) {}
	return {fields: out, frames, self};
}`

// refLookups counts per-ref selector lookups (the slow path), for tests.
var refLookups atomic.Int64

type domField struct {
	role, name, sel string
}

// docFields is what fieldsScript says about one document. ok is false when
// the script did not run (the frame went away, navigation): its fields are
// then resolved one ref at a time.
type docFields struct {
	ok     bool
	fields []domField
	frames map[int]string // window.frames index -> iframe CSS selector
	self   int            // index in the parent's window.frames, -1 unknown
}

func parseDocFields(v any, err error) docFields {
	d := docFields{self: -1, frames: map[int]string{}}
	m, ok := v.(map[string]any)
	if err != nil || !ok {
		return d
	}
	d.ok = true
	list, _ := m["fields"].([]any)
	for _, it := range list {
		f, _ := it.(map[string]any)
		r, _ := f["role"].(string)
		n, _ := f["name"].(string)
		sel, _ := f["sel"].(string)
		d.fields = append(d.fields, domField{r, n, sel})
	}
	fl, _ := m["frames"].([]any)
	for _, it := range fl {
		f, _ := it.(map[string]any)
		sel, _ := f["sel"].(string)
		if i, ok := f["idx"]; ok && sel != "" {
			d.frames[toInt(i)] = sel
		}
	}
	if v, ok := m["self"]; ok {
		d.self = toInt(v)
	}
	return d
}

// resolveSelectors fills in Selector and turns Frame from the enclosing
// iframe's ref into its selector chain. Each document's fields were listed
// by one script (docs, by frame) and are matched to the snapshot's fields in
// order by role and accessible name. An iframe of the tree is paired with
// the one child frame of its parent's frame whose list holds every named
// field the tree shows inside it; it gets its CSS selector from its parent
// document's list. Whatever that leaves open (an iframe with no named field
// or with a twin, a frame whose list did not come, a field that does not
// match exactly, an iframe its parent's script cannot see, such as one in a
// shadow root) is resolved through its ref, one round trip each.
func (s *Session) resolveSelectors(p playwright.Page, fields []Field, frames map[string]*frameRef, byFrameDoc map[playwright.Frame]docFields) {
	byFrame := map[string][]int{}
	for i := range fields {
		byFrame[fields[i].Frame] = append(byFrame[fields[i].Frame], i)
	}
	// The frames to list: those holding fields, and their ancestors (whose
	// lists name the iframes below them).
	need := map[string]bool{}
	for fref := range byFrame {
		for r := fref; r != "" && !need[r]; {
			f := frames[r]
			if f == nil {
				break
			}
			need[r] = true
			r = f.parent
		}
	}
	main := p.MainFrame()
	docs := map[string]docFields{"": byFrameDoc[main]}
	frameOf := map[string]playwright.Frame{"": main}
	var pair func(ref string) playwright.Frame
	pair = func(ref string) playwright.Frame {
		if f, ok := frameOf[ref]; ok {
			return f
		}
		frameOf[ref] = nil
		fr := frames[ref]
		if fr == nil {
			return nil
		}
		parent := pair(fr.parent)
		if parent == nil {
			return nil
		}
		var found playwright.Frame
		for _, c := range parent.ChildFrames() {
			if d, ok := byFrameDoc[c]; ok && d.ok && holdsAll(fields, byFrame[ref], d.fields) {
				if found != nil {
					return nil // twins: only the ref can tell them apart
				}
				found = c
			}
		}
		frameOf[ref] = found
		return found
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for ref := range need {
		if f := pair(ref); f != nil {
			docs[ref] = byFrameDoc[f]
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The script runs in the frame holding the matched root; with no
			// match it must not run at all (it would describe another
			// document).
			v, err := p.FrameLocator("aria-ref="+ref).Locator(":root").EvaluateAll(`(els) => els.length === 1 ? (`+fieldsScript+`)() : null`, nil)
			d := parseDocFields(v, err)
			mu.Lock()
			docs[ref] = d
			mu.Unlock()
		}()
	}
	wg.Wait()

	sem := make(chan struct{}, 8)
	evalRef := func(ref string, dst *string) {
		defer wg.Done()
		sem <- struct{}{}
		defer func() { <-sem }()
		refLookups.Add(1)
		v, err := p.Locator("aria-ref="+ref).Evaluate(cssOf, nil, playwright.LocatorEvaluateOptions{Timeout: ms(2 * time.Second)})
		if err == nil {
			if str, ok := v.(string); ok {
				*dst = str
			}
		}
	}
	for ref := range need {
		f := frames[ref]
		if d := docs[ref]; d.self >= 0 {
			f.selector = docs[f.parent].frames[d.self]
		}
		if f.selector == "" {
			wg.Add(1)
			go evalRef(ref, &f.selector)
		}
	}
	var unmatched []int
	for fref, idx := range byFrame {
		if d := docs[fref]; d.ok {
			unmatched = append(unmatched, matchFields(fields, idx, d.fields)...)
		} else {
			unmatched = append(unmatched, idx...)
		}
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
	frameSel := map[string]string{}
	for fref := range byFrame {
		if fref != "" {
			frameSel[fref] = chain(fref)
		}
	}
	for _, i := range unmatched {
		if fields[i].Frame != "" && frameSel[fields[i].Frame] == "" {
			continue // the frame cannot be named: no selector either way
		}
		wg.Add(1)
		go evalRef(fields[i].Ref, &fields[i].Selector)
	}
	wg.Wait()
	for i := range fields {
		if fields[i].Frame != "" {
			fields[i].Frame = frameSel[fields[i].Frame]
			if fields[i].Frame == "" {
				fields[i].Selector = ""
			}
		}
	}
}

// holdsAll reports whether dom lists, in order, every field of idx by its
// role and name, and idx has at least one named field: the document is then
// the one the tree shows in that iframe.
func holdsAll(fields []Field, idx []int, dom []domField) bool {
	named := 0
	j := 0
	for _, i := range idx {
		f := fields[i]
		if f.Name == "" {
			continue
		}
		named++
		for j < len(dom) && (dom[j].role != f.Role || dom[j].name != f.Name) {
			j++
		}
		if j == len(dom) {
			return false
		}
		j++
	}
	return named > 0
}

// matchFields assigns selectors to the snapshot fields idx (in order) from
// the document's list, greedily in order, requiring the same role and the
// same non-empty name. It returns the fields left unmatched.
func matchFields(fields []Field, idx []int, dom []domField) []int {
	var miss []int
	j := 0
	for _, i := range idx {
		f := &fields[i]
		found := -1
		if f.Name != "" {
			for k := j; k < len(dom); k++ {
				if dom[k].role == f.Role && dom[k].name == f.Name {
					found = k
					break
				}
			}
		}
		if found < 0 || dom[found].sel == "" {
			miss = append(miss, i)
			continue
		}
		f.Selector = dom[found].sel
		j = found + 1
	}
	return miss
}
