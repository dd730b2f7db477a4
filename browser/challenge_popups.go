package browser

import (
	"time"

	"github.com/mxschmitt/playwright-go"
)

// DetectChallengeInPopups scans the tabs the session's pages opened that no
// tool has taken yet (a bank's 3-D Secure window opened after a server
// round trip arrives with no notice): the first one showing a challenge,
// and whether one did.
func (s *Session) DetectChallengeInPopups() (Challenge, bool) {
	s.mu.Lock()
	var pages []playwright.Page
	for _, q := range s.queue {
		if !s.isClosed(q.page) {
			pages = append(pages, q.page)
		}
	}
	s.mu.Unlock()
	for _, p := range pages {
		c := challengeOf(evaluatePage(p, challengeScript, frameTimeout))
		if len(c.Types) > 0 && !(len(c.Types) == 1 && c.OTPWeak) {
			return c, true
		}
	}
	return Challenge{}, false
}

// evaluatePage runs script in every frame of p, in parallel, each frame
// given at most timeout; a frame that fails or times out answers nil.
func evaluatePage(p playwright.Page, script string, timeout time.Duration) []any {
	frames := p.Frames()
	type ans struct {
		i int
		v any
	}
	ch := make(chan ans, len(frames))
	for i, f := range frames {
		go func() {
			v, err := f.Evaluate(script)
			if err != nil {
				v = nil
			}
			ch <- ans{i, v}
		}()
	}
	out := make([]any, len(frames))
	t := time.NewTimer(timeout)
	defer t.Stop()
	for range frames {
		select {
		case a := <-ch:
			out[a.i] = a.v
		case <-t.C:
			return out
		}
	}
	return out
}
