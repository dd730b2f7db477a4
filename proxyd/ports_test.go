package proxyd_test

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/proxyd"
)

// TestFailedStartWritesNothing: every listener is bound before anything is
// written, so a start that fails on any port in use (the credential-use
// listener's included: it was bound after the vault was created, issue 26)
// leaves no data directory, and the error names the address and its key.
func TestFailedStartWritesNothing(t *testing.T) {
	for _, key := range []string{"listen.proxy", "listen.control", "listen.admin", "listen.dashboard", "listen.credentials"} {
		t.Run(key, func(t *testing.T) {
			busy, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer busy.Close()
			m := proxyd.NewMain()
			m.Stderr = io.Discard
			m.Config.DataDir = filepath.Join(t.TempDir(), "fresh")
			l := &m.Config.Listen
			l.Proxy, l.Control, l.Admin, l.Dashboard, l.Credentials = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
			addr := busy.Addr().String()
			switch key {
			case "listen.proxy":
				l.Proxy = addr
			case "listen.control":
				l.Control = addr
			case "listen.admin":
				l.Admin = addr
			case "listen.dashboard":
				l.Dashboard = addr
			case "listen.credentials":
				l.Credentials = addr
			}
			err = m.Open(context.Background())
			if err == nil {
				m.Close()
				t.Fatal("proxyd started on a port in use")
			}
			if msg := agentvault.ErrorMessage(err); !strings.Contains(msg, addr) || !strings.Contains(msg, key) {
				t.Errorf("error %q names neither %s nor %s", msg, addr, key)
			}
			if _, err := os.Stat(m.Config.DataDir); err == nil {
				t.Errorf("a failed start (%s busy) left the data directory behind", key)
			}
		})
	}
}

// TestUnaskedListenersAreOff: the embedded defaults turn on only the
// listeners `make run` needs; the credential-use listener and mcpd's
// metrics are off until a config or flag names them.
func TestUnaskedListenersAreOff(t *testing.T) {
	l := proxyd.DefaultConfig().Listen
	if l.Credentials != "" || l.MCPMetrics != "" {
		t.Errorf("listeners nobody asked for are on by default: credentials %q, mcp_metrics %q", l.Credentials, l.MCPMetrics)
	}
	if l.Proxy == "" || l.Control == "" || l.Admin == "" || l.Dashboard == "" || l.MCP == "" {
		t.Errorf("a listener `make run` needs is off: %+v", l)
	}
}
