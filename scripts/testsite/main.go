// Command testsite is the local HTTPS shop of the README's first ten
// minutes (and scripts/walk.sh, which runs them): a checkout form, and a
// /pay endpoint that records the card number it received (to show the real
// one arrived) and echoes it back (to show proxyd scrubs it from the
// answer). Loopback only, as shop.test (and other.test); its own CA, kept
// in <data>/testshop/ca.pem for proxyd's tls.extra_roots, which
// --configure writes into <data>/proxyd.yaml with the other two test-only
// settings. Never for real use.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"html"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentvault/agentvault/internal/deploy"
	"gopkg.in/yaml.v3"
)

const checkout = `<!doctype html><html><head><meta charset="utf-8"><title>Test shop checkout</title></head><body>
<h1>Checkout</h1><p>Order total: <span id="total" class="order-total">12.00 EUR</span></p>
<form method="post" action="/pay">
<label>Card number <input id="card" name="card" autocomplete="cc-number" inputmode="numeric"></label>
<label>Expiry month <input id="exp-month" name="exp_month" autocomplete="cc-exp-month"></label>
<label>Expiry year <input id="exp-year" name="exp_year" autocomplete="cc-exp-year"></label>
<label>Security code <input id="cvc" name="cvc" autocomplete="cc-csc" inputmode="numeric"></label>
<input type="hidden" name="amount" value="12.00"><input type="hidden" name="currency" value="EUR">
<button id="pay" type="submit">Pay 12.00 EUR</button>
</form></body></html>`

// names are the host names the shop answers to (its certificate covers
// them, --configure maps them to loopback): shop.test, and other.test for
// the walk that shows a card refused on a site it is not for.
var names = []string{"shop.test", "other.test"}

func main() {
	data := flag.String("data", "", "proxyd's data directory (default as proxyd: $AGENTVAULT_DATA, $DATA, ~/.agentvault)")
	dir := flag.String("dir", "", "where ca.pem, addr, url and received.log go (default <data>/testshop)")
	addr := flag.String("addr", "", "listen address, loopback only (default: the one saved in <dir>/addr, else a free port)")
	configure := flag.Bool("configure", false, "write the shop's CA and the settings proxyd needs to reach it into <data>/proxyd.yaml, then exit")
	flag.Parse()
	if flag.NArg() > 0 {
		log.Fatalf("testsite takes only flags, not %q", flag.Arg(0))
	}
	ch, err := deploy.Resolve(*data, "", nil)
	if err != nil {
		log.Fatal(err)
	}
	if *dir == "" {
		*dir = filepath.Join(ch.Data.Dir, "testshop")
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		log.Fatal(err)
	}
	if *addr == "" {
		*addr = "127.0.0.1:0"
		if b, err := os.ReadFile(filepath.Join(*dir, "addr")); err == nil {
			*addr = strings.TrimSpace(string(b))
		}
	}
	if h, _, err := net.SplitHostPort(*addr); err != nil || (h != "127.0.0.1" && h != "::1") {
		log.Fatal("testsite listens on loopback only")
	}
	cert, err := loadOrIssue(*dir)
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("cannot listen on %s: %v (pass --addr 127.0.0.1:PORT)", *addr, err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	url := "https://" + names[0] + ":" + port + "/checkout"
	for name, body := range map[string]string{"addr": ln.Addr().String(), "url": url} {
		if err := os.WriteFile(filepath.Join(*dir, name), []byte(body+"\n"), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	if *configure {
		ln.Close()
		if err := configureProxyd(filepath.Join(ch.Data.Dir, deploy.ConfigFile), filepath.Join(*dir, "ca.pem")); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("test shop set up: %s (start it with: testsite, then restart proxyd: it reads the config at start)\n", url)
		return
	}
	var mu sync.Mutex
	mux := http.NewServeMux()
	mux.HandleFunc("GET /checkout", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, checkout)
	})
	mux.HandleFunc("POST /pay", func(w http.ResponseWriter, r *http.Request) {
		card := strings.TrimSpace(r.PostFormValue("card"))
		mu.Lock()
		f, err := os.OpenFile(filepath.Join(*dir, "received.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprintln(f, card)
			f.Close()
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><body><p id="ok">Paid.</p><p>We charged card <span id="echo">%s</span>.</p></body></html>`, html.EscapeString(card))
	})
	fmt.Printf("test shop: %s (what it received: %s)\n", url, filepath.Join(*dir, "received.log"))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	log.Fatal(srv.ServeTLS(ln, "", ""))
}

// configureProxyd adds to proxyd's config the three test-only settings a
// shop on this machine needs: its CA in tls.extra_roots, loopback allowed
// (unsafe_allow_private_ranges) and its names (unsafe_test_hosts). A
// config that already has them is left alone; one that sets those keys
// otherwise is refused with what to add by hand.
func configureProxyd(path, caPath string) error {
	block := fmt.Sprintf(`
# Added by scripts/testsite --configure: the local test shop (tests only).
tls:
  extra_roots: [%s]
unsafe_allow_private_ranges: true
unsafe_test_hosts:
`, caPath)
	for _, n := range names {
		block += "  " + n + ": 127.0.0.1\n"
	}
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	var have map[string]any
	if err := yaml.Unmarshal(old, &have); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	if strings.Contains(string(old), block) {
		return nil
	}
	for _, k := range []string{"tls", "unsafe_allow_private_ranges", "unsafe_test_hosts"} {
		if _, ok := have[k]; ok {
			return fmt.Errorf("%s already sets %s: add the test shop's settings by hand:\n%s", path, k, block)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(block); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// loadOrIssue reuses the shop's CA from dir (so proxyd's trust in it
// survives a restart of the shop) or makes one, and issues a leaf.
func loadOrIssue(dir string) (tls.Certificate, error) {
	caPath, keyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	var ca *x509.Certificate
	var caKey *ecdsa.PrivateKey
	if cb, err := os.ReadFile(caPath); err == nil {
		if kb, err := os.ReadFile(keyPath); err == nil {
			cp, _ := pem.Decode(cb)
			kp, _ := pem.Decode(kb)
			if cp != nil && kp != nil {
				c, err1 := x509.ParseCertificate(cp.Bytes)
				k, err2 := x509.ParseECPrivateKey(kp.Bytes)
				if err1 == nil && err2 == nil && time.Now().Before(c.NotAfter.Add(-time.Hour)) {
					ca, caKey = c, k
				}
			}
		}
	}
	if ca == nil {
		var caDER []byte
		var err error
		if ca, caKey, caDER, err = newCA(); err != nil {
			return tls.Certificate{}, err
		}
		kDER, err := x509.MarshalECPrivateKey(caKey)
		if err != nil {
			return tls.Certificate{}, err
		}
		if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kDER}), 0o600); err != nil {
			return tls.Certificate{}, err
		}
		if err := os.WriteFile(caPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
			return tls.Certificate{}, err
		}
	}
	return issue(ca, caKey)
}

// newCA makes the shop's own CA (a year; never trusted beyond proxyd's
// tls.extra_roots).
func newCA() (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: "agentvault test shop CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour),
		PermittedDNSDomainsCritical: true, PermittedDNSDomains: []string{".test"},
		PermittedIPRanges: []*net.IPNet{{IP: net.IPv4(127, 0, 0, 0), Mask: net.CIDRMask(8, 32)}}}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	return ca, caKey, caDER, err
}

// issue makes a leaf for the shop's names and 127.0.0.1 under ca.
func issue(ca *x509.Certificate, caKey *ecdsa.PrivateKey) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(now.UnixNano()), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.Raw}, PrivateKey: key}, nil
}
