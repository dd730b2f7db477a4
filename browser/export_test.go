package browser

import (
	"time"

	"github.com/mxschmitt/playwright-go"
)

var MatchFieldsForTest = matchFields

type DomField = domField

func NewDomField(role, name, sel string) DomField { return domField{role, name, sel} }

var ChooseOptionForTest = chooseOption

func CompactForTest(raw string) (string, []Field) {
	y, f, _ := compactSnapshot(raw)
	return y, f
}

// SnapshotWalks is how many accessibility walks snapshots have made.
func SnapshotWalks() int64 { return snapshotWalks.Load() }

// FrameLookups is how many full frame lookups FrameOf has made.
func FrameLookups() int64 { return frameLookups.Load() }

// ProxyAuthPauses is how many requests were paused until the proxy's
// challenge was answered.
func ProxyAuthPauses() int64 { return proxyAuthPauses.Load() }

// NotedWalks is how many walks started on tokens taken after an action.
func NotedWalks() int64 { return notedWalks.Load() }

// WaitNotedForTest waits until the change tokens the session's last action
// or wait asked for are in (or the bound passes).
func WaitNotedForTest(s *Session, bound time.Duration) bool {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		s.pendMu.Lock()
		done := s.pend != nil && s.pend.seq == s.pendSeq.Load()
		s.pendMu.Unlock()
		if done {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// ReadingDoneForTest waits for the reading the last navigation (or
// ReadAhead) started in the background.
func ReadingDoneForTest(s *Session) {
	s.aheadMu.Lock()
	ahead := s.ahead
	s.aheadMu.Unlock()
	if ahead != nil {
		<-ahead
	}
}

// HoldReadingsForTest keeps the session's readings from starting until
// release is called (a reading that takes long, as one waiting on a frame
// still loading does).
func HoldReadingsForTest(s *Session) (release func()) {
	s.snapMu.Lock()
	return s.snapMu.Unlock
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

// PageEvalForTest runs script in the current page (or in the document of
// the iframe frame names) the way the page's own scripts would: no action
// of the session is recorded.
func PageEvalForTest(s *Session, frame, script string) error {
	p, err := s.page()
	if err != nil {
		return err
	}
	if frame == "" {
		_, err = p.Evaluate(script)
		return err
	}
	h, err := p.Locator(frame).ElementHandle()
	if err != nil {
		return err
	}
	f, err := h.ContentFrame()
	if err != nil {
		return err
	}
	_, err = f.Evaluate(script)
	return err
}

// RawAria is Playwright's own AI-mode snapshot of the current page, for
// the benchmark that compares against it.
func RawAria(s *Session) (string, error) {
	p, err := s.page()
	if err != nil {
		return "", err
	}
	return p.AriaSnapshot(playwright.PageAriaSnapshotOptions{Mode: playwright.AriaSnapshotModeAi, Depth: playwright.Int(MaxSnapshotDepth)})
}

// ReadAheads is how many readings ReadAhead started.
func ReadAheads() int64 { return readAheads.Load() }

// FieldValueForTest is the value of the field selector names in the
// document of h's frame.
func FieldValueForTest(h *FrameHandle, selector string) (string, error) {
	v, err := h.f.Locator(selector).InputValue()
	return v, err
}

// CloseOpenersForTest closes every page under the current one, as a user
// closing the tab that opened a popup would (no script may close the page
// the session opened itself), and returns once the session has seen each
// close.
func CloseOpenersForTest(s *Session, bound time.Duration) bool {
	s.mu.Lock()
	var under []playwright.Page
	if len(s.stack) > 1 {
		under = append(under, s.stack[:len(s.stack)-1]...)
	}
	s.mu.Unlock()
	for _, p := range under {
		if err := p.Close(); err != nil {
			return false
		}
	}
	deadline := time.Now().Add(bound)
	for _, p := range under {
		for !s.isClosed(p) {
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return len(under) > 0
}

// PidForTest is the driver's process id.
func (d *Driver) PidForTest() int { return d.pw.Pid() }
