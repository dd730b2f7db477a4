package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/mcpserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMcpdFollowsProxydDataDirRule: with nothing but what proxyd itself
// reads (--data, $AGENTVAULT_DATA, $DATA, a config's data_dir, the default
// ~/.agentvault), mcpd finds the control token, the API key and the control
// API's address (listen.control in the data directory's proxyd.yaml, or
// in --config) and answers a tool call through that control API. Issue 26:
// mcpd ignored DATA and failed with "cannot read the control token file".
func TestMcpdFollowsProxydDataDirRule(t *testing.T) {
	for _, env := range []string{"AGENTVAULT_DATA", "DATA", "AGENTVAULT_CONTROL_URL", "AGENTVAULT_CONTROL_TOKEN_FILE",
		"AGENTVAULT_API_KEY_FILE", "AGENTVAULT_API_KEY", "AGENTVAULT_CONTROL_CA"} {
		t.Setenv(env, "")
	}
	for _, c := range []string{"--data", "AGENTVAULT_DATA", "DATA", "--config data_dir", "default"} {
		t.Run(strings.ReplaceAll(c, " ", "_"), func(t *testing.T) {
			token, key := "avc_tok_"+strings.ReplaceAll(c, " ", "_"), "avk_key_"+strings.ReplaceAll(c, " ", "_")
			var mu sync.Mutex
			var gotKey string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer "+token || r.URL.Path != control.CatalogPath {
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				mu.Lock()
				gotKey = r.URL.Query().Get("apiKey")
				mu.Unlock()
				w.Write([]byte(`{"identity":null,"addresses":[],"cards":[],"logins":[]}`))
			}))
			defer srv.Close()
			listen := fmt.Sprintf("listen:\n  control: %s\n", strings.TrimPrefix(srv.URL, "http://"))

			home := t.TempDir()
			t.Setenv("HOME", home)
			data := filepath.Join(t.TempDir(), "data")
			var args []string
			switch c {
			case "--data":
				args = []string{"--data", data}
			case "AGENTVAULT_DATA":
				t.Setenv("AGENTVAULT_DATA", data)
				t.Setenv("DATA", filepath.Join(home, "not-this-one"))
			case "DATA":
				t.Setenv("DATA", data)
			case "--config data_dir":
				cfg := filepath.Join(t.TempDir(), "proxyd.yaml")
				if err := os.WriteFile(cfg, []byte("data_dir: "+data+"\n"+listen), 0o600); err != nil {
					t.Fatal(err)
				}
				args = []string{"--config", cfg}
			case "default":
				data = filepath.Join(home, ".agentvault")
			}
			if err := os.MkdirAll(data, 0o700); err != nil {
				t.Fatal(err)
			}
			for name, body := range map[string]string{"control-token": token, "api-key": key} {
				if err := os.WriteFile(filepath.Join(data, name), []byte(body+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if c != "--config data_dir" {
				if err := os.WriteFile(filepath.Join(data, "proxyd.yaml"), []byte(listen), 0o600); err != nil {
					t.Fatal(err)
				}
			}

			m := mcpserver.NewMain()
			m.Stderr = io.Discard
			if err := m.ParseFlags(args); err != nil {
				t.Fatalf("ParseFlags(%v): %v", args, err)
			}
			if d, err := m.Deployment(); err != nil || d.Data.Dir != data {
				t.Fatalf("data directory %+v (%v), want %s", d.Data, err, data)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ct, st := mcp.NewInMemoryTransports()
			done := make(chan error, 1)
			go func() { done <- m.RunTransport(ctx, st) }()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "deploy-test", Version: "0"}, nil).Connect(ctx, ct, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_token_catalog", Arguments: map[string]any{}})
			if err != nil || res.IsError {
				t.Fatalf("get_token_catalog: %v %+v", err, res)
			}
			mu.Lock()
			defer mu.Unlock()
			if gotKey != key {
				t.Errorf("the control API got key %q, want the data directory's %q", gotKey, key)
			}
			cs.Close()
			cancel()
			<-done
			m.Close()
		})
	}
}

// TestMcpdHelpAndStrayArguments: -h prints the flags on stdout (exit 0 in
// main), a stray argument or an unknown flag is refused.
func TestMcpdHelpAndStrayArguments(t *testing.T) {
	m := newMainForTest("unused")
	if err := m.ParseFlags([]string{"--no-such-flag"}); err == nil {
		t.Error("an unknown flag was accepted")
	}
	m = newMainForTest("unused")
	if err := m.ParseFlags([]string{"serve"}); err == nil {
		t.Error("a stray argument was accepted")
	}
}
