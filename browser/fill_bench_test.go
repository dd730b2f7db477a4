package browser_test

import (
	"cmp"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault/browser"
	"github.com/agentvault/agentvault/e2e/corpus"
)

// BenchmarkTokenFillCorpus profiles the browser's share of a card number
// fill_checkout on the corpus pages that take a card: the card frame's
// first lookup on a freshly loaded page (frame-first), a lookup again
// (frame, what every later fill pays), the order total's read (total),
// both at once as the fill makes them (check), and the typing into the
// field of the frame looked up (type). fill is the same field filled by its
// selectors, as a literal is (Playwright resolves the iframe inside the
// fill). Per phase: ms/op and the CDP calls sent (cdp/op), read from the
// driver's protocol log as in BenchmarkSnapshotCorpus. proxyd's authorize
// is not in it: mcpd's "token fill" debug line has it.
//
//	go test -run '^$' -bench TokenFillCorpus -benchtime 20x ./browser/
func BenchmarkTokenFillCorpus(b *testing.B) {
	c, tap, s := tappedSession(b)
	for _, p := range corpus.Pages() {
		if p.Card.Selector == "" {
			continue
		}
		b.Run(p.Name, func(b *testing.B) {
			ps := newPhases(b, tap, s)
			measure := ps.measure
			const digits = "4000000000000077"
			t := browser.Target{Selector: p.Card.Selector, Frame: p.Card.Frame}
			for b.Loop() {
				b.StopTimer()
				if err := s.Goto(c.URL(p), 30*time.Second); err != nil {
					b.Fatal(err)
				}
				ready := cmp.Or(p.Ready, p.Type.Selector)
				if err := s.WaitFor(browser.Target{Selector: ready}, "visible", 20*time.Second); err != nil {
					b.Fatal(err)
				}
				if err := s.WaitFor(t, "visible", 20*time.Second); err != nil {
					b.Fatal(err)
				}
				// The reading open_page started is over by the time an agent
				// fills (a snapshot waits for it), and the fill stops
				// readings before it types (a token went in).
				if _, err := s.SnapshotOf(browser.SnapshotOptions{}); err != nil {
					b.Fatal(err)
				}
				s.SetReadings(false)
				b.StartTimer()
				// The page's first lookup of the frame is the full one; the
				// fills after it ask whether the iframe is still the one kept.
				measure("frame-first", func() error { _, err := s.FrameOf(p.Card.Frame); return err })
				measure("frame", func() error { _, err := s.FrameOf(p.Card.Frame); return err })
				measure("total", func() error { s.ReadOrderTotal(); return nil })
				var h *browser.FrameHandle
				measure("check", func() error {
					var wg sync.WaitGroup
					wg.Add(1)
					go func() { defer wg.Done(); s.ReadOrderTotal() }()
					var err error
					h, err = s.FrameOf(p.Card.Frame)
					wg.Wait()
					return err
				})
				measure("type", func() error { return s.FillIn(h, t, digits, 5*time.Second) })
				measure("fill", func() error { return s.Fill(t, digits, 5*time.Second) })
				s.SetReadings(true)
			}
			ps.report(p.Name, false)
		})
	}
}
