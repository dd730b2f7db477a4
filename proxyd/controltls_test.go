package proxyd_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/vault"

	"github.com/agentvault/agentvault/internal/leakcheck"
)

// controlHTTPClient is what mcpd builds for an https control URL: the
// deployment's CA from the data directory's ca.pem, no proxy.
func controlHTTPClient(t *testing.T, m *proxyd.Main) (*http.Client, *x509.CertPool) {
	t.Helper()
	pemData, err := os.ReadFile(filepath.Join(m.DataDir(), proxyd.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		t.Fatal("ca.pem holds no certificate")
	}
	return &http.Client{Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: pool}}}, pool
}

// TestP4_ControlAPIOverTLS: with listen.control_tls the control API (and
// its bearer token) speaks only TLS 1.2+ under a leaf of the deployment's
// CA, which names the listen host and listen.control_names. A client with
// ca.pem creates a session and authorizes a fill; a client without it
// fails verification before sending the token; a plain HTTP request on the
// port gets no answer from the API.
func TestP4_ControlAPIOverTLS(t *testing.T) {
	m, logs := startMain(t, "", func(c *proxyd.Config) {
		c.Listen.ControlTLS = true
		c.Listen.ControlNames = []string{"proxyd-1.test"}
		c.Policy.AuthorizedDestinations = []string{"shop.example"}
	})
	ctx := context.Background()
	if _, err := m.Vault.AddCard(ctx, proxyd.DefaultOrg, "owner", vault.CardInput{
		Number: vault.NewSecret([]byte(strings.Repeat("4242", 4))), CVV: vault.NewSecret([]byte("737")), ExpiryMonth: 12, ExpiryYear: 2031, AnySite: true,
	}); err != nil {
		t.Fatal(err)
	}
	base := "https://" + m.ControlAddr.String()
	hc, pool := controlHTTPClient(t, m)

	c := control.NewClient(base, m.ControlToken, hc)
	s, err := c.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatalf("create session over TLS: %v", err)
	}
	cat, err := c.Catalog(ctx, m.APIKey, "")
	i := strings.Index(string(cat), "av_card_1_number_")
	if err != nil || i < 0 {
		t.Fatalf("catalog over TLS: %v", err)
	}
	token := string(cat)[i : i+len("av_card_1_number_")+5]
	a, err := c.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: token, PageURL: "https://shop.example/checkout"})
	if err != nil || !a.StandIn {
		t.Fatalf("authorize over TLS: %v", err)
	}
	if _, err := c.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}

	// The leaf: the deployment's CA, the listen address and the configured
	// name, TLS 1.3 with a client that offers it; TLS 1.1 is refused.
	for _, name := range []string{"127.0.0.1", "proxyd-1.test"} {
		conn, err := tls.Dial("tcp", m.ControlAddr.String(), &tls.Config{RootCAs: pool, ServerName: name})
		if err != nil {
			t.Fatalf("handshake as %s: %v", name, err)
		}
		st := conn.ConnectionState()
		conn.Close()
		leaf := st.PeerCertificates[0]
		if st.Version != tls.VersionTLS13 || !slices.Contains(leaf.DNSNames, "proxyd-1.test") || len(leaf.IPAddresses) != 1 ||
			!leaf.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) || leaf.CheckSignatureFrom(m.CA.Certificate()) != nil {
			t.Fatalf("control leaf: version %x, names %v %v", st.Version, leaf.DNSNames, leaf.IPAddresses)
		}
	}
	if conn, err := tls.Dial("tcp", m.ControlAddr.String(), &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11}); err == nil {
		conn.Close()
		t.Fatal("control listener accepted TLS 1.1")
	}
	if conn, err := tls.Dial("tcp", m.ControlAddr.String(), &tls.Config{RootCAs: pool, ServerName: "other.test"}); err == nil {
		conn.Close()
		t.Fatal("control leaf verified for a name it must not hold")
	}

	// `proxyd session create` trusts the data directory's ca.pem for an
	// https control URL.
	var out, errOut strings.Builder
	if code := proxyd.RunCLI(ctx, []string{"session", "create", "--data", m.DataDir(), "--control", base}, &out, &errOut); code != 0 ||
		!strings.HasPrefix(out.String(), "session:  ") {
		t.Fatalf("session create over TLS: exit %d, %s", code, errOut.String())
	}

	// Without the CA (system roots): verification fails, nothing is sent.
	_, err = control.NewClient(base, m.ControlToken, nil).CreateSession(ctx, m.APIKey)
	var verr *tls.CertificateVerificationError
	if agentvault.ErrorCode(err) != agentvault.CodeUpstream || !errors.As(err, &verr) {
		t.Fatalf("client without the CA: %v", err)
	}

	// Plain HTTP on the TLS port: net/http's 400 for HTTP on an HTTPS
	// server, never the API's answer.
	req, _ := http.NewRequest(http.MethodGet, "http://"+m.ControlAddr.String()+control.CatalogPath+"?apiKey="+m.APIKey, nil)
	req.Header.Set("Authorization", "Bearer "+m.ControlToken)
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(body), "av_card_") || strings.Contains(string(body), `"code"`) {
			t.Fatalf("plain HTTP on the TLS port: %d %q", resp.StatusCode, body)
		}
	}
	leakcheck.New(leakcheck.Value("control token", m.ControlToken), leakcheck.Value("card number stand-in", a.Value)).
		Logs(t, "proxyd's log", []byte(logs.String()))
}

// TestP17_ControlBeyondLoopbackNeedsTLS: a control listener other machines
// can reach is refused unless listen.control_tls is on (the error names
// the key); loopback stays allowed either way; the admin listener stays
// loopback-only; listen.control_names are checked and need TLS.
func TestP17_ControlBeyondLoopbackNeedsTLS(t *testing.T) {
	dir := t.TempDir()
	load := func(body string) error {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := proxyd.LoadConfig(p)
		return err
	}
	for _, c := range []struct {
		name, body string
		want       string // "" accepted, else a part of the stable error
	}{
		{"loopback plain", "listen:\n  control: 127.0.0.1:7701\n", ""},
		{"loopback tls", "listen:\n  control: 127.0.0.1:7701\n  control_tls: true\n", ""},
		{"localhost tls", "listen:\n  control: localhost:7701\n  control_tls: true\n", ""},
		{"lan plain", "listen:\n  control: 10.0.0.5:7701\n",
			`config: listen.control must be a loopback address unless listen.control_tls is true, got "10.0.0.5:7701"`},
		{"name plain", "listen:\n  control: proxyd-1.internal:7701\n", "unless listen.control_tls is true"},
		{"every address plain", "listen:\n  control: 0.0.0.0:7701\n", "unless listen.control_tls is true"},
		{"lan tls", "listen:\n  control: 10.0.0.5:7701\n  control_tls: true\n", ""},
		{"lan tls with names", "listen:\n  control: 10.0.0.5:7701\n  control_tls: true\n  control_names: [proxyd-1.internal, 192.0.2.7, \"2001:db8::7\"]\n", ""},
		{"every address tls, no names", "listen:\n  control: 0.0.0.0:7701\n  control_tls: true\n", "listen.control_names must name the hosts mcpd dials"},
		{"every address tls with a name", "listen:\n  control: \"[::]:7701\"\n  control_tls: true\n  control_names: [proxyd-1.internal]\n", ""},
		{"names without tls", "listen:\n  control_names: [proxyd-1.internal]\n", "listen.control_names is set but listen.control_tls is false"},
		{"name with a port", "listen:\n  control_tls: true\n  control_names: [\"proxyd-1.internal:7701\"]\n", "listen.control_names"},
		{"name not lower-case", "listen:\n  control_tls: true\n  control_names: [Proxyd-1.internal]\n", "listen.control_names"},
		{"wildcard name", "listen:\n  control_tls: true\n  control_names: [\"*.internal\"]\n", "listen.control_names"},
		{"admin stays loopback", "listen:\n  control_tls: true\n  admin: 10.0.0.5:7702\n", "listen.admin must be a loopback address"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := load(c.body)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (agentvault.ErrorCode(err) != agentvault.CodeInvalidInput || !strings.Contains(agentvault.ErrorMessage(err), c.want)):
				t.Fatalf("got %v, want an invalid_input error with %q", err, c.want)
			}
		})
	}
}
