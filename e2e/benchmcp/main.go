// Command benchmcp runs mcpd and @playwright/mcp side by side on the same
// HTTPS checkout (the e2e test merchant: about 30 fields and a cross-origin
// card iframe), both over MCP stdio, in one run, and prints each step's
// median per server and their ratio (mcpd/playwright-mcp).
//
// mcpd goes through proxyd as in production: proxyd's Main runs in this
// process with the merchant's CA among its upstream roots, and mcpd (built
// from ./cmd/mcpd) reaches it over the control API. playwright-mcp loads the
// same merchant directly; its Chromium (Debian's, never a download) is told
// to ignore certificate errors (--ignore-https-errors) with an in-memory
// profile (--isolated), and to settle for 0 ms after an action
// (--timeout-settle 0).
//
// The servers take turns on every iteration of every step (which one goes
// first alternates), so a busy neighbour on the machine slows both alike.
// Startup is timed from process start to the end of the first navigate,
// -starts times per server in each run. BENCH_STDERR=1 passes the servers'
// stderr through; BENCH_DUMP=dir writes each server's last steady snapshot
// answer there.
// It is a benchmark, not a test: `make bench-mcp` installs @playwright/mcp
// into .cache/bench-mcp and runs it; neither `make test` nor `make run`
// needs it. It must never print what a field holds: the values typed are
// fixed literals, and only timings and sizes are printed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/agentvault/agentvault/e2e/merchant"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	payFrame = `iframe[title='Secure payment input frame']`
	cardSel  = `#card-number`
	plainSel = `#first-name`
	clickSel = `#apply-promo`
)

// steps in the order they are printed.
var steps = []string{
	"startup + first navigate",
	"navigate (reload)",
	"snapshot, first after a load",
	"snapshot, steady",
	"click a button",
	"type a plain field",
	"type in the card iframe",
}

func main() {
	runs := flag.Int("runs", 3, "whole runs, each with fresh mcpd and playwright-mcp processes")
	iters := flag.Int("n", 10, "iterations of each step per run")
	starts := flag.Int("starts", 3, "startups of each server per run (a fresh process each)")
	pwCLI := flag.String("playwright-mcp", os.Getenv("PLAYWRIGHT_MCP"), "path to @playwright/mcp's cli.js")
	only := flag.String("only", "", "run one side alone for profiling: mcpd or playwright-mcp")
	flag.Parse()
	log.SetFlags(0)
	if *pwCLI == "" && *only != "mcpd" {
		log.Fatal("benchmcp: set --playwright-mcp (or PLAYWRIGHT_MCP) to @playwright/mcp's cli.js; make bench-mcp does")
	}
	if err := run(*runs, *iters, *starts, *pwCLI, *only); err != nil {
		log.Fatal("benchmcp: ", err)
	}
}

type env struct {
	root, tmp string
	mcpdBin   string
	mcpdArgs  []string
	mcpdEnv   []string
	pwCLI     string
	pwArgs    []string
	checkout  string
	product   string
}

func run(runs, iters, starts int, pwCLI, only string) error {
	e, stop, err := setup(pwCLI)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Printf("load average before: %s\n", loadavg())
	all := map[string]map[string][]float64{"mcpd": {}, "playwright-mcp": {}} // side -> step -> per-run medians
	sizes := map[string]int{}
	for r := range runs {
		res, sz, err := oneRun(e, r, iters, starts, only)
		if err != nil {
			return fmt.Errorf("run %d: %w", r+1, err)
		}
		for k, v := range sz {
			sizes[k] = v
		}
		fmt.Printf("\nrun %d (load average %s), median ms over %d iterations (%d startups):\n", r+1, loadavg(), iters, starts)
		printTable(func(side, step string) (float64, bool) {
			d := res[side][step]
			if len(d) == 0 {
				return 0, false
			}
			m := median(d)
			all[side][step] = append(all[side][step], m)
			return m, true
		})
	}
	fmt.Printf("\nall %d runs, median of the per-run medians (ms):\n", runs)
	printTable(func(side, step string) (float64, bool) {
		d := all[side][step]
		if len(d) == 0 {
			return 0, false
		}
		return median(d), true
	})
	fmt.Printf("\nsteady snapshot size (characters of the answer): mcpd %d, playwright-mcp %d\n", sizes["mcpd"], sizes["playwright-mcp"])
	fmt.Printf("load average after: %s\n", loadavg())
	return nil
}

func printTable(get func(side, step string) (float64, bool)) {
	fmt.Printf("| %-30s | %14s | %8s | %7s |\n", "step", "playwright-mcp", "mcpd", "mcpd/pw")
	fmt.Printf("|%s|%s|%s|%s|\n", strings.Repeat("-", 32), strings.Repeat("-", 16), strings.Repeat("-", 10), strings.Repeat("-", 9))
	for _, st := range steps {
		pw, okp := get("playwright-mcp", st)
		md, okm := get("mcpd", st)
		cell := func(v float64, ok bool) string {
			if !ok {
				return "-"
			}
			return fmt.Sprintf("%.1f", v)
		}
		ratio := "-"
		if okp && okm && pw > 0 {
			ratio = fmt.Sprintf("%.2f", md/pw)
		}
		fmt.Printf("| %-30s | %14s | %8s | %7s |\n", st, cell(pw, okp), cell(md, okm), ratio)
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// setup starts the merchant and proxyd, builds mcpd, and returns how to
// start both servers.
func setup(pwCLI string) (*env, func(), error) {
	root := repoRoot()
	tmp, err := os.MkdirTemp("", "agentvault-benchmcp-")
	if err != nil {
		return nil, nil, err
	}
	var closers []func()
	stop := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		_ = os.RemoveAll(tmp)
	}
	fail := func(err error) (*env, func(), error) { stop(); return nil, nil, err }

	m, err := merchant.Start(merchant.Options{})
	if err != nil {
		return fail(err)
	}
	closers = append(closers, m.Close)
	dataDir := filepath.Join(tmp, "proxyd")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fail(err)
	}
	caPath, err := m.WriteCA(dataDir)
	if err != nil {
		return fail(err)
	}
	pm := proxyd.NewMain()
	pm.Stderr = io.Discard
	pm.Config.DataDir = dataDir
	pm.Config.Listen = proxyd.ListenConfig{Proxy: "127.0.0.1:0", Control: "127.0.0.1:0", Admin: "127.0.0.1:0"}
	pm.Config.UnsafeAllowPrivateRanges = true
	pm.Config.UnsafeTestHosts = m.HostMap()
	pm.Config.TLS.ExtraRoots = []string{caPath}
	pm.Config.Log = proxyd.LogConfig{Level: "error", Format: "json"}
	ctx, cancel := context.WithCancel(context.Background())
	if err := pm.Open(ctx); err != nil {
		cancel()
		return fail(fmt.Errorf("proxyd Open: %w", err))
	}
	done := make(chan error, 1)
	go func() { done <- pm.Run(ctx) }()
	closers = append(closers, func() { cancel(); <-done })

	bin := filepath.Join(tmp, "mcpd")
	build := exec.Command("go", "build", "-o", bin, "./cmd/mcpd")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("go build ./cmd/mcpd: %v\n%s", err, out))
	}
	driver := os.Getenv("PLAYWRIGHT_DRIVER_PATH")
	if driver == "" {
		driver = filepath.Join(root, ".cache", "playwright-driver")
	}
	chromium := os.Getenv("CHROMIUM_PATH")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	node := os.Getenv("PLAYWRIGHT_NODEJS_PATH")
	if node == "" {
		node = "/usr/bin/node"
	}
	e := &env{
		root: root, tmp: tmp, mcpdBin: bin, pwCLI: pwCLI,
		mcpdArgs: []string{
			"--control-url", "http://" + pm.ControlAddr.String(),
			"--control-token-file", filepath.Join(dataDir, proxyd.ControlTokenFile),
			"--api-key-file", filepath.Join(dataDir, proxyd.APIKeyFile),
			"--driver-dir", driver, "--chromium", chromium, "--log-level", "error",
		},
		mcpdEnv:  []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dataDir, "PLAYWRIGHT_NODEJS_PATH=" + node},
		checkout: m.Shop.URL + "/checkout",
		product:  m.Shop.URL + "/products/trail-shoes",
	}
	// playwright-mcp gets the same Chromium flags as mcpd's browser where
	// they matter for speed (no GPU, no background networking).
	cfg := filepath.Join(tmp, "pw-config.json")
	if err := os.WriteFile(cfg, []byte(`{"browser":{"launchOptions":{"args":["--disable-gpu","--disable-quic","--no-first-run","--disable-background-networking","--disable-component-update","--disable-sync","--disable-default-apps","--disable-features=AutofillServerCommunication,OptimizationHints,MediaRouter,Translate"]}}}`), 0o600); err != nil {
		return fail(err)
	}
	e.pwArgs = []string{pwCLI, "--config", cfg, "--headless", "--browser", "chromium", "--executable-path", chromium,
		"--no-sandbox", "--isolated", "--ignore-https-errors", "--timeout-settle", "0", "--viewport-size", "1280x900",
		"--output-dir", filepath.Join(tmp, "pw-out")}
	return e, stop, nil
}

// server is one MCP server under test.
type server struct {
	name  string
	cs    *mcp.ClientSession
	times map[string][]float64
	// snapSize is the length of the latest steady snapshot answer.
	snapSize int
	// refs found in playwright-mcp's snapshot (it types by ref).
	plainRef, cardRef string
}

func (s *server) call(tool string, args map[string]any) (string, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	d := time.Since(start)
	if err != nil {
		return "", d, fmt.Errorf("%s %s: %w", s.name, tool, err)
	}
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	text := strings.Join(parts, "\n")
	if res.IsError {
		first, _, _ := strings.Cut(text, "\n")
		if len(first) > 200 {
			first = first[:200]
		}
		return text, d, fmt.Errorf("%s %s refused: %s", s.name, tool, first)
	}
	return text, d, nil
}

func (s *server) record(step string, d time.Duration) {
	s.times[step] = append(s.times[step], float64(d.Microseconds())/1000)
}

func start(e *env, name string) (*server, time.Time, error) {
	var cmd *exec.Cmd
	if name == "mcpd" {
		cmd = exec.Command(e.mcpdBin, e.mcpdArgs...)
		cmd.Env = e.mcpdEnv
	} else {
		cmd = exec.Command("node", e.pwArgs...)
		cmd.Dir = e.tmp
		cmd.Env = append(os.Environ(), "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1")
	}
	cmd.Stderr = io.Discard
	if os.Getenv("BENCH_STDERR") != "" {
		cmd.Stderr = os.Stderr
	}
	t0 := time.Now()
	client := mcp.NewClient(&mcp.Implementation{Name: "agentvault-benchmcp", Version: "1.0.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		return nil, t0, fmt.Errorf("start %s: %w", name, err)
	}
	return &server{name: name, cs: cs, times: map[string][]float64{}}, t0, nil
}

var (
	pwPlainRef = regexp.MustCompile(`textbox "First name" \[ref=([a-z0-9]+)\]`)
	pwCardRef  = regexp.MustCompile(`textbox "Card number[^"]*" \[ref=([a-z0-9]+)\]`)
)

// Each step, as each server is driven.
func navigate(s *server, url string) (time.Duration, error) {
	if s.name == "mcpd" {
		_, d, err := s.call("open_page", map[string]any{"url": url})
		return d, err
	}
	_, d, err := s.call("browser_navigate", map[string]any{"url": url})
	return d, err
}

func snapshot(s *server) (string, time.Duration, error) {
	if s.name == "mcpd" {
		return s.call("snapshot_page", map[string]any{})
	}
	text, d, err := s.call("browser_snapshot", map[string]any{})
	if err == nil {
		if m := pwPlainRef.FindStringSubmatch(text); m != nil {
			s.plainRef = m[1]
		}
		if m := pwCardRef.FindStringSubmatch(text); m != nil {
			s.cardRef = m[1]
		}
	}
	return text, d, err
}

func click(s *server, sel string) (time.Duration, error) {
	if s.name == "mcpd" {
		_, d, err := s.call("click", map[string]any{"selector": sel})
		return d, err
	}
	_, d, err := s.call("browser_click", map[string]any{"target": sel, "element": sel})
	return d, err
}

func typePlain(s *server, v string) (time.Duration, error) {
	if s.name == "mcpd" {
		_, d, err := s.call("fill_checkout", map[string]any{"fields": []map[string]any{{"selector": plainSel, "value": v}}})
		return d, err
	}
	_, d, err := s.call("browser_type", map[string]any{"target": s.plainRef, "element": "First name", "text": v})
	return d, err
}

func typeCard(s *server, v string) (time.Duration, error) {
	if s.name == "mcpd" {
		_, d, err := s.call("fill_checkout", map[string]any{"fields": []map[string]any{{"selector": cardSel, "frame": payFrame, "value": v}}})
		return d, err
	}
	_, d, err := s.call("browser_type", map[string]any{"target": s.cardRef, "element": "Card number", "text": v})
	return d, err
}

// oneRun starts both servers and takes every step iters times.
func oneRun(e *env, r, iters, starts int, only string) (map[string]map[string][]float64, map[string]int, error) {
	names := []string{"mcpd", "playwright-mcp"}
	if only != "" {
		names = []string{only}
	}
	if r%2 == 1 {
		slices.Reverse(names)
	}
	var servers []*server
	defer func() {
		for _, s := range servers {
			_ = s.cs.Close()
		}
	}()
	// Startup: process start, MCP initialize, browser launch, first page;
	// starts times per server, taking turns, and the last ones stay for the
	// other steps.
	startTimes := map[string][]float64{}
	for k := range starts {
		order := slices.Clone(names)
		if k%2 == 1 {
			slices.Reverse(order)
		}
		last := k == starts-1
		for _, n := range order {
			s, t0, err := start(e, n)
			if err != nil {
				return nil, nil, err
			}
			_, err = navigate(s, e.product)
			d := time.Since(t0)
			if last {
				servers = append(servers, s)
			} else {
				_ = s.cs.Close()
			}
			if err != nil {
				return nil, nil, err
			}
			startTimes[n] = append(startTimes[n], float64(d.Microseconds())/1000)
		}
	}
	slices.SortFunc(servers, func(a, b *server) int { return slices.Index(names, a.name) - slices.Index(names, b.name) })
	for _, s := range servers {
		s.times[steps[0]] = startTimes[s.name]
	}
	// A cart, so the checkout renders.
	for _, s := range servers {
		if _, err := click(s, "#add-to-cart"); err != nil {
			return nil, nil, err
		}
		if s.name == "mcpd" {
			if _, _, err := s.call("wait_for_selector", map[string]any{"selector": "#checkout"}); err != nil {
				return nil, nil, err
			}
		}
		if _, err := navigate(s, e.checkout); err != nil {
			return nil, nil, err
		}
		if _, _, err := snapshot(s); err != nil {
			return nil, nil, err
		}
	}
	turn := func(i int) []*server {
		o := slices.Clone(servers)
		if i%2 == 1 {
			slices.Reverse(o)
		}
		return o
	}
	each := func(step string, f func(s *server, i int) (time.Duration, error)) error {
		for i := range iters {
			for _, s := range turn(i) {
				d, err := f(s, i)
				if err != nil {
					return err
				}
				s.record(step, d)
			}
		}
		return nil
	}
	// A load, then the first snapshot on it.
	if err := each(steps[1], func(s *server, i int) (time.Duration, error) {
		d, err := navigate(s, e.checkout)
		if err != nil {
			return d, err
		}
		_, d2, err := snapshot(s)
		s.record(steps[2], d2)
		return d, err
	}); err != nil {
		return nil, nil, err
	}
	if err := each(steps[3], func(s *server, i int) (time.Duration, error) {
		text, d, err := snapshot(s)
		s.snapSize = len(text)
		if dir := os.Getenv("BENCH_DUMP"); dir != "" {
			_ = os.WriteFile(filepath.Join(dir, s.name+".txt"), []byte(text), 0o600)
		}
		return d, err
	}); err != nil {
		return nil, nil, err
	}
	if err := each(steps[4], func(s *server, i int) (time.Duration, error) { return click(s, clickSel) }); err != nil {
		return nil, nil, err
	}
	for _, s := range servers {
		if s.name != "mcpd" && (s.plainRef == "" || s.cardRef == "") {
			return nil, nil, errors.New("playwright-mcp's snapshot has no ref for the first-name or card-number field")
		}
	}
	if err := each(steps[5], func(s *server, i int) (time.Duration, error) {
		return typePlain(s, fmt.Sprintf("Ada%d", i))
	}); err != nil {
		return nil, nil, err
	}
	if err := each(steps[6], func(s *server, i int) (time.Duration, error) {
		return typeCard(s, "4000 0000 0000 "+fmt.Sprintf("%04d", i))
	}); err != nil {
		return nil, nil, err
	}
	res := map[string]map[string][]float64{}
	sizes := map[string]int{}
	for _, s := range servers {
		res[s.name] = s.times
		sizes[s.name] = s.snapSize
	}
	return res, sizes, nil
}
