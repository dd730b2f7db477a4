package proxyd

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentvault/agentvault/internal/webtls"
)

// writePair writes a fresh self-signed certificate and its key as PEM,
// stamped at mtime, and returns the certificate's serial.
func writePair(t *testing.T, certFile, keyFile string, mtime time.Time) string {
	t.Helper()
	c, err := webtls.SelfSigned([]string{"proxy.test"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{certFile, keyFile} {
		if err := os.Chtimes(f, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	return c.Leaf.SerialNumber.String()
}

// TestOwnerProxyCertificateFollowsItsFiles: the owner's certificate for the
// proxy listener is re-read when its files change (checked at most once a
// minute, on the injected clock), and a pair that does not load (a renewal
// half written) keeps the certificate served.
func TestOwnerProxyCertificateFollowsItsFiles(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "proxy.pem"), filepath.Join(dir, "proxy.key")
	stamp := time.Now().Add(-time.Hour)
	first := writePair(t, certFile, keyFile, stamp)
	now := time.Unix(1_700_000_000, 0)
	oc, err := newOwnerCert(certFile, keyFile, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	serial := func() string { return oc.get().Leaf.SerialNumber.String() }
	if serial() != first {
		t.Fatal("not the owner's certificate")
	}
	second := writePair(t, certFile, keyFile, stamp.Add(time.Minute))
	now = now.Add(59 * time.Second)
	if serial() != first {
		t.Error("files checked more than once a minute")
	}
	now = now.Add(time.Second)
	if serial() != second {
		t.Fatal("a renewed certificate was not picked up")
	}
	if err := os.WriteFile(certFile, []byte("-----BEGIN CERTIFICATE-----\nhalf"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(certFile, stamp.Add(2*time.Minute), stamp.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if serial() != second {
		t.Error("a pair that does not load replaced the certificate served")
	}
	if _, err := newOwnerCert(certFile, keyFile, nil); err == nil {
		t.Error("a start with a pair that does not load was accepted")
	}
}
