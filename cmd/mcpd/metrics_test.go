package main

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/control"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func scrapeMcpd(t *testing.T, url string) map[string]float64 {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// TestMcpdMetrics: mcpd serves /metrics on loopback: tool calls by tool and
// status (every registered tool at zero from the start), a latency
// histogram per tool, browser up, and the standard collectors.
func TestMcpdMetrics(t *testing.T) {
	dir := t.TempDir()
	const token = "ctl-token-metrics"
	ctlSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.NotFound(w, r)
			return
		}
		switch r.URL.Path {
		case control.CatalogPath:
			w.Write([]byte(`{"identity":null,"addresses":[],"cards":[],"logins":[]}`))
		case control.SessionsPath: // over HTTP the catalog call starts a session (hosted rules)
			w.Write([]byte(`{"id":"s_1","proxyURL":"http://127.0.0.1:1","proxyUser":"s_1","proxyPassword":"pw"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer ctlSrv.Close()
	tokFile := filepath.Join(dir, "control-token")
	os.WriteFile(tokFile, []byte(token), 0o600)
	t.Setenv("AGENTVAULT_API_KEY", "avk_metrics_test")
	m := newMainForTest(tokFile)
	m.ControlURL = ctlSrv.URL
	if err := m.ParseFlags([]string{"--metrics-addr=0.0.0.0:9"}); err == nil {
		t.Error("--metrics-addr accepted a non-loopback address")
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	m.MetricsAddr = l.Addr().String()
	l.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.ServeHTTP(ctx, ln) }()
	base := "http://" + ln.Addr().String()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "metrics-test", Version: "0"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	metricsURL := "http://" + m.MetricsAddr + "/metrics"
	start := scrapeMcpd(t, metricsURL)
	for _, name := range []string{
		`agentvault_mcp_tool_calls_total{status="ok",tool="fill_checkout"}`,
		`agentvault_mcp_tool_calls_total{status="error",tool="fill_checkout"}`,
		`agentvault_mcp_tool_calls_total{status="failed",tool="open_page"}`,
		`agentvault_mcp_tool_duration_seconds_count{tool="get_token_catalog"}`,
		`agentvault_mcp_browser_up`,
	} {
		if v, ok := start[name]; !ok || v != 0 {
			t.Errorf("%s at start = %v (present %v), want 0", name, v, ok)
		}
	}
	for _, name := range []string{"go_goroutines", "process_open_fds"} {
		if _, ok := start[name]; !ok {
			t.Errorf("%s missing", name)
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_token_catalog", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("get_token_catalog: %v %+v", err, res)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_run_report", Arguments: map[string]any{"sessionId": "s_none"}})
	if err != nil || !res.IsError {
		t.Fatalf("get_run_report of no session: %v %+v", err, res)
	}
	after := scrapeMcpd(t, metricsURL)
	if v := after[`agentvault_mcp_tool_calls_total{status="ok",tool="get_token_catalog"}`]; v != 1 {
		t.Errorf("ok calls of get_token_catalog = %v", v)
	}
	if v := after[`agentvault_mcp_tool_calls_total{status="error",tool="get_run_report"}`]; v != 1 {
		t.Errorf("error calls of get_run_report = %v", v)
	}
	if v := after[`agentvault_mcp_tool_duration_seconds_count{tool="get_token_catalog"}`]; v != 1 {
		t.Errorf("latency observations = %v", v)
	}
	cs.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ServeHTTP: %v", err)
	}
	m.Close()
}
