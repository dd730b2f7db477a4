package browser_test

import (
	"bytes"
	"encoding/pem"
	"image/png"
	"testing"
	"time"

	"github.com/agentvault/agentvault/browser"
	"github.com/agentvault/agentvault/browser/browsertest"
	"github.com/agentvault/agentvault/internal/managedtest"
)

// remoteSession opens the test checkout in a session of b and fills the
// card frame, the way every tool reaches a page.
func remoteSession(t *testing.T, site *browsertest.Site, b *browser.Browser) *browser.Session {
	t.Helper()
	s, err := b.NewSession(browser.SessionOptions{})
	if err != nil {
		t.Fatalf("new session: %v", err)
	}
	if err := s.Goto(site.CheckoutURL(), 30*time.Second); err != nil {
		s.Close()
		t.Fatalf("goto: %v", err)
	}
	if err := s.Fill(browser.Target{Selector: "#number", Frame: "iframe"}, "4242424242424242", 30*time.Second); err != nil {
		s.Close()
		t.Fatalf("fill the card frame: %v", err)
	}
	return s
}

// liveAndScreenshot proves the hand-off's live view (a screencast frame
// over the session's DevTools connection) and a masked screenshot on a
// session of any provider.
func liveAndScreenshot(t *testing.T, s *browser.Session) {
	t.Helper()
	shot, err := s.Screenshot(nil)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if _, err := png.DecodeConfig(bytes.NewReader(shot)); err != nil {
		t.Fatalf("screenshot is no PNG: %v", err)
	}
	lp, err := s.LivePage()
	if err != nil {
		t.Fatal(err)
	}
	frames := make(chan browser.Frame, 1)
	if err := lp.StartScreencast(640, 480, 50, func(f browser.Frame) {
		select {
		case frames <- f:
		default:
		}
	}); err != nil {
		t.Fatalf("screencast: %v", err)
	}
	defer lp.StopScreencast()
	select {
	case f := <-frames:
		if len(f.JPEG) == 0 || f.Width == 0 {
			t.Fatalf("empty live frame %dx%d", f.Width, f.Height)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no live frame within 60 s")
	}
}

// TestRemoteBrowsers drives a browser mcpd did not launch, through each
// kind of remote provider, with the same primitives as the local one:
// navigation, a fill into a cross-origin frame, a masked screenshot and the
// hand-off's live view. Each browser runs as a process of its own.
func TestRemoteBrowsers(t *testing.T) {
	browsertest.SkipIfNoBrowser(t)
	site := browsertest.Start(t)
	d, err := browser.StartDriver(browser.Config{DriverDir: browsertest.DriverDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Stop() })

	t.Run("PlaywrightServer", func(t *testing.T) {
		srv := managedtest.StartPlaywrightServer(t, managedtest.PlaywrightServerOptions{
			DriverDir: browsertest.DriverDir(), Chromium: managedtest.ChromiumOptions{TrustSPKI: []string{site.SPKI}}})
		b, err := d.Launch(browser.Config{Remote: browser.Remote{Provider: browser.ProviderPlaywright, Endpoint: srv.WSEndpoint}, TrustSPKI: []string{site.SPKI}})
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		defer b.Close()
		s := remoteSession(t, site, b)
		defer s.Close()
		liveAndScreenshot(t, s)
	})

	t.Run("CDP", func(t *testing.T) {
		c := managedtest.StartChromium(t, managedtest.ChromiumOptions{TrustSPKI: []string{site.SPKI}})
		b, err := d.Launch(browser.Config{Remote: browser.Remote{Provider: browser.ProviderCDP, Endpoint: c.HTTPURL}, TrustSPKI: []string{site.SPKI}})
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		s := remoteSession(t, site, b)
		liveAndScreenshot(t, s)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		// Closing mcpd's side leaves the remote browser running.
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		b2, err := d.Launch(browser.Config{Remote: browser.Remote{Provider: browser.ProviderCDP, Endpoint: c.WSURL}, TrustSPKI: []string{site.SPKI}})
		if err != nil {
			t.Fatalf("the remote browser did not outlive mcpd's connection: %v", err)
		}
		b2.Close()
	})

	t.Run("ManagedDouble", func(t *testing.T) {
		caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: site.Shop.Certificate().Raw}))
		for _, kind := range []managedtest.Kind{managedtest.Steel, managedtest.Browserbase} {
			t.Run(string(kind), func(t *testing.T) {
				api := managedtest.Start(t, managedtest.Options{Kind: kind, APIKey: "key-" + string(kind)})
				b, err := d.Launch(browser.Config{TrustPEM: caPEM, TrustSPKI: []string{site.SPKI},
					Remote: browser.Remote{Provider: browser.Provider(kind), Endpoint: api.URL, APIKey: browser.APIKey("key-" + string(kind))}})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				s := remoteSession(t, site, b)
				liveAndScreenshot(t, s)
				recs := api.Records()
				if len(recs) != 1 || recs[0].TrustedSPKI != site.SPKI || recs[0].Width != 1280 || recs[0].Height != 900 || recs[0].Released {
					t.Fatalf("the provider session: %+v", recs)
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				if recs = api.Records(); !recs[0].Released {
					t.Fatal("closing the session did not release the provider's")
				}
			})
		}
	})
}
