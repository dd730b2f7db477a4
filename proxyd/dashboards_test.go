package proxyd_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/mcpserver"
	"github.com/agentvault/agentvault/proxyd"
	"gopkg.in/yaml.v3"
)

// exportedMetrics are the metric family names proxyd and mcpd export, read
// from their live registries.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	m, _ := startMain(t, "", func(c *proxyd.Config) { c.Listen.Dashboard = "127.0.0.1:0" })
	names := map[string]bool{"up": true} // Prometheus' own, per scrape target
	fams, err := m.Metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mcpserver.New(mcpserver.Config{Control: control.NewClient("http://127.0.0.1:1", "unused", nil), APIKey: "avk_unused"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	mf, err := srv.MetricsRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(fams, mf...) {
		names[f.GetName()] = true
	}
	return names
}

var (
	metricRef  = regexp.MustCompile(`\b(agentvault_[a-z0-9_]+|go_[a-z0-9_]+|process_[a-z0-9_]+|up)\b`)
	histSuffix = regexp.MustCompile(`_(bucket|count|sum)$`)
)

func checkExpr(t *testing.T, where, expr string, names map[string]bool) {
	t.Helper()
	// Label names and values are not metrics: drop {...} and by (...).
	bare := regexp.MustCompile(`\{[^}]*\}|\b(by|without|on|ignoring)\s*\([^)]*\)|"[^"]*"`).ReplaceAllString(expr, " ")
	refs := metricRef.FindAllString(bare, -1)
	if len(refs) == 0 {
		t.Errorf("%s: %q names no metric", where, expr)
	}
	for _, r := range refs {
		if !names[r] && !names[histSuffix.ReplaceAllString(r, "")] {
			t.Errorf("%s: %q names %s, which neither daemon exports", where, expr, r)
		}
	}
}

func repoFile(t *testing.T, rel string) []byte {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(file)), rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOperator_GrafanaDashboardAndAlertRulesNameRealMetrics: the shipped
// Grafana dashboard is valid JSON with panels and queries, and every
// expression in it and in the Prometheus rules names a metric proxyd or
// mcpd exports (`promtool check rules` in make test checks the syntax).
func TestOperator_GrafanaDashboardAndAlertRulesNameRealMetrics(t *testing.T) {
	names := exportedMetrics(t)
	var dash struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(repoFile(t, "configs/grafana-dashboard.json"), &dash); err != nil {
		t.Fatalf("configs/grafana-dashboard.json: %v", err)
	}
	if dash.Title == "" || dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatal("the dashboard has no title, uid or panels")
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			checkExpr(t, "dashboard panel "+p.Title, tg.Expr, names)
		}
	}
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(repoFile(t, "configs/prometheus-rules.yml"), &rules); err != nil {
		t.Fatalf("configs/prometheus-rules.yml: %v", err)
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			checkExpr(t, "alert "+r.Alert, strings.TrimSpace(r.Expr), names)
		}
	}
	if n == 0 {
		t.Error("no alerting rules")
	}
	// The checker can fail: a made-up metric is not among the names.
	if refs := metricRef.FindAllString("rate(agentvault_no_such_metric_total[5m])", -1); len(refs) != 1 || names[refs[0]] {
		t.Error("the expression checker would not catch an unknown metric")
	}
}
