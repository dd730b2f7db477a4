package proxyd_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/proxyd"
)

// TestSeed004_ReceiptReachesTheOwner: the reference of the receipt image
// mcpd kept of a confirmation (seed 004, get_session_outcome) travels in
// the confirmation event over the control API; the owner finds it on the
// dashboard's Activity page and in proxyd's log, and the confirmation is
// recorded. A confirmation whose receipt is anything but a reference and
// a host is refused whole: neither the confirmation nor its text is
// recorded.
func TestSeed004_ReceiptReachesTheOwner(t *testing.T) {
	m, logs := startMain(t, "", func(c *proxyd.Config) { c.Listen.Dashboard = "127.0.0.1:0" })
	ctx := context.Background()
	c := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	bad, err := c.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	const smuggled = "Hunter2-Smuggled-Value-9"
	for name, ev := range map[string]control.EventRequest{
		"a path for a receipt":          {Receipt: "../" + smuggled + ".png", Site: "shop.example.com"},
		"a login capture for a receipt": {Receipt: control.NewLoginArtifact(), Site: "shop.example.com"},
		"a URL with a query for a site": {Receipt: control.NewReceiptArtifact(), Site: "https://shop.example.com/?card=" + smuggled},
		"no site":                       {Receipt: control.NewReceiptArtifact()},
	} {
		ev.Type = control.EventConfirmation
		if err := c.Event(ctx, bad.ID, ev); agentvault.ErrorCode(err) != agentvault.CodeInvalidInput {
			t.Errorf("%s: %v, want invalid_input", name, err)
		}
	}
	if rep, err := c.Report(ctx, bad.ID); err != nil || rep.ConfirmationDetected {
		t.Fatalf("a refused confirmation was recorded: %+v %v", rep, err)
	}

	s, err := c.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	ref := control.NewReceiptArtifact()
	if err := c.Event(ctx, s.ID, control.EventRequest{Type: control.EventConfirmation, Receipt: ref, Site: "Shop.Example.COM"}); err != nil {
		t.Fatal(err)
	}
	if rep, err := c.Report(ctx, s.ID); err != nil || !rep.ConfirmationDetected {
		t.Fatalf("the confirmation with a receipt was not recorded: %+v %v", rep, err)
	}

	d := signIn(t, m)
	_, _, page := d.status(http.MethodGet, "/activity", nil)
	for _, want := range []string{"Receipts of checkouts", ref, "shop.example.com", s.ID} {
		if !strings.Contains(page, want) {
			t.Errorf("the Activity page does not show %q", want)
		}
	}
	if n := len(regexp.MustCompile(`receipt-[0-9a-f]{16}\.png`).FindAllString(page, -1)); n != 1 {
		t.Errorf("the Activity page lists %d receipts, want the one event that passed", n)
	}
	if strings.Contains(page, smuggled) || strings.Contains(page, bad.ID) {
		t.Error("a refused event reached the Activity page")
	}
	logged := false
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "receipt image kept" {
			logged = logged || rec["artifact"] == ref && rec["session"] == s.ID
		}
	}
	if !logged {
		t.Error("proxyd's log does not record the receipt's reference")
	}
	if strings.Contains(logs.String(), smuggled) {
		t.Error("a refused event's text reached proxyd's log")
	}
}
