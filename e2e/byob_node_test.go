package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault/internal/leakcheck"
	"github.com/agentvault/agentvault/proxyd"
)

// TestBYOBNodeExampleChecksOut runs examples/byob-node, the bring-your-own-
// browser example (docs/byob.md), as its own Node.js process: playwright-core
// (the driver's, the version the Makefile installs) drives Debian's
// Chromium, and the script talks to proxyd's control API with its own API
// key. proxyd is set up as for browsers on other machines: the proxy faces
// the network over TLS (listen.proxy_network, proxy_tls) and so does the
// control API (control_tls; the script trusts ca.pem through
// NODE_EXTRA_CA_CERTS). The checkout completes, the processor receives the
// real card number (audited) and never the stand-in, and neither the real
// number nor the CVV appears in anything the script printed, its transcript
// of everything it was told and read, any other file it or its browser left
// in its home and temp directories, or proxyd's log (P11).
func TestBYOBNodeExampleChecksOut(t *testing.T) {
	requireE2E(t, true)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("skipping the bring-your-own-browser example: node (Node.js) is not installed")
	}
	ap := startAppliance(t, func(c *proxyd.Config) {
		c.Listen.ProxyNetwork, c.Listen.ProxyTLS = true, true
		c.Listen.ControlTLS = true
	})
	leak := leakcheck.New(leakcheck.Value("card number", ap.card.number), leakcheck.Value("card CVV", ap.card.cvv))

	// playwright-core from the driver folder, as node_modules would hold it.
	modules := t.TempDir()
	if err := os.Symlink(filepath.Join(driverDir(), "package"), filepath.Join(modules, "playwright-core")); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir() // the script's home, temp and working directory: everything it writes
	transcript := filepath.Join(home, "transcript.json")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(repoRoot(), "examples", "byob-node", "checkout.js"))
	cmd.Dir = home
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + home, "NODE_PATH=" + modules,
		"NODE_EXTRA_CA_CERTS=" + filepath.Join(ap.dataDir, proxyd.CAFile),
		"AGENTVAULT_CONTROL_URL=https://" + ap.pm.ControlAddr.String(),
		"AGENTVAULT_API_KEY_FILE=" + ap.apiKeyFile,
		"SHOP_URL=" + ap.m.Shop.URL + "/products/trail-shoes",
		"CHROMIUM_PATH=" + chromiumPath(),
		"BYOB_TRANSCRIPT=" + transcript,
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	leak.Text(t, "the script's stdout", stdout.Bytes())
	leak.Text(t, "the script's stderr", stderr.Bytes())
	if runErr != nil {
		t.Fatalf("the example failed: %v\nstdout:\n%s\nstderr:\n%s", runErr, leakcheck.Redact(stdout.String()), leakcheck.Redact(stderr.String()))
	}
	t.Logf("the example printed:\n%s", stdout.String())
	if !strings.Contains(stdout.String(), "order confirmed: EUR 42.50") || !strings.Contains(stdout.String(), "session closed") {
		t.Errorf("the script did not report a confirmed order and a closed session")
	}

	// What reached the merchant: the real number at the processor, once,
	// never at the shop, and never the stand-in the script typed.
	var kept []struct {
		What string          `json:"what"`
		Data json.RawMessage `json:"data"`
	}
	tb, err := os.ReadFile(transcript)
	if err != nil {
		t.Fatalf("the script wrote no transcript: %v", err)
	}
	if err := json.Unmarshal(tb, &kept); err != nil {
		t.Fatalf("transcript: %v", err)
	}
	var sessionID, standIn string
	for _, k := range kept {
		var a struct {
			Data struct {
				ID, Value, Kind, Field string
				StandIn                bool
			}
		}
		_ = json.Unmarshal(k.Data, &a)
		switch {
		case k.What == "POST /v1/sessions":
			sessionID = a.Data.ID
		case a.Data.Kind == "card" && a.Data.Field == "number":
			standIn = a.Data.Value
		}
	}
	if sessionID == "" || standIn == "" || standIn == ap.card.number {
		t.Fatalf("the transcript holds no session or no card number stand-in")
	}
	if got := ap.m.Pay.Count(ap.card.number); got != 1 {
		t.Errorf("the processor received the real number %d times, want once", got)
	}
	if ap.m.Pay.Saw(standIn) || ap.m.Shop.Saw(ap.card.number) {
		t.Error("the stand-in reached the processor, or the real number reached the shop")
	}
	if o := ap.m.Orders(); len(o) != 1 || o[0].Total != "42.50" {
		t.Errorf("want one EUR 42.50 order, have %d", len(o))
	}
	ap.checkAudit(t, "the example", sessionID)

	// Everything the script and its browser left behind.
	files := 0
	err = filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(home, p)
		if p == transcript {
			leak.Answer(t, "the script's transcript", b)
		} else {
			leak.Binary(t, "a file the script or its browser wrote ("+rel+")", b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	leak.Logs(t, "proxyd's log", ap.logs.Bytes())
	t.Logf("checked %d files the script left, its output and proxyd's log", files)
}
