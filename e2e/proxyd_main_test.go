package e2e

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/intercept/proxyd"
)

// startAppliance runs proxyd's own Main in-process, the way cmd/proxyd does,
// with a temporary data directory, loopback listeners on free ports,
// unsafe_allow_private_ranges (the merchant is on loopback) and the
// merchant's CA as an extra upstream root. The merchant is on localhost and
// 127.0.0.1, the names the system resolver knows.
func startAppliance(t *testing.T) *appliance { t.Helper(); return startProxydMain(t, true) }

func startProxydMain(t *testing.T, trustMerchant bool) *appliance {
	t.Helper()
	ap := &appliance{m: startMerchant(t), dataDir: t.TempDir(), logs: &syncBuffer{}}
	caPath, err := ap.m.WriteCA(ap.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	pm := proxyd.NewMain()
	pm.Stderr = ap.logs
	pm.Config.DataDir = ap.dataDir
	pm.Config.Listen = proxyd.ListenConfig{Proxy: "127.0.0.1:0", Control: "127.0.0.1:0", Admin: "127.0.0.1:0"}
	pm.Config.UnsafeAllowPrivateRanges = true
	if trustMerchant {
		pm.Config.TLS.ExtraRoots = []string{caPath}
	}
	pm.Config.Log = proxyd.LogConfig{Level: "debug", Format: "json"}
	ctx, cancel := context.WithCancel(context.Background())
	if err := pm.Open(ctx); err != nil {
		cancel()
		t.Fatalf("proxyd Open: %v", err)
	}
	ap.vault = pm.Vault
	ap.seed(t, pm.Vault)
	done := make(chan error, 1)
	go func() { done <- pm.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxyd Run: %v", err)
		}
	})
	ap.proxyAddr = pm.ProxyAddr.String()
	ap.controlURL = "http://" + pm.ControlAddr.String()
	ap.controlTokenFile = filepath.Join(ap.dataDir, proxyd.ControlTokenFile)
	ap.apiKeyFile = filepath.Join(ap.dataDir, proxyd.APIKeyFile)
	ap.apiKey = pm.APIKey
	ap.metricsURL = "http://" + pm.AdminAddr.String() + "/metrics"
	ap.ctl = control.NewClient(ap.controlURL, pm.ControlToken, nil)
	return ap
}

// TestP5_UntrustedUpstreamIsRefused runs proxyd's Main without the
// merchant's CA among its roots: upstream TLS is verified, so the request
// is refused with upstream_tls and the card never reaches the processor.
func TestP5_UntrustedUpstreamIsRefused(t *testing.T) {
	requireE2E(t, false)
	ap := startProxydMain(t, false)
	ps := ap.cardSession(t)
	res, err := ps.goClient(t).PostForm(ps.legacyCheckout, ps.form(ap))
	code, _ := refusal(t, res, err)
	if code != "upstream_tls" {
		t.Errorf("request to an upstream signed by an untrusted CA: code %q, want upstream_tls", code)
	}
	if ap.m.Pay.Saw(ap.card.number) || len(ap.m.Charges()) != 0 {
		t.Error("the card reached an upstream whose certificate proxyd could not verify")
	}
}
