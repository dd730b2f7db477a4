package browser

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
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
	// Reused is true when the page had not changed since the last reading
	// and that reading was returned without walking the page again.
	Reused bool
}

// SnapshotOptions says which part of the page to read. The zero value reads
// the whole page, every frame included, at MaxSnapshotDepth.
type SnapshotOptions struct {
	// Depth limits the walk (MaxSnapshotDepth when 0 or above it).
	Depth int
	// Selector reads only the element it names and what is inside it
	// (iframes included). It must match exactly one element.
	Selector string
	// Frame is the CSS selector of an iframe (nested iframes chained with
	// Playwright's enter-frame separator): the snapshot reads that frame's
	// document, or Selector inside it.
	Frame string
}

// Snapshot captures the whole page's accessibility tree to depth.
func (s *Session) Snapshot(depth int) (Snapshot, error) {
	return s.SnapshotOf(SnapshotOptions{Depth: depth})
}

// SnapshotOf captures the accessibility tree (Playwright's AI mode: refs,
// and the content of iframes, cross-origin ones included), rewritten to
// what an agent acts on and reads (compact.go). Field values are removed: a
// snapshot shows names and structure, never what is typed.
//
// A whole-page reading is kept: every frame runs a change watcher (DOM
// mutations, shadow roots, focus, input and form state, loads and
// animations), and a later whole-page snapshot at the same depth, with no
// action of this session in between, no frame changed and no frame come or
// gone, answers from the kept reading after one check per frame instead of
// walking the page again. Otherwise the field lists of the documents that
// changed are taken while the tree is walked, so the field selectors cost
// no round trip after the tree.
func (s *Session) SnapshotOf(o SnapshotOptions) (Snapshot, error) {
	p, err := s.page()
	if err != nil {
		return Snapshot{}, err
	}
	depth := o.Depth
	if depth <= 0 || depth > MaxSnapshotDepth {
		depth = MaxSnapshotDepth
	}
	if o.Selector == "" && o.Frame == "" {
		// A reading ReadAhead started goes first, even when this call
		// came before it took the lock.
		s.aheadMu.Lock()
		ahead := s.ahead
		s.aheadMu.Unlock()
		if ahead != nil {
			<-ahead
		}
	}
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	if o.Selector == "" && o.Frame == "" {
		return s.readPage(p, depth, true)
	}
	return s.readPart(p, o, depth)
}

// reading is the last whole-page snapshot and what it was taken from.
type reading struct {
	page   playwright.Page
	depth  int
	epoch  uint64
	seq    uint64                      // when the tokens were taken (Session.pendSeq)
	tokens map[playwright.Frame]string // each frame's change token, taken before the walk
	refs   map[string]*frameRef
	// resolved says whether the fields have their selectors yet; docs are
	// the field lists they were resolved from.
	resolved bool
	docs     map[playwright.Frame]docFields
	snap     Snapshot
}

// frameListWait bounds how long a snapshot waits for a frame's check; a
// frame whose renderer is busy past it counts as changed and its fields
// are resolved through refs.
const frameListWait = 2 * time.Second

// readPage is the whole-page snapshot; the caller holds snapMu.
func (s *Session) readPage(p playwright.Page, depth int, resolve bool) (Snapshot, error) {
	tr := newReadTrace(s, len(p.Frames()), resolve)
	defer tr.done()
	epoch := s.epoch.Load()
	prev := s.last
	if prev != nil && prev.page != p {
		prev = nil
	}
	frames := p.Frames()
	// Tokens taken since the last action (noteChanges) that already show
	// the page moved on from the kept reading: the walk is certain, and
	// those tokens, taken before it, stand for it. Otherwise every frame is
	// asked now, before the walk.
	if pend := s.pendingTokens(p, epoch, frames, prev); pend != nil && (prev == nil || prev.depth != depth || prev.epoch != epoch || s.partial != nil || !unchanged(prev.tokens, pend.tokens)) {
		tr.pending = true
		notedWalks.Add(1)
		return s.walkPage(p, depth, resolve, epoch, pend.seq, pend.tokens, nil, tr)
	}
	var lists func() map[playwright.Frame]docFields
	if resolve && prev != nil && !prev.resolved {
		// A navigation's reading whose fields have no selectors yet: their
		// lists are needed whatever the check says, so they are asked for
		// with it.
		lists = s.fieldListsAsync(frames, nil, nil)
	}
	seq := s.pendSeq.Add(1)
	tokens := s.checkFrames(frames)
	tr.mark("check")
	if prev != nil && prev.depth == depth && prev.epoch == epoch && s.partial == nil && unchanged(prev.tokens, tokens) {
		if lists != nil {
			s.resolve(p, prev, lists())
			tr.mark("lists")
		}
		tr.reused = true
		out := prev.snap
		out.Fields = append([]Field(nil), prev.snap.Fields...)
		out.Reused = true
		return out, nil
	}
	// The field lists of the documents that changed are taken while the
	// tree is walked (the tokens above were taken before it, so a change
	// during the walk shows in the next check). A reading taken ahead of
	// any snapshot (warm) leaves them for the snapshot that first needs
	// them: the navigation that took it waits for the tree alone.
	if resolve && lists == nil {
		lists = s.fieldListsAsync(frames, prev, tokens)
	}
	return s.walkPage(p, depth, resolve, epoch, seq, tokens, lists, tr)
}

// walkPage walks the page and keeps the reading, with tokens taken before
// the walk. lists, when not nil, are the field lists already asked for;
// with resolve and no lists, every frame is asked for its list during the
// walk.
func (s *Session) walkPage(p playwright.Page, depth int, resolve bool, epoch, seq uint64, tokens map[playwright.Frame]string, lists func() map[playwright.Frame]docFields, tr *readTrace) (Snapshot, error) {
	if resolve && lists == nil {
		lists = s.fieldListsAsync(p.Frames(), nil, nil)
	}
	snapshotWalks.Add(1)
	raw, err := p.AriaSnapshot(playwright.PageAriaSnapshotOptions{
		Mode:    playwright.AriaSnapshotModeAi,
		Depth:   playwright.Int(depth),
		Timeout: ms(10 * time.Second),
	})
	tr.mark("walk")
	if err != nil {
		if lists != nil {
			go lists()
		}
		return Snapshot{}, agentvault.Wrap(agentvault.CodeInternal, err, "accessibility snapshot failed (the page may have been navigating: ask again)")
	}
	yaml, fields, refs := compactSnapshot(raw)
	tr.mark("compact")
	r := &reading{page: p, depth: depth, epoch: epoch, seq: seq, tokens: tokens, refs: refs, snap: Snapshot{YAML: yaml, Fields: fields}}
	if lists != nil {
		docs := lists()
		tr.mark("lists")
		s.resolve(p, r, docs)
		tr.mark("resolve")
	}
	s.last = r
	s.partial = nil
	out := r.snap
	out.Fields = append([]Field(nil), r.snap.Fields...)
	return out, nil
}

// readTrace times a whole-page reading's phases for a debug log line
// (timings and counts only: nothing of the page).
type readTrace struct {
	s        *Session
	start    time.Time
	last     time.Time
	frames   int
	resolve  bool
	reused   bool
	pending  bool
	phases   []any
	lookups0 int64
}

func newReadTrace(s *Session, frames int, resolve bool) *readTrace {
	now := time.Now()
	return &readTrace{s: s, start: now, last: now, frames: frames, resolve: resolve, lookups0: refLookups.Load()}
}

// mark ends a phase.
func (t *readTrace) mark(phase string) {
	now := time.Now()
	t.phases = append(t.phases, phase+"_ms", float64(now.Sub(t.last).Microseconds())/1000)
	t.last = now
}

func (t *readTrace) done() {
	if t.s.b == nil || t.s.b.log == nil {
		return
	}
	args := append([]any{"frames", t.frames, "for_snapshot", t.resolve, "reused", t.reused, "tokens_taken_before", t.pending,
		"ref_lookups", refLookups.Load() - t.lookups0, "total_ms", float64(time.Since(t.start).Microseconds()) / 1000}, t.phases...)
	t.s.b.log.Debug("page read", args...)
}

// resolve gives a reading's fields their selectors from the documents'
// field lists.
func (s *Session) resolve(p playwright.Page, r *reading, docs map[playwright.Frame]docFields) {
	s.resolveSelectors(p, p.MainFrame(), "", r.snap.Fields, r.refs, docs)
	r.docs, r.resolved = docs, true
}

// fieldListsAsync starts taking the field list of every frame whose token
// moved since prev (the others' lists are prev's) and returns the wait for
// them. A frame whose list has not come within frameListWait of that wait
// (a renderer busy with its own work) is left out: its fields are resolved
// through refs.
func (s *Session) fieldListsAsync(frames []playwright.Frame, prev *reading, tokens map[playwright.Frame]string) func() map[playwright.Frame]docFields {
	docs := map[playwright.Frame]docFields{}
	ch := make(chan frameDoc, len(frames))
	asked := 0
	for _, f := range frames {
		if tok := tokens[f]; tok != "" && prev != nil && prev.tokens[f] == tok && prev.docs[f].ok {
			docs[f] = prev.docs[f]
			continue
		}
		asked++
		go func() { ch <- frameDoc{f, parseDocFields(f.Evaluate(fieldsScript))} }()
	}
	return func() map[playwright.Frame]docFields {
		late := time.NewTimer(frameListWait)
		defer late.Stop()
		for range asked {
			select {
			case d := <-ch:
				docs[d.frame] = d.doc
			case <-late.C:
				return docs
			}
		}
		return docs
	}
}

type frameDoc struct {
	frame playwright.Frame
	doc   docFields
}

// pending are change tokens of every frame taken after the session's last
// action (noteChanges), for the next reading.
type pending struct {
	seq    uint64
	page   playwright.Page
	epoch  uint64
	tokens map[playwright.Frame]string
}

// noteChanges takes every frame's change token in the background after an
// action or a wait. A later reading that finds the page moved on from the
// kept reading (the tokens differ, the action made the kept reading
// unusable, or there is none) walks at once with these tokens instead of
// asking every frame first: they were taken before its walk and after the
// last action, so a change since either shows in the walk or makes the
// next check fail, exactly as tokens asked for just before the walk do.
// The field lists of such a walk are all taken afresh (a list kept from an
// earlier reading could predate a change made since the tokens).
func (s *Session) noteChanges() {
	if s.noReadings.Load() {
		return
	}
	p, err := s.page()
	if err != nil {
		return
	}
	seq := s.pendSeq.Add(1)
	epoch := s.epoch.Load()
	go func() {
		frames := p.Frames()
		tokens := s.checkFrames(frames)
		for _, tok := range tokens {
			if tok == "" {
				return // a frame did not answer: the reading asks again
			}
		}
		s.pendMu.Lock()
		defer s.pendMu.Unlock()
		if s.pend == nil || s.pend.seq < seq {
			s.pend = &pending{seq: seq, page: p, epoch: epoch, tokens: tokens}
		}
	}()
}

// pendingTokens returns the tokens noteChanges took on p in this epoch,
// after those of the kept reading prev, when they cover exactly the frames
// the page has now.
func (s *Session) pendingTokens(p playwright.Page, epoch uint64, frames []playwright.Frame, prev *reading) *pending {
	s.pendMu.Lock()
	pd := s.pend
	s.pendMu.Unlock()
	if pd == nil || pd.page != p || pd.epoch != epoch || s.epoch.Load() != epoch || len(pd.tokens) != len(frames) || (prev != nil && pd.seq < prev.seq) {
		return nil
	}
	for _, f := range frames {
		if pd.tokens[f] == "" {
			return nil
		}
	}
	return pd
}

// unchanged reports whether every frame answered its check with the token
// it had at the kept reading, and no frame came or went.
func unchanged(prev, now map[playwright.Frame]string) bool {
	if len(prev) != len(now) {
		return false
	}
	for f, tok := range now {
		if tok == "" || prev[f] != tok {
			return false
		}
	}
	return true
}

// checkFrames asks every frame, in parallel, for its change token ("" for
// a frame that did not answer within frameListWait).
func (s *Session) checkFrames(frames []playwright.Frame) map[playwright.Frame]string {
	type answer struct {
		f   playwright.Frame
		tok string
	}
	ch := make(chan answer, len(frames))
	for _, f := range frames {
		go func() {
			v, err := f.Evaluate(watchScript, s.watchKey)
			tok, _ := v.(string)
			if err != nil {
				tok = ""
			}
			ch <- answer{f, tok}
		}()
	}
	out := make(map[playwright.Frame]string, len(frames))
	late := time.NewTimer(frameListWait)
	defer late.Stop()
	for range frames {
		select {
		case a := <-ch:
			out[a.f] = a.tok
		case <-late.C:
			for _, f := range frames {
				if _, ok := out[f]; !ok {
					out[f] = ""
				}
			}
			return out
		}
	}
	return out
}

// readPart is a snapshot of one element or one frame; the caller holds
// snapMu. A part read with a selector leaves Playwright's ref lookup of that
// frame knowing only the part's refs: the refs it showed are kept in
// s.partial, and an action on any other ref walks the page once first
// (restoreRefs).
func (s *Session) readPart(p playwright.Page, o SnapshotOptions, depth int) (Snapshot, error) {
	root := p.MainFrame()
	var loc playwright.Locator
	if o.Frame != "" {
		fl := p.Locator(o.Frame)
		if err := one(fl, "frame", o.Frame); err != nil {
			return Snapshot{}, err
		}
		h, err := fl.ElementHandle(playwright.LocatorElementHandleOptions{Timeout: ms(3 * time.Second)})
		if err != nil {
			return Snapshot{}, partError("frame", o.Frame, err)
		}
		f, err := h.ContentFrame()
		go h.Dispose()
		if err != nil || f == nil {
			return Snapshot{}, agentvault.Errorf(agentvault.CodeInvalidInput, "frame %s is not an iframe with a document", o.Frame)
		}
		root = f
		sel := o.Selector
		if sel == "" {
			sel = "body"
		}
		loc = p.FrameLocator(o.Frame).Locator(sel)
	} else {
		loc = p.Locator(o.Selector)
	}
	if o.Selector != "" {
		if err := one(loc, "selector", o.Selector); err != nil {
			return Snapshot{}, err
		}
	}
	docCh := make(chan docFields, 1)
	go func() {
		docCh <- parseDocFields(loc.Evaluate(scopedFieldsScript, nil, playwright.LocatorEvaluateOptions{Timeout: ms(frameListWait)}))
	}()
	snapshotWalks.Add(1)
	raw, err := loc.AriaSnapshot(playwright.LocatorAriaSnapshotOptions{
		Mode:    playwright.AriaSnapshotModeAi,
		Depth:   playwright.Int(depth),
		Timeout: ms(5 * time.Second),
	})
	if err != nil {
		what, sel := "selector", o.Selector
		if o.Selector == "" {
			what, sel = "frame", o.Frame
		}
		return Snapshot{}, partError(what, sel, err)
	}
	yaml, fields, refs := compactSnapshot(raw)
	s.resolveSelectors(p, root, o.Frame, fields, refs, map[playwright.Frame]docFields{root: <-docCh})
	if o.Selector != "" {
		shown := map[string]bool{}
		for _, m := range refAttr.FindAllStringSubmatch(yaml, -1) {
			shown[m[1]] = true
		}
		s.partial = shown
	}
	return Snapshot{YAML: yaml, Fields: fields}, nil
}

// one checks that a part's selector names exactly one element, and says so
// at once when it does not (a snapshot would wait for one).
func one(loc playwright.Locator, what, sel string) error {
	n, err := loc.Count()
	switch {
	case err != nil:
		return partError(what, sel, err)
	case n == 0:
		return agentvault.Errorf(agentvault.CodeFieldNotFound, "%s %s matches nothing on the page", what, sel)
	case n > 1:
		return agentvault.Errorf(agentvault.CodeInvalidInput, "%s %s matches %d elements; narrow it to one", what, sel, n)
	}
	return nil
}

// partError explains a selector or frame a part snapshot could not read,
// without Playwright's text (it can quote the page).
func partError(what, sel string, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "strict mode violation"):
		return agentvault.Wrap(agentvault.CodeInvalidInput, err, "%s %s matches more than one element; narrow it", what, sel)
	case errors.Is(err, playwright.ErrTimeout), strings.Contains(msg, "does not match any"):
		return agentvault.Wrap(agentvault.CodeFieldNotFound, err, "%s %s matches nothing on the page", what, sel)
	case strings.Contains(msg, "Unexpected token"), strings.Contains(msg, "not a valid selector"), strings.Contains(msg, "Unknown engine"):
		return agentvault.Wrap(agentvault.CodeInvalidInput, err, "%s %s is not a valid selector", what, sel)
	}
	return agentvault.Wrap(agentvault.CodeInternal, err, "snapshot of %s %s failed (the page may have been navigating: ask again)", what, sel)
}

// restoreRefs makes every ref of the page resolvable again after a part
// snapshot, for an action on ref (a ref the part showed needs nothing).
func (s *Session) restoreRefs(p playwright.Page, ref string) {
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	if s.partial == nil || s.partial[ref] {
		return
	}
	snapshotWalks.Add(1)
	if _, err := p.AriaSnapshot(playwright.PageAriaSnapshotOptions{Mode: playwright.AriaSnapshotModeAi, Depth: playwright.Int(MaxSnapshotDepth), Timeout: ms(10 * time.Second)}); err == nil {
		s.partial = nil
	}
}

var refAttr = regexp.MustCompile(`\[ref=([a-z0-9]+)\]`)

// snapshotWalks counts accessibility walks of a page, for tests;
// notedWalks those that started at once on tokens noteChanges took.
var snapshotWalks, notedWalks atomic.Int64

func newWatchKey() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "__av" + hex.EncodeToString(b)
}

// watchScript runs in every frame at each whole-page snapshot, before the
// walk. On its first run in a document it installs the change watcher under
// a random, non-enumerable name: a MutationObserver over the document and
// every open shadow root, and capture listeners for the events that change
// what the tree shows without a mutation (focus, input, change, loads,
// animations, toggles, resize). Each run takes pending mutations, watches
// shadow roots created since, and compares a fingerprint of the focus and
// of the checked and selected state of the form controls (set by scripts
// without an attribute). It answers the document's change token. It reads
// no value.
const watchScript = `(key) => {
	let st = window[key];
	if (!st) {
		st = {doc: Math.random().toString(36).slice(2), ver: 0, fp: '', roots: new WeakSet(), ids: new WeakMap(), next: 1};
		const bump = () => { st.ver++; };
		st.obs = new MutationObserver(bump);
		for (const t of ['input', 'change', 'focusin', 'focusout', 'animationstart', 'animationend', 'transitionend', 'toggle', 'resize', 'pageshow']) window.addEventListener(t, bump, true);
		for (const t of ['load', 'error']) document.addEventListener(t, bump, true);
		Object.defineProperty(window, key, {value: st});
	}
	if (st.obs.takeRecords().length) st.ver++;
	const roots = [document];
	const find = (n) => { for (const el of n.querySelectorAll('*')) if (el.shadowRoot) { roots.push(el.shadowRoot); find(el.shadowRoot); } };
	find(document);
	for (const r of roots) {
		if (!st.roots.has(r)) {
			st.roots.add(r);
			st.obs.observe(r, {subtree: true, childList: true, attributes: true, characterData: true});
			st.ver++;
		}
	}
	const id = (el) => { if (!el) return 0; let v = st.ids.get(el); if (!v) { v = st.next++; st.ids.set(el, v); } return v; };
	let fp = id(document.activeElement) + ':';
	for (const r of roots) for (const el of r.querySelectorAll('input[type=checkbox],input[type=radio],select')) {
		fp += el.tagName === 'SELECT' ? el.selectedIndex + ',' : (el.checked ? '1' : '0') + (el.indeterminate ? 'i' : '');
	}
	if (fp !== st.fp) { st.fp = fp; st.ver++; }
	return st.doc + ':' + st.ver;
}`

// fieldsScript lists one document's fields (fieldsFunc).
var fieldsScript = `() => (` + fieldsFunc + `)(document)`

// scopedFieldsScript lists the fields under one element (a part snapshot's
// root): the greedy matching by role and name must not reach a same-named
// field outside the part.
var scopedFieldsScript = `(el) => (` + fieldsFunc + `)(el)`

// cssFactory builds, for one document, the function that computes a short
// CSS selector naming exactly one element: id, then a distinguishing
// attribute, then an nth-of-type path. Playwright's CSS pierces open shadow
// roots, so uniqueness is over the document and all of them; an element
// inside a shadow root that has no such selector gets its host's selector,
// ">>", and a path inside the shadow root. Uniqueness is read from counts
// of ids and attribute values taken in one pass over the document, each
// attribute's only when first needed: a query per candidate selector made
// a page of many fields cost fields × nodes. It never reads a value.
const cssFactory = `(doc) => {
	const roots = [doc];
	const find = (n) => { for (const el of n.querySelectorAll('*')) if (el.shadowRoot) { roots.push(el.shadowRoot); find(el.shadowRoot); } };
	find(doc);
	const esc = (v) => CSS.escape(v);
	const q = (v) => v.replace(/["\\]/g, '\\$&');
	const bump = (m, k) => m.set(k, (m.get(k) || 0) + 1);
	// ids counted per root (a path inside a shadow root needs an id unique
	// there), attribute values per tag, attribute and value over all roots.
	let ids = null;
	const idCount = (list, id) => {
		if (!ids) {
			ids = new Map();
			for (const r of roots) { const m = new Map(); for (const el of r.querySelectorAll('[id]')) bump(m, el.id); ids.set(r, m); }
		}
		let n = 0;
		for (const r of list) n += ids.get(r).get(id) || 0;
		return n;
	};
	const attrs = new Map();
	const attrCount = (tag, a, v) => {
		let m = attrs.get(a);
		if (!m) {
			m = new Map();
			for (const r of roots) for (const el of r.querySelectorAll('[' + a + ']')) {
				const w = el.getAttribute(a);
				bump(m, el.tagName.toLowerCase() + ' ' + (a === 'type' ? w.toLowerCase() : w));
			}
			attrs.set(a, m);
		}
		return m.get(tag + ' ' + (a === 'type' ? v.toLowerCase() : v)) || 0;
	};
	let choices = null;
	const choiceCount = (tag, name, opt) => {
		if (!choices) {
			choices = new Map();
			for (const r of roots) for (const el of r.querySelectorAll('[name][value]')) bump(choices, el.tagName.toLowerCase() + '\u0001' + el.getAttribute('name') + '\u0001' + el.getAttribute('value'));
		}
		return choices.get(tag + '\u0001' + name + '\u0001' + opt) || 0;
	};
	const inside = new Map();
	const within = (root) => {
		let out = inside.get(root);
		if (!out) { out = [root]; const f = (n) => { for (const el of n.querySelectorAll('*')) if (el.shadowRoot) { out.push(el.shadowRoot); f(el.shadowRoot); } }; f(root); inside.set(root, out); }
		return out;
	};
	// A value a quoted CSS string cannot hold as written is not used.
	const plain = (v) => v && v.length <= 80 && !/[\n\r\f]/.test(v);
	const cssOf = (el) => {
		const tag = el.tagName.toLowerCase();
		if (el.id && idCount(roots, el.id) === 1) return '#' + esc(el.id);
		for (const a of ['name', 'data-testid', 'autocomplete', 'title', 'aria-label', 'placeholder', 'type']) {
			const v = el.getAttribute(a);
			if (plain(v) && attrCount(tag, a, v) === 1) return tag + '[' + a + '="' + q(v) + '"]';
		}
		const type = (el.getAttribute('type') || '').toLowerCase();
		const name = el.getAttribute('name'), opt = el.getAttribute('value');
		if ((type === 'radio' || type === 'checkbox') && plain(name) && plain(opt) && choiceCount(tag, name, opt) === 1) {
			// A choice's value attribute names the option (it is not input).
			return tag + '[name="' + q(name) + '"][value="' + q(opt) + '"]';
		}
		const top = el.getRootNode();
		const inShadow = top !== doc && top.host;
		const local = inShadow ? within(top) : roots;
		const parts = [];
		let e = el;
		while (e && e.nodeType === 1 && e !== doc.documentElement) {
			if (e !== el && e.id && idCount(local, e.id) === 1) { parts.unshift('#' + esc(e.id)); break; }
			let p = e.tagName.toLowerCase();
			const sibs = e.parentElement ? e.parentElement.children : (e.parentNode ? e.parentNode.children : []);
			let n = 0, at = 0;
			for (const c of sibs) { if (c.tagName === e.tagName) { n++; if (c === e) at = n; } }
			if (n > 1) p += ':nth-of-type(' + at + ')';
			parts.unshift(p);
			e = e.parentElement;
		}
		const path = parts.join(' > ');
		return inShadow ? cssOf(top.host) + ' >> ' + path : path;
	};
	return cssOf;
}`

// cssOf is the per-element form of cssFactory, for a field a document's
// list did not cover.
const cssOf = `(el) => (` + cssFactory + `)(el.ownerDocument)(el)`

const enterFrame = " >> internal:control=enter-frame >> "

// fieldsFunc describes the fields under root (a document or an element)
// without reading any value: each field in the order the accessibility tree
// shows them (shadow roots and slots followed the way Playwright's walk
// follows them) with its role, best-effort accessible name and unique CSS
// selector; the iframes (CSS selector and position in window.frames); and
// the document's own position in its parent's window.frames. Window
// identity is comparable across origins, so a frame and the iframe element
// holding it are paired exactly, whatever the tree shows or hides.
var fieldsFunc = `(root) => {
	const doc = root.nodeType === 9 ? root : root.ownerDocument;
	const cssOf = (` + cssFactory + `)(doc);
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
		const home = el.getRootNode();
		const lb = el.getAttribute('aria-labelledby');
		if (lb && home.getElementById) { const t = lb.split(/\s+/).map((id) => { const e = home.getElementById(id); return e ? textOf(e, null) : ''; }).join(' '); if (norm(t)) return norm(t); }
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
	// Only fields are matched to the tree's (fieldRoles): a star rating's
	// role=img or a role=status needs no selector.
	const fieldRole = ` + fieldRolesJS + `;
	const shown = (el) => {
		if (el.closest('[aria-hidden=true],[inert]')) return false;
		return el.checkVisibility ? el.checkVisibility({visibilityProperty: true}) : true;
	};
	const out = [];
	const iframes = [];
	const visit = (el) => {
		if (el.tagName === 'IFRAME' || el.tagName === 'FRAME') { iframes.push(el); return; }
		if (el.tagName === 'INPUT' || el.tagName === 'SELECT' || el.tagName === 'TEXTAREA' || el.hasAttribute('role') || el.hasAttribute('contenteditable')) {
			const role = roleOf(el);
			if (fieldRole[role] && shown(el)) out.push({role, name: nameOf(el), sel: cssOf(el)});
		}
		if (el.tagName === 'SLOT') {
			const as = el.assignedElements({flatten: true});
			if (as.length) { for (const c of as) visit(c); return; }
		}
		for (const c of (el.shadowRoot || el).children) visit(c);
	};
	visit(root.nodeType === 9 ? root.documentElement : root);
	const frames = [];
	for (const el of iframes) {
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

// docFields is what fieldsFunc says about one document. ok is false when
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
// iframe's ref into its selector chain, prefixed with base (the iframe a
// frame snapshot was taken in). root is the frame the tree's top belongs
// to. Each document's fields were listed by one script (byFrameDoc) and are
// matched to the snapshot's fields in order by role and accessible name. An
// iframe of the tree is paired with the one child frame of its parent's
// frame whose list holds every named field the tree shows inside it; it
// gets its CSS selector from its parent document's list. Whatever that
// leaves open (an iframe with no named field or with a twin, a frame whose
// list did not come, a field that does not match exactly, an iframe its
// parent's script cannot see) is resolved through its ref, one round trip
// each.
func (s *Session) resolveSelectors(p playwright.Page, root playwright.Frame, base string, fields []Field, frames map[string]*frameRef, byFrameDoc map[playwright.Frame]docFields) {
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
	docs := map[string]docFields{"": byFrameDoc[root]}
	frameOf := map[string]playwright.Frame{"": root}
	// Children by parent, from the page's frame list: playwright-go's
	// ChildFrames reads a slice its connection goroutine changes as frames
	// come and go, without a lock (a race under -race when a frame went
	// during a background reading); Frames is a locked copy, and a frame's
	// parent never changes.
	children := map[playwright.Frame][]playwright.Frame{}
	for _, f := range p.Frames() {
		if pf := f.ParentFrame(); pf != nil {
			children[pf] = append(children[pf], f)
		}
	}
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
		for _, c := range children[parent] {
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
			v, err := p.FrameLocator("aria-ref="+ref).Locator(":root").EvaluateAll(`(els) => els.length === 1 ? (`+fieldsFunc+`)(document) : null`, nil)
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
		if base != "" {
			parts = append([]string{base}, parts...)
		}
		return strings.Join(parts, enterFrame)
	}
	frameSel := map[string]string{"": base}
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
		fr := fields[i].Frame
		fields[i].Frame = frameSel[fr]
		if fr != "" && fields[i].Frame == "" {
			fields[i].Selector = ""
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
