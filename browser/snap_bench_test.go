package browser_test

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault/browser"
	"github.com/agentvault/agentvault/e2e/corpus"
)

// BenchmarkSnapshotCorpus profiles snapshot_page's reading on every page of
// the corpus: per page and phase, the time, the Chrome DevTools Protocol
// calls the driver sent (cdp/op), the distinct targets they went to (one
// per out-of-process frame, frames/op), the scripts run in a page
// (Runtime.evaluate and callFunctionOn, evals/op), the execution worlds
// created (worlds/op) and the compilations of Playwright's injected engine
// into a document (injects/op). The CDP
// traffic is read from the driver's own protocol log (DEBUG=pw:protocol).
// Phases: goto is open_page's navigation and reading, wait the first
// wait_for_selector on the page, raw Playwright's AI-mode walk alone (what
// playwright-mcp's browser_snapshot costs at least), first the first
// snapshot after the wait, steady one on the unchanged page, changed one
// after a DOM change made by the page's own script, nav-first the first
// snapshot after a click that navigated (and its wait), nav-raw the walk
// alone at that moment (alternate rounds). With
// AV_SNAP_PROFILE=v the methods of each phase are printed too.
//
//	go test -run '^$' -bench SnapshotCorpus -benchtime 5x ./browser/
func BenchmarkSnapshotCorpus(b *testing.B) {
	c, tap, s := tappedSession(b)
	for _, p := range corpus.Pages() {
		b.Run(p.Name, func(b *testing.B) {
			ps := newPhases(b, tap, s)
			measure := ps.measure
			round := 0
			for b.Loop() {
				measure("goto", func() error { return s.Goto(c.URL(p), 30*time.Second) })
				// The first wait on the page: for what renders late, else for
				// the field the bench types in.
				ready := cmp.Or(p.Ready, p.Type.Selector)
				measure("wait", func() error { return s.WaitFor(browser.Target{Selector: ready}, "visible", 20*time.Second) })
				measure("first", func() error { _, err := s.SnapshotOf(browser.SnapshotOptions{}); return err })
				measure("steady", func() error { _, err := s.SnapshotOf(browser.SnapshotOptions{}); return err })
				if err := browser.PageEvalForTest(s, "", `document.body.appendChild(document.createElement('p')).textContent = 'changed ' + Date.now()`); err != nil {
					b.Fatal(err)
				}
				measure("changed", func() error { _, err := s.SnapshotOf(browser.SnapshotOptions{}); return err })
				measure("raw", func() error { _, err := browser.RawAria(s); return err })
				// A click that navigates, the ready wait, then the first
				// reading: ours on even rounds, Playwright's walk alone on
				// odd ones (the same moment cannot be read twice).
				measure("nav-click", func() error { _, err := s.Click(browser.Target{Selector: p.Nav.Selector}, 30*time.Second); return err })
				if p.Ready != "" {
					if err := s.WaitFor(browser.Target{Selector: p.Ready}, "visible", 20*time.Second); err != nil {
						b.Fatal(err)
					}
				}
				if round%2 == 0 {
					measure("nav-first", func() error { _, err := s.SnapshotOf(browser.SnapshotOptions{}); return err })
				} else {
					measure("nav-raw", func() error { _, err := browser.RawAria(s); return err })
				}
				round++
			}
			ps.report(p.Name, true)
		})
	}
}

// tappedSession serves the corpus and opens a browser session whose
// driver's protocol log the returned tap reads.
func tappedSession(b *testing.B) (*corpus.Corpus, *protocolTap, *browser.Session) {
	b.Helper()
	var tap *protocolTap
	c, s := corpusSession(b, func(cfg browser.Config) (*browser.Browser, error) {
		tap = startProtocolTap(b)
		defer tap.restore()
		return browser.Launch(cfg)
	})
	return c, tap, s
}

// phases times a benchmark's named phases, each with the CDP calls it
// sent.
type phases struct {
	b     *testing.B
	tap   *protocolTap
	s     *browser.Session
	stats map[string]*phaseStats
}

func newPhases(b *testing.B, tap *protocolTap, s *browser.Session) *phases {
	return &phases{b: b, tap: tap, s: s, stats: map[string]*phaseStats{}}
}

func (ps *phases) measure(name string, f func() error) {
	ps.tap.mark(ps.s)
	start := time.Now()
	if err := f(); err != nil {
		ps.b.Fatalf("%s: %v", name, err)
	}
	d := time.Since(start)
	st := ps.stats[name]
	if st == nil {
		st = &phaseStats{methods: map[string]int{}}
		ps.stats[name] = st
	}
	st.add(d, ps.tap.mark(ps.s))
}

// report gives each phase's ms/op and cdp/op (and, with all, the frames,
// evaluations, worlds and engine injections); AV_SNAP_PROFILE=v logs the
// methods of each phase too.
func (ps *phases) report(page string, all bool) {
	names := make([]string, 0, len(ps.stats))
	for n := range ps.stats {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		st := ps.stats[n]
		k := float64(st.n)
		ps.b.ReportMetric(float64(st.d.Microseconds())/1000/k, n+"-ms/op")
		ps.b.ReportMetric(float64(st.cdp)/k, n+"-cdp/op")
		if all {
			ps.b.ReportMetric(float64(st.targets)/k, n+"-frames/op")
			ps.b.ReportMetric(float64(st.evals)/k, n+"-evals/op")
			ps.b.ReportMetric(float64(st.worlds)/k, n+"-worlds/op")
			ps.b.ReportMetric(float64(st.injects)/k, n+"-injects/op")
		}
		if os.Getenv("AV_SNAP_PROFILE") == "v" {
			ps.b.Logf("%s %s: %s", page, n, st.top())
		}
	}
}

type phaseStats struct {
	n, cdp, targets, evals, worlds, injects int
	d                                       time.Duration
	methods                                 map[string]int
}

func (st *phaseStats) add(d time.Duration, sent []cdpCall) {
	st.n++
	st.d += d
	st.cdp += len(sent)
	targets := map[string]bool{}
	for _, c := range sent {
		targets[c.session] = true
		st.methods[c.method]++
		switch c.method {
		case "Runtime.evaluate", "Runtime.callFunctionOn":
			st.evals++
		case "Page.createIsolatedWorld":
			st.worlds++
		}
		if c.inject {
			st.injects++
		}
	}
	st.targets += len(targets)
}

func (st *phaseStats) top() string {
	type kv struct {
		k string
		v int
	}
	var list []kv
	for k, v := range st.methods {
		list = append(list, kv{k, v})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].v > list[j].v })
	var out []string
	for _, e := range list {
		out = append(out, fmt.Sprintf("%s %.1f", e.k, float64(e.v)/float64(st.n)))
	}
	return strings.Join(out, ", ")
}

// cdpCall is one CDP call the driver sent; inject marks a script of more
// than 20 kB evaluated into a page (Playwright's injected engine).
type cdpCall struct {
	method, session string
	inject          bool
}

// protocolTap reads the driver's protocol log from a pipe that stands in
// for the process's stderr while the driver starts (the driver inherits
// it), and splits it at marks.
type protocolTap struct {
	old     *os.File
	mu      sync.Mutex
	cond    *sync.Cond
	calls   []cdpCall
	seen    map[string]bool
	nextID  int
	restore func()
}

func startProtocolTap(b *testing.B) *protocolTap {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	t := &protocolTap{old: os.Stderr, seen: map[string]bool{}}
	t.cond = sync.NewCond(&t.mu)
	prev, had := os.LookupEnv("DEBUG")
	os.Setenv("DEBUG", "pw:protocol")
	os.Stderr = w
	t.restore = func() {
		os.Stderr = t.old
		if had {
			os.Setenv("DEBUG", prev)
		} else {
			os.Unsetenv("DEBUG")
		}
	}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			line := sc.Text()
			i := strings.Index(line, "SEND ► ")
			if i < 0 {
				continue
			}
			var m struct {
				Method    string          `json:"method"`
				SessionID string          `json:"sessionId"`
				Params    json.RawMessage `json:"params"`
			}
			if json.Unmarshal([]byte(line[i+len("SEND ► "):]), &m) != nil {
				continue
			}
			t.mu.Lock()
			t.calls = append(t.calls, cdpCall{m.Method, m.SessionID, m.Method == "Runtime.evaluate" && len(m.Params) > 20000})
			if j := strings.Index(string(m.Params), "__avmark_"); j >= 0 {
				k := j + len("__avmark_")
				e := k
				for e < len(m.Params) && m.Params[e] >= '0' && m.Params[e] <= '9' {
					e++
				}
				t.seen[string(m.Params[k:e])] = true
			}
			t.cond.Broadcast()
			t.mu.Unlock()
		}
	}()
	b.Cleanup(func() { _ = w.Close() })
	return t
}

// mark sends a marker through the page, waits until the log shows it, and
// returns the calls sent since the previous mark (the marker's own call
// among them: it costs one evaluate, the same in every phase).
func (t *protocolTap) mark(s *browser.Session) []cdpCall {
	t.mu.Lock()
	t.nextID++
	id := fmt.Sprint(t.nextID)
	t.mu.Unlock()
	_ = browser.PageEvalForTest(s, "", `'__avmark_`+id+`'`)
	deadline := time.AfterFunc(10*time.Second, func() { t.mu.Lock(); t.seen[id] = true; t.cond.Broadcast(); t.mu.Unlock() })
	defer deadline.Stop()
	t.mu.Lock()
	defer t.mu.Unlock()
	for !t.seen[id] {
		t.cond.Wait()
	}
	out := t.calls
	t.calls = nil
	// The marker's own call and anything after it belong to the next phase;
	// drop the marker itself.
	if n := len(out); n > 0 {
		out = out[:n-1]
	}
	return out
}
