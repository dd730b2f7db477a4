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
	"github.com/agentvault/agentvault/credentials"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/vault"

	"github.com/agentvault/agentvault/internal/leakcheck"
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
	leakcheck.New(leakcheck.Value("credential value", canary)).Logs(t, "proxyd's log", []byte(logs.String()))
}

// redeemOverHTTP is the skill's runtime: it POSTs the use URL's token (the
// part after '#') to the credential-use listener.
func redeemOverHTTP(t *testing.T, useURL string) (int, control.CredentialUseAnswer) {
	t.Helper()
	base, token, _ := strings.Cut(useURL, "#")
	body, _ := json.Marshal(control.CredentialUseRequest{Token: token})
	resp, err := http.Post(base, "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ans control.CredentialUseAnswer
	_ = json.NewDecoder(resp.Body).Decode(&ans)
	return resp.StatusCode, ans
}

// storeFor types a personal credential's values as its person would on
// the dashboard's entry form.
func storeFor(t *testing.T, m *proxyd.Main, user, name, field, value string) {
	t.Helper()
	ctx := context.Background()
	p, err := m.Credentials.PrincipalFor(ctx, m.Owner.Org(), user)
	if err != nil {
		t.Fatal(err)
	}
	iss, err := m.Credentials.Request(ctx, p, credentials.RequestArgs{Name: name, Fields: []string{field}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Credentials.OpenEntry(ctx, p, iss.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Credentials.SubmitEntry(ctx, p, iss.Token, map[string]vault.Secret{field: vault.NewSecret([]byte(value))}); err != nil {
		t.Fatal(err)
	}
}

// P24, the finding "an admin reads a member's personal credential": the
// admin binds his own API key to a member and calls credential_use with it
// over the control API of a running proxyd. The binding is an offer: the
// call is refused and says the member must accept the key; once the member
// accepts it, the key acts for them.
func TestP24_OfferedKeyForbiddenOverControlAPI(t *testing.T) {
	ctx := context.Background()
	m, logs := startMain(t, "", func(c *proxyd.Config) {
		c.Listen.Credentials = "127.0.0.1:0"
		c.Listen.Dashboard = "127.0.0.1:0"
	})
	ctl := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	if err := m.Owner.SetOwnerPassword(ctx, "owner@example.org", "Owner-pass-123"); err != nil {
		t.Fatal(err)
	}
	org := m.Owner.Org()
	op, err := m.Credentials.PrincipalFor(ctx, org, "owner@example.org")
	if err != nil {
		t.Fatal(err)
	}
	for user, role := range map[string]credentials.Role{"adm@example.org": credentials.RoleAdmin, "ana@example.org": credentials.RoleMember} {
		if err := m.Credentials.PutMember(ctx, op, credentials.Member{Org: org, User: user, Role: role}); err != nil {
			t.Fatal(err)
		}
	}
	const canary = "ana-erp-canary-3c9d"
	storeFor(t, m, "ana@example.org", "erp", "password", canary)

	k, admKey, err := m.Owner.CreateAPIKey(ctx, "the admin's agent", owner.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	adm, err := m.Credentials.PrincipalFor(ctx, org, "adm@example.org")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Credentials.BindKey(ctx, adm, k.ID, "ana@example.org"); err != nil {
		t.Fatal(err)
	}
	_, err = ctl.CredentialUse(ctx, control.CredentialUseIn{APIKey: admKey, Name: "erp"})
	if agentvault.ErrorCode(err) != agentvault.CodeForbidden || !strings.Contains(agentvault.ErrorMessage(err), "Credentials page") {
		t.Fatalf("credential_use with the admin's key on ana's personal credential: %v; want forbidden, accept on the Credentials page", err)
	}
	if _, err := ctl.CredentialRequest(ctx, control.CredentialRequestIn{APIKey: admKey, Name: "erp", Fields: []string{"password"}}); agentvault.ErrorCode(err) != agentvault.CodeForbidden {
		t.Fatalf("credential_request with the admin's key for ana: %v", err)
	}
	if list, err := ctl.CredentialList(ctx, admKey); err != nil || len(list.Credentials) != 0 {
		t.Fatalf("credential_list with the admin's key shows %+v, %v", list, err)
	}

	// Ana, signed in as herself, accepts it: now it is her agent's key.
	ap, _ := m.Credentials.PrincipalFor(ctx, org, "ana@example.org")
	if err := m.Credentials.AcceptKey(ctx, ap, k.ID); err != nil {
		t.Fatal(err)
	}
	use, err := ctl.CredentialUse(ctx, control.CredentialUseIn{APIKey: admKey, Name: "erp"})
	if err != nil {
		t.Fatalf("credential_use once ana accepted: %v", err)
	}
	if st, ans := redeemOverHTTP(t, use.URL); st != http.StatusOK || ans.Values["password"] != canary {
		t.Fatalf("redeem once accepted: HTTP %d", st)
	}
	if strings.Contains(logs.String(), canary) {
		t.Fatal("a value reached proxyd's log")
	}
}

// P24 and seed 003: on a fresh single-owner install the default API key
// (the api-key file's) reaches the owner's own credentials over the
// control API with no binding; before any dashboard account exists it
// says to set a password first.
func TestP24_DefaultKeyReachesSingleOwnerOverControlAPI(t *testing.T) {
	ctx := context.Background()
	m, _ := startMain(t, "", func(c *proxyd.Config) {
		c.Listen.Credentials = "127.0.0.1:0"
		c.Listen.Dashboard = "127.0.0.1:0"
	})
	ctl := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	_, err := ctl.CredentialList(ctx, m.APIKey)
	if agentvault.ErrorCode(err) != agentvault.CodeForbidden || !strings.Contains(agentvault.ErrorMessage(err), "proxyd owner set-password") {
		t.Fatalf("default key before any account: %v", err)
	}
	if err := m.Owner.SetOwnerPassword(ctx, "owner@example.org", "Owner-pass-123"); err != nil {
		t.Fatal(err)
	}
	req, err := ctl.CredentialRequest(ctx, control.CredentialRequestIn{APIKey: m.APIKey, Name: "bank", Fields: []string{"password"}})
	if err != nil {
		t.Fatalf("credential_request with the default key on a single-owner install: %v", err)
	}
	if req.Visibility != string(credentials.Personal) {
		t.Fatalf("request = %+v", req)
	}
	const canary = "owner-bank-canary-81ee"
	storeFor(t, m, "owner@example.org", "bank", "password", canary)
	list, err := ctl.CredentialList(ctx, m.APIKey)
	if err != nil || len(list.Credentials) != 1 || list.Credentials[0].Owner != "owner@example.org" || !list.Credentials[0].IsSelected {
		t.Fatalf("credential_list = %+v, %v", list, err)
	}
	use, err := ctl.CredentialUse(ctx, control.CredentialUseIn{APIKey: m.APIKey, Name: "bank"})
	if err != nil {
		t.Fatal(err)
	}
	if st, ans := redeemOverHTTP(t, use.URL); st != http.StatusOK || ans.Values["password"] != canary {
		t.Fatalf("redeem: HTTP %d", st)
	}
}
