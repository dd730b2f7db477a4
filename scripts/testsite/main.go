// Command testsite is the local HTTPS shop the README's walk (scripts/walk.sh)
// buys from: a checkout form, and a /pay endpoint that records the card
// number it received (to show the real one arrived) and echoes it back (to
// show proxyd scrubs it from the answer). Loopback only; its own CA, written
// to <dir>/ca.pem for proxyd's tls.extra_roots. Never for real use.
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

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (loopback)")
	dir := flag.String("dir", ".", "where ca.pem, addr and received.log go")
	flag.Parse()
	if h, _, err := net.SplitHostPort(*addr); err != nil || (h != "127.0.0.1" && h != "::1") {
		log.Fatal("testsite listens on loopback only")
	}
	cert, caPEM, err := issue()
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*dir, "ca.pem"), caPEM, 0o644); err != nil {
		log.Fatal(err)
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
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*dir, "addr"), []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	log.Fatal(srv.ServeTLS(ln, "", ""))
}

// issue makes a throwaway CA and a leaf for shop.test and 127.0.0.1.
func issue() (tls.Certificate, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agentvault walk test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "shop.test"}, DNSNames: []string{"shop.test"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}
