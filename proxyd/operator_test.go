package proxyd_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentvault/agentvault/internal/tcplb"
)

// The operator tests drive the built binaries as a new owner would: real
// processes, real listeners, real files.

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// builtBinaries builds ./cmd/... once per test binary.
func builtBinaries(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "agentvault-bin-")
		if binErr != nil {
			return
		}
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Dir(filepath.Dir(file))
		cmd := exec.Command("go", "build", "-o", binDir+"/", "./cmd/...")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// cleanEnv is an environment with no data directory variable and HOME at
// home.
func cleanEnv(home string, extra ...string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}
	return append(env, extra...)
}

type result struct {
	code           int
	stdout, stderr string
}

func runBin(t *testing.T, env []string, stdin string, name string, args ...string) result {
	t.Helper()
	cmd := exec.Command(filepath.Join(builtBinaries(t), name), args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, o.String(), e.String()}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestOperator_DataDirRule: every command takes --data anywhere, then
// AGENTVAULT_DATA, then DATA, then ~/.agentvault; a CLI command refuses to
// create a vault where none exists (naming where it looked) unless --init.
func TestOperator_DataDirRule(t *testing.T) {
	home := t.TempDir()
	data := filepath.Join(t.TempDir(), "vault")

	// Forgetting --data: no second vault under ~/.agentvault, and the
	// error says where it looked and what to do.
	r := runBin(t, cleanEnv(home), "", "proxyd", "vault", "list")
	if r.code == 0 || !strings.Contains(r.stderr, filepath.Join(home, ".agentvault", "vault.db")) || !strings.Contains(r.stderr, "--init") || !strings.Contains(r.stderr, "default") {
		t.Errorf("vault list without a vault: exit %d, stderr %q", r.code, r.stderr)
	}
	if exists(filepath.Join(home, ".agentvault")) {
		t.Error("vault list created ~/.agentvault")
	}
	for _, args := range [][]string{{"owner", "keys"}, {"ca", "export"}} {
		if r := runBin(t, cleanEnv(home), "", "proxyd", args...); r.code == 0 || !strings.Contains(r.stderr, "no vault at") {
			t.Errorf("%v without a vault: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	if exists(filepath.Join(home, ".agentvault")) {
		t.Error("owner/ca created ~/.agentvault")
	}

	// --init creates it; --data after the subcommand and after its flags.
	r = runBin(t, cleanEnv(home), "", "proxyd", "vault", "add-identity", "--name", "Ada", "--data", data, "--init")
	if r.code != 0 || !exists(filepath.Join(data, "vault.db")) || !exists(filepath.Join(data, "master.key")) {
		t.Fatalf("vault add-identity --init: exit %d, stderr %q", r.code, r.stderr)
	}
	for name, env := range map[string][]string{
		"flag first":      cleanEnv(home),
		"AGENTVAULT_DATA": cleanEnv(home, "AGENTVAULT_DATA="+data, "DATA=/nonexistent"),
		"DATA":            cleanEnv(home, "DATA="+data),
	} {
		args := []string{"vault", "list"}
		if name == "flag first" {
			args = []string{"--data", data, "vault", "list"}
		}
		if r := runBin(t, env, "", "proxyd", args...); r.code != 0 || !strings.Contains(r.stdout, "Ada") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", name, r.code, r.stdout, r.stderr)
		}
	}
	// owner set-password takes --data (it was refused).
	r = runBin(t, cleanEnv(home), "correct horse battery staple\n", "proxyd", "owner", "set-password", "--email", "o@example.com", "--data", data)
	if r.code != 0 {
		t.Errorf("owner set-password --data: exit %d, stderr %q", r.code, r.stderr)
	}
	// A path that cannot be a directory: the error names it and why.
	file := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runBin(t, cleanEnv(home), "", "proxyd", "vault", "list", "--data", filepath.Join(file, "sub"))
	if r.code == 0 || !strings.Contains(r.stderr, filepath.Join(file, "sub", "vault.db")) || !strings.Contains(r.stderr, "not a directory") {
		t.Errorf("data dir under a file: exit %d, stderr %q", r.code, r.stderr)
	}
	// session create names the API key file it cannot read, and why.
	missing := filepath.Join(data, "no-such-key")
	r = runBin(t, cleanEnv(home), "", "proxyd", "session", "create", "--data", data, "--api-key-file", missing)
	if r.code == 0 || !strings.Contains(r.stderr, missing) || !strings.Contains(r.stderr, "no such file") {
		t.Errorf("session create with a missing key file: exit %d, stderr %q", r.code, r.stderr)
	}
	// data-dir prints the rule's answer.
	if r := runBin(t, cleanEnv(home, "DATA="+data), "", "proxyd", "data-dir"); strings.TrimSpace(r.stdout) != data {
		t.Errorf("data-dir with DATA: %q", r.stdout)
	}
}

func freeAddr(t *testing.T) string { t.Helper(); return tcplb.FreeAddr(t) }

type ports struct{ proxy, control, admin, dash string }

func newPorts(t *testing.T) ports {
	return ports{freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)}
}

func writeConfig(t *testing.T, dir string, p ports, extra string) string {
	t.Helper()
	cfg := filepath.Join(dir, "proxyd.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("listen:\n  proxy: %s\n  control: %s\n  admin: %s\n  dashboard: %s\n%s",
		p.proxy, p.control, p.admin, p.dash, extra)), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// syncBuffer is a goroutine-safe buffer for a child's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type daemon struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan error
}

// startProxyd starts `proxyd run` and waits until /healthz answers with
// its pid, or it exits.
func startProxyd(t *testing.T, env []string, p ports, args ...string) *daemon {
	t.Helper()
	d := &daemon{out: &syncBuffer{}, exited: make(chan error, 1)}
	d.cmd = exec.Command(filepath.Join(builtBinaries(t), "proxyd"), append([]string{"run"}, args...)...)
	d.cmd.Env = env
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.exited <- d.cmd.Wait() }()
	t.Cleanup(func() { _ = d.cmd.Process.Kill() })
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 2 * time.Second}
	want := "ok pid=" + strconv.Itoa(d.cmd.Process.Pid)
	for i := 0; i < 300; i++ {
		select {
		case err := <-d.exited:
			d.exited <- err
			return d
		default:
		}
		if res, err := hc.Get("http://" + p.admin + "/healthz"); err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if strings.TrimSpace(string(b)) == want {
				return d
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("proxyd never answered /healthz with its pid; output:\n%s", d.out.String())
	return nil
}

// wait returns the exit code once the process ended.
func (d *daemon) wait(t *testing.T) int {
	t.Helper()
	err := <-d.exited
	d.exited <- err
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

func (d *daemon) running() bool {
	select {
	case err := <-d.exited:
		d.exited <- err
		return false
	default:
		return true
	}
}

// TestOperator_StartupChecksBeforeWriting: a second instance on the same
// data directory says "already running" with the first one's pid and
// rewrites nothing; a busy port fails with the address and the cause
// before any vault is created; Ctrl-C is a clean stop.
func TestOperator_StartupChecksBeforeWriting(t *testing.T) {
	home := t.TempDir()
	data := filepath.Join(t.TempDir(), "data")
	p1 := newPorts(t)
	cfg := writeConfig(t, t.TempDir(), p1, "")
	first := startProxyd(t, cleanEnv(home), p1, "--config", cfg, "--data", data)
	if !first.running() {
		t.Fatalf("first proxyd exited:\n%s", first.out.String())
	}
	caPath := filepath.Join(data, "ca.pem")
	before, err := os.Stat(caPath)
	if err != nil {
		t.Fatal(err)
	}

	// Same data directory, other ports.
	p2 := newPorts(t)
	second := startProxyd(t, cleanEnv(home), p2, "--config", writeConfig(t, t.TempDir(), p2, ""), "--data", data)
	if code := second.wait(t); code == 0 {
		t.Fatal("a second proxyd on the same data directory started")
	}
	wantPID := fmt.Sprintf("pid %d", first.cmd.Process.Pid)
	if out := second.out.String(); !strings.Contains(out, "already running") || !strings.Contains(out, wantPID) {
		t.Errorf("second instance said %q, want \"already running\" and %q", out, wantPID)
	}
	after, err := os.Stat(caPath)
	if err != nil || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("the second instance rewrote ca.pem (%v)", err)
	}

	// A new data directory, the first one's ports: nothing is created.
	fresh := filepath.Join(t.TempDir(), "fresh")
	third := startProxyd(t, cleanEnv(home), p1, "--config", cfg, "--data", fresh)
	if code := third.wait(t); code == 0 {
		t.Fatal("proxyd started on a busy port")
	}
	if out := third.out.String(); !strings.Contains(out, "cannot listen on "+p1.proxy) || !strings.Contains(out, "address already in use") {
		t.Errorf("busy port: %q, want the address and the cause", out)
	}
	if exists(fresh) {
		t.Error("proxyd created its data directory before it failed to listen")
	}

	// Ctrl-C: a clean stop, said as such.
	if err := first.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := first.wait(t); code != 0 {
		t.Errorf("proxyd exited %d on SIGINT", code)
	}
	if out := first.out.String(); !strings.Contains(out, `"msg":"proxyd stopped"`) {
		t.Errorf("no clean stop line in:\n%s", lastLines(out, 5))
	}
}

func lastLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestOperator_RunScriptNoBannerWhenProxydFails: scripts/run.sh must not
// take another instance's /healthz for its own proxyd's.
func TestOperator_RunScriptNoBannerWhenProxydFails(t *testing.T) {
	home := t.TempDir()
	p := newPorts(t)
	cfg := writeConfig(t, t.TempDir(), p, "")
	first := startProxyd(t, cleanEnv(home), p, "--config", cfg, "--data", filepath.Join(t.TempDir(), "a"))
	if !first.running() {
		t.Fatalf("first proxyd exited:\n%s", first.out.String())
	}
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(filepath.Dir(file)), "scripts", "run.sh")
	cmd := exec.Command("bash", script)
	cmd.Env = cleanEnv(home, "BIN="+builtBinaries(t), "DATA="+filepath.Join(t.TempDir(), "b"),
		"PROXYD_ARGS=--config "+cfg, "MCP_ADDR="+freeAddr(t))
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Error("run.sh succeeded while its proxyd could not listen")
	}
	if strings.Contains(string(out), "agentvault is running") {
		t.Errorf("run.sh printed the running banner for another instance:\n%s", out)
	}
	if !strings.Contains(string(out), "cannot listen on") {
		t.Errorf("run.sh did not pass on proxyd's reason:\n%s", out)
	}
}

// TestOperator_RunScriptBannerOnlyWhenBothListen: the "agentvault is
// running" banner waits for mcpd too: with mcpd's port (listen.mcp) taken,
// run.sh prints no banner, passes on mcpd's reason naming the address, and
// stops proxyd.
func TestOperator_RunScriptBannerOnlyWhenBothListen(t *testing.T) {
	home := t.TempDir()
	p := newPorts(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	data := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, data, p, "  mcp: "+busy.Addr().String()+"\n")
	_, file, _, _ := runtime.Caller(0)
	cmd := exec.Command("bash", filepath.Join(filepath.Dir(filepath.Dir(file)), "scripts", "run.sh"))
	cmd.Env = cleanEnv(home, "BIN="+builtBinaries(t), "DATA="+data)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Error("run.sh succeeded while mcpd could not listen")
	}
	if strings.Contains(string(out), "agentvault is running") {
		t.Errorf("run.sh printed the banner before mcpd listened:\n%s", out)
	}
	if !strings.Contains(string(out), "cannot listen on "+busy.Addr().String()) || !strings.Contains(string(out), "mcpd did not start") {
		t.Errorf("run.sh did not say that mcpd could not listen on %s:\n%s", busy.Addr(), out)
	}
	if hc, err := net.DialTimeout("tcp", p.admin, time.Second); err == nil {
		hc.Close()
		t.Error("proxyd was left running")
	}
}

// TestOperator_DashboardCertStableAcrossRestarts: the dashboard's
// certificate chains to a local root written once to the data directory;
// after a restart the same root still verifies it, so the owner trusts it
// once. A failed TLS handshake is a debug JSON record, not a raw line.
func TestOperator_DashboardCertStableAcrossRestarts(t *testing.T) {
	home := t.TempDir()
	data := filepath.Join(t.TempDir(), "data")
	p := newPorts(t)
	cfg := writeConfig(t, t.TempDir(), p, "log:\n  level: debug\n  format: json\n")
	var rootPEM []byte
	for run := 0; run < 2; run++ {
		d := startProxyd(t, cleanEnv(home), p, "--config", cfg, "--data", data)
		if !d.running() {
			t.Fatalf("proxyd exited:\n%s", d.out.String())
		}
		pemNow, err := os.ReadFile(filepath.Join(data, "dashboard-ca.pem"))
		if err != nil {
			t.Fatal(err)
		}
		if run == 0 {
			rootPEM = pemNow
		} else if !bytes.Equal(rootPEM, pemNow) {
			t.Error("the dashboard root changed across a restart")
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(rootPEM) {
			t.Fatal("dashboard-ca.pem holds no certificate")
		}
		conn, err := tls.Dial("tcp", p.dash, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatalf("run %d: the dashboard certificate does not verify against the first run's root: %v", run, err)
		}
		conn.Close()
		// A client that is not TLS at all.
		if c, err := net.Dial("tcp", p.dash); err == nil {
			_, _ = c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
			_, _ = io.ReadAll(c)
			c.Close()
		}
		if err := d.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if code := d.wait(t); code != 0 {
			t.Fatalf("exit %d", code)
		}
		sawHandshake := false
		for _, line := range strings.Split(strings.TrimSpace(d.out.String()), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Errorf("a raw line between the JSON records: %q", line)
				continue
			}
			if strings.Contains(fmt.Sprint(rec["msg"]), "TLS handshake error") {
				sawHandshake = rec["level"] == "DEBUG"
			}
		}
		if !sawHandshake {
			t.Error("the failed handshake was not logged as a debug record")
		}
	}
}

// TestOperator_Doctor: `proxyd doctor` passes on a healthy running
// deployment (ports held by this instance), and fails with what to fix
// when the dashboard password is missing, a key file is readable by
// others, or a port is taken by another process.
func TestOperator_Doctor(t *testing.T) {
	home := t.TempDir()
	data := filepath.Join(t.TempDir(), "data")
	p := newPorts(t)
	cfg := writeConfig(t, t.TempDir(), p, "")
	driver := t.TempDir()
	if err := os.MkdirAll(filepath.Join(driver, "package"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(driver, "package", "cli.js"), []byte("//"), 0o644)
	chromium := filepath.Join(t.TempDir(), "chromium")
	os.WriteFile(chromium, []byte("#!/bin/sh\n"), 0o755)
	env := cleanEnv(home, "PLAYWRIGHT_DRIVER_PATH="+driver, "CHROMIUM_PATH="+chromium, "PLAYWRIGHT_NODEJS_PATH=/usr/bin/node")
	d := startProxyd(t, env, p, "--config", cfg, "--data", data)
	if !d.running() {
		t.Fatalf("proxyd exited:\n%s", d.out.String())
	}
	r := runBin(t, env, "", "proxyd", "doctor", "--config", cfg, "--data", data)
	if r.code == 0 || !strings.Contains(r.stdout, "no dashboard password is set") || !strings.Contains(r.stdout, "set-password") {
		t.Errorf("doctor without a password: exit %d\n%s", r.code, r.stdout)
	}
	if r := runBin(t, env, "a long owner passphrase 42\n", "proxyd", "owner", "set-password", "--email", "o@example.com", "--data", data); r.code != 0 {
		t.Fatalf("set-password: %s", r.stderr)
	}
	r = runBin(t, env, "", "proxyd", "doctor", "--config", cfg, "--data", data)
	if r.code != 0 || !strings.Contains(r.stdout, "held by this data directory's proxyd") {
		t.Errorf("doctor on a healthy deployment: exit %d\n%s", r.code, r.stdout)
	}
	os.Chmod(filepath.Join(data, "api-key"), 0o644)
	r = runBin(t, env, "", "proxyd", "doctor", "--config", cfg, "--data", data)
	if r.code == 0 || !strings.Contains(r.stdout, "chmod 600 "+filepath.Join(data, "api-key")) {
		t.Errorf("doctor with a world-readable key: exit %d\n%s", r.code, r.stdout)
	}
	os.Chmod(filepath.Join(data, "api-key"), 0o600)
	// Another data directory whose ports are this instance's.
	other := filepath.Join(t.TempDir(), "other")
	r = runBin(t, env, "", "proxyd", "doctor", "--config", cfg, "--data", other)
	if r.code == 0 || !strings.Contains(r.stdout, "does not exist") || !strings.Contains(r.stdout, "taken by another process") {
		t.Errorf("doctor on another data directory: exit %d\n%s", r.code, r.stdout)
	}
}

// TestOperator_DuplicateCardsRefused: the CLI takes --exp 12/31 like the
// dashboard; the same number added twice is refused, naming the card it
// duplicates (label, last 4, expiry), compared by the vault's keyed HMAC;
// another card with the same last 4 is accepted.
func TestOperator_DuplicateCardsRefused(t *testing.T) {
	home := t.TempDir()
	data := filepath.Join(t.TempDir(), "data")
	env := cleanEnv(home, "AGENTVAULT_DATA="+data)
	r := runBin(t, env, "4242424242424242\n737\n", "proxyd", "vault", "--init", "add-card", "--exp", "12/31", "--any-site")
	if r.code != 0 || !strings.Contains(r.stdout, "exp 12/2031") {
		t.Fatalf("add-card --exp 12/31: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runBin(t, env, "4242 4242 4242 4242\n123\n", "proxyd", "vault", "add-card", "--exp", "01/2032", "--any-site")
	if r.code == 0 || !strings.Contains(r.stderr, "already in the vault as card 1: visa •••• 4242, exp 12/31") {
		t.Errorf("the same number twice: exit %d, stderr %q", r.code, r.stderr)
	}
	if strings.Contains(r.stderr+r.stdout, "4242424242424242") {
		t.Error("the refusal shows the number")
	}
	other := "4000056655024242" // another Visa ending 4242
	r = runBin(t, env, other+"\n123\n", "proxyd", "vault", "add-card", "--exp", "12/31", "--any-site")
	if r.code != 0 || strings.Contains(r.stderr, "warning") {
		t.Errorf("another card with the same last 4: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runBin(t, env, "", "proxyd", "vault", "list"); strings.Count(r.stdout, "4242") != 2 {
		t.Errorf("vault list:\n%s", r.stdout)
	}
}
