package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/e2e/merchant"
	"github.com/agentvault/agentvault/internal/leakcheck"
	"github.com/agentvault/agentvault/internal/tcplb"
)

func freePort(t *testing.T) string { t.Helper(); return tcplb.FreeAddr(t) }

// TestProxydBinaryOwnerFlow is the owner's walk-through with the built
// binary: `proxyd vault add-card` reads the card from stdin, `proxyd run`
// starts from a strict YAML config, `proxyd session create` prints the
// proxy credential, and curl through it delivers the real number to the
// processor, with the mock token itself in the form. SIGTERM shuts it down
// cleanly. Its stderr is swept for the canaries (P11).
func TestProxydBinaryOwnerFlow(t *testing.T) {
	requireE2E(t, false)
	curl, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("curl is missing")
		}
		t.Skip("curl is missing")
	}
	m := startMerchant(t)
	number, cvv := merchant.RandomCard()
	cvv = uncommonCVV(cvv)
	leakcheck.Plant(number)
	year := time.Now().Year() + 3
	m.AcceptCard(number, cvv, 11, year)
	bin := buildCmd(t, "proxyd")
	data := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + data}

	add := exec.Command(bin, "vault", "--data", data, "--init", "add-card", "--exp", fmt.Sprintf("11/%d", year), "--any-site")
	add.Env = env
	add.Stdin = strings.NewReader(number + "\n" + cvv + "\n")
	var addOut, addErr bytes.Buffer
	add.Stdout, add.Stderr = &addOut, &addErr
	if err := add.Run(); err != nil {
		t.Fatalf("proxyd vault add-card: %v (stderr %d bytes)", err, addErr.Len())
	}
	caPath, err := m.WriteCA(data)
	if err != nil {
		t.Fatal(err)
	}
	// Every listener on a port of its own: the defaults (7700-7703) may be
	// taken by an appliance running on the same machine.
	proxyAddr, controlAddr, adminAddr, dashAddr, credAddr := freePort(t), freePort(t), freePort(t), freePort(t), freePort(t)
	cfg := filepath.Join(data, "proxyd.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`data_dir: %s
listen:
  proxy: %s
  control: %s
  admin: %s
  dashboard: %s
  credentials: %s
tls:
  extra_roots: [%s]
unsafe_allow_private_ranges: true
policy:
  authorized_destinations: [127.0.0.1]
log:
  level: debug
  format: json
`, data, proxyAddr, controlAddr, adminAddr, dashAddr, credAddr, caPath)), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	run := exec.Command(bin, "run", "--config", cfg)
	run.Env = env
	run.Stdout, run.Stderr = logs, logs
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- run.Wait() }()
	defer func() { _ = run.Process.Kill() }() // a no-op once it has exited
	// Wait for /healthz (bounded by count, not asserted on time).
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 2 * time.Second}
	up := false
	for i := 0; i < 150 && !up; i++ {
		select {
		case err := <-exited:
			t.Fatalf("proxyd run exited early: %v", err)
		default:
		}
		if res, err := hc.Get("http://" + adminAddr + "/healthz"); err == nil {
			res.Body.Close()
			up = res.StatusCode == http.StatusOK
		}
		if !up {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !up {
		t.Fatal("proxyd never answered /healthz")
	}

	sc := exec.Command(bin, "session", "create", "--data", data, "--control", "http://"+controlAddr)
	sc.Env = env
	out, err := sc.Output()
	if err != nil {
		t.Fatalf("proxyd session create: %v", err)
	}
	sid := regexp.MustCompile(`(?m)^session:\s+(\S+)`).FindSubmatch(out)
	proxy := regexp.MustCompile(`(?m)^proxy:\s+(\S+)`).FindSubmatch(out)
	ca := regexp.MustCompile(`(?m)^ca:\s+(\S+)`).FindSubmatch(out)
	if sid == nil || proxy == nil || ca == nil {
		t.Fatalf("session create printed no session, proxy or ca line (%d bytes)", len(out))
	}

	// Authorize the card tokens for the processor's page, as mcpd would.
	tok, err := os.ReadFile(filepath.Join(data, "control-token"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(data, "api-key"))
	if err != nil {
		t.Fatal(err)
	}
	ctl := control.NewClient("http://"+controlAddr, strings.TrimSpace(string(tok)), nil)
	ctx := context.Background()
	page := m.Pay.URL + "/legacy/checkout"
	cat, err := ctl.Catalog(ctx, strings.TrimSpace(string(key)), page)
	if err != nil {
		t.Fatal(err)
	}
	numTok, cvvTok := findToken(string(cat), "card", "number"), findToken(string(cat), "card", "cvv")
	for _, tk := range []string{numTok, cvvTok} {
		if _, err := ctl.Authorize(ctx, string(sid[1]), control.AuthorizeRequest{Token: tk, PageURL: page,
			OrderTotal: &control.OrderTotal{Amount: "42.50", Currency: "EUR"}}); err != nil {
			t.Fatalf("authorize: %v", err)
		}
	}
	form := "number=" + numTok + "&cvc=" + cvvTok + "&exp_month=11&exp_year=" + strconv.Itoa(year) + "&amount=42.50&currency=EUR"
	c := exec.Command(curl, "-sS", "--max-time", "30", "-w", "\n%{http_code}", "--proxy", string(proxy[1]),
		"--cacert", string(ca[1]), "--data", form, page)
	c.Env = []string{"PATH=" + os.Getenv("PATH")}
	body, err := c.Output()
	if err != nil {
		t.Fatalf("curl through the proxyd binary: %v", err)
	}
	if !bytes.Contains(body, []byte(`id="payment-ok"`)) || !bytes.HasSuffix(body, []byte("\n200")) {
		t.Errorf("curl got no payment confirmation (%d bytes)", len(body))
	}
	if !m.Pay.Saw(number) || !m.Pay.SawField(cvv) {
		t.Error("the processor did not receive the real card")
	}
	if m.Pay.Saw(numTok) {
		t.Error("a mock token reached the processor")
	}
	leak := leakcheck.New(leakcheck.Value("card number", number), leakcheck.Value("cvv", cvv))
	leak.Text(t, "curl output", body)
	leak.Text(t, "add-card output", append(addOut.Bytes(), addErr.Bytes()...))

	// Graceful shutdown on SIGTERM.
	if err := run.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Errorf("proxyd run did not exit cleanly on SIGTERM: %v", err)
	}
	leak.Logs(t, "proxyd binary logs", logs.Bytes())
	if _, err := net.DialTimeout("tcp", proxyAddr, time.Second); err == nil {
		t.Error("the proxy listener is still open after shutdown")
	}
}
