package e2e

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/e2e/merchant"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/proxyd"
)

// startAppliance runs proxyd's own Main in-process, the way cmd/proxyd does,
// with a temporary data directory, loopback listeners on free ports and the
// merchant's CA as an extra upstream root. The merchant answers as
// shop.test, pay.test and login.test: the vault takes only DNS names as card
// and login sites, so Main maps them to 127.0.0.1 with its loudly named test
// knobs (unsafe_test_hosts, which needs unsafe_allow_private_ranges). The
// owner has authorized the three sites (policy.authorized_destinations), so
// fills do not wait for an approval; mods may change that (an empty
// AuthorizedDestinations makes every first fill ask the owner) or turn the
// dashboard on.
func startAppliance(t *testing.T, mods ...func(*proxyd.Config)) *appliance {
	t.Helper()
	return startProxydMain(t, true, mods...)
}

// startWiredAppliance is startAppliance: it used to wire proxyd's parts by
// hand because Main had no way to resolve the test names.
func startWiredAppliance(t *testing.T) *appliance { t.Helper(); return startAppliance(t) }

func startProxydMain(t *testing.T, trustMerchant bool, mods ...func(*proxyd.Config)) *appliance {
	t.Helper()
	m, err := merchant.Start(merchant.Options{ShopHost: "shop.test", PayHost: "pay.test", LoginHost: "login.test",
		JSHost: "js.pay.test", APIHost: "api.pay.test", CollectHost: "collect.pay.test",
		VaultHost: "checkout.cardvault.test", CSEHost: "checkoutshopper-test.adyen.com"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	ap := &appliance{m: m, dataDir: t.TempDir(), logs: &syncBuffer{}}
	caPath, err := ap.m.WriteCA(ap.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	pm := proxyd.NewMain()
	pm.Stderr = ap.logs
	pm.Config.DataDir = ap.dataDir
	pm.Config.Listen = proxyd.ListenConfig{Proxy: "127.0.0.1:0", Control: "127.0.0.1:0", Admin: "127.0.0.1:0"}
	pm.Config.UnsafeAllowPrivateRanges = true
	pm.Config.UnsafeTestHosts = m.HostMap()
	// The merchant's payment integrations, the way an owner adds theirs.
	for _, in := range m.Integrations() {
		pm.Config.Policy.PaymentIntegrations = append(pm.Config.Policy.PaymentIntegrations,
			policy.Integration{Name: in.Name, Frames: in.Frames, PostsTo: in.PostsTo})
	}
	pm.Config.Policy.AuthorizedDestinations = []string{"shop.test", "pay.test", "login.test"}
	if trustMerchant {
		pm.Config.TLS.ExtraRoots = []string{caPath}
	}
	pm.Config.Log = proxyd.LogConfig{Level: "debug", Format: "json"}
	for _, mod := range mods {
		mod(&pm.Config)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := pm.Open(ctx); err != nil {
		cancel()
		t.Fatalf("proxyd Open: %v", err)
	}
	ap.vault, ap.pm = pm.Vault, pm
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
