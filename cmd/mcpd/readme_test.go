package main

import (
	"flag"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/agentvault/agentvault/mcpserver"
)

// TestReadmeListsEveryFlag: cmd/mcpd/README.md's table names every flag
// mcpd has, and no flag it does not (issue 26: it listed 11 of 21).
func TestReadmeListsEveryFlag(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `--([a-z-]+)").FindAllStringSubmatch(string(b), -1) {
		documented = append(documented, m[1])
	}
	var flags []string
	mcpserver.NewMain().FlagSet().VisitAll(func(f *flag.Flag) { flags = append(flags, f.Name) })
	slices.Sort(documented)
	slices.Sort(flags)
	for _, f := range flags {
		if !slices.Contains(documented, f) {
			t.Errorf("--%s is not in cmd/mcpd/README.md's table", f)
		}
	}
	for _, d := range documented {
		if !slices.Contains(flags, d) {
			t.Errorf("cmd/mcpd/README.md lists --%s, which mcpd does not have", d)
		}
	}
	if len(flags) < 20 {
		t.Fatalf("read only %d flags: the flag set is not what mcpd parses", len(flags))
	}
}
