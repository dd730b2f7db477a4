package proxyd_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/internal/tcplb"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/store/postgres/pgtest"
	"github.com/agentvault/agentvault/vault"

	"github.com/agentvault/agentvault/internal/leakcheck"
)

// startBalancer is a round-robin TCP balancer in front of the replicas,
// as a deployment's layer-4 balancer (internal/tcplb).
func startBalancer(t *testing.T) *tcplb.Balancer {
	t.Helper()
	lb, err := tcplb.Start(tcplb.RoundRobin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })
	return lb
}

// rssKiB is this process's resident set size.
func rssKiB(t *testing.T) int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
}

// TestSoakTwoReplicas is the bounded soak of issue 12: two proxyd replicas
// on one Postgres behind a TCP balancer, AV_SOAK_SESSIONS (200) browser-like
// sessions at once for AV_SOAK_FOR (2m), each mixing plain requests with
// purchases (an authorize on either replica, then the form carrying the
// stand-in through the balancer, so a session's connections land on both
// replicas). No request may fail; every purchase reaches the site with the
// real number once and comes back scrubbed; once the sessions are closed
// the goroutines and the RSS come back to the baseline. It runs only with
// AV_SOAK=1 (make soak), never in make test.
func TestSoakTwoReplicas(t *testing.T) {
	if os.Getenv("AV_SOAK") == "" {
		t.Skip("soak: run it with make soak (AV_SOAK=1 and a Postgres from scripts/test-postgres.sh)")
	}
	dsn := pgtest.DSN(t)
	sessions := envInt("AV_SOAK_SESSIONS", 200)
	dur, err := time.ParseDuration(os.Getenv("AV_SOAK_FOR"))
	if err != nil || dur <= 0 {
		dur = 2 * time.Minute
	}
	number := strings.Repeat("4242", 4)
	var received atomic.Int64
	small := strings.Repeat("x", 1024)
	up, roots := tlsUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/pay" {
			b, _ := io.ReadAll(r.Body)
			if strings.Contains(string(b), number) {
				received.Add(1)
			}
			_, _ = w.Write([]byte("paid with " + string(b)))
			return
		}
		_, _ = w.Write([]byte(small))
	})
	lb := startBalancer(t)
	onPG := func(dataDir string) func(*proxyd.Config) {
		return func(c *proxyd.Config) {
			c.Store = proxyd.StoreConfig{Driver: "postgres", DSN: dsn}
			c.Policy.AuthorizedDestinations = []string{"127.0.0.1"}
			c.ProxyURL = "http://" + lb.Addr()
			c.Limits.AuthorizeBurst, c.Limits.AuthorizePerMinute = 100000, 100000
			c.Limits.MaxSessionsPerKey = 4 * sessions
			c.Limits.MaxTunnels = 8 * sessions
			c.Log.Level = "warn"
			if dataDir != "" {
				c.DataDir = dataDir
			}
		}
	}
	// The replicas' logs are checked line by line and not kept: the soak
	// would measure its own buffer.
	real := leakcheck.New(leakcheck.Value("card number", number))
	logs1, logs2 := real.LogWriter("replica 1's log"), real.LogWriter("replica 2's log")
	m1 := startMainLogging(t, roots, onPG(""), logs1)
	ctx := context.Background()
	if _, err := m1.Vault.AddCard(ctx, proxyd.DefaultOrg, "owner", vault.CardInput{
		Number: vault.NewSecret([]byte(number)), CVV: vault.NewSecret([]byte("737")), ExpiryMonth: 12, ExpiryYear: 2031, AnySite: true,
	}); err != nil {
		t.Fatal(err)
	}
	dir2 := t.TempDir()
	for _, f := range []string{"master.key", proxyd.APIKeyFile, proxyd.ControlTokenFile} {
		b, err := os.ReadFile(filepath.Join(m1.DataDir(), f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir2, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m2 := startMainLogging(t, roots, onPG(dir2), logs2)
	lb.SetBackends(m1.ProxyAddr.String(), m2.ProxyAddr.String())
	ctls := []*control.Client{
		control.NewClient("http://"+m1.ControlAddr.String(), m1.ControlToken, nil),
		control.NewClient("http://"+m2.ControlAddr.String(), m1.ControlToken, nil),
	}
	cat, err := ctls[1].Catalog(ctx, m1.APIKey, "")
	i := strings.Index(string(cat), "av_card_1_number_")
	if err != nil || i < 0 {
		t.Fatalf("catalog: %v", err)
	}
	token := string(cat)[i : i+len("av_card_1_number_")+5]

	var purchases, plain, failures atomic.Int64
	var firstErr atomic.Value
	fail := func(format string, args ...any) {
		if failures.Add(1) == 1 {
			firstErr.Store(fmt.Sprintf(format, args...))
		}
	}
	// One browser-like session: its own proxy credential and connection
	// pool, plain requests and purchases until the deadline.
	session := func(no int, until time.Time) {
		rnd := rand.New(rand.NewPCG(uint64(no), 7))
		s, err := ctls[no%2].CreateSession(ctx, m1.APIKey)
		if err != nil {
			fail("session %d: create: %v", no, err)
			return
		}
		hc := proxyClient(m1, s)
		defer hc.CloseIdleConnections()
		for time.Now().Before(until) {
			if rnd.IntN(5) == 0 {
				a, err := ctls[rnd.IntN(2)].Authorize(ctx, s.ID, control.AuthorizeRequest{Token: token, PageURL: up.URL + "/checkout"})
				if err != nil {
					fail("session %d: authorize: %v", no, err)
					return
				}
				resp, err := hc.Post(up.URL+"/pay", "application/x-www-form-urlencoded", strings.NewReader("cc="+a.Value))
				if err != nil {
					fail("session %d: purchase: %v", no, err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || strings.Contains(string(body), number) || !strings.Contains(string(body), a.Value) {
					msg := "(holds the number)"
					if !strings.Contains(string(body), number) {
						msg = string(body[:min(len(body), 300)])
					}
					fail("session %d: purchase answered %d: %s", no, resp.StatusCode, msg)
					return
				}
				purchases.Add(1)
			} else {
				resp, err := hc.Get(up.URL + "/small")
				if err != nil {
					fail("session %d: get: %v", no, err)
					return
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || n != int64(len(small)) {
					fail("session %d: get answered %d (%d bytes)", no, resp.StatusCode, n)
					return
				}
				plain.Add(1)
			}
			if rnd.IntN(10) == 0 {
				// A new connection: the balancer may send it to the other replica.
				hc.CloseIdleConnections()
			}
		}
		if _, err := ctls[rnd.IntN(2)].CloseSession(ctx, s.ID); err != nil {
			fail("session %d: close: %v", no, err)
		}
	}
	run := func(n int, d time.Duration) {
		var wg sync.WaitGroup
		until := time.Now().Add(d)
		for no := range n {
			wg.Add(1)
			go func() { defer wg.Done(); session(no, until) }()
		}
		wg.Wait()
	}
	settle := func() (int, int) {
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		for range 3 {
			runtime.GC()
			time.Sleep(200 * time.Millisecond)
		}
		debug.FreeOSMemory()
		return runtime.NumGoroutine(), rssKiB(t)
	}
	// Warm up (pools, caches, the leaf certificate), then the baseline.
	run(8, 2*time.Second)
	if failures.Load() > 0 {
		t.Fatalf("warm-up: %v", firstErr.Load())
	}
	received.Store(0)
	purchases.Store(0)
	plain.Store(0)
	baseG, baseRSS := settle()

	t0 := time.Now()
	var peakRSS atomic.Int64
	stopSampler := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopSampler:
				return
			case <-time.After(500 * time.Millisecond):
				if r := int64(rssKiB(t)); r > peakRSS.Load() {
					peakRSS.Store(r)
				}
			}
		}
	}()
	run(sessions, dur)
	close(stopSampler)
	wall := time.Since(t0)
	if failures.Load() > 0 {
		t.Fatalf("%d failures; first: %v", failures.Load(), firstErr.Load())
	}
	t.Logf("authorizes answered before every replica acknowledged: %d on A, %d on B", m1.Broker.AckMisses(), m2.Broker.AckMisses())
	if received.Load() != purchases.Load() {
		t.Fatalf("the site received the real number %d times for %d purchases", received.Load(), purchases.Load())
	}
	var g, rss int
	for range 30 {
		if g, rss = settle(); g <= baseG+10 {
			break
		}
		time.Sleep(time.Second)
	}
	t.Logf("soak: %d sessions for %v on 2 replicas: %d purchases, %d plain requests (%.0f req/s); goroutines %d -> %d; RSS %d MiB baseline, %d MiB peak, %d MiB after",
		sessions, wall.Round(time.Second), purchases.Load(), plain.Load(), float64(purchases.Load()+plain.Load())/wall.Seconds(),
		baseG, g, baseRSS>>10, peakRSS.Load()>>10, rss>>10)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("heap: %d MiB in use, %d MiB allocated, %d MiB from the OS", ms.HeapInuse>>20, ms.HeapAlloc>>20, ms.HeapSys>>20)
	if p := os.Getenv("AV_SOAK_HEAPPROFILE"); p != "" {
		if f, err := os.Create(p); err == nil {
			pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	if g > baseG+10 {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines left after the soak, baseline %d:\n%s", g, baseG, buf[:runtime.Stack(buf, true)])
	}
	if rss > baseRSS+32<<10 {
		t.Fatalf("RSS %d MiB after the soak, baseline %d MiB", rss>>10, baseRSS>>10)
	}
	logs1.Check(t)
	logs2.Check(t)
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
