package proxyd_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/vault"
)

// The credential-use listener is loopback only, like the control API.
func TestCredentials_UseListenerLoopbackOnly(t *testing.T) {
	dir := t.TempDir()
	for cfg, ok := range map[string]bool{
		"listen:\n  credentials: 0.0.0.0:7705\n":   false,
		"listen:\n  credentials: 10.1.2.3:7705\n":  false,
		"listen:\n  credentials: 127.0.0.1:7705\n": true,
		"listen:\n  credentials: \"\"\n":           true,
	} {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := proxyd.LoadConfig(p); (err == nil) != ok {
			t.Errorf("%q: %v", cfg, err)
		}
	}
}

// The runtime's endpoint takes JSON only (a web page cannot spend a token
// with a plain form post), answers once, and sends no CORS header; the
// control API's credential calls never carry a value.
func TestCredentials_UseEndpointOverControlAPI(t *testing.T) {
	ctx := context.Background()
	m, logs := startMain(t, "", func(c *proxyd.Config) {
		c.Listen.Credentials = "127.0.0.1:0"
		c.Listen.Dashboard = "127.0.0.1:0"
	})
	ctl := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	if _, err := ctl.CredentialList(ctx, m.APIKey); agentvault.ErrorCode(err) != agentvault.CodeForbidden {
		t.Fatalf("unbound key: %v", err)
	}
	if err := m.Owner.SetOwnerPassword(ctx, "owner@example.org", "Owner-pass-123"); err != nil {
		t.Fatal(err)
	}
	op, err := m.Credentials.PrincipalFor(ctx, m.Owner.Org(), "owner@example.org")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Credentials.BindKey(ctx, op, proxyd.DefaultKeyID, "owner@example.org"); err != nil {
		t.Fatal(err)
	}
	req, err := ctl.CredentialRequest(ctx, control.CredentialRequestIn{APIKey: m.APIKey, Name: "erp", Fields: []string{"apiKey"}})
	if err != nil {
		t.Fatal(err)
	}
	tok := req.URL[strings.LastIndex(req.URL, "/")+1:]
	if _, _, err := m.Credentials.OpenEntry(ctx, op, tok); err != nil {
		t.Fatal(err)
	}
	const canary = "erp-key-canary-5f1e"
	if _, err := m.Credentials.SubmitEntry(ctx, op, tok, map[string]vault.Secret{"apiKey": vault.NewSecret([]byte(canary))}); err != nil {
		t.Fatal(err)
	}
	list, err := ctl.CredentialList(ctx, m.APIKey)
	if err != nil || len(list.Credentials) != 1 || !list.Credentials[0].IsSelected || !list.Credentials[0].HasValues {
		t.Fatalf("list = %+v, %v", list, err)
	}
	use, err := ctl.CredentialUse(ctx, control.CredentialUseIn{APIKey: m.APIKey, Name: "erp"})
	if err != nil {
		t.Fatal(err)
	}
	base, token, _ := strings.Cut(use.URL, "#")
	post := func(ct, body string) *http.Response {
		resp, err := http.Post(base, ct, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := post("application/x-www-form-urlencoded", "token="+token); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("form post: %d", resp.StatusCode)
	}
	body, _ := json.Marshal(control.CredentialUseRequest{Token: token})
	resp := post("application/json", string(body))
	var ans control.CredentialUseAnswer
	_ = json.NewDecoder(resp.Body).Decode(&ans)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || ans.Values["apiKey"] != canary || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("first POST: %d %q", resp.StatusCode, ans.Name)
	}
	if resp := post("application/json", string(body)); resp.Header.Get("X-Agentvault-Code") != string(agentvault.CodeLinkUsed) {
		t.Fatalf("second POST: %d", resp.StatusCode)
	}
	if strings.Contains(logs.String(), canary) {
		t.Fatal("a value reached proxyd's log")
	}
}
