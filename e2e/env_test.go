package e2e

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/mxschmitt/playwright-go"
)

// repoRoot is the module root, found from this file's location.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

func driverDir() string {
	if d := os.Getenv("PLAYWRIGHT_DRIVER_PATH"); d != "" {
		return d
	}
	return filepath.Join(repoRoot(), ".cache", "playwright-driver")
}

func chromiumPath() string {
	if p := os.Getenv("CHROMIUM_PATH"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// requireE2E skips under -short. It skips when Chromium or the playwright
// driver is missing on a developer's machine, and fails under CI, where
// `make test` has installed both and a skip would hide a broken proof.
func requireE2E(t *testing.T, needBrowser bool) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end proof: skipped with -short")
	}
	if !needBrowser {
		return
	}
	missing := ""
	if _, err := os.Stat(filepath.Join(driverDir(), "package", "cli.js")); err != nil {
		missing = "the playwright driver (PLAYWRIGHT_DRIVER_PATH or .cache/playwright-driver; run make driver)"
	} else if _, err := os.Stat(chromiumPath()); err != nil {
		missing = "Chromium at " + chromiumPath() + " (run make system-deps)"
	}
	if missing == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI must run the end-to-end proofs, but %s is missing", missing)
	}
	t.Skipf("skipping end-to-end proof: %s is missing", missing)
}

// spkiOfPEM is the base64 SHA-256 of the first certificate's public key, the
// form Chromium's --ignore-certificate-errors-spki-list takes.
func spkiOfPEM(t *testing.T, pemBytes []byte) string {
	t.Helper()
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		t.Fatal("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// chromium starts the driver and a headless Debian Chromium trusting the
// given CA public keys. proxy, when not nil, carries every request, loopback
// included.
func chromium(t *testing.T, trustSPKI []string, proxy *playwright.Proxy) playwright.Browser {
	t.Helper()
	if os.Getenv("PLAYWRIGHT_NODEJS_PATH") == "" {
		if _, err := os.Stat("/usr/bin/node"); err == nil {
			t.Setenv("PLAYWRIGHT_NODEJS_PATH", "/usr/bin/node")
		}
	}
	pw, err := playwright.Run(&playwright.RunOptions{
		SkipInstallBrowsers: true,
		DriverDirectory:     driverDir(),
		Stdout:              os.Stderr,
		Stderr:              os.Stderr,
	})
	if err != nil {
		t.Fatalf("start playwright driver: %v", err)
	}
	args := []string{
		"--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-features=AutofillServerCommunication,OptimizationHints,MediaRouter,Translate",
	}
	if len(trustSPKI) > 0 {
		args = append(args, "--ignore-certificate-errors-spki-list="+strings.Join(trustSPKI, ","))
	}
	opts := playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String(chromiumPath()),
		Headless:       playwright.Bool(true),
		Args:           args,
		Env:            map[string]string{"HTTP_PROXY": "", "HTTPS_PROXY": "", "http_proxy": "", "https_proxy": "", "NO_PROXY": "", "no_proxy": ""},
	}
	if proxy != nil {
		opts.Proxy = proxy
	}
	b, err := pw.Chromium.Launch(opts)
	if err != nil {
		_ = pw.Stop()
		t.Fatalf("launch Chromium: %v", err)
	}
	t.Cleanup(func() {
		_ = b.Close()
		_ = pw.Stop()
	})
	return b
}

// pemDecode parses every certificate in a PEM bundle.
func pemDecode(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errNoPEM
	}
	return out, nil
}
