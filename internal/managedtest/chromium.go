package managedtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startWait bounds how long a browser process may take to say where it
// listens: generous, the machine may be loaded.
const startWait = 90 * time.Second

// ChromiumOptions configures a Chromium started as a process of its own.
type ChromiumOptions struct {
	// Path is the browser binary (CHROMIUM_PATH, then /usr/bin/chromium).
	Path string
	// TrustSPKI lists base64 SHA-256 hashes of CA public keys Chromium
	// accepts certificates from (proxyd's CA).
	TrustSPKI []string
	// ProxyServer routes every request, loopback included
	// (http://host:port, no credentials: Chromium takes none on its
	// command line).
	ProxyServer string
	// Width and Height size the window (default 1280x900).
	Width, Height int
}

func (o *ChromiumOptions) defaults() {
	if o.Path == "" {
		o.Path = os.Getenv("CHROMIUM_PATH")
	}
	if o.Path == "" {
		o.Path = "/usr/bin/chromium"
	}
	if o.Width == 0 || o.Height == 0 {
		o.Width, o.Height = 1280, 900
	}
}

// Chromium is a headless Chromium answering the DevTools protocol on a
// loopback port, as a remote browser or a provider's would.
type Chromium struct {
	// WSURL is the browser's DevTools WebSocket
	// (ws://127.0.0.1:PORT/devtools/browser/ID); HTTPURL its HTTP endpoint
	// (http://127.0.0.1:PORT, which answers /json/version).
	WSURL, HTTPURL string

	cmd  *exec.Cmd
	dir  string
	done chan struct{}
}

// StartChromium starts Chromium with --remote-debugging-port=0 and reads
// the port it chose from its stderr; the test's end stops it.
func StartChromium(t testing.TB, opts ChromiumOptions) *Chromium {
	t.Helper()
	c, err := startChromium(opts)
	if err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func startChromium(opts ChromiumOptions) (*Chromium, error) {
	opts.defaults()
	dir, err := os.MkdirTemp("", "managedtest-chromium-")
	if err != nil {
		return nil, err
	}
	args := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-default-apps",
		"--disable-features=AutofillServerCommunication,OptimizationHints,MediaRouter,Translate",
		"--no-default-browser-check", "--metrics-recording-only",
		"--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
		// The solver's DevTools client sends an Origin header.
		"--remote-allow-origins=" + solverOrigin,
		"--user-data-dir=" + dir,
		fmt.Sprintf("--window-size=%d,%d", opts.Width, opts.Height),
	}
	if len(opts.TrustSPKI) > 0 {
		args = append(args, "--ignore-certificate-errors-spki-list="+strings.Join(opts.TrustSPKI, ","))
	}
	if opts.ProxyServer != "" {
		args = append(args, "--proxy-server="+opts.ProxyServer, "--proxy-bypass-list=<-loopback>")
	}
	args = append(args, "about:blank")
	cmd := exec.Command(opts.Path, args...)
	cmd.Env = cleanEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c := &Chromium{cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.done) }()
	ws, err := readLine(stderr, "DevTools listening on ", startWait)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("chromium did not announce its DevTools endpoint: %w", err)
	}
	u, err := url.Parse(ws)
	if err != nil || u.Host == "" {
		c.Close()
		return nil, fmt.Errorf("chromium announced %q", ws)
	}
	c.WSURL, c.HTTPURL = ws, "http://"+u.Host
	return c, nil
}

// Close stops Chromium (its whole process group: the renderers too) and
// removes its profile.
func (c *Chromium) Close() {
	stopGroup(c.cmd, c.done)
	os.RemoveAll(c.dir)
}

// PlaywrightServerOptions configures a Playwright browser server.
type PlaywrightServerOptions struct {
	// DriverDir holds package/cli.js of playwright-core, the same version
	// as playwright-go's driver (PLAYWRIGHT_DRIVER_PATH).
	DriverDir string
	// NodePath is node (PLAYWRIGHT_NODEJS_PATH, then /usr/bin/node).
	NodePath string
	Chromium ChromiumOptions
}

// PlaywrightServer is `playwright launch-server` running Chromium: what
// BrowserType.launchServer serves, on a loopback port.
type PlaywrightServer struct {
	// WSEndpoint is what BrowserType.connect takes.
	WSEndpoint string

	cmd  *exec.Cmd
	dir  string
	done chan struct{}
}

// StartPlaywrightServer starts the driver's launch-server command as a
// process of its own and reads its endpoint; the test's end stops it and
// its Chromium.
func StartPlaywrightServer(t testing.TB, opts PlaywrightServerOptions) *PlaywrightServer {
	t.Helper()
	if opts.DriverDir == "" {
		opts.DriverDir = os.Getenv("PLAYWRIGHT_DRIVER_PATH")
	}
	if opts.NodePath == "" {
		opts.NodePath = os.Getenv("PLAYWRIGHT_NODEJS_PATH")
	}
	if opts.NodePath == "" {
		opts.NodePath = "/usr/bin/node"
	}
	opts.Chromium.defaults()
	dir := t.TempDir()
	args := []string{
		"--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-default-apps",
		"--disable-features=AutofillServerCommunication,OptimizationHints,MediaRouter,Translate",
	}
	if len(opts.Chromium.TrustSPKI) > 0 {
		args = append(args, "--ignore-certificate-errors-spki-list="+strings.Join(opts.Chromium.TrustSPKI, ","))
	}
	cfg, _ := json.Marshal(map[string]any{
		"executablePath": opts.Chromium.Path,
		"headless":       true,
		"args":           args,
		"host":           "127.0.0.1",
		"port":           0,
	})
	cfgPath := filepath.Join(dir, "launch-server.json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(opts.NodePath, filepath.Join(opts.DriverDir, "package", "cli.js"), "launch-server", "--browser", "chromium", "--config", cfgPath)
	cmd.Env = cleanEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the Playwright browser server: %v", err)
	}
	s := &PlaywrightServer{cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	t.Cleanup(func() { stopGroup(s.cmd, s.done) })
	ws, err := readLine(stdout, "ws://", startWait)
	if err != nil {
		t.Fatalf("the Playwright browser server did not print its endpoint: %v", err)
	}
	s.WSEndpoint = "ws://" + ws
	return s
}

// readLine waits for a line starting with prefix and returns the rest;
// the reader is drained afterwards so the process never blocks on it.
func readLine(r io.Reader, prefix string, within time.Duration) (string, error) {
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if !sent {
				if i := strings.Index(line, prefix); i >= 0 {
					found <- line[i+len(prefix):]
					sent = true
				}
			}
		}
		if !sent {
			close(found)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	select {
	case v, ok := <-found:
		if !ok {
			return "", fmt.Errorf("the process ended first")
		}
		return v, nil
	case <-ctx.Done():
		return "", fmt.Errorf("nothing within %s", within)
	}
}

// stopGroup asks the process group to stop, then kills it if it has not
// within ten seconds.
func stopGroup(cmd *exec.Cmd, done chan struct{}) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
	}
	// Renderers of the group that outlived their parent.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// cleanEnv is the test's environment without proxy variables: they must
// not steer the browser.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToLower(k) {
		case "http_proxy", "https_proxy", "no_proxy", "all_proxy":
			continue
		}
		env = append(env, kv)
	}
	return env
}
