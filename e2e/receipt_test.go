package e2e

import (
	"bytes"
	"image/png"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentvault/agentvault/mcpserver"
)

// TestSeed004_ReceiptImageReachesTheOwner: the whole chain of seed 004's
// receipt image. A checkout paid with a saved card, in a session that
// filled no token: get_session_outcome with confirmsCheckout records the
// confirmation and says a receipt image was kept; mcpd keeps a masked PNG
// in its artifact directory (under the data directory when nothing names
// another), and proxyd hands its reference to the owner's record (the
// Activity page lists it). A session that filled a token before the same
// checkout is recorded confirmed with no image.
func TestSeed004_ReceiptImageReachesTheOwner(t *testing.T) {
	requireE2E(t, true)
	ap := startWiredAppliance(t)
	artifacts := filepath.Join(ap.dataDir, "mcpd", mcpserver.DiagnosticsDir)
	bin := buildCmd(t, "mcpd")
	args, env := ap.mcpdArgs()
	agent := startAgent(t, bin, append(args, "--data", ap.dataDir), env)
	checkoutURL := ap.m.Shop.URL + "/saved/checkout"
	u, _ := url.Parse(ap.m.Shop.URL)
	receipts := func() []string {
		t.Helper()
		got, err := filepath.Glob(filepath.Join(artifacts, "receipt-*.png"))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	confirm := func() map[string]any {
		t.Helper()
		agent.must("click", map[string]any{"selector": "#place-order"})
		out := agent.must("get_session_outcome", map[string]any{"successSelector": "#order-success", "timeout": 30000,
			"confirmsCheckout": true, "submitSelector": "#place-order"}).json(t)
		if out["outcome"] != "success" || out["corroborated"] != true {
			t.Fatalf("outcome %v", out)
		}
		if rep := agent.must("get_run_report", map[string]any{}).json(t); rep["confirmationDetected"] != true {
			t.Fatalf("the confirmation was not recorded: %v", rep)
		}
		return out
	}

	agent.must("open_page", map[string]any{"url": checkoutURL})
	if out := confirm(); out["receiptImageKept"] != true {
		t.Fatalf("a checkout that filled nothing kept no receipt image: %v", out)
	}
	agent.must("close_session", map[string]any{})
	kept := receipts()
	if len(kept) != 1 {
		t.Fatalf("%d receipt images, want 1", len(kept))
	}
	ref := filepath.Base(kept[0])
	st, err := os.Stat(kept[0])
	b, _ := os.ReadFile(kept[0])
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the receipt image %s: %v (mode %v)", ref, err, st)
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(b)); err != nil || cfg.Width == 0 {
		t.Fatalf("the receipt image is no PNG: %v", err)
	}
	recs := ap.pm.Owner.Receipts()
	if len(recs) != 1 || recs[0].Artifact != ref || recs[0].Site != u.Hostname() {
		t.Fatalf("the owner's record of the receipt: %+v, want %s on %s", recs, ref, u.Hostname())
	}

	// A new session fills the receipt email from the vault first.
	cat := agent.must("get_token_catalog", map[string]any{"url": checkoutURL})
	emailTok := findToken(cat.text, "identity", "email")
	if emailTok == "" {
		t.Fatal("the catalog has no identity email token")
	}
	agent.must("open_page", map[string]any{"url": checkoutURL})
	agent.must("fill_checkout", map[string]any{"fields": []map[string]any{{"selector": "#email", "value": emailTok}}})
	if out := confirm(); out["receiptImageKept"] != false {
		t.Fatalf("a checkout that filled a token kept a receipt image: %v", out)
	}
	agent.must("close_session", map[string]any{})
	agent.close()
	if n, m := len(receipts()), len(ap.pm.Owner.Receipts()); n != 1 || m != 1 {
		t.Fatalf("after a token-filled checkout: %d images, %d owner records, want 1 and 1", n, m)
	}
}
