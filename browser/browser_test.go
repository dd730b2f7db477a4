package browser_test

import (
	"bytes"
	"image/png"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/browser"
	"github.com/agentvault/agentvault/browser/browsertest"
)

func open(t *testing.T) (*browsertest.Site, *browser.Session) {
	t.Helper()
	site := browsertest.Start(t)
	b := browsertest.Launch(t, site)
	s, err := b.NewSession(browser.SessionOptions{ViewportWidth: 1280, ViewportHeight: 2400})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Goto(site.CheckoutURL(), 30*time.Second); err != nil {
		t.Fatalf("goto: %v", err)
	}
	if err := s.WaitFor(browser.Target{Selector: "#number", Frame: "iframe"}, "visible", 30*time.Second); err != nil {
		t.Fatalf("card frame: %v", err)
	}
	return site, s
}

// TestBrowserCheckoutPage walks the primitives on the test checkout: a
// snapshot with field selectors into the cross-origin card frame, values
// never shown, fills by those selectors, counts, the popup queue and the
// real payment post.
func TestBrowserCheckoutPage(t *testing.T) {
	site, s := open(t)

	t.Run("snapshot", func(t *testing.T) {
		if err := s.Fill(browser.Target{Selector: "#company"}, "Zebracorp-Canary", 30*time.Second); err != nil {
			t.Fatal(err)
		}
		snap, err := s.Snapshot(0)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Fill(browser.Target{Selector: "#notes-ta"}, "ring twice\nZebranote-Canary: - textbox", 30*time.Second); err != nil {
			t.Fatal(err)
		}
		before := browser.RefLookups()
		snap, err = s.Snapshot(0)
		if err != nil {
			t.Fatal(err)
		}
		if n := browser.RefLookups() - before; n != 0 {
			t.Errorf("%d per-ref lookups: every field and frame should resolve from the documents' lists", n)
		}
		if strings.Contains(snap.YAML, "Zebracorp") || strings.Contains(snap.YAML, "Zebranote") {
			t.Fatalf("snapshot shows a field value (len %d)", len(snap.YAML))
		}
		if !strings.Contains(snap.YAML, `textbox "Card number" [ref=f`) {
			t.Fatalf("snapshot does not reach into the card frame:\n%s", snap.YAML)
		}
		byName := map[string]browser.Field{}
		for _, f := range snap.Fields {
			byName[f.Selector] = f
		}
		num, ok := byName["#number"]
		if !ok || num.Frame != `iframe[title="Secure payment input frame"]` {
			t.Fatalf("card number field: %+v (fields %+v)", num, snap.Fields)
		}
		if f, ok := byName["#email"]; !ok || f.Frame != "" {
			t.Fatalf("email field: %+v", f)
		}
		if len(snap.Fields) < 28 {
			t.Fatalf("only %d fields", len(snap.Fields))
		}
		// Every field selector names exactly one element in its frame.
		for _, f := range snap.Fields {
			c, err := s.Count(browser.Target{Selector: f.Selector, Frame: f.Frame})
			if err != nil || c.Count != 1 {
				t.Fatalf("field %s selector %q frame %q matches %d (%v)", f.Ref, f.Selector, f.Frame, c.Count, err)
			}
		}
		// A ref works as a selector.
		c, err := s.Count(browser.Target{Selector: "aria-ref=" + num.Ref})
		if err != nil || c.Count != 1 {
			t.Fatalf("count by ref: %+v %v", c, err)
		}
	})

	t.Run("count", func(t *testing.T) {
		c, err := s.Count(browser.Target{Selector: "input"})
		if err != nil || c.Count < 20 || c.Visible != nil {
			t.Fatalf("many inputs: %+v %v", c, err)
		}
		c, err = s.Count(browser.Target{Selector: "#cvc", Frame: "iframe"})
		if err != nil || c.Count != 1 || c.Visible == nil || *c.Visible != 1 {
			t.Fatalf("cvc: %+v %v", c, err)
		}
		c, err = s.Count(browser.Target{Selector: "#nothing"})
		if err != nil || c.Count != 0 {
			t.Fatalf("nothing: %+v %v", c, err)
		}
	})

	t.Run("fill errors carry no value", func(t *testing.T) {
		err := s.Fill(browser.Target{Selector: "#missing"}, "4111111111111111", 200*time.Millisecond)
		if agentvault.ErrorCode(err) != agentvault.CodeFieldNotFound {
			t.Fatalf("code %q", agentvault.ErrorCode(err))
		}
		var full string
		for e := err; e != nil; e = unwrap(e) {
			full += e.Error()
		}
		if strings.Contains(full, "4111") {
			t.Fatal("fill error chain carries the typed value")
		}
	})

	t.Run("popup", func(t *testing.T) {
		act, err := s.Click(browser.Target{Selector: "#wallet"}, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.WaitForPopup(30 * time.Second); err != nil {
			t.Fatalf("wait_for_popup: %v (notice %v)", err, act.NewTab)
		}
		if !strings.HasSuffix(s.URL(), "/popup") {
			t.Fatalf("current page %q", s.URL())
		}
		where, _, err := s.ClosePopup()
		if err != nil || where != "opener" || !strings.HasSuffix(s.URL(), "/checkout") {
			t.Fatalf("close_popup: %q %v %q", where, err, s.URL())
		}
		if _, err := s.WaitForPopup(100 * time.Millisecond); agentvault.ErrorCode(err) != agentvault.CodeTimeout {
			t.Fatalf("empty queue: %v", err)
		}
	})

	t.Run("pay", func(t *testing.T) {
		must(t, s.SelectOption(browser.Target{Selector: "#exp-month"}, "12", 30*time.Second))
		must(t, s.Fill(browser.Target{Selector: "#number", Frame: "iframe"}, "4242424242424242", 30*time.Second))
		must(t, s.Fill(browser.Target{Selector: "#cvc", Frame: "iframe"}, "123", 30*time.Second))
		if _, err := s.Click(browser.Target{Selector: "#place-order"}, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		m, err := s.Race(browser.Target{Selector: "#order-success"}, browser.Target{Selector: "#err:not(:empty), .checkout-error"}, 30*time.Second)
		if err != nil || m != "success" {
			t.Fatalf("race: %q %v", m, err)
		}
		if p := site.PostedBodies(); len(p) != 1 || !strings.Contains(p[0], "number=4242424242424242") {
			t.Fatalf("payments API got %d posts", len(p))
		}
	})
}

// TestSeed004_ClosePopupLandsOnBlankPage: close_popup on a popup whose
// opener is gone, and no other tab left, lands on a blank page in the same
// browser, and that page navigates (seed 004, close_popup).
func TestSeed004_ClosePopupLandsOnBlankPage(t *testing.T) {
	site, s := open(t)
	if _, err := s.Click(browser.Target{Selector: "#wallet"}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitForPopup(30 * time.Second); err != nil {
		t.Fatalf("wait_for_popup: %v", err)
	}
	if !browser.CloseOpenersForTest(s, 30*time.Second) {
		t.Fatal("the opener did not close")
	}
	where, u, err := s.ClosePopup()
	if err != nil || where != "blank" || u != "about:blank" || s.URL() != "about:blank" {
		t.Fatalf("close_popup with no opener left: %q %q %v (current %q)", where, u, err, s.URL())
	}
	if err := s.Goto(site.CheckoutURL(), 30*time.Second); err != nil {
		t.Fatalf("goto from the blank page: %v", err)
	}
	if err := s.WaitFor(browser.Target{Selector: "#number", Frame: "iframe"}, "visible", 30*time.Second); err != nil {
		t.Fatalf("card frame after the blank page: %v", err)
	}
	if _, err := s.WaitForPopup(100 * time.Millisecond); agentvault.ErrorCode(err) != agentvault.CodeTimeout {
		t.Fatalf("the blank page was queued as a popup: %v", err)
	}
}

// TestGotoProxyRefusal: a refusal proxyd answers inside the tunnel comes
// back with its code and public message, and the tab returns to where it
// was.
func TestGotoProxyRefusal(t *testing.T) {
	site, s := open(t)
	err := s.Goto(site.Shop.URL+"/refused", 5*time.Second)
	if agentvault.ErrorCode(err) != agentvault.CodeInsecureSite || !strings.Contains(agentvault.ErrorMessage(err), "Nothing was sent over plain http") {
		t.Fatalf("goto: %v", err)
	}
	if !strings.HasSuffix(s.URL(), "/checkout") {
		t.Fatalf("tab is at %q", s.URL())
	}
	// A refused fetch the page makes is recorded with its code.
	n := s.RefusalCount()
	if _, err := s.Click(browser.Target{Selector: "#probe"}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	must(t, s.WaitFor(browser.Target{Selector: "body[data-probed]"}, "attached", 30*time.Second))
	rs := s.RefusalsSince(n)
	if len(rs) != 1 || rs[0].Code != "insecure_site" || rs[0].ResourceType != "fetch" {
		t.Fatalf("refusals %+v", rs)
	}
}

// TestObserveErrorText reads validation output only, and flags it.
func TestObserveErrorText(t *testing.T) {
	_, s := open(t)
	must(t, s.Fill(browser.Target{Selector: "#number", Frame: "iframe"}, "4242424242424241", 30*time.Second))
	must(t, s.Fill(browser.Target{Selector: "#cvc", Frame: "iframe"}, "123", 30*time.Second))
	if _, err := s.Click(browser.Target{Selector: "#place-order"}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor(browser.Target{Selector: "#err:not(:empty)"}, "visible", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	sig, err := s.Observe()
	if err != nil {
		t.Fatal(err)
	}
	if !sig.Error || sig.PasswordField || !sig.EmailOrPhone || sig.Incomplete {
		t.Fatalf("signals %+v", sig)
	}
	joined := strings.Join(sig.ErrorText, "|")
	if !strings.Contains(joined, "Card declined") || !strings.Contains(joined, "is invalid") {
		t.Fatalf("errorText %d entries", len(sig.ErrorText))
	}
	ch, err := s.DetectChallenge()
	if err != nil || len(ch.Types) != 0 {
		t.Fatalf("challenge on a plain checkout: %+v %v", ch, err)
	}
}

// TestP19_ScreenshotMasksAtSource paints masked fields before the pixels
// leave Chromium: the red card number box comes out black.
func TestP19_ScreenshotMasksAtSource(t *testing.T) {
	site, s := open(t)
	shot := func(masks []string) (r, g, bl uint32) {
		raw, err := s.Screenshot(masks)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		// Find the red box: scan for a red pixel without a mask first.
		r, g, bl, _ = img.At(probeX, probeY).RGBA()
		return r >> 8, g >> 8, bl >> 8
	}
	// The red box is the card number field in the payments frame: with the
	// default masks it must never show. Find where it is by unmasking a
	// copy of the page whose field is not card-shaped.
	must(t, s.Goto(site.Pay.URL+"/lookalike", 30*time.Second))
	locateRed(t, s)
	must(t, s.Goto(site.Pay.URL+"/card", 30*time.Second))
	if r, g, b := shot(nil); r > 30 || g > 30 || b > 30 {
		t.Fatalf("card number pixel %d,%d,%d with the default masks, want black", r, g, b)
	}
}

var probeX, probeY int

func locateRed(t *testing.T, s *browser.Session) {
	raw, err := s.Screenshot(nil)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	bd := img.Bounds()
	for y := bd.Min.Y; y < bd.Max.Y; y += 2 {
		for x := bd.Min.X; x < bd.Max.X; x += 2 {
			r, g, b, _ := img.At(x, y).RGBA()
			if r>>8 > 240 && g>>8 < 20 && b>>8 < 20 {
				probeX, probeY = x+6, y+6
				return
			}
		}
	}
	t.Fatal("red card box not on screen")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func unwrap(err error) error {
	u, ok := err.(interface{ Unwrap() error })
	if !ok {
		return nil
	}
	return u.Unwrap()
}

// TestObserveLiveRegions: a live region's text is reported either way, but
// only failure wording (or an alert) makes the page an error page, so a
// confirmation that announces itself in role=status is not an error.
func TestObserveLiveRegions(t *testing.T) {
	site := browsertest.Start(t)
	b := browsertest.Launch(t, site)
	s, err := b.NewSession(browser.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, c := range []struct {
		path  string
		error bool
		text  string
	}{
		{"/live/status-success", false, "Thank you, your order is confirmed."},
		{"/live/polite-success", false, "Payment received"},
		{"/live/assertive-success", false, "Payment successful"},
		{"/live/status-failure", true, "Payment failed: the card was declined."},
		{"/live/assertive-failure", true, "Something went wrong, please try again."},
		{"/live/alert", true, "Enter a valid postcode"},
		{"/live/hidden-failure", false, ""},
	} {
		t.Run(strings.TrimPrefix(c.path, "/live/"), func(t *testing.T) {
			must(t, s.Goto(site.Shop.URL+c.path, 30*time.Second))
			sig, err := s.Observe()
			if err != nil {
				t.Fatal(err)
			}
			if sig.Error != c.error {
				t.Errorf("error = %v, want %v", sig.Error, c.error)
			}
			got := strings.Join(sig.ErrorText, "|")
			if got != c.text {
				t.Errorf("errorText %q, want %q", got, c.text)
			}
		})
	}
}

// TestSnapshotNestedFrames: on a page with a hidden iframe first, a frame
// without fields and a cross-origin frame holding a field and the card
// frame, every field gets the selector of its own element and the chain of
// iframe selectors down to it, and each names exactly one element.
func TestSnapshotNestedFrames(t *testing.T) {
	site := browsertest.Start(t)
	b := browsertest.Launch(t, site)
	s, err := b.NewSession(browser.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Goto(site.FramesURL(), 30*time.Second); err != nil {
		t.Fatalf("goto: %v", err)
	}
	wallet := `iframe[title="Wallet"]`
	card := wallet + " >> internal:control=enter-frame >> " + `iframe[title="Card"]`
	if err := s.WaitFor(browser.Target{Selector: "#cvc", Frame: card}, "visible", 30*time.Second); err != nil {
		t.Fatalf("card frame: %v", err)
	}
	before := browser.RefLookups()
	snap, err := s.Snapshot(0)
	if err != nil {
		t.Fatal(err)
	}
	if n := browser.RefLookups() - before; n != 0 {
		t.Errorf("%d per-ref lookups: every field and frame should resolve from the documents' lists", n)
	}
	want := map[string]string{"#q": "", "#holder": wallet, "#number": card, "#cvc": card}
	got := map[string]string{}
	for _, f := range snap.Fields {
		got[f.Selector] = f.Frame
		c, err := s.Count(browser.Target{Selector: f.Selector, Frame: f.Frame})
		if err != nil || c.Count != 1 {
			t.Fatalf("field %s selector %q frame %q matches %d (%v)", f.Ref, f.Selector, f.Frame, c.Count, err)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fields %+v\n%s", snap.Fields, snap.YAML)
	}
}
