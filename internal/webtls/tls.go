package webtls

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/caddyserver/certmagic"
)

// TLSConfig says how the dashboard gets its certificate.
type TLSConfig struct {
	// Domain, when set, is served with a certificate from ACME (Let's
	// Encrypt by default) managed by certmagic, stored under DataDir. The
	// TLS-ALPN challenge is answered on this listener, so it must be
	// reachable on port 443 of Domain.
	Domain  string
	Email   string // ACME account contact
	CA      string // ACME directory; empty is Let's Encrypt production
	DataDir string // certmagic storage lives in DataDir/certmagic
	// Certificate, when set and Domain is empty, is used as is (tests, or an
	// owner's own certificate).
	Certificate *tls.Certificate
	// LocalCA, when set and neither Domain nor Certificate is, issues the
	// certificate: a leaf from the deployment's own root, which the owner
	// trusts once (the root does not change across restarts). Without it
	// the certificate is self-signed and new at every start.
	LocalCA *LocalCA
	// Hosts are the names and addresses a locally issued certificate
	// covers when neither Domain nor Certificate is set; empty is
	// localhost and 127.0.0.1.
	Hosts []string
	// Logger receives the server's own errors (TLS handshakes a browser
	// aborts because it does not trust the certificate yet, scanners) at
	// debug level, as structured records, never raw lines between them.
	Logger *slog.Logger
}

// Serve serves h over TLS on ln until ctx ends, then shuts down gracefully.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, cfg TLSConfig) error {
	tc, err := cfg.tlsConfig(ctx)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         tc,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    32 << 10,
	}
	if cfg.Logger != nil {
		srv.ErrorLog = slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(tls.NewListener(ln, tc)) }()
	select {
	case err := <-errc:
		return agentvault.Wrap(agentvault.CodeInternal, err, "dashboard listener failed")
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return agentvault.Wrap(agentvault.CodeInternal, err, "dashboard listener failed")
		}
		return nil
	}
}

// TLS is the listener configuration cfg describes: ACME for a domain, the
// given certificate, or a locally issued one. mcpd's hosted server uses it
// too.
func (cfg TLSConfig) TLS(ctx context.Context) (*tls.Config, error) { return cfg.tlsConfig(ctx) }

func (cfg TLSConfig) tlsConfig(ctx context.Context) (*tls.Config, error) {
	switch {
	case cfg.Domain != "":
		return cfg.acme(ctx)
	case cfg.Certificate != nil:
		return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cfg.Certificate}, NextProtos: []string{"h2", "http/1.1"}}, nil
	}
	hosts := cfg.Hosts
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	var cert tls.Certificate
	var err error
	if cfg.LocalCA != nil {
		cert, err = cfg.LocalCA.Issue(hosts, time.Now())
	} else {
		cert, err = SelfSigned(hosts, time.Now())
	}
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}, nil
}

func (cfg TLSConfig) acme(ctx context.Context) (*tls.Config, error) {
	if cfg.DataDir == "" {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "ACME needs a data directory for its certificates")
	}
	var magic *certmagic.Config
	cache := certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert: func(certmagic.Certificate) (*certmagic.Config, error) { return magic, nil },
	})
	magic = certmagic.New(cache, certmagic.Config{
		Storage: &certmagic.FileStorage{Path: filepath.Join(cfg.DataDir, "certmagic")},
	})
	ca := cfg.CA
	if ca == "" {
		ca = certmagic.LetsEncryptProductionCA
	}
	issuer := certmagic.NewACMEIssuer(magic, certmagic.ACMEIssuer{
		CA: ca, Email: cfg.Email, Agreed: true,
		DisableHTTPChallenge: true, // only this TLS listener exists; answer TLS-ALPN-01
	})
	magic.Issuers = []certmagic.Issuer{issuer}
	if err := magic.ManageSync(ctx, []string{cfg.Domain}); err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "could not obtain a certificate for the dashboard domain")
	}
	tc := magic.TLSConfig()
	tc.MinVersion = tls.VersionTLS12
	tc.NextProtos = append([]string{"h2", "http/1.1"}, tc.NextProtos...)
	return tc, nil
}

// SelfSigned issues a locally trusted-by-nobody certificate for hosts
// (names or IP addresses), valid for 90 days from now. The browser warns
// once; the owner can pin it or configure a domain for ACME.
func SelfSigned(hosts []string, now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, agentvault.Wrap(agentvault.CodeInternal, err, "generate dashboard key")
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return tls.Certificate{}, agentvault.Wrap(agentvault.CodeInternal, err, "generate serial")
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "agentvault dashboard", Organization: []string{"agentvault"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(90 * 24 * time.Hour),
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
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, agentvault.Wrap(agentvault.CodeInternal, err, "issue dashboard certificate")
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, agentvault.Wrap(agentvault.CodeInternal, err, "parse dashboard certificate")
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}
