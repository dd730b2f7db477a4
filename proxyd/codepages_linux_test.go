package proxyd

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFileKiB is this process's resident file-backed memory (VmRSS's
// RssFile line), KiB.
func rssFileKiB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "RssFile:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

// TestTrimCodePagesDropsStartupCode: after start-up the executable's
// read-only pages that serving does not use leave memory, and the
// program runs on (its code comes back from the file as it is used).
func TestTrimCodePagesDropsStartupCode(t *testing.T) {
	before := rssFileKiB(t)
	trimCodePages()
	after := rssFileKiB(t)
	if after >= before {
		t.Fatalf("resident file-backed memory %d KiB before, %d KiB after: nothing dropped", before, after)
	}
	// Code and read-only data come back on use.
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("the default config after the trim: %v", err)
	}
	t.Logf("resident file-backed memory: %d KiB -> %d KiB", before, after)
}
