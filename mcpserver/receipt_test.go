package mcpserver

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/internal/leakcheck"
)

// receiptSite serves a one-page checkout: a saved card to pay with, an
// optional email field (?email=1) and a place-order button that swaps the
// form for a confirmation.
func receiptSite(t *testing.T) string {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		email := ""
		if r.URL.Query().Get("email") != "" {
			email = `<label for="email">Email for the receipt</label><input id="email" type="email">`
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><html><body><h1>Checkout</h1>
<form id="form" onsubmit="event.preventDefault(); this.hidden = true; document.getElementById('order-success').hidden = false">
<p>Pay with your saved card.</p>`+email+`<button id="place-order">Place order</button></form>
<div id="order-success" hidden><h2>Thank you</h2><p>Order 1042 is placed.</p></div></body></html>`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// receipts lists the receipt images kept in dir.
func receipts(t *testing.T, dir string) []string {
	t.Helper()
	got, err := filepath.Glob(filepath.Join(dir, "receipt-*.png"))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestSeed004_ReceiptImageOnlyWithoutTokens: get_session_outcome with
// confirmsCheckout keeps a masked image of the receipt page only for a
// session that filled no token (a saved-payment checkout): the image is
// kept where the login diagnostics are, the confirmation event carries its
// reference and the page's host (what the owner's Activity page lists),
// and the answer says an image was kept. Once the session has filled a
// token, a confirmation is recorded with no image, and the answer says so.
// Real Chromium, over the MCP transport.
func TestSeed004_ReceiptImageOnlyWithoutTokens(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	h.srv.cfg.ArtifactDir = dir // before the first call, which reads it
	site := receiptSite(t)
	confirm := func() map[string]any {
		t.Helper()
		h.ok("click", map[string]any{"selector": "#place-order"})
		out := jsonOf(t, h.ok("get_session_outcome", map[string]any{"successSelector": "#order-success", "timeout": 20000,
			"confirmsCheckout": true, "submitSelector": "#place-order"}))
		if out["outcome"] != "success" || out["corroborated"] != true {
			t.Fatalf("outcome %v", out)
		}
		return out
	}
	confirmations := func() []control.EventRequest {
		h.ctl.mu.Lock()
		defer h.ctl.mu.Unlock()
		var out []control.EventRequest
		for _, e := range h.ctl.events {
			if e.Type == control.EventConfirmation {
				out = append(out, e)
			}
		}
		return out
	}

	h.ok("open_page", map[string]any{"url": site + "/checkout"})
	out := confirm()
	if out["receiptImageKept"] != true || !strings.Contains(out["note"].(string), "image of the receipt page") {
		t.Fatalf("a saved-payment checkout: %v", out)
	}
	kept := receipts(t, dir)
	evs := confirmations()
	if len(kept) != 1 || len(evs) != 1 {
		t.Fatalf("%d images, %d confirmations, want 1 and 1", len(kept), len(evs))
	}
	ref := filepath.Base(kept[0])
	if !regexp.MustCompile(`^receipt-[0-9a-f]{16}\.png$`).MatchString(ref) || evs[0].Receipt != ref || evs[0].Site != "127.0.0.1" {
		t.Fatalf("the confirmation event %+v, the image %s", evs[0], ref)
	}
	if err := control.CheckReceipt(evs[0]); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(kept[0])
	b, _ := os.ReadFile(kept[0])
	if err != nil || st.Mode().Perm() != 0o600 || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("the image %s: %v %v", ref, st, err)
	}
	named := leakcheck.New(leakcheck.Value("the receipt image's name", ref))
	if len(named.Find(leakcheck.Logs, "mcpd log", []byte(h.logs.String()))) == 0 {
		t.Error("mcpd's log does not name the image")
	}
	if len(named.Find(leakcheck.Answer, "MCP answers", []byte(strings.Join(h.all, "\n")))) > 0 {
		t.Error("an answer names the image: it is the owner's")
	}

	// The same session fills a token: the next confirmation keeps none.
	h.ok("open_page", map[string]any{"url": site + "/checkout?email=1"})
	h.ok("fill_checkout", map[string]any{"fields": []map[string]any{{"selector": "#email", "value": "av_identity_1_email_u7x2k"}}})
	out = confirm()
	if out["receiptImageKept"] != false || !strings.Contains(out["note"].(string), "No receipt image: this session filled values from the vault") {
		t.Fatalf("a token-filled checkout: %v", out)
	}
	if evs := confirmations(); len(evs) != 2 || evs[1].Receipt != "" || evs[1].Site != "" {
		t.Fatalf("confirmations %+v, want a second one without a receipt", evs)
	}
	if n := len(receipts(t, dir)); n != 1 {
		t.Fatalf("%d images after a token-filled checkout, want still 1", n)
	}
	h.sweep(t)
}
