// Command benchmcp runs mcpd and @playwright/mcp side by side on the page
// corpus of e2e/corpus (a long product listing, a checkout with five
// cross-origin iframes, a page built in shadow DOM, selects with hundreds of
// options, a single-page app that renders after its load, a checkout whose
// payment frame mounts late), both over MCP stdio, in one run, and prints,
// per page and step, each server's median, their ratio (mcpd/playwright-mcp)
// and the snapshot's size in characters for both.
//
// mcpd goes through proxyd as in production: proxyd's Main runs in this
// process with the corpus CA among its upstream roots, a card allowed on
// any site and the corpus's sites authorized by the owner, and mcpd (built from ./cmd/mcpd) reaches it over the
// control API; its token fill asks proxyd to authorize the card number.
// playwright-mcp loads the same pages directly; its Chromium (Debian's, never
// a download) is told to ignore certificate errors (--ignore-https-errors)
// with an in-memory profile (--isolated), and to settle for 0 ms after an
// action (--timeout-settle 0). Each acts the way an agent drives it: mcpd by
// CSS selectors, playwright-mcp by the refs of its latest snapshot.
//
// The servers take turns on every call (which one goes first alternates), so
// a busy neighbour on the machine slows both alike, and each timed call
// waits, untimed, until neither server's processes use CPU (quiet): what one
// left running in the background does not fall on the other's call. On
// every page, each
// iteration runs: open the page (then wait until it has rendered, untimed),
// snapshot twice (the first after the navigation, then a steady one), click
// a button that does not navigate, type in a field, type in a field of a
// cross-origin iframe (where the page has one), click a link that navigates
// and snapshot, submit a form that posts and snapshot, and open the page
// and snapshot it back to back, timed as one. The token fill (mcpd:
// a card number token through proxyd's authorize; playwright-mcp: the same
// digits typed) runs last on the pages that take a card, because mcpd
// refuses snapshots for the rest of a session once a token was filled.
// Startup is timed from process start to the end of the first navigate.
// BENCH_STDERR=1 passes the servers' stderr through (BENCH_MCPD_LOG=debug
// adds mcpd's "page read" lines, each reading's phases in ms, and its "token
// fill" lines, each card fill's check, authorize and typing in ms); BENCH_DUMP=dir
// writes each server's steady snapshot answer per page there.
//
// It is a benchmark, not a test: `make bench-mcp` installs @playwright/mcp
// into .cache/bench-mcp and runs it; neither `make test` nor `make run`
// needs it. It never prints what a field holds: the values typed are fixed
// literals and a test card, and only timings and sizes are printed.
package main

import (
	"cmp"
	"context"
	"encoding/json"
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
	"strconv"
	"strings"
	"time"

	"github.com/agentvault/agentvault/e2e/corpus"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/vault"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Steps in the order they are printed.
const (
	stStartup   = "startup + first navigate"
	stNavigate  = "navigate (open_page)"
	stSnapFirst = "snapshot, first after open_page"
	stSnap      = "snapshot, steady"
	stClick     = "click (no navigation)"
	stType      = "type a plain field"
	stTypeFrame = "type in an iframe"
	stNavClick  = "click that navigates"
	stSnapNav   = "snapshot, first after that click"
	stPost      = "form post (click submit)"
	stSnapPost  = "snapshot, first after the post"
	stToken     = "token fill in the card iframe"
	stNavSnap   = "open_page + snapshot, back to back"
)

var steps = []string{stNavigate, stSnapFirst, stSnap, stClick, stType, stTypeFrame, stNavClick, stSnapNav, stPost, stSnapPost, stToken, stNavSnap}

// testCard is a Luhn-valid test number; the bench types it, it is no secret.
const testCard = "4000000000000077"

func main() {
	runs := flag.Int("runs", 3, "whole runs, each with fresh mcpd and playwright-mcp processes")
	iters := flag.Int("n", 5, "iterations of each page's steps per run")
	starts := flag.Int("starts", 3, "startups of each server per run (a fresh process each)")
	only := flag.String("pages", "", "comma-separated page names to run (default: all)")
	pwCLI := flag.String("playwright-mcp", os.Getenv("PLAYWRIGHT_MCP"), "path to @playwright/mcp's cli.js")
	flag.Parse()
	log.SetFlags(0)
	if *pwCLI == "" {
		log.Fatal("benchmcp: set --playwright-mcp (or PLAYWRIGHT_MCP) to @playwright/mcp's cli.js; make bench-mcp does")
	}
	pages := corpus.Pages()
	if *only != "" {
		want := strings.Split(*only, ",")
		pages = slices.DeleteFunc(pages, func(p corpus.Page) bool { return !slices.Contains(want, p.Name) })
	}
	if err := run(*runs, *iters, *starts, *pwCLI, pages); err != nil {
		log.Fatal("benchmcp: ", err)
	}
}

type env struct {
	tmp      string
	mcpdBin  string
	mcpdArgs []string
	mcpdEnv  []string
	pwArgs   []string
	c        *corpus.Corpus
}

// results: side -> page -> step -> values.
type results map[string]map[string]map[string][]float64

func (r results) add(side, page, step string, v float64) {
	if r[side] == nil {
		r[side] = map[string]map[string][]float64{}
	}
	if r[side][page] == nil {
		r[side][page] = map[string][]float64{}
	}
	r[side][page][step] = append(r[side][page][step], v)
}

func (r results) get(side, page, step string) []float64 {
	return r[side][page][step]
}

// sizes of a page's snapshot: playwright-mcp's answer; mcpd's answers over
// every page of it, and its first page alone.
type sizes struct {
	pw, mcpd, mcpdFirst, mcpdPages int
}

func run(runs, iters, starts int, pwCLI string, pages []corpus.Page) error {
	e, stop, err := setup(pwCLI)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Printf("load average before: %s (%d CPUs)\n", loadavg(), runtime.NumCPU())
	perRun := results{} // per-run medians
	sz := map[string]sizes{}
	for r := range runs {
		res, s, err := oneRun(e, r, iters, starts, pages)
		if err != nil {
			return fmt.Errorf("run %d: %w", r+1, err)
		}
		for k, v := range s {
			sz[k] = v
		}
		fmt.Printf("\nrun %d done (load average %s)\n", r+1, loadavg())
		for side, bp := range res {
			for page, bs := range bp {
				for step, v := range bs {
					perRun.add(side, page, step, median(v))
				}
			}
		}
	}
	fmt.Printf("\nmedian ms of the per-run medians (%d runs, %d iterations per page per run), mcpd/playwright-mcp and each run's ratio:\n", runs, iters)
	row := func(page, step string) {
		pw, md := perRun.get("playwright-mcp", page, step), perRun.get("mcpd", page, step)
		if len(pw) == 0 || len(md) == 0 {
			return
		}
		var per []string
		for i := range min(len(pw), len(md)) {
			per = append(per, fmt.Sprintf("%.2f", md[i]/pw[i]))
		}
		fmt.Printf("| %-9s | %-33s | %8.1f | %8.1f | %5.2f | %s |\n", page, step, median(pw), median(md), median(md)/median(pw), strings.Join(per, ", "))
	}
	fmt.Printf("| %-9s | %-33s | %8s | %8s | %5s | %s |\n", "page", "step", "pw ms", "mcpd ms", "ratio", "per run")
	fmt.Printf("|%s|%s|%s|%s|%s|%s|\n", strings.Repeat("-", 11), strings.Repeat("-", 35), strings.Repeat("-", 10), strings.Repeat("-", 10), strings.Repeat("-", 7), strings.Repeat("-", 10))
	row("all", stStartup)
	for _, p := range pages {
		for _, st := range steps {
			row(p.Name, st)
		}
	}
	fmt.Printf("\nsnapshot size, characters of the answer (mcpd: every page of it, cursor by cursor; its first page alone):\n")
	fmt.Printf("| %-9s | %8s | %8s | %5s | %10s | %5s |\n", "page", "pw", "mcpd", "ratio", "mcpd first", "pages")
	for _, p := range pages {
		s := sz[p.Name]
		fmt.Printf("| %-9s | %8d | %8d | %5.2f | %10d | %5d |\n", p.Name, s.pw, s.mcpd, float64(s.mcpd)/float64(max(s.pw, 1)), s.mcpdFirst, s.mcpdPages)
	}
	fmt.Printf("load average after: %s\n", loadavg())
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
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

// setup starts the corpus and proxyd (with a card allowed on any site),
// builds mcpd, and returns how to start both servers.
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

	c, err := corpus.Start()
	if err != nil {
		return fail(err)
	}
	closers = append(closers, c.Close)
	dataDir := filepath.Join(tmp, "proxyd")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fail(err)
	}
	caPath, err := c.WriteCA(dataDir)
	if err != nil {
		return fail(err)
	}
	pm := proxyd.NewMain()
	pm.Stderr = io.Discard
	pm.Config.DataDir = dataDir
	pm.Config.Listen = proxyd.ListenConfig{Proxy: "127.0.0.1:0", Control: "127.0.0.1:0", Admin: "127.0.0.1:0"}
	pm.Config.UnsafeAllowPrivateRanges = true
	pm.Config.TLS.ExtraRoots = []string{caPath}
	pm.Config.Log = proxyd.LogConfig{Level: "error", Format: "json"}
	ctx, cancel := context.WithCancel(context.Background())
	if err := pm.Open(ctx); err != nil {
		cancel()
		return fail(fmt.Errorf("proxyd Open: %w", err))
	}
	if _, err := pm.Vault.AddCard(ctx, proxyd.DefaultOrg, "owner", vault.CardInput{
		Number: vault.NewSecret([]byte(testCard)), CVV: vault.NewSecret([]byte("123")),
		ExpiryMonth: 12, ExpiryYear: time.Now().Year() + 3, Holder: "Bench Card", AnySite: true,
	}); err != nil {
		cancel()
		return fail(fmt.Errorf("add the bench card: %w", err))
	}
	// The owner has authorized the corpus's sites: a fill is not held for
	// an approval (this measures the server, not the owner).
	for _, o := range append([]string{c.Pages}, c.Frames[:]...) {
		if err := pm.Owner.AuthorizeSite(ctx, o, "bench"); err != nil {
			cancel()
			return fail(fmt.Errorf("authorize %s: %w", o, err))
		}
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
		tmp: tmp, mcpdBin: bin, c: c,
		mcpdArgs: []string{
			"--control-url", "http://" + pm.ControlAddr.String(),
			"--control-token-file", filepath.Join(dataDir, proxyd.ControlTokenFile),
			"--api-key-file", filepath.Join(dataDir, proxyd.APIKeyFile),
			"--driver-dir", driver, "--chromium", chromium, "--log-level", cmp.Or(os.Getenv("BENCH_MCPD_LOG"), "error"),
		},
		mcpdEnv: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dataDir, "PLAYWRIGHT_NODEJS_PATH=" + node},
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
	name string
	cs   *mcp.ClientSession
	// last is playwright-mcp's latest snapshot text: it acts by its refs.
	last string
	// cardToken is mcpd's card number token, from its catalog.
	cardToken string
	// pid is the server's process: its browser and driver are under it.
	pid int
}

func (s *server) mcpd() bool { return s.name == "mcpd" }

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
	if !s.mcpd() && strings.Contains(text, "[ref=") {
		s.last = text
	}
	return text, d, nil
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
	return &server{name: name, cs: cs, pid: cmd.Process.Pid}, t0, nil
}

// ref finds the ref playwright-mcp's latest snapshot gives the target.
func (s *server) ref(t corpus.Target) (string, error) {
	re := regexp.MustCompile(regexp.QuoteMeta(t.Role+" "+jsonQuote(t.Name)) + `(?: \[[a-z]+(?:=[a-z0-9]+)?\])* \[ref=([a-z0-9]+)\]`)
	m := re.FindStringSubmatch(s.last)
	if m == nil {
		return "", fmt.Errorf("playwright-mcp's snapshot has no ref for %s %q", t.Role, t.Name)
	}
	return m[1], nil
}

func jsonQuote(v string) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Each action, as each server is driven.

func (s *server) navigate(url string) (time.Duration, error) {
	if s.mcpd() {
		_, d, err := s.call("open_page", map[string]any{"url": url})
		return d, err
	}
	_, d, err := s.call("browser_navigate", map[string]any{"url": url})
	return d, err
}

// ready waits, untimed, until a page that renders after its load has
// rendered. Neither server reads the page to find out, and each returns
// once the page has laid the content out: mcpd waits for the element to be
// visible, playwright-mcp evaluates a script that polls for it and then
// waits for two animation frames (its browser_wait_for would answer with a
// snapshot, a reading the first snapshot after it would profit from).
func (s *server) ready(p corpus.Page) error {
	if p.Ready == "" {
		return nil
	}
	if s.mcpd() {
		_, _, err := s.call("wait_for_selector", map[string]any{"selector": p.Ready, "timeout": 20000})
		return err
	}
	fn := `() => new Promise((done) => { const t = setInterval(() => { if (document.querySelector(` + jsonQuote(p.Ready) + `)) { clearInterval(t); requestAnimationFrame(() => requestAnimationFrame(() => done(true))); } }, 20); })`
	_, _, err := s.call("browser_evaluate", map[string]any{"function": fn})
	return err
}

func (s *server) snapshot() (string, time.Duration, error) {
	if s.mcpd() {
		return s.call("snapshot_page", map[string]any{})
	}
	return s.call("browser_snapshot", map[string]any{})
}

func (s *server) click(t corpus.Target) (time.Duration, error) {
	if s.mcpd() {
		args := map[string]any{"selector": t.Selector}
		if t.Frame != "" {
			args["frame"] = t.Frame
		}
		_, d, err := s.call("click", args)
		return d, err
	}
	ref, err := s.ref(t)
	if err != nil {
		return 0, err
	}
	_, d, err := s.call("browser_click", map[string]any{"target": ref, "element": t.Name})
	return d, err
}

func (s *server) typeIn(t corpus.Target, value string) (time.Duration, error) {
	if s.mcpd() {
		f := map[string]any{"selector": t.Selector, "value": value}
		if t.Frame != "" {
			f["frame"] = t.Frame
		}
		_, d, err := s.call("fill_checkout", map[string]any{"fields": []map[string]any{f}})
		return d, err
	}
	ref, err := s.ref(t)
	if err != nil {
		return 0, err
	}
	_, d, err := s.call("browser_type", map[string]any{"target": ref, "element": t.Name, "text": value})
	return d, err
}

// snapshotSize pages through mcpd's snapshot of the current page and adds
// up the answers; playwright-mcp's is one answer.
func (s *server) snapshotSize() (total, first, pages int, text string, err error) {
	if !s.mcpd() {
		text, _, err = s.snapshot()
		return len(text), len(text), 1, text, err
	}
	args := map[string]any{}
	cursor := regexp.MustCompile(`# truncated: call snapshot_page again with cursor=(\d+) depth=(\d+)`)
	for {
		t, _, err := s.call("snapshot_page", args)
		if err != nil {
			return 0, 0, 0, "", err
		}
		if pages == 0 {
			first, text = len(t), t
		}
		total += len(t)
		pages++
		m := cursor.FindStringSubmatch(t)
		if m == nil || pages > 50 {
			return total, first, pages, text, nil
		}
		var c, d int
		fmt.Sscan(m[1], &c)
		fmt.Sscan(m[2], &d)
		args = map[string]any{"cursor": c, "depth": d}
	}
}

// oneRun starts both servers and drives every page.
func oneRun(e *env, r, iters, starts int, pages []corpus.Page) (results, map[string]sizes, error) {
	names := []string{"mcpd", "playwright-mcp"}
	if r%2 == 1 {
		slices.Reverse(names)
	}
	var servers []*server
	defer func() {
		for _, s := range servers {
			_ = s.cs.Close()
		}
	}()
	all := results{}
	gate := &quiet{}
	defer func() {
		fmt.Printf("run %d: %d timed calls waited for both servers to go quiet, %.0f ms on average, %d of them gave up at %v\n",
			r+1, gate.n, gate.waited.Seconds()*1000/float64(max(gate.n, 1)), gate.gaveUp, quietMax)
	}()
	first := e.c.URL(pages[0])
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
			_, err = s.navigate(first)
			d := time.Since(t0)
			if err != nil {
				_ = s.cs.Close()
				return nil, nil, err
			}
			if last {
				servers = append(servers, s)
			} else {
				_ = s.cs.Close()
			}
			all.add(n, "all", stStartup, ms(d))
		}
	}
	slices.SortFunc(servers, func(a, b *server) int { return slices.Index(names, a.name) - slices.Index(names, b.name) })
	for _, s := range servers {
		if s.mcpd() {
			cat, _, err := s.call("get_token_catalog", map[string]any{})
			if err != nil {
				return nil, nil, err
			}
			var c struct {
				Cards []struct {
					Tokens map[string]string `json:"tokens"`
				} `json:"cards"`
			}
			if err := json.Unmarshal([]byte(cat), &c); err != nil || len(c.Cards) == 0 || c.Cards[0].Tokens["number"] == "" {
				return nil, nil, errors.New("mcpd's catalog has no card number token")
			}
			s.cardToken = c.Cards[0].Tokens["number"]
		}
	}
	// step runs f on both servers, taking turns, and records its time.
	turn := 0
	step := func(page, name string, f func(s *server) (time.Duration, error)) error {
		order := slices.Clone(servers)
		if turn%2 == 1 {
			slices.Reverse(order)
		}
		turn++
		for _, s := range order {
			if name != "" {
				gate.wait(servers)
			}
			d, err := f(s)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", page, name, err)
			}
			if name != "" {
				all.add(s.name, page, name, ms(d))
			}
		}
		return nil
	}
	untimed := func(f func(s *server) error) func(s *server) (time.Duration, error) {
		return func(s *server) (time.Duration, error) { return 0, f(s) }
	}
	snap := func(s *server) (time.Duration, error) {
		_, d, err := s.snapshot()
		return d, err
	}
	sz := map[string]sizes{}
	for _, p := range pages {
		url := e.c.URL(p)
		for i := range iters {
			steps := []struct {
				name string
				f    func(s *server) (time.Duration, error)
			}{
				{stNavigate, func(s *server) (time.Duration, error) { return s.navigate(url) }},
				{"", untimed(func(s *server) error { return s.ready(p) })},
				{stSnapFirst, snap},
				{stSnap, snap},
			}
			if i == 0 {
				steps = append(steps, struct {
					name string
					f    func(s *server) (time.Duration, error)
				}{"", untimed(func(s *server) error {
					total, first, n, text, err := s.snapshotSize()
					if err != nil {
						return err
					}
					cur := sz[p.Name]
					if s.mcpd() {
						cur.mcpd, cur.mcpdFirst, cur.mcpdPages = total, first, n
					} else {
						cur.pw = total
					}
					sz[p.Name] = cur
					if dir := os.Getenv("BENCH_DUMP"); dir != "" {
						_ = os.WriteFile(filepath.Join(dir, p.Name+"."+s.name+".txt"), []byte(text), 0o600)
					}
					return nil
				})})
			}
			type st = struct {
				name string
				f    func(s *server) (time.Duration, error)
			}
			steps = append(steps,
				st{stClick, func(s *server) (time.Duration, error) { return s.click(p.Click) }},
				st{stType, func(s *server) (time.Duration, error) { return s.typeIn(p.Type, fmt.Sprintf("Ada%d", i)) }},
			)
			if p.FrameType.Selector != "" {
				steps = append(steps, st{stTypeFrame, func(s *server) (time.Duration, error) { return s.typeIn(p.FrameType, fmt.Sprintf("Ada Bench %d", i)) }})
			}
			steps = append(steps,
				st{stNavClick, func(s *server) (time.Duration, error) { return s.click(p.Nav) }},
				st{"", untimed(func(s *server) error { return s.ready(p) })},
				st{stSnapNav, snap},
				st{stPost, func(s *server) (time.Duration, error) { return s.click(p.Post) }},
				st{"", untimed(func(s *server) error { return s.ready(p) })},
				st{stSnapPost, snap},
				// What an agent that reads a page as soon as it opened
				// waits for in all: the navigation, the wait for what
				// renders late (where the page has any) and the first
				// snapshot, with no gap for the servers' background work.
				st{stNavSnap, func(s *server) (time.Duration, error) {
					start := time.Now()
					if _, err := s.navigate(url); err != nil {
						return 0, err
					}
					if err := s.ready(p); err != nil {
						return 0, err
					}
					if _, _, err := s.snapshot(); err != nil {
						return 0, err
					}
					return time.Since(start), nil
				}},
			)
			for _, x := range steps {
				if err := step(p.Name, x.name, x.f); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	// The token fills last: mcpd refuses snapshots once one was filled.
	for _, p := range pages {
		if p.Card.Selector == "" {
			continue
		}
		url := e.c.URL(p)
		prep := []func(s *server) error{
			func(s *server) error { _, err := s.navigate(url); return err },
			func(s *server) error { return s.ready(p) },
			func(s *server) error {
				if s.mcpd() {
					return nil // refused once a token was filled; mcpd fills by CSS
				}
				_, _, err := s.snapshot() // the refs playwright-mcp types by
				return err
			},
		}
		for _, f := range prep {
			if err := step(p.Name, "", untimed(f)); err != nil {
				return nil, nil, err
			}
		}
		for range iters {
			if err := step(p.Name, stToken, func(s *server) (time.Duration, error) {
				if s.mcpd() {
					return s.typeIn(p.Card, s.cardToken)
				}
				return s.typeIn(p.Card, testCard)
			}); err != nil {
				return nil, nil, err
			}
			// A click between two numbers: mcpd owes the card's security
			// code after a number, and an action spends that.
			if err := step(p.Name, "", untimed(func(s *server) error { _, err := s.click(p.Click); return err })); err != nil {
				return nil, nil, err
			}
		}
	}
	return all, sz, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// quietMax bounds how long a timed call waits for the servers to go quiet.
const quietMax = 2 * time.Second

// quiet holds each timed call until neither server's process tree (the
// server, its driver, its browser and renderers) has used CPU for a short
// window, up to quietMax: work one server left running in the background
// (mcpd reads a page after its navigation and after a wait; playwright-mcp
// settles after its actions) then never falls on the other's timed call on
// the same cores. The wait is not timed. An agent gives the servers such
// a gap between any two calls (its model's turn), so a call's figure is
// what the agent waits for; "open_page + snapshot, back to back" is the
// figure with no gap.
type quiet struct {
	n, gaveUp int
	waited    time.Duration
}

// quietWindow is how long the trees must use no CPU (the kernel counts
// CPU time in ticks of 10 ms).
const quietWindow = 40 * time.Millisecond

func (q *quiet) wait(servers []*server) {
	start := time.Now()
	defer func() { q.n++; q.waited += time.Since(start) }()
	var roots []int
	for _, s := range servers {
		roots = append(roots, s.pid)
	}
	last := treeTicks(roots)
	for {
		time.Sleep(quietWindow)
		now := treeTicks(roots)
		if now == last {
			return
		}
		last = now
		if time.Since(start) > quietMax {
			q.gaveUp++
			return
		}
	}
}

// treeTicks is the CPU time, in clock ticks, the processes under roots
// (themselves included) have used, from /proc.
func treeTicks(roots []int) uint64 {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	type proc struct {
		ppid  int
		ticks uint64
	}
	procs := map[int]proc{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name (field 2) is in parentheses and may hold
		// spaces: the fields after it start after the last ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseUint(f[11], 10, 64)
		st, _ := strconv.ParseUint(f[12], 10, 64)
		procs[pid] = proc{ppid, ut + st}
	}
	in := map[int]bool{}
	for _, r := range roots {
		in[r] = true
	}
	var total uint64
	for pid, p := range procs {
		// Walk up to a root; trees here are a few levels deep.
		for q, depth := pid, 0; q > 1 && depth < 16; q, depth = procs[q].ppid, depth+1 {
			if in[q] {
				total += p.ticks
				break
			}
		}
	}
	return total
}
