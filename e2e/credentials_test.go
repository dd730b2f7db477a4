package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/credentials"
	"github.com/agentvault/agentvault/internal/leakcheck"
	"github.com/agentvault/agentvault/internal/vaultcli"
	"github.com/agentvault/agentvault/mcpserver"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/skills"
	"github.com/agentvault/agentvault/vault"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/mxschmitt/playwright-go"
)

// testClock is the credential links' clock: the test moves it instead of
// sleeping 60 s.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// credAgent is an in-process mcpd (mcpserver with the credential switch on)
// for one member's API key, reached by a real MCP client; every answer goes
// to the shared transcript for the P11 sweep.
func credAgent(t *testing.T, controlURL, controlToken, apiKey, skillsDir string, transcript *answers) *mcpAgent {
	t.Helper()
	ctl := control.NewClient(controlURL, controlToken, nil)
	sk, err := skills.Open(skillsDir)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mcpserver.New(mcpserver.Config{Control: ctl, APIKey: apiKey, Credentials: ctl, Skills: sk})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = srv.Run(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agentvault-e2e-agent", Version: "1.0.0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); cancel(); _ = srv.Close() })
	a := &mcpAgent{t: t, cs: cs, logs: &syncBuffer{}, latency: map[string][]time.Duration{}}
	t.Cleanup(func() { transcript.add(&a.transcript) })
	return a
}

// runtimePOST is the skill's runtime: it splits the use URL at '#' and
// POSTs the token to the part before it.
func runtimePOST(t *testing.T, useURL string) (int, control.CredentialUseAnswer, string) {
	t.Helper()
	base, tok, ok := strings.Cut(useURL, "#")
	if !ok || tok == "" || strings.Contains(base, tok) {
		t.Fatalf("the use URL must carry its token after '#' only")
	}
	body, _ := json.Marshal(control.CredentialUseRequest{Token: tok})
	hc := &http.Client{Transport: &http.Transport{Proxy: nil}}
	resp, err := hc.Post(base, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("runtime POST: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var ans control.CredentialUseAnswer
	_ = json.Unmarshal(raw, &ans)
	return resp.StatusCode, ans, resp.Header.Get("X-Agentvault-Code")
}

// TestCredentials_PortalE2E is issue 14's proof, through proxyd's Main, its
// TLS dashboard in real Chromium, its control API and its credential-use
// listener.
func TestCredentials_PortalE2E(t *testing.T) {
	requireE2E(t, true)
	dataDir := t.TempDir()
	logs := &syncBuffer{}
	clk := &testClock{t: time.Now().UTC()}
	pm := proxyd.NewMain()
	pm.Stderr = logs
	pm.Now = clk.Now
	pm.Config.DataDir = dataDir
	pm.Config.Listen = proxyd.ListenConfig{Proxy: "127.0.0.1:0", Control: "127.0.0.1:0", Admin: "127.0.0.1:0",
		Dashboard: "127.0.0.1:0", Credentials: "127.0.0.1:0"}
	pm.Config.Log = proxyd.LogConfig{Level: "debug", Format: "json"}
	ctx, cancel := context.WithCancel(context.Background())
	if err := pm.Open(ctx); err != nil {
		cancel()
		t.Fatalf("proxyd Open: %v", err)
	}
	const ownerEmail = "owner@example.org"
	ownerPassword := "Owner-" + randomHex(8)
	if err := pm.Owner.SetOwnerPassword(ctx, ownerEmail, ownerPassword); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pm.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxyd Run: %v", err)
		}
	})
	dashURL := "https://" + pm.DashboardAddr.String()
	dashSPKI := dashboardSPKI(t, pm.DashboardAddr.String())
	controlURL := "http://" + pm.ControlAddr.String()

	// The organisation: the owner (the dashboard account), an admin and two
	// members, each agent's API key bound to its person.
	svc := pm.Credentials
	op, err := svc.PrincipalFor(ctx, pm.Owner.Org(), ownerEmail)
	if err != nil || op.Role != credentials.RoleOwner {
		t.Fatalf("owner principal: %+v, %v", op, err)
	}
	// The owner's agent holds the default key, which acts for the single
	// owner with no binding (P24); each other key is offered by the owner
	// and accepted by its person.
	keys := map[string]string{ownerEmail: pm.APIKey}
	for user, role := range map[string]credentials.Role{"adm@example.org": credentials.RoleAdmin, "ana@example.org": credentials.RoleMember, "bia@example.org": credentials.RoleMember} {
		if err := svc.PutMember(ctx, op, credentials.Member{Org: op.Org, User: user, Role: role}); err != nil {
			t.Fatal(err)
		}
		k, secret, err := pm.Owner.CreateAPIKey(ctx, "agent of "+user, owner.Scope{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.BindKey(ctx, op, k.ID, user); err != nil {
			t.Fatal(err)
		}
		up, err := svc.PrincipalFor(ctx, op.Org, user)
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.AcceptKey(ctx, up, k.ID); err != nil {
			t.Fatal(err)
		}
		keys[user] = secret
	}
	transcript := &answers{}
	skillsDir := filepath.Join(dataDir, "skills")
	agent := func(user string) *mcpAgent {
		return credAgent(t, controlURL, pm.ControlToken, keys[user], skillsDir, transcript)
	}
	ownerAgent := agent(ownerEmail)

	userCanary := "erp-user-" + randomHex(6)
	pwCanary := "Erp-Pass-" + randomHex(10)
	anaCanary := "Ana-Pass-" + randomHex(10)

	// The skill says what it needs; a bad credentials field is refused.
	bad := ownerAgent.refused("file_write", map[string]any{"path": "extrair-pedidos/SKILL.md",
		"content": "---\nname: extrair-pedidos\ndescription: x\ncredentials: sankhya\n---\n"}, "invalid_input")
	if !strings.Contains(bad.text, "credentials") {
		t.Errorf("the refusal does not name the field: %q", bad.status())
	}
	ownerAgent.must("file_write", map[string]any{"path": "extrair-pedidos/SKILL.md",
		"content": "---\nname: extrair-pedidos\ndescription: Pulls the day's orders from the ERP.\ncredentials: [sankhya]\n---\nRun orders.py.\n"})
	found := ownerAgent.must("skill_find", map[string]any{"query": "orders"}).json(t)
	if sk, _ := found["skills"].([]any); len(sk) != 1 || !strings.Contains(mustJSON(sk), `"credentials":["sankhya"]`) {
		t.Fatalf("skill_find = %v", found)
	}

	// 1. The owner's agent asks; the owner opens the link in Chromium and
	// types the values.
	if r := ownerAgent.refused("credential_use", map[string]any{"name": "sankhya"}, "not_found"); !strings.Contains(r.text, "credential_request") {
		t.Errorf("not_found does not point at credential_request: %q", r.status())
	}
	req := ownerAgent.must("credential_request", map[string]any{"name": "sankhya", "fields": []string{"username", "password"}}).json(t)
	link, _ := req["url"].(string)
	if !strings.HasPrefix(link, dashURL+"/credentials/enter/") {
		t.Fatalf("entry link %q is not on the dashboard", link)
	}
	b := chromium(t, []string{dashSPKI}, nil)
	bctx, err := b.NewContext()
	if err != nil {
		t.Fatal(err)
	}
	page, err := bctx.NewPage()
	if err != nil {
		t.Fatal(err)
	}
	var pages syncBuffer
	keep := func() {
		if html, err := page.Content(); err == nil {
			pages.Write([]byte(html))
		}
	}
	// Not signed in: the link sends the owner to sign in, and is not spent.
	if _, err := page.Goto(link, playwright.PageGotoOptions{Timeout: playwright.Float(15000)}); err != nil {
		t.Fatal(err)
	}
	must(t, "sign-in form", page.Locator("input[name=email]").Fill(ownerEmail))
	must(t, "password", page.Locator("input[name=password]").Fill(ownerPassword))
	must(t, "sign in", page.Locator("form[action='/signin'] button").Click())
	must(t, "signed in", page.Locator("h1:has-text('Approvals')").WaitFor(playwright.LocatorWaitForOptions{Timeout: playwright.Float(10000)}))
	// Then opens the link again, as the seed says.
	if _, err := page.Goto(link); err != nil {
		t.Fatal(err)
	}
	must(t, "entry form", page.Locator("h1:has-text('Enter sankhya')").WaitFor(playwright.LocatorWaitForOptions{Timeout: playwright.Float(10000)}))
	must(t, "username", page.Locator("input[name=value_username]").Fill(userCanary))
	must(t, "password", page.Locator("input[name=value_password]").Fill(pwCanary))
	must(t, "save", page.Locator("form[action='/credentials/enter'] button").Click())
	must(t, "saved", page.Locator(".flash:has-text('Saved the values of sankhya')").WaitFor(playwright.LocatorWaitForOptions{Timeout: playwright.Float(10000)}))
	keep()
	// A second open of the link fails.
	resp, err := page.Goto(link)
	if err != nil {
		t.Fatal(err)
	}
	keep()
	if resp.Status() != http.StatusGone {
		t.Errorf("second open of the entry link: HTTP %d, want 410", resp.Status())
	}
	if n, _ := page.Locator("input[name=value_password]").Count(); n != 0 {
		t.Error("the second open showed the form again")
	}

	// 2. The skill's runtime: one POST gets the values, a second fails, a
	// POST after 60 s fails.
	list := ownerAgent.must("credential_list", nil).json(t)
	if s := mustJSON(list); !strings.Contains(s, `"isSelected":true`) || !strings.Contains(s, `"hasValues":true`) {
		t.Fatalf("credential_list = %s", s)
	}
	use := ownerAgent.must("credential_use", map[string]any{"name": "sankhya"}).json(t)
	useURL, _ := use["url"].(string)
	status, ans, _ := runtimePOST(t, useURL)
	if status != http.StatusOK || ans.Name != "sankhya" || ans.Values["username"] != userCanary || ans.Values["password"] != pwCanary {
		t.Fatalf("first POST: HTTP %d, name %q, %d values", status, ans.Name, len(ans.Values))
	}
	if status, ans, code := runtimePOST(t, useURL); status < 400 || len(ans.Values) != 0 || code != "link_used" {
		t.Errorf("second POST: HTTP %d code %q", status, code)
	}
	late := ownerAgent.must("credential_use", map[string]any{"name": "sankhya"}).json(t)
	clk.Add(61 * time.Second)
	if status, ans, code := runtimePOST(t, late["url"].(string)); status < 400 || len(ans.Values) != 0 || code != "link_expired" {
		t.Errorf("POST after 60 s: HTTP %d code %q", status, code)
	}

	// 3. The audit shows the use: the credential, the person, the time, an
	// HMAC of each value.
	recs, err := pm.Vault.Audit(ctx, vault.AuditFilter{Action: vault.AuditCredentialUse})
	if err != nil || len(recs) != 2 {
		t.Fatalf("audit: %d records, %v; want 2 (one use, two fields)", len(recs), err)
	}
	for _, r := range recs {
		if r.Actor != ownerEmail || r.Session != use["credentialId"] || r.Time.IsZero() || len(r.ValueHMAC) == 0 {
			t.Errorf("audit record %+v", r)
		}
	}
	if !bytes.Equal(recs[1].ValueHMAC, pm.Vault.AuditHMAC(vault.NewSecret([]byte(pwCanary)))) {
		t.Error("the audit HMAC is not the password's")
	}

	// 4. A member's personal credential: another member cannot use it, an
	// admin sees it and deletes it but cannot use it.
	ana, bia, adm := agent("ana@example.org"), agent("bia@example.org"), agent("adm@example.org")
	anaReq := ana.must("credential_request", map[string]any{"name": "erp", "fields": []string{"password"}}).json(t)
	ap, _ := svc.PrincipalFor(ctx, op.Org, "ana@example.org")
	anaTok := anaReq["url"].(string)[strings.LastIndex(anaReq["url"].(string), "/")+1:]
	if _, _, err := svc.OpenEntry(ctx, ap, anaTok); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SubmitEntry(ctx, ap, anaTok, map[string]vault.Secret{"password": vault.NewSecret([]byte(anaCanary))}); err != nil {
		t.Fatal(err)
	}
	anaID := anaReq["credentialId"].(string)
	bia.refused("credential_use", map[string]any{"name": "erp"}, "not_found")
	bia.refused("credential_delete", map[string]any{"credentialId": anaID}, "not_found")
	if s := mustJSON(bia.must("credential_list", nil).json(t)); strings.Contains(s, anaID) {
		t.Error("a member sees another member's personal credential")
	}
	adm.refused("credential_use", map[string]any{"name": "erp"}, "not_found")
	adm.refused("grant_set", map[string]any{"credentialId": anaID, "subject": "user:bia@example.org", "write": true}, "forbidden")
	if s := mustJSON(adm.must("credential_list", nil).json(t)); !strings.Contains(s, anaID) || !strings.Contains(s, `"owner":"ana@example.org"`) {
		t.Errorf("the admin does not see ana's credential: %s", s)
	}
	// P24: a key the admin offers to ana and she has not accepted never
	// reaches her personal credential.
	offered, offeredKey, err := pm.Owner.CreateAPIKey(ctx, "the admin's second agent", owner.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	admP, _ := svc.PrincipalFor(ctx, op.Org, "adm@example.org")
	if _, err := svc.BindKey(ctx, admP, offered.ID, "ana@example.org"); err != nil {
		t.Fatal(err)
	}
	sneaky := credAgent(t, controlURL, pm.ControlToken, offeredKey, skillsDir, transcript)
	if r := sneaky.refused("credential_use", map[string]any{"name": "erp"}, "forbidden"); !strings.Contains(r.text, "Credentials page") {
		t.Errorf("the refusal does not say to accept the key: %q", r.status())
	}
	adm.must("credential_delete", map[string]any{"credentialId": anaID})
	ana.refused("credential_use", map[string]any{"name": "erp"}, "not_found")

	// 5. P11: no tool answer carries a value; the dashboard pages neither;
	// the logs neither. At rest: ciphertext only, WAL included.
	l := leakcheck.New(leakcheck.Value("credential username", userCanary), leakcheck.Value("credential password", pwCanary), leakcheck.Value("member password", anaCanary))
	transcript.sweep(t, l, "MCP transcript")
	for _, a := range []*mcpAgent{ownerAgent, ana, bia, adm} {
		a.transcript.sweep(t, l, "MCP transcript")
	}
	l.Text(t, "dashboard pages", pages.Bytes())
	l.Logs(t, "proxyd logs", logs.Bytes())
	dbPath := filepath.Join(dataDir, vaultcli.DBFileName)
	for _, suffix := range []string{"", "-wal", "-shm"} {
		raw, err := os.ReadFile(dbPath + suffix)
		if err != nil {
			t.Logf("%s: %v", filepath.Base(dbPath+suffix), err)
			continue
		}
		l.Binary(t, filepath.Base(dbPath+suffix), raw)
	}
	t.Logf("leak sweep: %s", l.Summary())
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
