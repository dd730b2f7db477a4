package mcpserver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultMetricsAddr is the address the docs suggest for mcpd's /metrics.
// The listener is off unless asked for: --metrics-addr, or the config's
// listen.mcp_metrics with --http (over stdio, one mcpd per MCP client,
// only --metrics-addr turns it on).
const DefaultMetricsAddr = "127.0.0.1:7706"

// Tool call statuses (a closed set).
const (
	toolOK     = "ok"     // a result the agent can use
	toolError  = "error"  // an isError result (a refusal, a page that did not cooperate)
	toolFailed = "failed" // the call itself failed (bad arguments, protocol)
)

// Metrics are mcpd's Prometheus series on their own registry. Labels are
// closed sets: the registered tool names and the three statuses, all
// initialised at zero.
type Metrics struct {
	Registry  *prometheus.Registry
	calls     *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	browserUp atomic.Bool
	tools     map[string]bool
}

// instrument registers the metrics and wraps every tools/call in a
// receiving middleware that counts it by tool and status.
func (s *Server) instrument() *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry(), tools: map[string]bool{}}
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentvault_mcp_tool_calls_total",
		Help: "MCP tool calls, by tool and status (ok, error: an isError result, failed: the call itself failed)."}, []string{"tool", "status"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentvault_mcp_tool_duration_seconds",
		Help:    "MCP tool call latency, by tool (a fill waiting on the owner counts its wait).",
		Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900}}, []string{"tool"})
	up := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "agentvault_mcp_browser_up",
		Help: "1 while the proxied Chromium is running, 0 before the first page and after it stopped."}, func() float64 {
		if s.launchMu.TryLock() {
			m.browserUp.Store(s.browser != nil && !s.closed)
			s.launchMu.Unlock()
		}
		if m.browserUp.Load() {
			return 1
		}
		return 0
	})
	version := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
	}
	info := prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentvault_build_info", Help: "Always 1; its labels say which build runs.",
		ConstLabels: prometheus.Labels{"daemon": "mcpd", "version": version, "goversion": runtime.Version()}})
	info.Set(1)
	m.Registry.MustRegister(m.calls, m.latency, up, info,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewBuildInfoCollector())
	for _, name := range s.toolNames() {
		m.tools[name] = true
		for _, st := range []string{toolOK, toolError, toolFailed} {
			m.calls.WithLabelValues(name, st)
		}
		m.latency.WithLabelValues(name)
	}
	s.mcp.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			name := "other"
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && m.tools[p.Name] {
				name = p.Name
			}
			start := time.Now()
			res, err := next(ctx, method, req)
			status := toolOK
			if r, ok := res.(*mcp.CallToolResult); err != nil || !ok {
				status = toolFailed
			} else if r.IsError {
				status = toolError
			}
			m.calls.WithLabelValues(name, status).Inc()
			m.latency.WithLabelValues(name).Observe(time.Since(start).Seconds())
			return res, err
		}
	})
	return m
}

// toolNames lists the registered tools by asking the server, as a client
// would, over an in-memory connection.
func (s *Server) toolNames() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.mcp.Connect(ctx, st, nil)
	if err != nil {
		return nil
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "metrics", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		return nil
	}
	defer cs.Close()
	var names []string
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return names
		}
		names = append(names, t.Name)
	}
	return names
}

// MetricsRegistry is the server's metrics registry, instrumenting the
// server first if Main has not (tests, and the dashboard check of
// configs/grafana-dashboard.json).
func (s *Server) MetricsRegistry() *prometheus.Registry {
	if s.metrics == nil {
		s.metrics = s.instrument()
	}
	return s.metrics.Registry
}

// serveMetrics serves /metrics on addr (loopback only) until ctx ends. A
// port already taken is logged, not fatal: MCP matters more than metrics.
func (m *Main) serveMetrics(ctx context.Context, addr string) {
	if addr == "" || addr == "off" || m.server == nil || m.server.metrics == nil {
		return
	}
	if err := checkMetricsAddr(addr); err != nil {
		m.server.log.Warn("metrics not served", "reason", agentvault.ErrorMessage(err))
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		m.server.log.Warn("metrics not served", "addr", addr, "reason", err.Error())
		return
	}
	m.MetricsAddr = ln.Addr().String()
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.server.metrics.Registry, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.server.log.Warn("metrics listener failed", "reason", err.Error())
		}
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	m.server.log.Info("mcpd serving metrics", "url", "http://"+m.MetricsAddr+"/metrics")
}

func checkMetricsAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "--metrics-addr wants host:port, e.g. %s", DefaultMetricsAddr)
	}
	if ip, err := netip.ParseAddr(host); host != "localhost" && (err != nil || !ip.IsLoopback()) {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "--metrics-addr listens on loopback only")
	}
	return nil
}
