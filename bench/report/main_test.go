package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// line is one load output line with the fields report reads.
func line(label string, rps, proxyCPU float64) string {
	return fmt.Sprintf(`{"label":%q,"requests":100,"rps":%g,"cpu_ms_per_req":{"load":0.1,"proxy":%g}}`, label, rps, proxyCPU)
}

// TestComparisonTable: pairs with one TARGET give one table with a column
// group per REF, whose ratios are TARGET's medians over REF's.
func TestComparisonTable(t *testing.T) {
	var in strings.Builder
	for rep := 1; rep <= 3; rep++ {
		fmt.Fprintln(&in, line(fmt.Sprintf("a_small/direct/%d", rep), 1000, 0))
		// medians: refproxy 0.2 ms and 400 req/s, refproxy-h2 0.4 ms and 200, proxyd 0.1 ms and 800
		fmt.Fprintln(&in, line(fmt.Sprintf("a_small/refproxy/%d", rep), 400+float64(rep-2)*10, 0.2+float64(rep-2)*0.01))
		fmt.Fprintln(&in, line(fmt.Sprintf("a_small/refproxy-h2/%d", rep), 200, 0.4))
		fmt.Fprintln(&in, line(fmt.Sprintf("a_small/proxyd/%d", rep), 800, 0.1))
	}
	fmt.Fprintln(&in, "not json")
	var out bytes.Buffer
	if err := report(&out, strings.NewReader(in.String()), [][2]string{{"refproxy", "proxyd"}, {"refproxy-h2", "proxyd"}}); err != nil {
		t.Fatal(err)
	}
	var row string
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "a_small" && strings.Contains(l, "|") {
			if row != "" {
				t.Fatalf("two comparison rows for a_small:\n%s", out.String())
			}
			row = l
		}
	}
	want := []string{"a_small", "0.1000", "800", "|", "0.2000", "400", "0.50x", "2.00x", "|", "0.4000", "200", "0.25x", "4.00x"}
	if got := strings.Fields(row); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("comparison row\n got %q\nwant %q\nwhole output:\n%s", got, want, out.String())
	}
}

// TestNoPairs: without pairs there is only the table of medians.
func TestNoPairs(t *testing.T) {
	var out bytes.Buffer
	if err := report(&out, strings.NewReader(line("a/direct/1", 10, 0)+"\n"), nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "|") {
		t.Errorf("a comparison table without pairs:\n%s", out.String())
	}
}
