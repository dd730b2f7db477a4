package browser_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentvault/agentvault/browser"
	"github.com/agentvault/agentvault/browser/browsertest"
)

// TestStopAfterTheDriverWasSignalled is a Ctrl-C in mcpd's terminal (or
// systemd stopping the unit): the signal reaches the driver and Chromium
// together with mcpd, and they may be gone before mcpd closes them. That
// is a clean stop: closing the browser and stopping the driver say so
// instead of failing with the lost connection (make walk saw mcpd exit 1).
func TestStopAfterTheDriverWasSignalled(t *testing.T) {
	browsertest.SkipIfNoBrowser(t)
	site := browsertest.Start(t)
	d, err := browser.StartDriver(browser.Config{DriverDir: browsertest.DriverDir()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Launch(browser.Config{TrustSPKI: []string{site.SPKI}})
	if err != nil {
		d.Stop()
		t.Fatal(err)
	}
	s, err := b.NewSession(browser.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Goto(site.CheckoutURL(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	driver := d.PidForTest()
	if driver == 0 {
		t.Fatal("no driver process id")
	}
	// The terminal's process group: the driver and everything it started.
	group := append([]int{driver}, descendants(driver)...)
	if len(group) < 2 {
		t.Fatalf("driver %d has no Chromium under it", driver)
	}
	for _, pid := range group {
		syscall.Kill(pid, syscall.SIGINT)
	}
	// mcpd got the signal too and closes at once: the close is in flight
	// while the driver dies, which is the race make walk lost.
	if err := b.Close(); err != nil {
		t.Errorf("closing the browser after the driver exited: %v", err)
	}
	if err := d.Stop(); err != nil {
		t.Errorf("stopping the driver after it exited: %v", err)
	}
	if alive(driver) {
		t.Errorf("driver %d still runs after Stop", driver)
	}
}

// descendants lists the processes under pid, read from /proc.
func descendants(pid int) []int {
	parent := map[int]int{}
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		p, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if len(fields) > 1 {
			pp, _ := strconv.Atoi(fields[1])
			parent[p] = pp
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// alive is true while pid runs (a zombie waiting to be reaped has exited).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && !strings.HasPrefix(strings.TrimSpace(string(b[i+1:])), "Z")
}
