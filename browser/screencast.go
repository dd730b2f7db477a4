package browser

import (
	"encoding/base64"
	"sync"

	"github.com/agentvault/agentvault"
	"github.com/mxschmitt/playwright-go"
)

// The live view of a challenge hand-off (seed 004): the page's frames as
// Chromium paints them (CDP Page.startScreencast), and the owner's clicks
// and keys replayed on it. Frames and input go to the owner's dashboard and
// come from it; nothing here ever reaches an MCP answer, and the input is
// not logged.

// Frame is one screencast frame: a JPEG of the page and the page's
// viewport in CSS pixels (the owner's clicks come back in those).
type Frame struct {
	JPEG          []byte
	Width, Height int
}

// LivePage is the page handed to the owner.
type LivePage struct {
	s *Session
	p playwright.Page

	mu   sync.Mutex
	cdp  playwright.CDPSession
	done chan struct{}
	once sync.Once
}

// LivePage returns the current page for a hand-off. When the current page
// was closed (a 3-D Secure window that closed itself), it is
// unknown_target: the page was gone before the hand-off started.
func (s *Session) LivePage() (*LivePage, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, agentvault.Errorf(agentvault.CodeSessionEnded, "the browser session is closed")
	}
	if len(s.stack) == 0 || s.isClosed(s.stack[len(s.stack)-1]) {
		s.mu.Unlock()
		return nil, errPageGone()
	}
	p := s.stack[len(s.stack)-1]
	s.mu.Unlock()
	return &LivePage{s: s, p: p}, nil
}

// Gone is LivePage's unknown_target error once the page has closed (nil
// while it is open), for a hand-off whose page closed after LivePage and
// before anyone was notified: while the re-detection ran.
func (lp *LivePage) Gone() error {
	if lp.s.isClosed(lp.p) {
		return errPageGone()
	}
	return nil
}

func errPageGone() error {
	return agentvault.Errorf(agentvault.CodeUnknownTarget, "Unknown pageId: the page was gone before the handoff started, and nobody was notified. Call close_popup or move to another live page, then detect_challenge again.")
}

// CurrentLivePage is the page the agent would act on now (closed popups
// dropped), for a hand-off whose page closed under the owner.
func (s *Session) CurrentLivePage() (*LivePage, error) {
	p, err := s.page()
	if err != nil {
		return nil, err
	}
	return &LivePage{s: s, p: p}, nil
}

// Closed reports whether the page has closed.
func (lp *LivePage) Closed() bool { return lp.s.isClosed(lp.p) }

// Same reports whether two live pages are the same tab.
func (lp *LivePage) Same(o *LivePage) bool { return o != nil && lp.p == o.p }

// StartScreencast streams frames to onFrame until StopScreencast. onFrame
// runs on its own goroutine, one frame at a time; a slow consumer makes
// Chromium send fewer frames (each frame is acknowledged after onFrame).
func (lp *LivePage) StartScreencast(maxWidth, maxHeight, quality int, onFrame func(Frame)) error {
	cdp, err := lp.s.ctx.NewCDPSession(lp.p)
	if err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "open the page's devtools session")
	}
	frames := make(chan map[string]any, 4)
	lp.done = make(chan struct{})
	done := lp.done
	cdp.On("Page.screencastFrame", func(params map[string]any) {
		// The event runs on playwright's dispatch goroutine: a Send from
		// here would wait on itself.
		select {
		case frames <- params:
		default: // the consumer is behind; the frame is dropped unacked
		}
	})
	lp.mu.Lock()
	lp.cdp = cdp
	lp.mu.Unlock()
	go func() {
		for {
			var params map[string]any
			select {
			case params = <-frames:
			case <-done:
				return
			}
			data, _ := params["data"].(string)
			jpeg, err := base64.StdEncoding.DecodeString(data)
			md, _ := params["metadata"].(map[string]any)
			w, h := num(md["deviceWidth"]), num(md["deviceHeight"])
			if err == nil && len(jpeg) > 0 {
				onFrame(Frame{JPEG: jpeg, Width: w, Height: h})
			}
			_, _ = cdp.Send("Page.screencastFrameAck", map[string]any{"sessionId": params["sessionId"]})
		}
	}()
	cdp.OnClose(func(playwright.CDPSession) { lp.once.Do(func() { close(done) }) })
	if _, err := cdp.Send("Page.startScreencast", map[string]any{
		"format": "jpeg", "quality": quality, "maxWidth": maxWidth, "maxHeight": maxHeight, "everyNthFrame": 1,
	}); err != nil {
		lp.StopScreencast()
		return agentvault.Wrap(agentvault.CodeInternal, err, "start the screencast")
	}
	return nil
}

// StopScreencast ends the stream; safe to call twice.
func (lp *LivePage) StopScreencast() {
	lp.mu.Lock()
	cdp := lp.cdp
	lp.cdp = nil
	lp.mu.Unlock()
	if cdp == nil {
		return
	}
	lp.once.Do(func() { close(lp.done) })
	if !lp.s.isClosed(lp.p) {
		_, _ = cdp.Send("Page.stopScreencast", nil)
	}
	_ = cdp.Detach()
}

func num(v any) int {
	switch x := v.(type) {
	case float64:
		return int(x + 0.5)
	case int:
		return x
	}
	return 0
}

// ClickAt clicks the page at viewport coordinates (CSS pixels).
func (lp *LivePage) ClickAt(x, y float64) error {
	lp.s.acted()
	if err := lp.p.Mouse().Click(x, y); err != nil {
		return agentvault.Wrap(agentvault.CodeUnknownTarget, err, "the click did not reach the page")
	}
	return nil
}

// Type types text into whatever has focus, one key event per character.
// The text is the owner's: it is never logged or returned.
func (lp *LivePage) Type(text string) error {
	lp.s.acted()
	if err := lp.p.Keyboard().Type(text); err != nil {
		return agentvault.Errorf(agentvault.CodeUnknownTarget, "the keys did not reach the page")
	}
	return nil
}

// Press sends one named key (Enter, Tab, Backspace, ...).
func (lp *LivePage) Press(key string) error {
	lp.s.acted()
	if err := lp.p.Keyboard().Press(key); err != nil {
		return agentvault.Errorf(agentvault.CodeUnknownTarget, "the key did not reach the page")
	}
	return nil
}
