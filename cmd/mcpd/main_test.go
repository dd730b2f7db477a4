package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/control"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMcpdSpeaksMCPOverStdio builds the binary, starts it as an MCP client
// would (a subprocess on stdin/stdout) against a loopback control API that
// checks the bearer token, and calls tools that need no browser.
func TestMcpdSpeaksMCPOverStdio(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "mcpd")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	const token = "ctl-token-for-test"
	var gotKey string
	ctlSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(control.ErrorBody{Code: "unauthorized", Message: "bad control token"})
			return
		}
		if r.URL.Path == control.CatalogPath {
			gotKey = r.URL.Query().Get("apiKey")
			w.Write([]byte(`{"identity":null,"addresses":[],"cards":[],"logins":[]}`))
			return
		}
		http.NotFound(w, r)
	}))
	defer ctlSrv.Close()
	tokFile := filepath.Join(dir, "control-token")
	os.WriteFile(tokFile, []byte(token+"\n"), 0o600)

	var stderr bytes.Buffer
	cmd := exec.Command(bin, "--control-url", ctlSrv.URL, "--control-token-file", tokFile, "--api-key-file", filepath.Join(dir, "none"))
	cmd.Env = append(os.Environ(), "AGENTVAULT_API_KEY=avk_stdio_test")
	cmd.Stderr = &stderr
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v (stderr %d bytes)", err, stderr.Len())
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) < 17 {
		t.Fatalf("tools/list: %v (%d tools)", err, len(tools.Tools))
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_token_catalog", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("get_token_catalog: %v %+v", err, res)
	}
	txt := res.Content[0].(*mcp.TextContent).Text
	if !strings.HasPrefix(txt, `{"status":"ok","identity":null`) || gotKey != "avk_stdio_test" {
		t.Fatalf("catalog answer %q (key sent: %v)", txt, gotKey == "avk_stdio_test")
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "click", Arguments: map[string]any{"selector": "#x"}})
	if err != nil || !res.IsError || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, "status=error code=no_page") {
		t.Fatalf("click before open_page: %v %+v", err, res)
	}
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if strings.Contains(stderr.String(), "avk_stdio_test") || strings.Contains(stderr.String(), token) {
		t.Fatal("a credential reached the log")
	}
}

// TestMcpdRefusesMissingControlToken: start-up fails clearly, before
// serving, when the control token file is missing.
func TestMcpdRefusesMissingControlToken(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AGENTVAULT_API_KEY", "avk_x")
	m := newMainForTest(filepath.Join(dir, "missing"))
	if err := m.Open(); err == nil || !strings.Contains(err.Error(), "control token") {
		t.Fatalf("Open: %v", err)
	}
}

// TestMcpdServesStreamableHTTP: --http serves the same tools over
// streamable HTTP on loopback (what `make run` starts), with /healthz, and
// stops when its context ends. Non-loopback addresses are refused.
func TestMcpdServesStreamableHTTP(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
		ok   bool
	}{
		{[]string{"--http"}, "127.0.0.1:7704", true},
		{[]string{"--http=127.0.0.1:7800"}, "127.0.0.1:7800", true},
		{[]string{"--http=[::1]:7800"}, "[::1]:7800", true},
		{[]string{}, "", true},
		{[]string{"--http=0.0.0.0:7704"}, "", false},
		{[]string{"--http=192.168.1.2:7704"}, "", false},
		{[]string{"--http=0.0.0.0:7704", "--keys"}, "", false},
		{[]string{"--http=0.0.0.0:7704", "--tls"}, "", false},
		{[]string{"--http=0.0.0.0:7704", "--keys", "--tls"}, "0.0.0.0:7704", true},
		{[]string{"--http=0.0.0.0:7704", "--keys", "--tls-domain=mcp.example.com"}, "0.0.0.0:7704", true},
	} {
		m := newMainForTest("unused")
		err := m.ParseFlags(c.args)
		if (err == nil) != c.ok || (c.ok && m.HTTPAddr != c.want) {
			t.Errorf("%v: addr %q err %v", c.args, m.HTTPAddr, err)
		}
	}

	dir := t.TempDir()
	const token = "ctl-token-http"
	ctlSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.NotFound(w, r)
			return
		}
		switch r.URL.Path {
		case control.CatalogPath:
			w.Write([]byte(`{"identity":null,"addresses":[],"cards":[],"logins":[]}`))
		case control.SessionsPath: // the hosted catalog call starts a session
			w.Write([]byte(`{"id":"s_1","proxyURL":"http://127.0.0.1:1","proxyUser":"s_1","proxyPassword":"pw"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer ctlSrv.Close()
	tokFile := filepath.Join(dir, "control-token")
	os.WriteFile(tokFile, []byte(token), 0o600)
	t.Setenv("AGENTVAULT_API_KEY", "avk_http_test")
	m := newMainForTest(tokFile)
	m.ControlURL = ctlSrv.URL
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.ServeHTTP(ctx, ln) }()
	base := "http://" + ln.Addr().String()

	resp, err := http.Get(base + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", err, resp)
	}
	resp.Body.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "http-test", Version: "0"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) < 17 {
		t.Fatalf("tools/list: %v", err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_token_catalog", Arguments: map[string]any{}})
	if err != nil || res.IsError || !strings.HasPrefix(res.Content[0].(*mcp.TextContent).Text, `{"status":"ok"`) {
		t.Fatalf("get_token_catalog over HTTP: %v %+v", err, res)
	}
	cs.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ServeHTTP: %v", err)
	}
	m.Close()
}
