package intercept

import (
	"container/list"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net/netip"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
)

// BlobStore keeps small sealed blobs; the vault implements it (SealBlob and
// OpenBlob encrypt under the master key). The CA key lives there (P6).
type BlobStore interface {
	SealBlob(ctx context.Context, name string, data []byte) error
	OpenBlob(ctx context.Context, name string) ([]byte, error)
}

// blobCreator seals a blob only when there is none (vault.Vault).
type blobCreator interface {
	OpenOrCreateBlob(ctx context.Context, name string, create func() ([]byte, error)) ([]byte, error)
}

// CABlobName is the vault blob holding the MITM CA (certificate and key).
const CABlobName = "mitm-ca"

const (
	caValidity   = 5 * 365 * 24 * time.Hour
	leafValidity = 24 * time.Hour
	leafSlack    = time.Hour // backdating for clock skew, and early renewal
	leafCacheMax = 1024
)

// CA is this deployment's MITM certificate authority: ECDSA P-256, generated
// at first start, never goproxy's built-in CA (P6). Leaves are ECDSA P-256,
// valid for 24 hours, with random 128-bit serials, cached per host.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	now     func() time.Time
	metrics *Metrics

	mu    sync.Mutex
	lru   *list.List // of *leafEntry, most recent first
	byKey map[string]*list.Element
}

type leafEntry struct {
	host string
	cert *tls.Certificate
}

// LoadOrCreateCA opens the CA from the blob store, or creates and seals a
// new one when there is none.
func LoadOrCreateCA(ctx context.Context, bs BlobStore, now func() time.Time) (*CA, error) {
	if now == nil {
		now = time.Now
	}
	if oc, ok := bs.(blobCreator); ok {
		// Replicas starting at once on one empty store: the first sealed
		// CA is every replica's (create-if-absent, never overwritten).
		data, err := oc.OpenOrCreateBlob(ctx, CABlobName, func() ([]byte, error) {
			_, pemData, err := NewCA(now)
			return pemData, err
		})
		if err != nil {
			return nil, agentvault.Wrap(agentvault.ErrorCode(err), err, "open the MITM CA")
		}
		return parseCA(data, now)
	}
	data, err := bs.OpenBlob(ctx, CABlobName)
	if err == nil {
		return parseCA(data, now)
	}
	if agentvault.ErrorCode(err) != agentvault.CodeNotFound {
		return nil, agentvault.Wrap(agentvault.ErrorCode(err), err, "open the MITM CA")
	}
	ca, pemData, err := NewCA(now)
	if err != nil {
		return nil, err
	}
	if err := bs.SealBlob(ctx, CABlobName, pemData); err != nil {
		return nil, agentvault.Wrap(agentvault.ErrorCode(err), err, "seal the MITM CA")
	}
	return ca, nil
}

// NewCA generates a CA and returns it with its PEM encoding (certificate
// then PKCS#8 key), which the caller must seal.
func NewCA(now func() time.Time) (*CA, []byte, error) {
	if now == nil {
		now = time.Now
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, agentvault.Wrap(agentvault.CodeInternal, err, "generate CA key")
	}
	t := now()
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "agentvault MITM CA " + t.UTC().Format("2006-01-02"), Organization: []string{"agentvault"}},
		NotBefore:             t.Add(-leafSlack),
		NotAfter:              t.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, agentvault.Wrap(agentvault.CodeInternal, err, "create CA certificate")
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, agentvault.Wrap(agentvault.CodeInternal, err, "encode CA key")
	}
	pemData := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	pemData = append(pemData, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})...)
	ca, err := parseCA(pemData, now)
	return ca, pemData, err
}

func parseCA(data []byte, now func() time.Time) (*CA, error) {
	bad := agentvault.Errorf(agentvault.CodeInternal, "stored MITM CA is malformed")
	var cert *x509.Certificate
	var key *ecdsa.PrivateKey
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		switch b.Type {
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, bad
			}
			cert = c
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
			if err != nil {
				return nil, bad
			}
			ek, ok := k.(*ecdsa.PrivateKey)
			if !ok {
				return nil, bad
			}
			key = ek
		}
	}
	if cert == nil || key == nil || !cert.IsCA {
		return nil, bad
	}
	return &CA{cert: cert, key: key, now: now, lru: list.New(), byKey: map[string]*list.Element{}}, nil
}

func randomSerial() *big.Int {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[0] &= 0x7f // positive
	b[0] |= 0x40 // and a full 127 bits, never short
	return new(big.Int).SetBytes(b)
}

// Certificate returns the CA certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// CertPEM returns the CA certificate in PEM, for browsers and curl --cacert.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})
}

// SPKIHash is the base64 SHA-256 of the CA's SubjectPublicKeyInfo.
func (ca *CA) SPKIHash() string {
	sum := sha256.Sum256(ca.cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// Leaf returns a certificate for host (a normalised name or IP), from the
// cache when a fresh one is there.
func (ca *CA) Leaf(host string) (*tls.Certificate, error) {
	now := ca.now()
	ca.mu.Lock()
	if el, ok := ca.byKey[host]; ok {
		e := el.Value.(*leafEntry)
		if now.Add(leafSlack).Before(e.cert.Leaf.NotAfter) {
			ca.lru.MoveToFront(el)
			ca.mu.Unlock()
			ca.metrics.leafHit()
			return e.cert, nil
		}
		ca.lru.Remove(el)
		delete(ca.byKey, host)
	}
	ca.mu.Unlock()
	ca.metrics.leafMiss()

	cert, err := ca.sign([]string{host}, now)
	if err != nil {
		return nil, err
	}
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if el, ok := ca.byKey[host]; ok { // another handshake signed it meanwhile
		return el.Value.(*leafEntry).cert, nil
	}
	ca.byKey[host] = ca.lru.PushFront(&leafEntry{host: host, cert: cert})
	for ca.lru.Len() > leafCacheMax {
		old := ca.lru.Back()
		ca.lru.Remove(old)
		delete(ca.byKey, old.Value.(*leafEntry).host)
	}
	return cert, nil
}

// ServerLeaf signs a leaf for one of proxyd's own TLS listeners (the
// control API reached from other machines) naming every host in names: IP
// addresses as IP SANs, the rest as DNS names. Like a MITM leaf it is
// short-lived (24 hours); it is not cached here: the caller keeps it and
// asks for a new one before it expires.
func (ca *CA) ServerLeaf(names []string) (*tls.Certificate, error) {
	if len(names) == 0 {
		return nil, agentvault.Errorf(agentvault.CodeInternal, "a server leaf needs a name")
	}
	return ca.sign(names, ca.now())
}

func (ca *CA) sign(hosts []string, now time.Time) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "generate leaf key")
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    now.Add(-leafSlack),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, host := range hosts {
		if ip, err := netip.ParseAddr(host); err == nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip.AsSlice())
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, host)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "sign leaf")
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "parse leaf")
	}
	return &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}
