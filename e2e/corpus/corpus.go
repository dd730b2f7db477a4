package corpus

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// Target is an element a step acts on, as each kind of client names it: a
// CSS selector (with the CSS selector of its iframe, if any) for mcpd, and
// the role and accessible name a snapshot shows it with, for a client that
// acts by the snapshot's refs.
type Target struct {
	Selector string
	Frame    string
	Role     string
	Name     string
}

// Page is one shape of the corpus and what the bench does on it.
type Page struct {
	// Name is short and stable: listing, checkout5, shadow, selects, spa,
	// latepay.
	Name string
	// Path is where the page is served on the page origin.
	Path string
	// Ready, when set, is a CSS selector of the top document that matches
	// once the page has rendered what it renders after its load (the SPA's
	// list, the late payment frame's fields).
	Ready string
	// Type is a plain text field; Click a button that changes the page
	// without navigating; Nav a link that navigates to the same shape;
	// Post the submit button of a form that posts and lands on the same
	// shape (a 303 to the page).
	Type, Click, Nav, Post Target
	// FrameType is a text field inside a cross-origin iframe (zero when the
	// page has none); Card is the card number field a token is filled into
	// (zero when the page takes no card).
	FrameType, Card Target
}

// Pages lists the corpus in the order the bench runs it.
func Pages() []Page {
	return []Page{
		{
			Name: "listing", Path: "/listing",
			Type:  Target{Selector: "#q", Role: "searchbox", Name: "Search products"},
			Click: Target{Selector: "#toggle-filters", Role: "button", Name: "Grid view"},
			Nav:   Target{Selector: "#next-page", Role: "link", Name: "Next page"},
			Post:  Target{Selector: "#subscribe", Role: "button", Name: "Subscribe"},
		},
		{
			Name: "checkout5", Path: "/checkout",
			Type:      Target{Selector: "#first-name", Role: "textbox", Name: "First name"},
			Click:     Target{Selector: "#apply-promo", Role: "button", Name: "Apply"},
			Nav:       Target{Selector: "#edit-cart", Role: "link", Name: "Edit cart"},
			Post:      Target{Selector: "#continue", Role: "button", Name: "Continue to payment"},
			FrameType: Target{Selector: "#card-number", Frame: numberFrame, Role: "textbox", Name: "Card number"},
			Card:      Target{Selector: "#card-number", Frame: numberFrame, Role: "textbox", Name: "Card number"},
		},
		{
			Name: "shadow", Path: "/shadow",
			Type:  Target{Selector: "#ship-name", Role: "textbox", Name: "Full name"},
			Click: Target{Selector: "#promo-apply", Role: "button", Name: "Apply code"},
			Nav:   Target{Selector: "#more-link", Role: "link", Name: "More like this"},
			Post:  Target{Selector: "#ship-save", Role: "button", Name: "Save address"},
		},
		{
			Name: "selects", Path: "/selects",
			Type:  Target{Selector: "#city", Role: "textbox", Name: "City"},
			Click: Target{Selector: "#locate", Role: "button", Name: "Use my location"},
			Nav:   Target{Selector: "#skip", Role: "link", Name: "Skip this step"},
			Post:  Target{Selector: "#save", Role: "button", Name: "Save and continue"},
		},
		{
			Name: "spa", Path: "/spa", Ready: "#app[data-ready]",
			Type:  Target{Selector: "#filter", Role: "textbox", Name: "Filter products"},
			Click: Target{Selector: "#in-stock", Role: "button", Name: "In stock only"},
			Nav:   Target{Selector: "#view-more", Role: "link", Name: "View all deals"},
			Post:  Target{Selector: "#spa-submit", Role: "button", Name: "Request a callback"},
		},
		{
			Name: "latepay", Path: "/latepay", Ready: "#pay-status[data-ready]",
			Type:      Target{Selector: "#email", Role: "textbox", Name: "Email"},
			Click:     Target{Selector: "#gift", Role: "checkbox", Name: "This is a gift"},
			Nav:       Target{Selector: "#change-shipping", Role: "link", Name: "Change shipping"},
			Post:      Target{Selector: "#save-contact", Role: "button", Name: "Save contact"},
			FrameType: Target{Selector: "#card-name", Frame: payFrame, Role: "textbox", Name: "Name on card"},
			Card:      Target{Selector: "#card-number", Frame: payFrame, Role: "textbox", Name: "Card number"},
		},
	}
}

// The frame selectors the pages' card fields live under.
const (
	numberFrame = `iframe[title="Secure card number input frame"]`
	payFrame    = `iframe[title="Secure payment input frame"]`
)

// Corpus is the running set of origins.
type Corpus struct {
	// Pages is the origin of every page, e.g. https://127.0.0.1:41234.
	Pages string
	// Frames are the five frame origins of the checkout (card number,
	// expiry, security code, express checkout, chat) and the late payment
	// frame's origin, each on its own loopback address.
	Frames [6]string

	caPEM []byte
	spki  string
	srvs  []*http.Server
	lns   []net.Listener
	done  []chan struct{}
}

// URL is the address of a page of the corpus.
func (c *Corpus) URL(p Page) string { return c.Pages + p.Path }

// CAPEM is the corpus CA certificate (PEM), for a proxy's extra upstream
// roots.
func (c *Corpus) CAPEM() []byte { return append([]byte(nil), c.caPEM...) }

// WriteCA writes the CA certificate to dir/corpus-ca.pem and returns the path.
func (c *Corpus) WriteCA(dir string) (string, error) {
	p := filepath.Join(dir, "corpus-ca.pem")
	return p, os.WriteFile(p, c.caPEM, 0o644)
}

// SPKI is the base64 SHA-256 of the CA's public key, for Chromium's
// --ignore-certificate-errors-spki-list.
func (c *Corpus) SPKI() string { return c.spki }

// Start creates the CA and its leaf and starts every origin; Close stops
// them.
func Start() (*Corpus, error) {
	ca, caKey, caPEM, err := newCA()
	if err != nil {
		return nil, err
	}
	ips := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7"}
	leaf, err := newLeaf(ca, caKey, ips)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(ca.PublicKey)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	c := &Corpus{caPEM: caPEM, spki: base64.StdEncoding.EncodeToString(sum[:])}
	origins := make([]string, len(ips))
	for i, ip := range ips {
		ln, err := net.Listen("tcp", ip+":0")
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("corpus: listen on %s: %w", ip, err)
		}
		c.lns = append(c.lns, ln)
		origins[i] = "https://" + ln.Addr().String()
	}
	c.Pages = origins[0]
	copy(c.Frames[:], origins[1:])
	handlers := []http.Handler{c.pageRoutes(), frameRoutes(framePage[0]), frameRoutes(framePage[1]), frameRoutes(framePage[2]),
		frameRoutes(framePage[3]), frameRoutes(framePage[4]), frameRoutes(latePayFrame)}
	for i, ln := range c.lns {
		srv := &http.Server{
			Handler:           handlers[i],
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          log.New(io.Discard, "", 0),
			TLSConfig:         &tls.Config{Certificates: []tls.Certificate{leaf}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}},
		}
		done := make(chan struct{})
		c.srvs = append(c.srvs, srv)
		c.done = append(c.done, done)
		go func() {
			defer close(done)
			_ = srv.ServeTLS(ln, "", "")
		}()
	}
	return c, nil
}

// Close stops every origin.
func (c *Corpus) Close() {
	for i, srv := range c.srvs {
		_ = srv.Close()
		<-c.done[i]
	}
	for _, ln := range c.lns[len(c.srvs):] {
		_ = ln.Close()
	}
}

func newCA() (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{"agentvault page corpus"}, CommonName: "corpus test root"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func newLeaf(ca *x509.Certificate, caKey *ecdsa.PrivateKey, ips []string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "corpus"},
		DNSNames:     []string{"localhost"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("corpus: sign leaf: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.Raw}, PrivateKey: key}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic("corpus: crypto/rand failed: " + err.Error())
	}
	return n.Add(n, big.NewInt(1))
}
