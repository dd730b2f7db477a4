package proxyd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/internal/deploy"
	"github.com/agentvault/agentvault/proxyd"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = proxyd.RunCLI(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

// fakeDriver makes dir/.cache/playwright-driver look like `make driver`'s.
func fakeDriver(t *testing.T, dir string) string {
	t.Helper()
	d := filepath.Join(dir, deploy.DriverCache)
	if err := os.MkdirAll(filepath.Join(d, "package"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "package", "cli.js"), []byte("//"), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestMCPConfigIsPasteReady: `proxyd mcp-config` prints, for each client
// and transport, JSON that parses, in the client's shape, naming files
// that exist (mcpd, the data directory's API key file, the driver the
// checkout holds) and the endpoint listen.mcp names.
func TestMCPConfigIsPasteReady(t *testing.T) {
	t.Setenv(deploy.DriverEnv, "")
	t.Setenv("AGENTVAULT_DATA", "")
	t.Setenv("DATA", "")
	checkout := t.TempDir()
	t.Chdir(checkout)
	driver := fakeDriver(t, checkout)
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "api-key"), []byte("avk_x\n"), 0o600)
	os.WriteFile(filepath.Join(data, "proxyd.yaml"), []byte("listen:\n  mcp: 127.0.0.1:9704\n"), 0o600)
	mcpd := filepath.Join(t.TempDir(), "mcpd")
	os.WriteFile(mcpd, []byte("#!/bin/sh\n"), 0o755)

	for _, client := range []string{"claude-desktop", "claude-code", "cursor", "vscode"} {
		for _, transport := range []string{"--stdio", "--http"} {
			code, out, errOut := runCLI(t, "mcp-config", transport, "--client", client, "--mcpd", mcpd, "--data", data)
			if client == "claude-desktop" && transport == "--http" {
				if code == 0 || !strings.Contains(errOut, "--stdio") {
					t.Errorf("claude-desktop --http: exit %d, %q", code, errOut)
				}
				continue
			}
			if code != 0 {
				t.Fatalf("%s %s: exit %d: %s", client, transport, code, errOut)
			}
			var doc map[string]map[string]map[string]any
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("%s %s: not JSON: %v\n%s", client, transport, err, out)
			}
			top := "mcpServers"
			if client == "vscode" {
				top = "servers"
			}
			s, ok := doc[top]["agentvault"]
			if !ok {
				t.Fatalf("%s %s: no %s.agentvault in %s", client, transport, top, out)
			}
			if transport == "--http" {
				if s["url"] != "http://127.0.0.1:9704/mcp" {
					t.Errorf("%s --http: url %v, want listen.mcp's", client, s["url"])
				}
				continue
			}
			if s["command"] != mcpd {
				t.Errorf("%s: command %v", client, s["command"])
			}
			var args []string
			for _, a := range s["args"].([]any) {
				args = append(args, a.(string))
			}
			val := func(flag string) string {
				i := slices.Index(args, flag)
				if i < 0 || i+1 >= len(args) {
					t.Fatalf("%s: no %s in %v", client, flag, args)
				}
				return args[i+1]
			}
			if val("--data") != data || val("--api-key-file") != filepath.Join(data, "api-key") || val("--driver-dir") != driver {
				t.Errorf("%s: args %v", client, args)
			}
			for _, p := range []string{val("--api-key-file"), filepath.Join(val("--driver-dir"), "package", "cli.js")} {
				if _, err := os.Stat(p); err != nil {
					t.Errorf("%s names %s, which does not exist", client, p)
				}
			}
		}
	}
	// Nothing to point at: the message says what to do.
	if code, _, errOut := runCLI(t, "mcp-config", "--data", t.TempDir(), "--mcpd", mcpd); code == 0 || !strings.Contains(errOut, "start proxyd once") {
		t.Errorf("without an api-key file: exit %d, %q", code, errOut)
	}
	if code, _, errOut := runCLI(t, "mcp-config", "--client", "emacs", "--data", data); code != 2 || !strings.Contains(errOut, "claude-desktop") {
		t.Errorf("unknown client: exit %d, %q", code, errOut)
	}
}

// TestDoctorFindsTheCheckoutsDriver: from a second terminal in the clone,
// without PLAYWRIGHT_DRIVER_PATH, doctor finds the driver `make driver`
// put in .cache/playwright-driver (it reported a failure on a healthy
// install, issue 26).
func TestDoctorFindsTheCheckoutsDriver(t *testing.T) {
	t.Setenv(deploy.DriverEnv, "")
	checkout := t.TempDir()
	t.Chdir(checkout)
	driver := fakeDriver(t, checkout)
	_, out, _ := runCLI(t, "doctor", "--data", filepath.Join(t.TempDir(), "none"), "--proxy", "127.0.0.1:0", "--control", "127.0.0.1:0",
		"--admin", "127.0.0.1:0", "--dashboard", "")
	if !strings.Contains(out, "ok    playwright driver "+driver) {
		t.Errorf("doctor did not find %s:\n%s", driver, out)
	}
}

// TestListenKeysAreOneSet: the listen keys mcpd reads (package deploy) are
// the ones proxyd's config takes, so one file moves every port.
func TestListenKeysAreOneSet(t *testing.T) {
	keys := func(v any) []string {
		var out []string
		ty := reflect.TypeOf(v)
		for i := 0; i < ty.NumField(); i++ {
			out = append(out, ty.Field(i).Tag.Get("yaml"))
		}
		slices.Sort(out)
		return out
	}
	if a, b := keys(proxyd.ListenConfig{}), keys(deploy.Listen{}); !slices.Equal(a, b) {
		t.Errorf("proxyd's listen keys %v, deploy's %v", a, b)
	}
}
