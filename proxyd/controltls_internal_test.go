package proxyd

import (
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault/intercept"
)

// TestP6_ControlLeafRenewedBeforeExpiry: the control API's leaf is
// short-lived like a MITM leaf, and a handshake past half its life gets a
// new one (new serial, later expiry); before that the same leaf is served.
// The clock is injected.
func TestP6_ControlLeafRenewedBeforeExpiry(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	ca, _, err := intercept.NewCA(clock)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := newCALeafCert(ca, []string{"127.0.0.1", "proxyd-1.test"}, clock)
	if err != nil {
		t.Fatal(err)
	}
	get := cc.tlsConfig().GetCertificate
	first, err := get(nil)
	if err != nil {
		t.Fatal(err)
	}
	life := first.Leaf.NotAfter.Sub(first.Leaf.NotBefore)
	if life > 48*time.Hour || first.Leaf.CheckSignatureFrom(ca.Certificate()) != nil {
		t.Fatalf("control leaf lives %s", life)
	}
	advance(life/2 - 2*time.Hour)
	if again, _ := get(nil); again != first {
		t.Fatal("leaf re-signed before half its life")
	}
	advance(2 * time.Hour)
	next, err := get(nil)
	if err != nil || next == first || next.Leaf.SerialNumber.Cmp(first.Leaf.SerialNumber) == 0 ||
		!next.Leaf.NotAfter.After(first.Leaf.NotAfter) || now.After(next.Leaf.NotAfter) {
		t.Fatalf("leaf not renewed at half its life: %v", err)
	}
}

// TestP17_RunFlagControlTLS: `proxyd run --control-tls` turns TLS on like
// listen.control_tls; without it a LAN control address is refused.
func TestP17_RunFlagControlTLS(t *testing.T) {
	common := commonFlags{data: t.TempDir()}
	for _, c := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"--control", "10.0.0.5:7701"}, false},
		{[]string{"--control", "10.0.0.5:7701", "--control-tls"}, true},
		{[]string{"--control", "127.0.0.1:7701", "--control-tls"}, true},
	} {
		f, err := parseRunFlags(c.args, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		cc, err := runConfig(f, common)
		if (err == nil) != c.ok || (err == nil && !cc.Config.Listen.ControlTLS) || (err != nil && !strings.Contains(err.Error(), "listen.control_tls")) {
			t.Errorf("%v: tls %v, err %v", c.args, cc.Config.Listen.ControlTLS, err)
		}
	}
}
