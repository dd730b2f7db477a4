package mcpserver

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
)

// TestP4_McpdControlURLAndCA: mcpd refuses at start an http:// control URL
// to a host other than loopback (the bearer token would cross the network
// in clear), loads --control-ca (or AGENTVAULT_CONTROL_CA), and says
// clearly when the file cannot be read or holds no certificate.
func TestP4_McpdControlURLAndCA(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unreadable := filepath.Join(dir, "unreadable.pem")
	if err := os.WriteFile(unreadable, nil, 0o000); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		env  string // AGENTVAULT_CONTROL_CA
		want string // "" accepted, else a part of the error
		ca   bool   // a CA pool is loaded
	}{
		{"default", nil, "", "", false},
		{"loopback http", []string{"--control-url", "http://127.0.0.1:7701,http://[::1]:7711,http://localhost:7721"}, "", "", false},
		{"lan http", []string{"--control-url", "http://10.0.0.5:7701"}, "", "http://10.0.0.5:7701 would send the control token in clear", false},
		{"named http among loopback", []string{"--control-url", "http://127.0.0.1:7701,http://proxyd-2.internal:7701"}, "", "would send the control token in clear", false},
		{"https, system roots", []string{"--control-url", "https://proxyd-1.internal:7701"}, "", "", false},
		{"https with the CA", []string{"--control-url", "https://10.0.0.5:7701,https://10.0.0.6:7701", "--control-ca", caFile}, "", "", true},
		{"CA from the environment", []string{"--control-url", "https://10.0.0.5:7701"}, caFile, "", true},
		{"missing CA file", []string{"--control-ca", filepath.Join(dir, "missing.pem")}, "", "cannot read the control CA file " + filepath.Join(dir, "missing.pem") + " (--control-ca): no such file or directory", false},
		{"CA file without a certificate", []string{"--control-ca", junk}, "", "holds no PEM certificate", false},
		{"other scheme", []string{"--control-url", "ftp://10.0.0.5:7701"}, "", "must be http://host:port or https://host:port", false},
		{"user info", []string{"--control-url", "https://u:p@10.0.0.5:7701"}, "", "without user info", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("AGENTVAULT_CONTROL_CA", c.env)
			t.Setenv("AGENTVAULT_CONTROL_URL", "")
			m := NewMain()
			out := &syncBuffer{}
			m.Stderr = out
			err := m.ParseFlags(c.args)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (agentvault.ErrorCode(err) != agentvault.CodeInvalidInput || !strings.Contains(agentvault.ErrorMessage(err), c.want) || !strings.Contains(out.String(), c.want)):
				t.Fatalf("got %v (stderr %q), want an invalid_input error with %q", err, out.String(), c.want)
			case err == nil && (m.controlRoots != nil) != c.ca:
				t.Fatalf("CA pool loaded: %v", m.controlRoots != nil)
			}
			if strings.Contains(out.String(), "u:p@") {
				t.Fatal("user info from the URL reached stderr")
			}
		})
	}
	if os.Geteuid() != 0 { // root reads any file
		m := NewMain()
		m.Stderr = &syncBuffer{}
		if err := m.ParseFlags([]string{"--control-ca", unreadable}); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Fatalf("unreadable CA file: %v", err)
		}
	}
}

// TestP4_McpdControlClientTrustsControlCA: the control client Open builds
// verifies an https control API against --control-ca (a real TLS
// listener); without it the system roots refuse the same server before the
// token is sent.
func TestP4_McpdControlClientTrustsControlCA(t *testing.T) {
	const token = "ctl-token-tls"
	var sawToken atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+token {
			sawToken.Add(1)
		}
		if r.URL.Path == control.CatalogPath {
			w.Write([]byte(`{"identity":null,"addresses":[],"cards":[],"logins":[]}`))
			return
		}
		http.NotFound(w, r)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	srv.StartTLS()
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTVAULT_CONTROL_CA", "")
	t.Setenv("AGENTVAULT_CONTROL_URL", "")
	catalog := func(args ...string) error {
		m := NewMain()
		m.Stderr = &syncBuffer{}
		if err := m.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		hc, err := m.controlHTTPClient()
		if err != nil {
			t.Fatal(err)
		}
		_, err = control.NewClient(m.ControlURL, token, hc).Catalog(context.Background(), "avk_x", "")
		return err
	}
	if err := catalog("--control-url", srv.URL, "--control-ca", caFile); err != nil || sawToken.Load() != 1 {
		t.Fatalf("catalog over TLS with --control-ca: %v (token seen %d times)", err, sawToken.Load())
	}
	err := catalog("--control-url", srv.URL)
	var verr *tls.CertificateVerificationError
	if !errors.As(err, &verr) || sawToken.Load() != 1 {
		t.Fatalf("without --control-ca: %v (token seen %d times)", err, sawToken.Load())
	}
}
