package webtls

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
)

// Files and blob names of the dashboard's local root.
const (
	// LocalCAFile is the root certificate under the data directory, the
	// one file the owner imports into their system or browser trust store
	// once (docs/dashboard.md, "Trust the dashboard once").
	LocalCAFile = "dashboard-ca.pem"
	// LocalCABlob names the sealed blob holding the root's certificate and
	// key. The key is sealed in the vault like the MITM CA's (P6) rather
	// than kept in a 0600 file: it is then encrypted under the master key,
	// travels with vault.db in a backup, and a copy of the data directory
	// without master.key cannot mint certificates the owner's browser
	// trusts.
	LocalCABlob = "dashboard-ca"

	localCAValidity   = 10 * 365 * 24 * time.Hour
	localLeafValidity = 90 * 24 * time.Hour
)

// BlobStore keeps small sealed blobs (the vault: SealBlob, OpenBlob).
type BlobStore interface {
	SealBlob(ctx context.Context, name string, data []byte) error
	OpenBlob(ctx context.Context, name string) ([]byte, error)
}

// LocalCA is the dashboard's own root, created once per deployment. Every
// start issues a fresh leaf from it, so the certificate the browser trusts
// (the root) never changes across restarts.
type LocalCA struct {
	Cert *x509.Certificate
	key  crypto.Signer
	PEM  []byte // the root certificate alone
}

// LoadOrCreateLocalCA opens the root from bs, or creates and seals one, and
// writes its certificate to dataDir/dashboard-ca.pem when that file is
// missing or differs.
func LoadOrCreateLocalCA(ctx context.Context, bs BlobStore, dataDir string, now time.Time) (*LocalCA, error) {
	data, err := bs.OpenBlob(ctx, LocalCABlob)
	switch {
	case err == nil:
	case agentvault.ErrorCode(err) == agentvault.CodeNotFound:
		if data, err = newLocalCA(now); err != nil {
			return nil, err
		}
		if err := bs.SealBlob(ctx, LocalCABlob, data); err != nil {
			return nil, agentvault.Wrap(agentvault.ErrorCode(err), err, "seal the dashboard root")
		}
	default:
		return nil, agentvault.Wrap(agentvault.ErrorCode(err), err, "open the dashboard root")
	}
	ca, err := parseLocalCA(data)
	if err != nil {
		return nil, err
	}
	if dataDir != "" {
		path := filepath.Join(dataDir, LocalCAFile)
		if old, err := os.ReadFile(path); err != nil || !bytes.Equal(old, ca.PEM) {
			if err := os.WriteFile(path+".tmp", ca.PEM, 0o644); err != nil {
				return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot write %s", path)
			}
			if err := os.Rename(path+".tmp", path); err != nil {
				return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot write %s", path)
			}
		}
	}
	return ca, nil
}

// The root may only vouch for local names and private addresses (RFC 5280
// name constraints, honoured by Chromium, Firefox and Go): trusting it
// system-wide cannot let it impersonate a public site, even if its key
// leaked.
var (
	permittedDNS = []string{"localhost", "local", "internal", "lan", "home.arpa"}
	permittedIPs = []string{"127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7", "fe80::/10"}
)

// LocalRootCovers reports whether the local root may vouch for host (a
// name or an address): a local name or a private address. Anything else
// needs a certificate from elsewhere (ACME).
func LocalRootCovers(host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		for _, c := range permittedIPs {
			if _, n, _ := net.ParseCIDR(c); n.Contains(ip) {
				return true
			}
		}
		return false
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, d := range permittedDNS {
		if host == d || strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}

func newLocalCA(now time.Time) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "generate the dashboard root key")
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "generate serial")
	}
	tmpl := &x509.Certificate{
		SerialNumber:                serial,
		Subject:                     pkix.Name{CommonName: "agentvault dashboard root " + now.UTC().Format("2006-01-02"), Organization: []string{"agentvault (this appliance only)"}},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.Add(localCAValidity),
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid:       true,
		IsCA:                        true,
		MaxPathLenZero:              true,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         permittedDNS,
	}
	for _, c := range permittedIPs {
		_, n, _ := net.ParseCIDR(c)
		tmpl.PermittedIPRanges = append(tmpl.PermittedIPRanges, n)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "create the dashboard root")
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "encode the dashboard root key")
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return append(out, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})...), nil
}

func parseLocalCA(data []byte) (*LocalCA, error) {
	bad := func(err error) error {
		return agentvault.Wrap(agentvault.CodeInternal, err, "the sealed dashboard root does not parse")
	}
	cb, rest := pem.Decode(data)
	kb, _ := pem.Decode(rest)
	if cb == nil || kb == nil {
		return nil, bad(nil)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, bad(err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, bad(err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, bad(nil)
	}
	return &LocalCA{Cert: cert, key: signer, PEM: pem.EncodeToMemory(cb)}, nil
}

// Issue signs a leaf for hosts (names or addresses) valid from now, with a
// fresh key; the chain served includes the root.
func (ca *LocalCA) Issue(hosts []string, now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, agentvault.Wrap(agentvault.CodeInternal, err, "generate dashboard key")
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return tls.Certificate{}, agentvault.Wrap(agentvault.CodeInternal, err, "generate serial")
	}
	notAfter := now.Add(localLeafValidity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "agentvault dashboard", Organization: []string{"agentvault"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return tls.Certificate{}, agentvault.Wrap(agentvault.CodeInternal, err, "issue the dashboard certificate (a name outside the local root's constraints?)")
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, agentvault.Wrap(agentvault.CodeInternal, err, "parse the dashboard certificate")
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.Cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}
