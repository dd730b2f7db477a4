package browser_test

import (
	"testing"
	"time"

	"github.com/agentvault/agentvault/browser"
	"github.com/agentvault/agentvault/browser/browsertest"
)

func BenchmarkSnapshotParts(b *testing.B) {
	site := browsertest.Start(b)
	br := browsertest.Launch(b, site)
	s, _ := br.NewSession(browser.SessionOptions{})
	s.Goto(site.CheckoutURL(), 10*time.Second)
	s.WaitFor(browser.Target{Selector: "#number", Frame: "iframe"}, "visible", 5*time.Second)
	b.Run("aria-only", func(b *testing.B) {
		for b.Loop() {
			browser.RawAria(s)
		}
	})
	b.Run("full", func(b *testing.B) {
		for b.Loop() {
			s.Snapshot(30)
		}
	})
}
