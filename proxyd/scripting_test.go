package proxyd_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestOperator_ScriptingJSONAndApply drives the built proxyd as a
// deployment script would: `owner pending`, `vault list`, `owner keys`
// and `owner sites` print JSON a script parses; `owner apply -f FILE`
// sets cards' rules and sites, authorized sites, API keys and pre-approved
// sign-ups from a file (its dry run prints the diff and writes nothing; a
// second run changes nothing), and `owner export` gives the file back.
func TestOperator_ScriptingJSONAndApply(t *testing.T) {
	home := t.TempDir()
	data := filepath.Join(t.TempDir(), "data")
	env := cleanEnv(home, "AGENTVAULT_DATA="+data)
	must := func(stdin string, args ...string) result {
		t.Helper()
		r := runBin(t, env, stdin, "proxyd", args...)
		if r.code != 0 {
			t.Fatalf("proxyd %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		return r
	}
	must("4242424242424242\n737\n", "vault", "--init", "add-card", "--exp", "12/31", "--any-site")
	must("5555555555554444\n123\n", "vault", "add-card", "--exp", "11/30", "--sites", "other.example")
	must("hunter2hunter2\n\n", "vault", "add-login", "--site", "shop.example", "--email", "a@example.com")
	must("", "owner", "create-key", "--name", "agent-a", "--cards", "1")

	list := func(args ...string) []map[string]any {
		t.Helper()
		r := must("", args...)
		var v []map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("proxyd %v: not a JSON list: %v\n%s", args, err, r.stdout)
		}
		return v
	}
	if v := list("owner", "pending", "--json"); len(v) != 0 {
		t.Errorf("pending --json: %v", v)
	}
	items := list("vault", "list", "--json")
	if len(items) != 3 || items[0]["kind"] != "card" || items[0]["card"].(map[string]any)["last4"] != "4242" || items[2]["login"].(map[string]any)["site"] != "shop.example" {
		t.Errorf("vault list --json: %v", items)
	}
	if strings.Contains(must("", "vault", "list", "--json").stdout, "hunter2") {
		t.Fatal("vault list --json shows a password")
	}
	if v := list("owner", "keys", "--json"); len(v) != 1 || v[0]["name"] != "agent-a" {
		t.Errorf("owner keys --json: %v", v)
	}
	if v := list("owner", "sites", "--json"); len(v) != 0 {
		t.Errorf("owner sites --json: %v", v)
	}

	spec := `sites: [shop.example, pay.example]
signups:
  - {site: shop.example, email: agent@example.com}
cards:
  - card: "1"
    sites: [shop.example, pay.example]
    currency: EUR
    per_purchase: "50.00"
    daily: "100.00"
    monthly: "500.00"
    approval_threshold: "30.00"
    live_cvv: true
  - card: "2"
    any_site: true
    every_purchase: true
    blocked_merchants: [casino.example]
keys:
  - name: agent-a
    cards: ["1", "2"]
    logins: [shop]
  - name: agent-b
    all_cards: true
notifications:
  challenges: false
`
	file := filepath.Join(t.TempDir(), "owner.yaml")
	if err := os.WriteFile(file, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	dry := must("", "owner", "apply", "-f", file, "--dry-run")
	for _, want := range []string{"+ site pay.example", "+ site shop.example", "+ signup shop.example agent@example.com",
		"daily none -> 100.00", "sites any site -> shop.example,pay.example", "every_purchase false -> true", "+ key agent-b", "~ key ",
		"~ notifications: challenges on -> off"} {
		if !strings.Contains(dry.stdout, want) {
			t.Errorf("the dry run lacks %q:\n%s", want, dry.stdout)
		}
	}
	if v := list("owner", "sites", "--json"); len(v) != 0 {
		t.Fatalf("the dry run wrote: sites %v", v)
	}
	first := must("", "owner", "apply", "-f", file)
	if keys := regexp.MustCompile(`avk_[0-9a-f]{16}_[0-9a-f]{64}`).FindAllString(first.stdout, -1); len(keys) != 1 {
		t.Errorf("apply printed %d new keys, want agent-b's once:\n%s", len(keys), first.stdout)
	}
	again := must("", "owner", "apply", "-f", file)
	if again.stdout != "" || !strings.Contains(again.stderr, "no changes") {
		t.Errorf("a second apply changed something: %q %q", again.stdout, again.stderr)
	}

	cards := list("owner", "cards", "--json")
	c1, c2 := cards[0], cards[1]
	if c1["label"] != "1" || c1["anySite"] != false || !slices.Equal(anyStrings(c1["sites"]), []string{"shop.example", "pay.example"}) ||
		c1["currency"] != "EUR" || c1["daily"].(map[string]any)["value"] != "100.00" || c1["liveCVV"] != true ||
		c1["approvalThreshold"].(map[string]any)["value"] != "30.00" {
		t.Errorf("card 1 after apply: %v", c1)
	}
	if c2["anySite"] != true || c2["everyPurchase"] != true || !slices.Equal(anyStrings(c2["blockedMerchants"]), []string{"casino.example"}) {
		t.Errorf("card 2 after apply: %v", c2)
	}
	keys := list("owner", "keys", "--json")
	if len(keys) != 2 {
		t.Fatalf("keys after apply: %v", keys)
	}
	for _, k := range keys {
		switch k["name"] {
		case "agent-a":
			if len(anyStrings(k["cards"])) != 2 || len(anyStrings(k["logins"])) != 1 || k["allCards"] != false {
				t.Errorf("agent-a: %v", k)
			}
		case "agent-b":
			if k["allCards"] != true {
				t.Errorf("agent-b: %v", k)
			}
		}
	}
	if v := list("owner", "signups", "--json"); len(v) != 1 || v[0]["email"] != "agent@example.com" {
		t.Errorf("signups after apply: %v", v)
	}
	var notif struct {
		Switches map[string]bool `json:"switches"`
		Channels map[string]any  `json:"channels"`
	}
	if err := json.Unmarshal([]byte(must("", "owner", "notify", "show", "--json").stdout), &notif); err != nil ||
		notif.Switches["challenges"] || !notif.Switches["email"] || notif.Channels["webhook"] != nil {
		t.Errorf("owner notify show --json after apply: %+v %v", notif, err)
	}

	// export gives back what was applied, and applying it changes nothing.
	exp := must("", "owner", "export")
	var back struct {
		Sites         []string
		Signups       []map[string]string
		Cards         []map[string]any
		Keys          []map[string]any
		Notifications map[string]bool
	}
	if err := yaml.Unmarshal([]byte(exp.stdout), &back); err != nil {
		t.Fatalf("export is not YAML: %v\n%s", err, exp.stdout)
	}
	if !slices.Equal(back.Sites, []string{"pay.example", "shop.example"}) || len(back.Signups) != 1 || len(back.Cards) != 2 || len(back.Keys) != 2 ||
		back.Cards[0]["daily"] != "100.00" || back.Cards[1]["every_purchase"] != true || len(back.Notifications) != 4 || back.Notifications["challenges"] {
		t.Errorf("export:\n%s", exp.stdout)
	}
	expFile := filepath.Join(t.TempDir(), "export.yaml")
	os.WriteFile(expFile, []byte(exp.stdout), 0o600)
	if r := must("", "owner", "apply", "-f", expFile); r.stdout != "" || !strings.Contains(r.stderr, "no changes") {
		t.Errorf("applying the export changed something: %q %q", r.stdout, r.stderr)
	}

	// Unknown flags are refused; help is on stdout with exit 0.
	for _, args := range [][]string{{"owner", "keys", "--bogus"}, {"vault", "list", "--bogus"}, {"owner", "pending", "--jsn"}, {"doctor", "--bogus"}, {"owner", "notify", "show", "--bogus"}} {
		if r := runBin(t, env, "", "proxyd", args...); r.code != 2 {
			t.Errorf("proxyd %v: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
	}
	for _, args := range [][]string{{"help"}, {"owner", "help"}, {"vault", "help"}, {"owner", "apply", "-h"}, {"vault", "list", "-h"}, {"run", "-h"}, {"mcp-config", "-h"}} {
		if r := runBin(t, env, "", "proxyd", args...); r.code != 0 || !strings.Contains(r.stdout, "usage") && !strings.Contains(r.stdout, "flags") {
			t.Errorf("proxyd %v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
}

func anyStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}
