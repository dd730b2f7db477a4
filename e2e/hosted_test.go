package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/internal/leakcheck"
	"github.com/agentvault/agentvault/mcpserver"
	"github.com/agentvault/agentvault/owner"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hostedClock is the hosted server's clock: real time, plus a jump the
// test makes to reach the idle limit.
type hostedClock struct {
	mu   sync.Mutex
	skew time.Duration
}

func (c *hostedClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.skew)
}

func (c *hostedClock) jump(d time.Duration) {
	c.mu.Lock()
	c.skew += d
	c.mu.Unlock()
}

// hostedMCP is mcpd's own Main serving the hosted server over streamable
// HTTP with API keys, beside proxyd's Main.
type hostedMCP struct {
	oa    *ownerAppliance
	url   string
	logs  *syncBuffer
	clock *hostedClock
}

func startHostedMCP(t *testing.T, oa *ownerAppliance) *hostedMCP {
	t.Helper()
	hm := &hostedMCP{oa: oa, logs: &syncBuffer{}, clock: &hostedClock{}}
	m := mcpserver.NewMain()
	m.ControlURL, m.ControlTokenFile, m.APIKeyFile = oa.controlURL, oa.controlTokenFile, oa.apiKeyFile
	m.DriverDir, m.ChromiumPath, m.LogLevel, m.Stderr = driverDir(), chromiumPath(), "debug", hm.logs
	m.RequireKeys = true
	m.Hosted = mcpserver.HostedConfig{Now: hm.clock.now, SweepEvery: 200 * time.Millisecond}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.ServeHTTP(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
		m.Close()
	})
	hm.url = "http://" + ln.Addr().String() + "/mcp"
	return hm
}

// hostedAgent is one MCP client on the hosted server, with its own key.
type hostedAgent struct {
	t   *testing.T
	hm  *hostedMCP
	key string
	cs  *mcp.ClientSession
	// session is the handle the agent passes on every call.
	session    string
	transcript answers
}

type keyTransport struct{ key string }

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && resp.Header.Get("Mcp-Session-Id") != "" {
		resp.Body.Close()
		return nil, errSessionHeader
	}
	return resp, err
}

// reasonIdleText is how mcpd names an idle end, in its log and its answers.
const reasonIdleText = "it was idle too long"

var errSessionHeader = &json.UnsupportedValueError{Str: "the hosted server sent an Mcp-Session-Id header"}

// agent is a client on key, whose holder has let it use everything on
// Connected apps (chooseAllUses).
func (hm *hostedMCP) agent(t *testing.T, key string) *hostedAgent {
	t.Helper()
	chooseAllUses(t, hm.oa, key)
	return hm.agentAsIs(t, key)
}

// chooseAllUses stands in for the holder choosing on Connected apps that
// key may use everything on the hosted server (TestSeed004_HostedConnectedAppsChoice
// makes the choice on the dashboard itself).
func chooseAllUses(t *testing.T, oa *ownerAppliance, key string) {
	t.Helper()
	k, err := oa.pm.Broker.LookupKey(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := oa.pm.ConnectedApps().Choose(k.ID, control.AppUses); err != nil {
		t.Fatal(err)
	}
}

// agentAsIs is a client on key with whatever the holder chose for it.
func (hm *hostedMCP) agentAsIs(t *testing.T, key string) *hostedAgent {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "hosted-e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hm.url, HTTPClient: &http.Client{Transport: keyTransport{key}}}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return &hostedAgent{t: t, hm: hm, key: key, cs: cs}
}

var hostedHandle = regexp.MustCompile(`session: (s_[a-z2-7]+) \(pass this as "session"`)

// call runs a tool on the agent's session (none yet: the call may start
// one) and remembers the handle the answer names.
func (a *hostedAgent) call(name string, args map[string]any) answer {
	a.t.Helper()
	if args == nil {
		args = map[string]any{}
	}
	if a.session != "" {
		if _, set := args["session"]; !set {
			args["session"] = a.session
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		a.t.Fatalf("%s: %v", name, err)
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	txt := strings.Join(parts, "\n")
	a.transcript.Write([]byte(txt + "\n"))
	if m := hostedHandle.FindStringSubmatch(txt); m != nil && a.session == "" {
		a.session = m[1]
	}
	return answer{text: txt, isErr: res.IsError, res: res}
}

// machinePending is the answer of a call that outlived the hosted call
// deadline with nobody asked: the work goes on and the agent fetches its
// own answer with get_pending_result.
var machinePending = regexp.MustCompile(`^status=pending wait=(w_[a-z2-7]+) waiting_on_owner=false(?: session=(s_[a-z2-7]+))?`)

// follow turns such a pending answer into the call's own answer, as an
// agent does: on a loaded machine an open_page can outlast the deadline.
// An answer waiting on the owner is returned as it is.
func (a *hostedAgent) follow(r answer) answer {
	a.t.Helper()
	m := machinePending.FindStringSubmatch(r.text)
	if m == nil {
		return r
	}
	if a.session == "" && m[2] != "" {
		a.session = m[2]
	}
	waitUntil(a.t, 3*time.Minute, "the answer of a call that outlived the hosted deadline, from get_pending_result", func() bool {
		r = a.call("get_pending_result", map[string]any{"wait": m[1]})
		return !machinePending.MatchString(r.text)
	})
	return r
}

func (a *hostedAgent) must(name string, args map[string]any) answer {
	a.t.Helper()
	r := a.follow(a.call(name, args))
	if r.isErr || strings.HasPrefix(r.text, "status=pending") {
		a.t.Fatalf("%s: %q", name, leakcheck.Redact(r.status()))
	}
	return r
}

// raw posts one tools/call with a chosen JSON-RPC id (a retransmission is
// the same body again) and returns its text.
func (a *hostedAgent) raw(id int, name string, args map[string]any) string {
	a.t.Helper()
	args["session"] = a.session
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": name, "arguments": args}})
	req, _ := http.NewRequest(http.MethodPost, a.hm.url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+a.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Mcp-Session-Id") != "" {
		a.t.Error("the answer carries an Mcp-Session-Id header")
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var msg struct {
			ID     int `json:"id"`
			Result struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(strings.TrimPrefix(sc.Text(), "data: ")), &msg) != nil || msg.ID != id {
			continue
		}
		var parts []string
		for _, c := range msg.Result.Content {
			parts = append(parts, c.Text)
		}
		txt := strings.Join(parts, "\n")
		a.transcript.Write([]byte(txt + "\n"))
		return txt
	}
	a.t.Fatalf("%s: no answer (HTTP %d)", name, resp.StatusCode)
	return ""
}

// TestP20_HostedCheckoutTwoAgents is issue 9's proof in real Chromium over
// streamable HTTP: two MCP clients, each with its own API key, each drive
// their own browser through one mcpd and one proxyd; a handle on the other
// connection reads as ended; a first card fill on the unapproved processor
// answers pending with the owner wait named, the owner approves on the
// dashboard, get_pending_result returns the fill's own answer and the
// checkout completes; DELETE is 405 and the browser keeps going; an idle
// session ends with its reason and report. P20: a retransmitted fill (the
// same JSON-RPC id) joins the running call, and once it is done gets the
// first answer without running: the site sees one payment.
func TestP20_HostedCheckoutTwoAgents(t *testing.T) {
	requireE2E(t, true)
	oa := startOwnerAppliance(t, "50.00")
	ctx := context.Background()
	_, keyB, err := oa.pm.Owner.CreateAPIKey(ctx, "second agent", owner.Scope{AllCards: true, AllLogins: true})
	if err != nil {
		t.Fatal(err)
	}
	hm := startHostedMCP(t, oa)
	a, b := hm.agent(t, oa.apiKey), hm.agent(t, keyB)

	cat := a.must("get_token_catalog", map[string]any{"url": oa.m.Shop.URL + "/checkout"})
	if a.session == "" {
		t.Fatalf("the catalog named no session: %q", cat.status())
	}
	numberTok, cvvTok := findToken(cat.text, "card", "number"), findToken(cat.text, "card", "cvv")
	a.must("open_page", map[string]any{"url": oa.m.Shop.URL + "/products/trail-shoes"})
	b.must("open_page", map[string]any{"url": oa.m.Shop.URL + "/products/headlamp"})
	if b.session == "" || b.session == a.session {
		t.Fatalf("sessions %q and %q", a.session, b.session)
	}
	if r := b.call("count", map[string]any{"selector": "#add-to-cart", "session": a.session}); !r.isErr ||
		!strings.Contains(r.text, "This session has ended: it was closed, timed out, or the gateway restarted.") || !strings.Contains(r.status(), "session_ended=true") {
		t.Fatalf("A's handle on B's connection: %q", r.status())
	}

	// A walks to the checkout.
	a.must("click", map[string]any{"selector": "#add-to-cart"})
	a.must("wait_for_selector", map[string]any{"selector": "#checkout", "timeout": 20000})
	a.must("click", map[string]any{"selector": "#checkout"})
	a.must("wait_for_selector", map[string]any{"selector": numberSel, "frame": payFrame, "timeout": 20000})
	a.must("fill_checkout", map[string]any{"fields": []map[string]any{
		{"selector": "#email", "value": "ada@example.org"},
		{"selector": "#first-name", "value": "Ada"},
		{"selector": "#last-name", "value": "Lovelace"},
		{"selector": "#address-line1", "value": "12 Analytical Row"},
		{"selector": "#postal-code", "value": "10115"},
		{"selector": "#city", "value": "Berlin"},
		{"selector": "#country", "value": "DE", "kind": "select"},
		{"selector": "#exp-month", "value": oa.card.month, "kind": "select", "frame": payFrame},
		{"selector": "#exp-year", "value": oa.card.year, "kind": "select", "frame": payFrame},
	}, "timeout": 5000})

	// DELETE closes nothing, and the browser keeps going.
	req, _ := http.NewRequest(http.MethodDelete, hm.url, nil)
	req.Header.Set("Authorization", "Bearer "+oa.apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE answered %d", resp.StatusCode)
	}
	a.must("count", map[string]any{"selector": numberSel, "frame": payFrame})

	owner := oa.signInOwner(t)
	fill := func() map[string]any {
		return map[string]any{"fields": []map[string]any{{"selector": numberSel, "value": numberTok, "frame": payFrame}, {"selector": cvcSel, "value": cvvTok, "frame": payFrame}}, "timeout": 5000}
	}
	const fillID = 9001
	started := time.Now()
	first := a.raw(fillID, "fill_checkout", fill())
	took := time.Since(started)
	m := regexp.MustCompile(`^status=pending wait=(w_[a-z2-7]+) waiting_on_owner=true reason=new_destination`).FindStringSubmatch(first)
	// Pending because the owner is asked (waiting_on_owner=true), not
	// because the call deadline passed; how long that took is logged, not
	// asserted (a busy machine is slow).
	if m == nil {
		t.Fatalf("first fill on the processor after %v: %q", took, leakcheck.Redact(first))
	}
	t.Logf("the first fill answered pending after %v", took.Round(time.Millisecond))
	if !strings.Contains(first, "fill_checkout is waiting for the account owner to approve a new site") {
		t.Errorf("the pending answer does not say what the owner is asked: %q", leakcheck.Redact(first))
	}
	// Sent again while it runs, it joins: the same wait.
	if again := a.raw(fillID, "fill_checkout", fill()); !strings.Contains(again, "wait="+m[1]) {
		t.Fatalf("retransmission while running: %q", leakcheck.Redact(again))
	}
	owner.decideNext(t, "approve")
	// Each get_pending_result waits up to the call deadline itself.
	var final answer
	waitUntil(t, 3*time.Minute, "the approved fill's own answer from get_pending_result", func() bool {
		final = a.call("get_pending_result", map[string]any{"wait": m[1]})
		return !strings.HasPrefix(final.text, "status=pending")
	})
	if final.isErr || !strings.HasPrefix(final.text, "status=ok filled=2/2 session="+a.session) {
		t.Fatalf("the fill's own answer: %q", leakcheck.Redact(final.status()))
	}

	t.Run("P20_RetransmittedFillTypesNothing", func(t *testing.T) {
		fills := strings.Count(string(hm.logs.Bytes()), "tool=fill_checkout status=ok")
		again := a.raw(fillID, "fill_checkout", fill())
		if again != final.text {
			t.Fatalf("the retransmitted fill answered %q, first %q", leakcheck.Redact(again), leakcheck.Redact(final.text))
		}
		if n := strings.Count(string(hm.logs.Bytes()), "tool=fill_checkout status=ok"); n != fills {
			t.Fatalf("the retransmitted fill ran (%d fills logged, %d before)", n, fills)
		}
	})

	a.must("click", map[string]any{"selector": "#place-order"})
	out := a.must("get_session_outcome", map[string]any{
		"successSelector": successSel, "failureSelector": "#form-error:not([hidden])",
		"confirmsCheckout": true, "submitSelector": "#place-order", "timeout": 20000,
	})
	var o map[string]any
	if err := json.Unmarshal([]byte(out.res.Content[0].(*mcp.TextContent).Text), &o); err != nil {
		t.Fatalf("outcome is not JSON: %v", err)
	}
	if o["outcome"] != "success" || o["corroborated"] != true {
		// What the proxy decided, codes only (no values), to tell a
		// refusal on the wire from a slow page.
		for _, l := range strings.Split(string(oa.logs.Bytes()), "\n") {
			if strings.Contains(l, `"decision":"refused"`) || strings.Contains(l, `"decision":"substituted"`) {
				t.Log(leakcheck.Redact(l))
			}
		}
		t.Fatalf("outcome %v, corroborated %v, because %v", o["outcome"], o["corroborated"], o["notCorroboratedBecause"])
	}
	if orders, charges := oa.m.Orders(), oa.m.Charges(); len(orders) != 1 || len(charges) != 1 {
		t.Fatalf("the merchant saw %d orders and %d charges, want one of each", len(orders), len(charges))
	}
	// B's browser was never on the checkout.
	if r := b.must("count", map[string]any{"selector": "#place-order"}); !strings.Contains(r.text, `"count":0`) {
		t.Errorf("B's page has A's checkout: %q", r.text)
	}
	a.must("close_session", nil)

	// B idles past 13 minutes: its session ends with the reason and what
	// its close found.
	// The sweeper (every 200 ms) ends it; its close (the browser and the
	// proxy's report) runs after. A call that comes before the close is
	// done waits up to 5 s for it and may answer without the report: ask
	// again until the report is there.
	hm.clock.jump(14 * time.Minute)
	waitUntil(t, time.Minute, "mcpd to end B's idle session (its log line)", func() bool {
		for _, l := range strings.Split(string(hm.logs.Bytes()), "\n") {
			if strings.Contains(l, "hosted session ended") && strings.Contains(l, reasonIdleText) {
				return true
			}
		}
		return false
	})
	const idleEnded = "This session has ended: the gateway closed it because " + reasonIdleText + ". What its close found: "
	var ended answer
	waitUntil(t, time.Minute, "the ended idle session's answer to carry its close's report", func() bool {
		ended = b.call("count", map[string]any{"selector": "#add-to-cart"})
		if !strings.Contains(ended.text, idleEnded) {
			t.Fatalf("idle session: %q", ended.text)
		}
		return strings.Contains(ended.text, idleEnded+`{"reports":[`)
	})

	l := leakcheck.New(leakcheck.Value("card number", oa.card.number), leakcheck.Value("cvv", oa.card.cvv))
	a.transcript.sweep(t, l, "agent A's answers")
	b.transcript.sweep(t, l, "agent B's answers")
	l.Logs(t, "mcpd logs", hm.logs.Bytes())
	l.Logs(t, "proxyd logs", oa.logs.Bytes())
}

// TestP24_HostedTwoClientsOneKey is issue 22's finding through proxyd and
// mcpd's own Main over streamable HTTP: two MCP clients on one API key make
// the same first call with the same JSON-RPC id (each new client counts from
// 1). The second starts a session of its own and is never given the first
// one's handle, and what it does on its session leaves the first one's
// page where it was.
func TestP24_HostedTwoClientsOneKey(t *testing.T) {
	requireE2E(t, true)
	oa := startOwnerAppliance(t, "50.00")
	hm := startHostedMCP(t, oa)
	a, b := hm.agent(t, oa.apiKey), hm.agent(t, oa.apiKey)
	product := oa.m.Shop.URL + "/products/trail-shoes"

	a.must("open_page", map[string]any{"url": product})
	b.must("open_page", map[string]any{"url": product})
	if a.session == "" || b.session == "" || b.session == a.session {
		t.Fatalf("the same first call on two clients of one key: sessions %q and %q", a.session, b.session)
	}
	b.must("open_page", map[string]any{"url": oa.m.Shop.URL + "/"})
	if r := a.must("count", map[string]any{"selector": "#add-to-cart"}); !strings.Contains(r.text, `"count":1`) {
		t.Fatalf("A's page after B moved its own: %q", r.status())
	}
	if r := b.must("count", map[string]any{"selector": "#add-to-cart"}); !strings.Contains(r.text, `"count":0`) {
		t.Fatalf("B's page: %q", r.status())
	}
	if strings.Contains(string(b.transcript.Bytes()), a.session) {
		t.Fatal("B was given A's session handle")
	}
}
