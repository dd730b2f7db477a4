package e2e

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/vault"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/mxschmitt/playwright-go"
)

// ownerAppliance is proxyd's Main with the owner's rules explicitly on, the
// owner's dashboard on a TLS loopback listener, an owner account, and the
// seeded card under an approval threshold.
type ownerAppliance struct {
	*appliance
	pm            *proxyd.Main
	dashURL       string
	dashSPKI      string
	cardID        string
	ownerEmail    string
	ownerPassword string
}

func startOwnerAppliance(t *testing.T, threshold string) *ownerAppliance {
	t.Helper()
	ap := &appliance{m: startMerchant(t), dataDir: t.TempDir(), logs: &syncBuffer{}}
	caPath, err := ap.m.WriteCA(ap.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	pm := proxyd.NewMain()
	pm.Stderr = ap.logs
	pm.Config.DataDir = ap.dataDir
	pm.Config.Listen = proxyd.ListenConfig{Proxy: "127.0.0.1:0", Control: "127.0.0.1:0", Admin: "127.0.0.1:0", Dashboard: "127.0.0.1:0"}
	pm.Config.UnsafeAllowPrivateRanges = true
	pm.Config.TLS.ExtraRoots = []string{caPath}
	pm.Config.Policy.OwnerRules = true
	pm.Config.Log = proxyd.LogConfig{Level: "debug", Format: "json"}
	ctx, cancel := context.WithCancel(context.Background())
	if err := pm.Open(ctx); err != nil {
		cancel()
		t.Fatalf("proxyd Open: %v", err)
	}
	ap.vault = pm.Vault
	ap.seed(t, pm.Vault)
	oa := &ownerAppliance{appliance: ap, pm: pm, ownerEmail: "owner@example.org", ownerPassword: "Owner-" + randomHex(8)}
	if err := pm.Owner.SetOwnerPassword(ctx, oa.ownerEmail, oa.ownerPassword); err != nil {
		cancel()
		t.Fatalf("owner password: %v", err)
	}
	items, err := pm.Vault.List(ctx, org)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	for _, it := range items {
		if it.Kind == vault.KindCard {
			oa.cardID = it.ID
		}
	}
	thr, err := policy.ParseDecimal(threshold, "EUR")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := pm.Owner.SetCardPolicy(ctx, owner.CardPolicy{CardID: oa.cardID, Currency: "EUR",
		Rules: policy.CardPolicy{ApprovalThreshold: &thr}}, "e2e"); err != nil {
		cancel()
		t.Fatalf("card rules: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- pm.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxyd Run: %v", err)
		}
	})
	ap.proxyAddr = pm.ProxyAddr.String()
	ap.controlURL = "http://" + pm.ControlAddr.String()
	ap.controlTokenFile = filepath.Join(ap.dataDir, proxyd.ControlTokenFile)
	ap.apiKeyFile = filepath.Join(ap.dataDir, proxyd.APIKeyFile)
	ap.apiKey = pm.APIKey
	ap.metricsURL = "http://" + pm.AdminAddr.String() + "/metrics"
	ap.ctl = control.NewClient(ap.controlURL, pm.ControlToken, nil)
	if pm.DashboardAddr == nil {
		t.Fatal("proxyd started without the dashboard")
	}
	oa.dashURL = "https://" + pm.DashboardAddr.String()
	oa.dashSPKI = dashboardSPKI(t, pm.DashboardAddr.String())
	return oa
}

// dashboardSPKI reads the dashboard's locally issued leaf (it may take a
// moment to start serving) and returns its SPKI hash for Chromium's trust
// list.
func dashboardSPKI(t *testing.T, addr string) string {
	t.Helper()
	var lastErr error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, ServerName: "127.0.0.1"}) // only to read the leaf it presents
		if err == nil {
			leaf := c.ConnectionState().PeerCertificates[0]
			c.Close()
			sum := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
			return base64.StdEncoding.EncodeToString(sum[:])
		}
		lastErr = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("dashboard TLS: %v", lastErr)
	return ""
}

// ownerBrowser is the owner at the dashboard, in a Chromium of their own
// (not mcpd's, and not through the proxy).
type ownerBrowser struct {
	oa   *ownerAppliance
	page playwright.Page
	// seen keeps every dashboard page the owner looked at, for the leak
	// sweep.
	seen syncBuffer
}

func (oa *ownerAppliance) signInOwner(t *testing.T) *ownerBrowser {
	t.Helper()
	b := chromium(t, []string{oa.dashSPKI}, nil)
	ctx, err := b.NewContext()
	if err != nil {
		t.Fatal(err)
	}
	page, err := ctx.NewPage()
	if err != nil {
		t.Fatal(err)
	}
	ob := &ownerBrowser{oa: oa, page: page}
	if _, err := page.Goto(oa.dashURL+"/signin", playwright.PageGotoOptions{Timeout: playwright.Float(15000)}); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	must(t, "email", page.Locator("input[name=email]").Fill(oa.ownerEmail))
	must(t, "password", page.Locator("input[name=password]").Fill(oa.ownerPassword))
	must(t, "sign in", page.Locator("form[action='/signin'] button").Click())
	must(t, "approvals page", page.Locator("h1:has-text('Approvals')").WaitFor(playwright.LocatorWaitForOptions{Timeout: playwright.Float(10000)}))
	ob.keep(t)
	return ob
}

// open navigates the owner's tab to a dashboard page. The Approvals page
// reloads itself when what waits for the owner changes; a navigation that
// races that reload ends net::ERR_ABORTED, which is not the dashboard
// failing, so it is tried again (a few times, each with its own timeout).
func (ob *ownerBrowser) open(t *testing.T, path string) {
	t.Helper()
	var err error
	for try := 0; try < 5; try++ {
		if _, err = ob.page.Goto(ob.oa.dashURL+path, playwright.PageGotoOptions{Timeout: playwright.Float(15000)}); err == nil {
			return
		}
		if !strings.Contains(err.Error(), "ERR_ABORTED") && !strings.Contains(err.Error(), "interrupted by another navigation") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("dashboard %s: %v", path, err)
}

func (ob *ownerBrowser) keep(t *testing.T) {
	if html, err := ob.page.Content(); err == nil {
		ob.seen.Write([]byte(html))
	}
}

// decideNext reloads the approvals page until a request is waiting, reads
// the banner, and approves or denies the first request. It returns the
// banner's text.
func (ob *ownerBrowser) decideNext(t *testing.T, decision string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ob.open(t, "/")
		if n, _ := ob.page.Locator("article.approval").Count(); n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no approval appeared on the dashboard within 60 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	ob.keep(t)
	banner, err := ob.page.Locator(".banner").InnerText()
	if err != nil {
		t.Fatalf("the dashboard shows a pending request but no banner: %v", err)
	}
	must(t, decision, ob.page.Locator("article.approval").First().Locator("button[value="+decision+"]").Click())
	must(t, "after the decision", ob.page.WaitForLoadState())
	ob.keep(t)
	return banner
}

// progressFeed collects the progress notifications mcpd sends the agent.
type progressFeed struct {
	mu   sync.Mutex
	msgs []string
	ch   chan string
}

func (p *progressFeed) handler(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	p.msgs = append(p.msgs, r.Params.Message)
	p.mu.Unlock()
	select {
	case p.ch <- r.Params.Message:
	default:
	}
}

// next returns the next notification not yet read.
func (p *progressFeed) next(t *testing.T, within time.Duration) string {
	t.Helper()
	select {
	case m := <-p.ch:
		return m
	case <-time.After(within):
		t.Fatalf("no progress notification within %v", within)
		return ""
	}
}

// waitFor reads notifications until one holds want.
func (p *progressFeed) waitFor(t *testing.T, within time.Duration, want string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("no progress notification saying %q within %v", want, within)
		}
		if strings.Contains(p.next(t, left), want) {
			return
		}
	}
}

// drain forgets the notifications not read yet (the tail of an earlier
// call).
func (p *progressFeed) drain() {
	for {
		select {
		case <-p.ch:
		default:
			return
		}
	}
}

func (p *progressFeed) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.msgs)
}

// atLeast waits until n notifications have arrived in all, and says how
// many did. A notification mcpd sent before a call's answer can reach the
// handler after the call returned, so a count read at once may be short.
func (p *progressFeed) atLeast(n int, within time.Duration) int {
	deadline := time.Now().Add(within)
	for p.count() < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	return p.count()
}

// startAgentWithProgress is startAgent with a client that receives progress
// notifications.
func startAgentWithProgress(t *testing.T, bin string, args, env []string) (*mcpAgent, *progressFeed) {
	t.Helper()
	feed := &progressFeed{ch: make(chan string, 256)}
	a := &mcpAgent{t: t, logs: &syncBuffer{}, latency: map[string][]time.Duration{}}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stderr = a.logs
	client := mcp.NewClient(&mcp.Implementation{Name: "agentvault-e2e-agent", Version: "1.0.0"},
		&mcp.ClientOptions{ProgressNotificationHandler: feed.handler})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to mcpd: %v (stderr has %d bytes)", err, len(a.logs.Bytes()))
	}
	a.cs = cs
	t.Cleanup(func() { _ = cs.Close() })
	return a, feed
}

// asyncCall is a tool call running while the test plays the owner.
type asyncCall struct {
	done chan struct{}
	ans  answer
	err  error
}

// callAsync starts a tool call with a progress token and returns at once.
func (a *mcpAgent) callAsync(name string, args map[string]any, progressToken string) *asyncCall {
	c := &asyncCall{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		p := &mcp.CallToolParams{Name: name, Arguments: args}
		p.SetProgressToken(progressToken)
		res, err := a.cs.CallTool(ctx, p)
		if err != nil {
			c.err = err
			return
		}
		raw, _ := json.Marshal(res)
		a.transcript.Write(raw)
		var parts []string
		for _, ct := range res.Content {
			if tc, ok := ct.(*mcp.TextContent); ok {
				parts = append(parts, tc.Text)
			}
		}
		text := strings.Join(parts, "\n")
		a.transcript.Write([]byte(text + "\n"))
		c.ans = answer{text: text, isErr: res.IsError, res: res}
	}()
	return c
}

func (c *asyncCall) wait(t *testing.T) answer {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(5 * time.Minute):
		t.Fatal("the tool call did not end within 5 minutes")
	}
	if c.err != nil {
		t.Fatalf("protocol error: %v", c.err)
	}
	return c.ans
}
