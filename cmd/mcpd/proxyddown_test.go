package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/browser/browsertest"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// connect runs m over an in-memory MCP transport and returns the client.
func connect(t *testing.T, m *mcpserver.Main) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ct, st := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- m.RunTransport(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "down-test", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		<-done
		m.Close()
	})
	return cs
}

func callText(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res.Content[0].(*mcp.TextContent).Text, res.IsError
}

// TestMcpdSaysProxydIsDown: with nothing answering at the control URL,
// every tool that needs proxyd answers the same message naming the
// address and the fix, at once: no navigation error, no wait for fields
// (issue 26 saw "control API unreachable", then "could not reach this
// site", then a field_not_found after a 5 s wait).
func TestMcpdSaysProxydIsDown(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "control-token")
	os.WriteFile(tok, []byte("avc_x\n"), 0o600)
	t.Setenv("AGENTVAULT_API_KEY", "avk_down_test")
	m := newMainForTest(tok)
	m.ControlURL = "http://" + closedAddr(t)
	if err := m.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, m)
	want := "proxyd is not answering at " + m.ControlURL + ": start it, or check --control-url"
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"get_token_catalog", map[string]any{}},
		{"open_page", map[string]any{"url": "https://shop.example/checkout"}},
		{"fill_checkout", map[string]any{"fields": []map[string]any{{"selector": "#card", "value": "av_card_1_number_abcde"}}}},
		{"get_token_catalog", map[string]any{}},
	} {
		text, isErr := callText(t, cs, c.tool, c.args)
		if !isErr || !strings.Contains(text, want) {
			t.Errorf("%s: %q, want an error saying %q", c.tool, text, want)
		}
	}
}

// TestMcpdSaysProxydIsDownMidSession: proxyd answered (a session and its
// proxy were handed out), then stopped. The next open_page, whose
// navigation the browser cannot send through the dead proxy, and the fill
// after it say that proxyd is not answering, not that the site could not
// be reached or a field was not found.
func TestMcpdSaysProxydIsDownMidSession(t *testing.T) {
	browsertest.SkipIfNoBrowser(t)
	proxyAddr := closedAddr(t)
	ctl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case control.CatalogPath:
			w.Write([]byte(`{"identity":null,"addresses":[],"cards":[],"logins":[]}`))
		case control.SessionsPath:
			w.Write([]byte(`{"id":"s_1","proxyURL":"http://` + proxyAddr + `","proxyUser":"s_1","proxyPassword":"pw"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	dir := t.TempDir()
	tok := filepath.Join(dir, "control-token")
	os.WriteFile(tok, []byte("avc_x\n"), 0o600)
	t.Setenv("AGENTVAULT_API_KEY", "avk_down_test")
	m := newMainForTest(tok)
	m.Stderr = io.Discard
	m.ControlURL = ctl.URL
	m.DriverDir = browsertest.DriverDir()
	if err := m.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, m)
	if text, isErr := callText(t, cs, "get_token_catalog", map[string]any{}); isErr {
		t.Fatalf("catalog while proxyd answers: %s", text)
	}
	ctl.Close() // proxyd stops
	want := "proxyd is not answering at " + ctl.URL + ": start it, or check --control-url"
	text, isErr := callText(t, cs, "open_page", map[string]any{"url": "https://shop.example/checkout"})
	if !isErr || !strings.Contains(text, want) {
		t.Errorf("open_page: %q, want %q", text, want)
	}
	text, isErr = callText(t, cs, "fill_checkout", map[string]any{"fields": []map[string]any{{"selector": "#card", "value": "4242"}}})
	if !isErr || !strings.Contains(text, want) {
		t.Errorf("fill_checkout: %q, want %q", text, want)
	}
}
