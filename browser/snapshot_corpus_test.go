package browser_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/browser"
	"github.com/agentvault/agentvault/browser/browsertest"
	"github.com/agentvault/agentvault/e2e/corpus"
)

// openCorpus serves the page corpus and opens a browser session trusting it.
func openCorpus(t *testing.T) (*corpus.Corpus, *browser.Session) {
	t.Helper()
	// The session's debug lines (timings and counts only) are printed
	// when the test fails: which reading walked, and why, is in them.
	dbg := &debugLines{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("browser debug log:\n%s", dbg.String())
		}
	})
	return corpusSession(t, func(cfg browser.Config) (*browser.Browser, error) {
		cfg.Logger = slog.New(slog.NewTextHandler(dbg, &slog.HandlerOptions{Level: slog.LevelDebug}))
		return browser.Launch(cfg)
	})
}

// corpusSession serves the page corpus and opens a session in the browser
// launch starts from a config that trusts it.
func corpusSession(tb testing.TB, launch func(browser.Config) (*browser.Browser, error)) (*corpus.Corpus, *browser.Session) {
	tb.Helper()
	browsertest.SkipIfNoBrowser(tb)
	c, err := corpus.Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	b, err := launch(browser.Config{DriverDir: browsertest.DriverDir(), TrustSPKI: []string{c.SPKI()}})
	if err != nil {
		tb.Fatalf("launch: %v", err)
	}
	tb.Cleanup(func() { _ = b.Close() })
	s, err := b.NewSession(browser.SessionOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return c, s
}

// debugLines collects log lines from the browser's goroutines.
type debugLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (d *debugLines) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.buf.Write(p)
}

func (d *debugLines) String() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.buf.String()
}

func corpusPage(t *testing.T, name string) corpus.Page {
	t.Helper()
	for _, p := range corpus.Pages() {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no corpus page %s", name)
	return corpus.Page{}
}

func gotoPage(t *testing.T, c *corpus.Corpus, s *browser.Session, name string) corpus.Page {
	t.Helper()
	p := corpusPage(t, name)
	if err := s.Goto(c.URL(p), 30*time.Second); err != nil {
		t.Fatalf("goto %s: %v", name, err)
	}
	if p.Ready != "" {
		if err := s.WaitFor(browser.Target{Selector: p.Ready}, "attached", 20*time.Second); err != nil {
			t.Fatalf("%s did not render: %v", name, err)
		}
	}
	browser.ReadingDoneForTest(s)
	return p
}

func snap(t *testing.T, s *browser.Session, o browser.SnapshotOptions) browser.Snapshot {
	t.Helper()
	sn, err := s.SnapshotOf(o)
	if err != nil {
		t.Fatalf("snapshot %+v: %v", o, err)
	}
	return sn
}

// TestSnapshotKeptReading: a whole-page snapshot of a page that has not
// changed answers from the kept reading without walking the page; any
// change the tree could show makes the next one walk it again and show it:
// a script's DOM change, a checkbox a script ticks (no mutation), a change
// inside a cross-origin frame, inside a shadow root, a new shadow root, and
// every action of the session.
func TestSnapshotKeptReading(t *testing.T) {
	c, s := openCorpus(t)
	// The page has no script: after its load nothing should move. On a
	// loaded machine (CI runs the browser packages side by side) the
	// renderer can still deliver a late event the change watcher counts
	// (one CI run in many walked once here, and the cause did not show
	// again in 100 runs under load); the open is tried a second time
	// before that counts as a failure, and the debug log of the session
	// (timings and counts) is printed with it.
	opened := func() string {
		gotoPage(t, c, s, "checkout5")
		walks := browser.SnapshotWalks()
		for i := range 2 {
			if sn := snap(t, s, browser.SnapshotOptions{}); !sn.Reused {
				return fmt.Sprintf("snapshot %d after open walked the page again", i+1)
			}
		}
		if n := browser.SnapshotWalks() - walks; n != 0 {
			return fmt.Sprintf("%d walks for an unchanged page", n)
		}
		return ""
	}
	if why := opened(); why != "" {
		t.Logf("first open: %s; opening again", why)
		if why := opened(); why != "" {
			t.Fatal(why)
		}
	}
	changed := func(name, frame, script, want string) {
		t.Helper()
		if script != "" {
			if err := browser.PageEvalForTest(s, frame, script); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		sn := snap(t, s, browser.SnapshotOptions{})
		if sn.Reused || !strings.Contains(sn.YAML, want) {
			t.Fatalf("%s: reused %v, %q shown %v", name, sn.Reused, want, strings.Contains(sn.YAML, want))
		}
		if sn := snap(t, s, browser.SnapshotOptions{}); !sn.Reused {
			t.Fatalf("%s: the snapshot after it walked again", name)
		}
	}
	changed("DOM change", "", `document.querySelector('h2').textContent = 'Contact details'`, `heading "Contact details"`)
	changed("checked by a script", "", `document.getElementById('news').checked = true`, `checkbox "Email me with news and offers" [checked]`)
	changed("cross-origin frame", `iframe[title="Chat widget"]`, `document.querySelector('p').textContent = 'We are away'`, "We are away")
	if _, err := s.Click(browser.Target{Selector: "#apply-promo"}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	changed("click", "", "", "Enter a valid discount code or gift card")
	if err := s.Fill(browser.Target{Selector: "#company"}, "Zebracorp", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	sn := snap(t, s, browser.SnapshotOptions{})
	if sn.Reused || strings.Contains(sn.YAML, "Zebracorp") {
		t.Fatalf("after a fill: reused %v, value shown %v", sn.Reused, strings.Contains(sn.YAML, "Zebracorp"))
	}
	if sn := snap(t, s, browser.SnapshotOptions{Depth: 5}); sn.Reused {
		t.Fatal("a reading at another depth was reused")
	}

	gotoPage(t, c, s, "shadow")
	if sn := snap(t, s, browser.SnapshotOptions{}); !sn.Reused {
		t.Fatal("first snapshot of the shadow page walked again")
	}
	changed("inside a shadow root", "", `document.querySelector('promo-box').shadowRoot.getElementById('promo-status').textContent = 'Code accepted'`, "Code accepted")
	changed("a new shadow root", "", `document.querySelector('main').attachShadow({mode: 'open'}).innerHTML = '<p>Replaced by a shadow root</p>'`, "Replaced by a shadow root")
}

// TestSnapshotParts: a selector reads only that element's part, a frame
// only that frame's document, each with field selectors that name exactly
// one element (the frame's selector as the fields' frame); a ref the part
// did not show still resolves afterwards; a selector matching nothing or
// several elements is refused at once.
func TestSnapshotParts(t *testing.T) {
	c, s := openCorpus(t)
	gotoPage(t, c, s, "listing")
	whole := snap(t, s, browser.SnapshotOptions{})
	next := ""
	for _, l := range strings.Split(whole.YAML, "\n") {
		if strings.Contains(l, `link "Next page" [ref=`) {
			next = strings.SplitN(strings.SplitN(l, "[ref=", 2)[1], "]", 2)[0]
		}
	}
	if next == "" {
		t.Fatalf("no Next page link in:\n%.2000s", whole.YAML)
	}
	part := snap(t, s, browser.SnapshotOptions{Selector: "#filters"})
	if !strings.Contains(part.YAML, `checkbox "Jackets (`) || strings.Contains(part.YAML, "Add to cart") || strings.Contains(part.YAML, "Next page") {
		t.Fatalf("the filters part:\n%s", part.YAML)
	}
	if len(part.Fields) != 29 {
		t.Fatalf("%d fields in the filters part, want 29", len(part.Fields))
	}
	for _, f := range part.Fields {
		if n, err := s.Count(browser.Target{Selector: f.Selector, Frame: f.Frame}); err != nil || n.Count != 1 {
			t.Fatalf("field %s selector %q matches %d (%v)", f.Ref, f.Selector, n.Count, err)
		}
	}
	// The part left Playwright knowing only its refs; a ref from the whole
	// page still works.
	if n, err := s.Count(browser.Target{Selector: "aria-ref=" + next}); err != nil || n.Count != 1 {
		t.Fatalf("a ref outside the part: %+v %v", n, err)
	}
	_, err := s.SnapshotOf(browser.SnapshotOptions{Selector: "#no-such-element"})
	if agentvault.ErrorCode(err) != agentvault.CodeFieldNotFound {
		t.Fatalf("no match: %v", err)
	}
	_, err = s.SnapshotOf(browser.SnapshotOptions{Selector: "li.card"})
	if agentvault.ErrorCode(err) != agentvault.CodeInvalidInput {
		t.Fatalf("many matches: %v", err)
	}

	p := gotoPage(t, c, s, "checkout5")
	fr := snap(t, s, browser.SnapshotOptions{Frame: p.Card.Frame})
	if !strings.Contains(fr.YAML, `textbox "Card number"`) || strings.Contains(fr.YAML, "First name") || strings.Contains(fr.YAML, "Security code") {
		t.Fatalf("the card number frame:\n%s", fr.YAML)
	}
	if len(fr.Fields) != 1 || fr.Fields[0].Selector != "#card-number" || fr.Fields[0].Frame != p.Card.Frame {
		t.Fatalf("frame fields %+v", fr.Fields)
	}
	in := snap(t, s, browser.SnapshotOptions{Selector: "form#shipping"})
	if !strings.Contains(in.YAML, `textbox "First name"`) || strings.Contains(in.YAML, "Card number") || strings.Contains(in.YAML, "Order summary") {
		t.Fatalf("the shipping form:\n%s", in.YAML)
	}
}

// TestSnapshotShadowFields: fields inside shadow roots get selectors that
// name exactly one element (Playwright's CSS pierces open shadow roots, so
// uniqueness is over all of them).
func TestSnapshotShadowFields(t *testing.T) {
	c, s := openCorpus(t)
	gotoPage(t, c, s, "shadow")
	sn := snap(t, s, browser.SnapshotOptions{})
	if len(sn.Fields) < 20 {
		t.Fatalf("%d fields", len(sn.Fields))
	}
	sels := map[string]bool{}
	for _, f := range sn.Fields {
		sels[f.Selector] = true
		if n, err := s.Count(browser.Target{Selector: f.Selector, Frame: f.Frame}); err != nil || n.Count != 1 {
			t.Fatalf("field %s %q selector %q matches %d (%v)", f.Ref, f.Name, f.Selector, n.Count, err)
		}
	}
	for _, want := range []string{"#ship-name", "#qty", `input[name="colour"][value="Navy"]`} {
		if !sels[want] {
			t.Fatalf("no field selector %s among %v", want, sels)
		}
	}
}

// TestClickThatNavigatesReadsTheNewPage: a click on a link returns once the
// page it led to has loaded and been read: the next snapshot answers from
// that reading.
func TestClickThatNavigatesReadsTheNewPage(t *testing.T) {
	c, s := openCorpus(t)
	gotoPage(t, c, s, "listing")
	if _, err := s.Click(browser.Target{Selector: "#next-page"}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.URL(), "page=2") {
		t.Fatalf("url %s", s.URL())
	}
	sn := snap(t, s, browser.SnapshotOptions{})
	if !sn.Reused || !strings.Contains(sn.YAML, "Showing 85–168") {
		t.Fatalf("reused %v, page 2 shown %v", sn.Reused, strings.Contains(sn.YAML, "Showing 85–168"))
	}
}

// TestFrameOfFollowsTheSelector: a frame looked up again by the same
// selector costs no second full lookup while the selector still names the
// same iframe, and follows the selector when it does not: a frame that
// navigated in place shows its new address, another iframe that took the
// selector is found, and so is an iframe put in the old one's place.
func TestFrameOfFollowsTheSelector(t *testing.T) {
	c, s := openCorpus(t)
	p := gotoPage(t, c, s, "checkout5")
	sel := p.Card.Frame
	frameURL := func(want string) {
		t.Helper()
		h, err := s.FrameOf(sel)
		if err != nil {
			t.Fatalf("FrameOf: %v", err)
		}
		if !strings.HasPrefix(h.URL(), want) {
			t.Fatalf("frame %s is at %s, want %s", sel, h.URL(), want)
		}
	}
	frameURL(c.Frames[0])
	full := browser.FrameLookups()
	frameURL(c.Frames[0])
	if n := browser.FrameLookups() - full; n != 0 {
		t.Fatalf("%d full lookups for the same iframe", n)
	}

	// The number frame navigates in place (the express checkout's document).
	if err := browser.PageEvalForTest(s, "", `document.querySelector('iframe[title="Secure card number input frame"]').src = `+jsString(c.Frames[3]+"/express")); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor(browser.Target{Selector: "#wallet-pay", Frame: sel}, "attached", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	frameURL(c.Frames[3])

	// Another iframe takes the selector.
	if err := browser.PageEvalForTest(s, "", `document.querySelector('iframe[title="Secure card number input frame"]').title = 'moved';
		document.querySelector('iframe[title="Secure CVC input frame"]').title = 'Secure card number input frame';`); err != nil {
		t.Fatal(err)
	}
	frameURL(c.Frames[2])

	// An iframe put in its place: a new frame, loaded from the same address.
	if err := browser.PageEvalForTest(s, "", `const old = document.querySelector('iframe[title="Secure card number input frame"]');
		const fresh = document.createElement('iframe'); fresh.title = old.title; fresh.src = `+jsString(c.Frames[4]+"/chat")+`; old.replaceWith(fresh);`); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor(browser.Target{Selector: "#open-chat", Frame: sel}, "attached", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	frameURL(c.Frames[4])

	// A second iframe with the same title, put before it: the selector's
	// first match is the new one, and two matches are no error.
	if err := browser.PageEvalForTest(s, "", `const f = document.createElement('iframe'); f.title = 'Secure card number input frame';
		f.src = `+jsString(c.Frames[3]+"/express")+`; document.body.prepend(f);`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		h, err := s.FrameOf(sel)
		if err != nil {
			t.Fatalf("FrameOf with two matches: %v", err)
		}
		if strings.HasPrefix(h.URL(), c.Frames[3]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("frame %s is at %s, want the first match's %s", sel, h.URL(), c.Frames[3])
		}
		time.Sleep(50 * time.Millisecond)
	}
	full = browser.FrameLookups()
	frameURL(c.Frames[3])
	if n := browser.FrameLookups() - full; n != 0 {
		t.Fatalf("%d full lookups for the same first match", n)
	}
}

func jsString(v string) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestSnapshotWalksOnNotedTokens: after an action the page's change tokens
// are taken in the background, and the next snapshot walks at once on them
// instead of asking every frame first. It shows what the action changed and
// what the page changed after those tokens; and since the tokens predate
// that later change, the snapshot after it walks again rather than answer
// from the kept reading. Only then is the page read as unchanged.
func TestSnapshotWalksOnNotedTokens(t *testing.T) {
	c, s := openCorpus(t)
	gotoPage(t, c, s, "checkout5")
	snap(t, s, browser.SnapshotOptions{})
	if _, err := s.Click(browser.Target{Selector: "#apply-promo"}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if !browser.WaitNotedForTest(s, 20*time.Second) {
		t.Fatal("the tokens after the click did not come")
	}
	if err := browser.PageEvalForTest(s, "", `document.querySelector('h2').textContent = 'Contact details'`); err != nil {
		t.Fatal(err)
	}
	noted := browser.NotedWalks()
	sn := snap(t, s, browser.SnapshotOptions{})
	if sn.Reused || browser.NotedWalks() != noted+1 {
		t.Fatalf("the snapshot after the click: reused %v, walks on noted tokens %d", sn.Reused, browser.NotedWalks()-noted)
	}
	for _, want := range []string{"Enter a valid discount code or gift card", `heading "Contact details"`} {
		if !strings.Contains(sn.YAML, want) {
			t.Fatalf("%q not shown", want)
		}
	}
	if sn := snap(t, s, browser.SnapshotOptions{}); sn.Reused {
		t.Fatal("the snapshot after a change made since the noted tokens answered from the kept reading")
	}
	if sn := snap(t, s, browser.SnapshotOptions{}); !sn.Reused {
		t.Fatal("an unchanged page was walked again")
	}
}

// TestFillInTypesIntoTheFrameLookedUp: a fill into a frame handle types
// into that frame's document even when, since the lookup, the page put
// another iframe first under the same selector: what goes in is what the
// caller checked the frame's URL for, and the other frame gets nothing.
func TestFillInTypesIntoTheFrameLookedUp(t *testing.T) {
	c, s := openCorpus(t)
	p := gotoPage(t, c, s, "checkout5")
	h, err := s.FrameOf(p.Card.Frame)
	if err != nil {
		t.Fatal(err)
	}
	// A look-alike frame of the page's own origin, inserted before the
	// card frame with the same title.
	if err := browser.PageEvalForTest(s, "", `(() => { const old = document.querySelector(`+jsString(p.Card.Frame)+`); const f = document.createElement('iframe'); f.title = old.title; f.srcdoc = '<input id="`+strings.TrimPrefix(p.Card.Selector, "#")+`">'; old.before(f); })()`); err != nil {
		t.Fatal(err)
	}
	other, err := s.FrameOf(p.Card.Frame)
	if err != nil || other.URL() == h.URL() {
		t.Fatalf("the look-alike frame is not first: %v", err)
	}
	if err := s.FillIn(h, browser.Target{Selector: p.Card.Selector, Frame: p.Card.Frame}, "4000000000000077", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if v, err := browser.FieldValueForTest(h, p.Card.Selector); err != nil || v != "4000000000000077" {
		t.Fatalf("the frame looked up holds %q (%v)", v, err)
	}
	if v, err := browser.FieldValueForTest(other, p.Card.Selector); err != nil || v != "" {
		t.Fatalf("the look-alike frame got %d characters (%v)", len(v), err)
	}
}

// TestFillInRefusesAFrameThatLeft: a frame handle whose iframe the page
// removed reports it (read from the page's frame list, under its lock), and
// a fill into it is refused with field_not_found before anything is typed.
func TestFillInRefusesAFrameThatLeft(t *testing.T) {
	c, s := openCorpus(t)
	p := gotoPage(t, c, s, "checkout5")
	h, err := s.FrameOf(p.Card.Frame)
	if err != nil {
		t.Fatal(err)
	}
	if h.Gone() {
		t.Fatal("a frame still on the page reports it left")
	}
	if err := browser.PageEvalForTest(s, "", `document.querySelector(`+jsString(p.Card.Frame)+`).remove()`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !h.Gone() {
		if time.Now().After(deadline) {
			t.Fatal("the removed frame never reported it left")
		}
		time.Sleep(20 * time.Millisecond)
	}
	err = s.FillIn(h, browser.Target{Selector: p.Card.Selector, Frame: p.Card.Frame}, "4000000000000077", 5*time.Second)
	if agentvault.ErrorCode(err) != agentvault.CodeFieldNotFound {
		t.Fatalf("a fill into a frame that left: %v, want %s", err, agentvault.CodeFieldNotFound)
	}
}

// TestReadAheadAfterWait: on a page that renders after its load (the
// single-page app), the navigation's reading is out of date once the app
// rendered; a read-ahead started after the wait for the app makes the next
// snapshot answer from that reading, showing what rendered with its field
// selectors, instead of walking the page. A change after it is still seen,
// and an action after the wait starts no reading.
func TestReadAheadAfterWait(t *testing.T) {
	c, s := openCorpus(t)
	p := corpusPage(t, "spa")
	if err := s.Goto(c.URL(p), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor(browser.Target{Selector: p.Ready}, "visible", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	// On loopback the app may render before the navigation's reading: the
	// page's own script renders more a moment later, as the app does when
	// its data comes late.
	if err := browser.PageEvalForTest(s, "", `setTimeout(() => { const h = document.createElement('h2'); h.id = 'late'; h.textContent = 'Deals ending soon'; document.getElementById('app').append(h) }, 50)`); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor(browser.Target{Selector: "#late"}, "visible", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	s.ReadAhead()
	walks := browser.SnapshotWalks()
	sn := snap(t, s, browser.SnapshotOptions{})
	if !sn.Reused {
		t.Fatalf("the snapshot after the read-ahead walked the page (%d walks since)", browser.SnapshotWalks()-walks)
	}
	if !strings.Contains(sn.YAML, "Deals ending soon") {
		t.Fatal("what rendered last is not in the snapshot")
	}
	found := false
	for _, f := range sn.Fields {
		found = found || f.Selector == "#filter"
	}
	if !found {
		t.Fatalf("the filter field has no selector in %+v", sn.Fields)
	}
	if err := browser.PageEvalForTest(s, "", `document.querySelector('h1').textContent = 'Deals of the week'`); err != nil {
		t.Fatal(err)
	}
	if sn := snap(t, s, browser.SnapshotOptions{}); sn.Reused || !strings.Contains(sn.YAML, "Deals of the week") {
		t.Fatalf("a change after the read-ahead: reused %v", sn.Reused)
	}
	// An action between the wait and the snapshot: the reading started
	// before it is not reused.
	if err := s.WaitFor(browser.Target{Selector: "#filter"}, "visible", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	s.ReadAhead()
	if err := s.Fill(browser.Target{Selector: "#filter"}, "Parka", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if sn := snap(t, s, browser.SnapshotOptions{}); sn.Reused {
		t.Fatal("a reading taken before a fill answered the snapshot after it")
	}
}

// TestWaitSeesAShortLivedElement: a wait sees an element that shows for
// 300 ms, 1.3 s into it. Playwright, asked once for the whole wait, polls
// at 770, 1270 and 1770 ms and misses it; the wait's short calls poll
// every 20 ms.
func TestWaitSeesAShortLivedElement(t *testing.T) {
	c, s := openCorpus(t)
	gotoPage(t, c, s, "shadow")
	for _, state := range []browser.WaitState{"visible", "attached"} {
		if err := browser.PageEvalForTest(s, "", `(() => { setTimeout(() => { const p = document.createElement('p'); p.id = 'blink'; p.textContent = 'Saved'; document.body.prepend(p); setTimeout(() => p.remove(), 300); }, 1300); })()`); err != nil {
			t.Fatal(err)
		}
		if err := s.WaitFor(browser.Target{Selector: "#blink"}, state, 5*time.Second); err != nil {
			t.Fatalf("%s: %v", state, err)
		}
		// Let it go before the next round.
		if err := s.WaitFor(browser.Target{Selector: "#blink"}, "detached", 5*time.Second); err != nil {
			t.Fatalf("%s: %v", state, err)
		}
	}
}

// TestWaitForStates: waits for an element to appear (visible, attached,
// inside a cross-origin frame, the first of several) return once it is
// there; a wait that does not hold in time is a timeout; a selector that
// cannot be used is not.
func TestWaitForStates(t *testing.T) {
	c, s := openCorpus(t)
	p := gotoPage(t, c, s, "checkout5")
	for _, ok := range []struct {
		target browser.Target
		state  browser.WaitState
	}{
		{browser.Target{Selector: "#first-name"}, "visible"},
		{browser.Target{Selector: "#first-name"}, ""},
		{browser.Target{Selector: "input"}, "visible"},
		{browser.Target{Selector: "#card-number", Frame: p.Card.Frame}, "attached"},
		{browser.Target{Selector: "#card-number", Frame: p.Card.Frame}, "visible"},
		{browser.Target{Selector: "#no-such"}, "detached"},
		{browser.Target{Selector: "#no-such"}, "hidden"},
	} {
		if err := s.WaitFor(ok.target, ok.state, 20*time.Second); err != nil {
			t.Fatalf("wait for %s %s: %v", ok.target, ok.state, err)
		}
	}
	for _, late := range []struct {
		target browser.Target
		state  browser.WaitState
	}{
		{browser.Target{Selector: "#no-such"}, "visible"},
		{browser.Target{Selector: "#no-such"}, "attached"},
		{browser.Target{Selector: "#no-such", Frame: p.Card.Frame}, "attached"},
		{browser.Target{Selector: "#first-name"}, "hidden"},
	} {
		err := s.WaitFor(late.target, late.state, 300*time.Millisecond)
		if agentvault.ErrorCode(err) != agentvault.CodeTimeout || !strings.Contains(agentvault.ErrorMessage(err), "did not become") {
			t.Fatalf("wait for %s %s: %v", late.target, late.state, err)
		}
	}
	if err := s.WaitFor(browser.Target{Selector: "input[[["}, "visible", 5*time.Second); err == nil || agentvault.ErrorCode(err) == agentvault.CodeTimeout {
		t.Fatalf("an unusable selector: %v", err)
	}
}

// TestNavigationDoesNotWaitForItsReading: a navigation answers at its
// load and leaves its reading to run in the background (held here, as a
// busy renderer or a frame still loading would hold it); the next snapshot
// waits for that reading, answers from it without walking the page again,
// and shows what the page became while it was held (a frame a script
// mounted after the load).
func TestNavigationDoesNotWaitForItsReading(t *testing.T) {
	c, s := openCorpus(t)
	release := browser.HoldReadingsForTest(s)
	defer func() { release() }()
	aheads := browser.ReadAheads()
	done := make(chan error, 1)
	go func() { done <- s.Goto(c.URL(corpusPage(t, "shadow")), 30*time.Second) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the navigation waited for its reading")
	}
	if browser.ReadAheads() != aheads+1 {
		t.Fatalf("the navigation started %d readings, want 1", browser.ReadAheads()-aheads)
	}
	if err := browser.PageEvalForTest(s, "", `const f = document.createElement('iframe'); f.title = 'Chat widget'; f.src = `+jsString(c.Frames[4]+"/chat")+`; document.body.append(f);`); err != nil {
		t.Fatal(err)
	}
	// A script's frame, not an action of the session: the reading still
	// runs once released, and takes the frame in.
	if err := s.WaitFor(browser.Target{Selector: "#open-chat", Frame: "iframe[title='Chat widget']"}, "visible", 20*time.Second); err != nil {
		t.Fatal(err)
	}
	walks := browser.SnapshotWalks()
	release()
	release = func() {}
	sn := snap(t, s, browser.SnapshotOptions{})
	if n := browser.SnapshotWalks() - walks; n != 1 {
		t.Fatalf("%d walks for the navigation's reading and the snapshot after it, want 1 (the snapshot answers from the reading)", n)
	}
	if !strings.Contains(sn.YAML, `button "Chat with us"`) {
		t.Fatalf("the page after the late frame:\n%s", sn.YAML)
	}
}
