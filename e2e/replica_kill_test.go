package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentvault/agentvault/e2e/merchant"
	"github.com/agentvault/agentvault/internal/leakcheck"
	"github.com/agentvault/agentvault/internal/tcplb"
	"github.com/agentvault/agentvault/internal/vaultcli"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/store/postgres"
	"github.com/agentvault/agentvault/store/postgres/pgtest"
	"github.com/agentvault/agentvault/vault"
)

// replica is one proxyd binary of a replicaSet: a real process, so that
// kill -9 is a real SIGKILL.
type replica struct {
	name                             string
	dataDir                          string
	proxyAddr, controlAddr, adminAdr string
	cmd                              *exec.Cmd
	exited                           chan error
	logs                             *syncBuffer
}

// replicaSet is a deployment of issue 12: two proxyd binaries on one
// Postgres schema behind a primary/backup TCP balancer (all browser
// traffic on replica 1 while it accepts connections, then on replica 2),
// the test merchant behind them, and one card in the shared vault.
type replicaSet struct {
	m    *merchant.Merchant
	dsn  string
	lb   *tcplb.Balancer
	reps [2]*replica
	card struct {
		number, cvv string
		month, year int
	}
}

func startReplicaSet(t *testing.T) *replicaSet {
	t.Helper()
	requireE2E(t, true)
	rs := &replicaSet{dsn: pgtest.DSN(t)}
	bin := buildCmd(t, "proxyd")
	rs.m = startMerchant(t)
	number, cvv := merchant.RandomCard()
	rs.card.number, rs.card.cvv = number, uncommonCVV(cvv)
	rs.card.month, rs.card.year = 11, time.Now().Year()+4
	leakcheck.Plant(rs.card.number)
	rs.m.AcceptCard(rs.card.number, rs.card.cvv, rs.card.month, rs.card.year)

	var err error
	if rs.lb, err = tcplb.Start(tcplb.PrimaryBackup); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.lb.Close() })

	// The owner's card, put in the shared vault before any replica runs:
	// replica 1's data directory gets the deployment's master.key.
	ctx := context.Background()
	dir1 := t.TempDir()
	st, err := postgres.Open(ctx, rs.dsn)
	if err != nil {
		t.Fatal(err)
	}
	v, err := vaultcli.OpenStore(ctx, dir1, st)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	_, err = v.AddCard(ctx, proxyd.DefaultOrg, "owner", vault.CardInput{
		Number: vault.NewSecret([]byte(rs.card.number)), CVV: vault.NewSecret([]byte(rs.card.cvv)),
		ExpiryMonth: rs.card.month, ExpiryYear: rs.card.year, Holder: "Ada Lovelace", AnySite: true,
	})
	st.Close()
	if err != nil {
		t.Fatalf("add card: %v", err)
	}
	caPath, err := rs.m.WriteCA(dir1)
	if err != nil {
		t.Fatal(err)
	}
	rs.reps[0] = rs.startReplica(t, bin, "replica 1", dir1, caPath)
	// Replica 2 joins with the deployment's key files (docs/DESIGN.md
	// "Replicas").
	dir2 := t.TempDir()
	for _, f := range []string{vaultcli.KeyFileName, proxyd.APIKeyFile, proxyd.ControlTokenFile} {
		b, err := os.ReadFile(filepath.Join(dir1, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir2, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rs.reps[1] = rs.startReplica(t, bin, "replica 2", dir2, caPath)
	rs.lb.SetBackends(rs.reps[0].proxyAddr, rs.reps[1].proxyAddr)
	return rs
}

func (rs *replicaSet) startReplica(t *testing.T, bin, name, dir, caPath string) *replica {
	t.Helper()
	r := &replica{name: name, dataDir: dir, logs: &syncBuffer{}, exited: make(chan error, 1),
		proxyAddr: freePort(t), controlAddr: freePort(t), adminAdr: freePort(t)}
	cfg := filepath.Join(dir, "proxyd.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`data_dir: %s
listen:
  proxy: %s
  control: %s
  control_tls: true
  admin: %s
  dashboard: %s
  credentials: %s
proxy_url: http://%s
store:
  driver: postgres
  dsn: %q
tls:
  extra_roots: [%s]
unsafe_allow_private_ranges: true
policy:
  authorized_destinations: [127.0.0.1]
log:
  level: debug
  format: json
`, dir, r.proxyAddr, r.controlAddr, r.adminAdr, freePort(t), freePort(t), rs.lb.Addr(), rs.dsn, caPath)), 0o600); err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(bin, "run", "--config", cfg)
	r.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	r.cmd.Stdout, r.cmd.Stderr = r.logs, r.logs
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.exited <- r.cmd.Wait() }()
	t.Cleanup(func() {
		if r.cmd.ProcessState != nil {
			return // killed by the test and reaped
		}
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.exited:
		case <-time.After(30 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
	})
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 2 * time.Second}
	for i := 0; ; i++ {
		select {
		case err := <-r.exited:
			t.Fatalf("%s exited early: %v; logs: %.600s", name, err, leakcheck.Redact(string(r.logs.Bytes())))
		default:
		}
		if res, err := hc.Get("http://" + r.adminAdr + "/healthz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return r
			}
		}
		if i == 300 {
			t.Fatalf("%s never answered /healthz", name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kill sends SIGKILL to the replica and waits until the process is gone
// (its sockets closed by the kernel).
func (r *replica) kill(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %s: %v", r.name, err)
	}
	err := <-r.exited
	if ws, ok := r.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("%s did not die of SIGKILL: %v", r.name, err)
	}
}

// agent starts the built mcpd pointed at both replicas' control listeners.
func (rs *replicaSet) agent(t *testing.T) *mcpAgent {
	t.Helper()
	dir := rs.reps[0].dataDir
	args := []string{
		// Over TLS, as between hosts: the replicas share one CA.
		"--control-url", "https://" + rs.reps[0].controlAddr + ",https://" + rs.reps[1].controlAddr,
		"--control-ca", filepath.Join(dir, proxyd.CAFile),
		"--control-token-file", filepath.Join(dir, proxyd.ControlTokenFile),
		"--api-key-file", filepath.Join(dir, proxyd.APIKeyFile),
		"--driver-dir", driverDir(),
		"--chromium", chromiumPath(),
		"--log-level", "debug",
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	if v := os.Getenv("PLAYWRIGHT_NODEJS_PATH"); v != "" {
		env = append(env, "PLAYWRIGHT_NODEJS_PATH="+v)
	} else if _, err := os.Stat("/usr/bin/node"); err == nil {
		env = append(env, "PLAYWRIGHT_NODEJS_PATH=/usr/bin/node")
	}
	return startAgent(t, buildCmd(t, "mcpd"), args, env)
}

// fillCheckout puts a product in the cart and fills the whole checkout,
// the card in the processor's iframe included (its authorize goes to the
// control listener mcpd reached first: replica 1).
func (rs *replicaSet) fillCheckout(t *testing.T, agent *mcpAgent) {
	t.Helper()
	cat := agent.must("get_token_catalog", map[string]any{"url": rs.m.Shop.URL + "/checkout"})
	numberTok, cvvTok := findToken(cat.text, "card", "number"), findToken(cat.text, "card", "cvv")
	if numberTok == "" || cvvTok == "" {
		t.Fatalf("catalog (%d bytes) has no card number or cvv token", len(cat.text))
	}
	agent.must("open_page", map[string]any{"url": rs.m.Shop.URL + "/products/trail-shoes"})
	agent.must("click", map[string]any{"selector": "#add-to-cart"})
	agent.must("wait_for_selector", map[string]any{"selector": "#checkout", "timeout": 30000})
	agent.must("click", map[string]any{"selector": "#checkout"})
	agent.must("wait_for_selector", map[string]any{"selector": "#place-order", "timeout": 30000})
	agent.must("wait_for_selector", map[string]any{"selector": numberSel, "frame": payFrame, "timeout": 30000})
	agent.must("fill_checkout", map[string]any{"fields": []map[string]any{
		{"selector": "#email", "value": "ada@example.org"},
		{"selector": "#first-name", "value": "Ada"},
		{"selector": "#last-name", "value": "Lovelace"},
		{"selector": "#address-line1", "value": "12 Analytical Row"},
		{"selector": "#postal-code", "value": "10115"},
		{"selector": "#city", "value": "Berlin"},
		{"selector": "#country", "value": "DE", "kind": "select"},
		{"selector": "#exp-month", "value": rs.card.month, "kind": "select", "frame": payFrame},
		{"selector": "#exp-year", "value": rs.card.year, "kind": "select", "frame": payFrame},
		{"selector": numberSel, "value": numberTok, "frame": payFrame},
		{"selector": cvcSel, "value": cvvTok, "frame": payFrame},
	}, "timeout": 5000})
}

// proxyLine is proxyd's canonical line for one request inside a tunnel.
type proxyLine struct {
	Msg, Decision, Code, Method, Host, Session string
}

// proxyLines are a replica's canonical request lines to host, by method.
func proxyLines(logs []byte, method, host string) []proxyLine {
	var out []proxyLine
	sc := bufio.NewScanner(bytes.NewReader(logs))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var l proxyLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Msg != "proxy request" {
			continue
		}
		if l.Method == method && l.Host == host {
			out = append(out, l)
		}
	}
	return out
}

func countLines(ls []proxyLine, decision, code string) int {
	n := 0
	for _, l := range ls {
		if l.Decision == decision && l.Code == code {
			n++
		}
	}
	return n
}

// numberReleases is, per session, how many times the audit log (read from
// Postgres, outside any replica) records the card number released into a
// request (purpose substitute).
func (rs *replicaSet) numberReleases(t *testing.T) map[string]int {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, rs.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.QueryAudit(ctx, vault.AuditFilter{Action: vault.AuditRelease})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range recs {
		if r.Purpose == "substitute" && r.Field == vault.FieldNumber {
			out[r.Session]++
		}
	}
	return out
}

// checkLeaks sweeps mcpd's transcript and stderr and both replicas' logs
// for the card (P11).
func (rs *replicaSet) checkLeaks(t *testing.T, agent *mcpAgent) {
	t.Helper()
	agent.close()
	l := leakcheck.New(leakcheck.Value("card number", rs.card.number), leakcheck.Value("cvv", rs.card.cvv))
	agent.transcript.sweep(t, l, "MCP results")
	l.Logs(t, "mcpd log", agent.logs.Bytes())
	for _, r := range rs.reps {
		l.Logs(t, r.name+" logs", r.logs.Bytes())
	}
	for i, img := range agent.images {
		l.Binary(t, "screenshot "+itoa(i), img)
	}
	t.Logf("P11 sweep covered %s", l.Summary())
}

// TestP21_ReplicaKilledDuringCheckout is the kill -9 proof of issue 12:
// two proxyd binaries on one Postgres behind a TCP balancer, the built
// mcpd pointed at both control listeners, real Chromium through the
// balancer. Replica 1, which serves everything, is killed with SIGKILL in
// the middle of a checkout; the browser's next connection goes to replica
// 2. The site sees one payment, and the audit log holds every release that
// went upstream (P12, P21, P22).
func TestP21_ReplicaKilledDuringCheckout(t *testing.T) {
	t.Run("BetweenFillAndSubmit", replicaKilledBeforeSubmit)
	t.Run("WhilePaymentAtSite", replicaKilledWhilePaymentAtSite)
}

// replicaKilledBeforeSubmit: the agent filled the checkout (authorize on
// replica 1), replica 1 dies, the agent places the order: the browser's
// request goes through replica 2, which loads the session and its grant
// from the store, and the purchase completes once.
func replicaKilledBeforeSubmit(t *testing.T) {
	rs := startReplicaSet(t)
	r1, r2 := rs.reps[0], rs.reps[1]
	agent := rs.agent(t)
	rs.fillCheckout(t, agent)
	if n := rs.lb.Served(r2.proxyAddr); n != 0 {
		t.Fatalf("replica 2 took %d browser connections before replica 1 died: the balancer is not primary/backup", n)
	}
	r1.kill(t)
	payHost := strings.Split(rs.m.Pay.Host, ":")[0]

	agent.must("click", map[string]any{"selector": "#place-order"})
	out := agent.must("get_session_outcome", map[string]any{
		"successSelector": successSel, "failureSelector": "#form-error:not([hidden])",
		"confirmsCheckout": true, "submitSelector": "#place-order", "timeout": 30000,
	})
	o := out.json(t)
	if o["outcome"] != "success" || o["corroborated"] != true {
		obs := agent.call("observe_page", map[string]any{})
		t.Fatalf("after replica 1 died: outcome %v, corroborated %v (status %q); page: %.300s",
			o["outcome"], o["corroborated"], out.status(), leakcheck.Redact(obs.text))
	}
	if rs.lb.Served(r2.proxyAddr) == 0 {
		t.Error("no browser connection went to replica 2 after replica 1 died")
	}
	subs := proxyLines(r2.logs.Bytes(), "POST", payHost)
	if n := countLines(subs, "substituted", ""); n != 1 {
		t.Errorf("replica 2 substituted %d POSTs to the processor, want the one confirmation", n)
	}

	// The site: one confirmation carrying the real number, one charge, one order.
	if n := rs.m.Pay.Count(rs.card.number); n != 1 {
		t.Errorf("the processor received the real number in %d requests, want 1", n)
	}
	if n := confirmPosts(rs.m); n != 1 {
		t.Errorf("the processor received %d confirmations, want 1", n)
	}
	if n := len(rs.m.Charges()); n != 1 {
		t.Errorf("the processor recorded %d payments, want 1", n)
	}
	if n := len(rs.m.Orders()); n != 1 {
		t.Errorf("the shop has %d orders, want 1", n)
	}
	// The audit: every release that went upstream, per session.
	rel := rs.numberReleases(t)
	if len(rel) != 1 {
		t.Errorf("card number releases recorded for %d sessions, want 1", len(rel))
	}
	for sid, n := range rel {
		if n != rs.m.Pay.Count(rs.card.number) {
			t.Errorf("session %s: %d card number releases audited, the processor saw %d", sid, n, rs.m.Pay.Count(rs.card.number))
		}
	}
	agent.must("close_session", map[string]any{}) // on replica 2: replica 1 cannot be reached
	rs.checkLeaks(t, agent)
}

// replicaKilledWhilePaymentAtSite: the processor holds its answer to the
// confirmation replica 1 forwarded until replica 1 has been killed, then
// records the payment. The browser's request dies with its connection;
// whatever the browser retries by itself, and the agent's second click,
// go through replica 2, which finds the card's one-purchase grant claimed
// in the store (grant_in_use while the dead replica's claim lease runs):
// nothing reaches the processor again.
func replicaKilledWhilePaymentAtSite(t *testing.T) {
	rs := startReplicaSet(t)
	r1, r2 := rs.reps[0], rs.reps[1]
	payHost := strings.Split(rs.m.Pay.Host, ":")[0]
	agent := rs.agent(t)
	rs.fillCheckout(t, agent)

	arrived, release := make(chan struct{}, 1), make(chan struct{})
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(letGo)
	rs.m.HoldPayments(func() {
		select {
		case arrived <- struct{}{}:
		default:
		}
		<-release
	})
	agent.must("click", map[string]any{"selector": "#place-order"})
	select {
	case <-arrived:
	case <-time.After(90 * time.Second):
		t.Fatal("the confirmation never reached the processor")
	}
	if n := rs.lb.Served(r2.proxyAddr); n != 0 {
		t.Fatalf("replica 2 took %d browser connections before replica 1 died", n)
	}
	r1.kill(t)
	letGo()
	for i := 0; len(rs.m.Charges()) == 0; i++ {
		if i == 200 {
			t.Fatal("the processor never recorded the held payment")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The page learns that the payment failed: from the dead connection,
	// or from replica 2's refusal of a retry Chromium made by itself.
	agent.must("wait_for_selector", map[string]any{"selector": "#form-error:not([hidden])", "timeout": 30000})
	posts := proxyLines(r2.logs.Bytes(), "POST", payHost)
	byChromium := len(posts)
	inUse := countLines(posts, "refused", "grant_in_use")
	if byChromium != inUse {
		t.Errorf("replica 2 handled %d POSTs to the processor on its own, %d refused with grant_in_use: every retry must be refused", byChromium, inUse)
	}
	obs := agent.must("observe_page", map[string]any{}).json(t)
	t.Logf("Chromium after the kill: %d retries of the POST on its own through replica 2 (refused grant_in_use: %d); the page says %v",
		byChromium, inUse, leakcheck.Redact(fmt.Sprint(obs["errorText"])))

	// The agent tries again: refused by replica 2 before anything goes out.
	agent.must("click", map[string]any{"selector": "#place-order"})
	for i := 0; len(proxyLines(r2.logs.Bytes(), "POST", payHost)) == byChromium; i++ {
		if i == 300 {
			t.Fatal("the agent's second click sent no POST through replica 2")
		}
		time.Sleep(100 * time.Millisecond)
	}
	posts = proxyLines(r2.logs.Bytes(), "POST", payHost)
	if n := countLines(posts[byChromium:], "refused", "grant_in_use"); n != len(posts)-byChromium {
		t.Errorf("the agent's retry: %d POSTs through replica 2, %d refused with grant_in_use", len(posts)-byChromium, n)
	}
	out := agent.must("get_session_outcome", map[string]any{
		"successSelector": successSel, "failureSelector": "#form-error:not([hidden])",
		"confirmsCheckout": true, "submitSelector": "#place-order", "timeout": 30000,
	}).json(t)
	if out["outcome"] == "success" {
		t.Errorf("the agent's retry ended in success: the card was sent twice or the shop took an unpaid order")
	}

	// The site: the one payment replica 1 forwarded, nothing after.
	if n := confirmPosts(rs.m); n != 1 {
		t.Errorf("the processor received %d confirmations, want 1", n)
	}
	if n := rs.m.Pay.Count(rs.card.number); n != 1 {
		t.Errorf("the processor received the real number in %d requests, want 1", n)
	}
	if n := len(rs.m.Charges()); n != 1 {
		t.Errorf("the processor recorded %d payments, want 1", n)
	}
	// The audit holds the one release that went upstream, written before
	// it left replica 1 (P12).
	rel := rs.numberReleases(t)
	var sessions []string
	for _, l := range posts {
		sessions = append(sessions, l.Session)
	}
	if len(rel) != 1 {
		t.Errorf("card number releases recorded for %d sessions, want 1", len(rel))
	}
	for sid, n := range rel {
		if n != 1 {
			t.Errorf("session %s: %d card number releases audited, want the 1 that reached the processor", sid, n)
		}
		for _, s := range sessions {
			if s != sid {
				t.Errorf("replica 2 refused a POST of session %s, the audited release is of session %s", s, sid)
			}
		}
	}
	agent.must("close_session", map[string]any{})
	rs.checkLeaks(t, agent)
}
