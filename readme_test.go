package agentvault_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeIsShortAndTrue keeps the README what issue 26 asked for: under
// 150 lines, nothing "not built yet", and every link it and docs/ hold
// naming a file in this repository (no link outside it). Its commands are
// run by scripts/walk.sh (make walk).
func TestReadmeIsShortAndTrue(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n >= 150 {
		t.Errorf("README.md has %d lines; keep it under 150 (details go to docs/)", n)
	}
	if strings.Contains(string(b), "not built yet") {
		t.Error("README.md says something is not built yet")
	}
	files, _ := filepath.Glob("docs/*.md")
	files = append(files, "README.md", "cmd/mcpd/README.md")
	link := regexp.MustCompile(`\]\(([^)#]+)(#[^)]*)?\)`)
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(body), -1) {
			target := m[1]
			if strings.Contains(target, "://") {
				continue
			}
			p := filepath.Clean(filepath.Join(filepath.Dir(f), target))
			if strings.HasPrefix(p, "..") {
				t.Errorf("%s links outside the repository: %s", f, target)
				continue
			}
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s links to %s, which does not exist", f, target)
			}
		}
	}
}

// TestMakeRunInstallsOnlyWhatRunningNeeds: `make run` installs what
// running needs and says the first build takes a while before building;
// PostgreSQL, Prometheus, sqlite3 and systemd are for `make test` only
// (issue 26). Read from `make -n`, which runs nothing.
func TestMakeRunInstallsOnlyWhatRunningNeeds(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	dry := func(target string) string {
		out, err := exec.Command("make", "-n", target).CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", target, err, out)
		}
		return string(out)
	}
	run := dry("run")
	for _, pkg := range []string{"postgresql", "prometheus", "sqlite3", "systemd"} {
		if strings.Contains(run, pkg) {
			t.Errorf("make run would install %s", pkg)
		}
	}
	for _, pkg := range []string{"chromium", "nodejs", "curl"} {
		if !strings.Contains(run, pkg) {
			t.Errorf("make run would not install %s when missing", pkg)
		}
	}
	announce, build := strings.Index(run, "first build takes a few minutes"), strings.Index(run, "go build")
	if announce < 0 || build < 0 || announce > build {
		t.Errorf("make run does not say the first build takes a few minutes before building:\n%s", run)
	}
	test := dry("test")
	for _, pkg := range []string{"postgresql", "prometheus", "sqlite3", "systemd", "verify-units.sh"} {
		if !strings.Contains(test, pkg) {
			t.Errorf("make test does not install or run %s", pkg)
		}
	}
}
