package ownercli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/owner/ownercli"
	"github.com/agentvault/agentvault/policy"
)

// TestListCommandsPrintJSON: every list command takes --json (and -o
// json) and prints JSON with stable field names a script can parse; a
// pending approval carries its card's name, its amount as a decimal and
// its currency.
func TestListCommandsPrintJSON(t *testing.T) {
	ctx := context.Background()
	e, out, errb, card := vaultEnv(t)
	s, _, err := e.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	amt := policy.MustAmount("19.99 EUR")
	a, err := s.RequestApproval(ctx, owner.ApprovalRequest{Kind: owner.KindPurchase, Reason: string(policy.ReasonEveryPurchase),
		Site: "shop.example", CardID: card.ID, ItemID: card.ID, Amount: &amt})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateAPIKey(ctx, "agent", owner.Scope{CardIDs: []string{card.ID}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AuthorizeSite(ctx, "shop.example", "test"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddSignup(ctx, "shop.example", "agent@example.com", "test"); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) []map[string]any {
		t.Helper()
		out.Reset()
		errb.Reset()
		if code := ownercli.Run(ctx, args, e); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb)
		}
		var v []map[string]any
		if err := json.Unmarshal(out.Bytes(), &v); err != nil {
			t.Fatalf("%v: not a JSON list: %v\n%s", args, err, out)
		}
		return v
	}
	p := run("pending", "--json")
	if len(p) != 1 || p[0]["id"] != a.ID || p[0]["kind"] != "purchase" || p[0]["site"] != "shop.example" ||
		p[0]["item"] != "card 1: visa •••• 4242, exp 04/30" || p[0]["itemId"] != card.ID {
		t.Errorf("pending --json: %v", p)
	}
	if am, _ := p[0]["amount"].(map[string]any); am["value"] != "19.99" || am["currency"] != "EUR" {
		t.Errorf("pending --json amount: %v", p[0]["amount"])
	}
	k := run("keys", "-o", "json")
	if len(k) != 1 || k[0]["name"] != "agent" || k[0]["status"] != "active" || k[0]["allCards"] != false {
		t.Errorf("keys -o json: %v", k)
	}
	if cards, _ := k[0]["cards"].([]any); len(cards) != 1 || cards[0] != card.ID {
		t.Errorf("keys --json cards: %v", k[0]["cards"])
	}
	if v := run("sites", "--json"); len(v) != 1 || v[0]["host"] != "shop.example" || v[0]["addedBy"] != "test" {
		t.Errorf("sites --json: %v", v)
	}
	if v := run("signups", "--json"); len(v) != 1 || v[0]["site"] != "shop.example" || v[0]["email"] != "agent@example.com" {
		t.Errorf("signups --json: %v", v)
	}
	if v := run("cards", "--json"); len(v) != 1 || v[0]["label"] != card.Label || v[0]["anySite"] != true || v[0]["perPurchase"] != nil {
		t.Errorf("cards --json: %v", v)
	}
}

// TestFlagsRefusedAndHelpOnStdout: a flag a command does not have is
// refused (exit 2, nothing printed on stdout); -h prints the command's
// flags on stdout and exits 0, as does `help`.
func TestFlagsRefusedAndHelpOnStdout(t *testing.T) {
	ctx := context.Background()
	e, out, errb, _ := vaultEnv(t)
	for _, cmd := range []string{"keys", "sites", "pending", "signups", "cards", "revoke", "authorize-site", "export", "apply", "set-card"} {
		out.Reset()
		errb.Reset()
		if code := ownercli.Run(ctx, []string{cmd, "--no-such-flag"}, e); code != 2 || out.Len() != 0 || !strings.Contains(errb.String(), "no-such-flag") {
			t.Errorf("%s --no-such-flag: exit %d, stdout %q, stderr %q", cmd, code, out, errb)
		}
		out.Reset()
		errb.Reset()
		if code := ownercli.Run(ctx, []string{cmd, "-h"}, e); code != 0 || !strings.Contains(out.String(), "usage: proxyd owner "+cmd) || errb.Len() != 0 {
			t.Errorf("%s -h: exit %d, stdout %q, stderr %q", cmd, code, out, errb)
		}
	}
	out.Reset()
	if code := ownercli.Run(ctx, []string{"help"}, e); code != 0 || !strings.Contains(out.String(), "apply -f FILE") {
		t.Errorf("help: exit %d, %q", code, out)
	}
	errb.Reset()
	if code := ownercli.Run(ctx, []string{"keys", "extra"}, e); code != 2 || !strings.Contains(errb.String(), "takes no arguments") {
		t.Errorf("keys extra: exit %d, %q", code, errb)
	}
}

// TestSetCardChangesOnlyWhatIsGiven: set-card changes the flags given and
// keeps the others; an amount "" removes that limit; the same command
// again says "no changes".
func TestSetCardChangesOnlyWhatIsGiven(t *testing.T) {
	ctx := context.Background()
	e, out, errb, card := vaultEnv(t)
	s, _, _ := e.Open(ctx)
	run := func(args ...string) string {
		t.Helper()
		out.Reset()
		errb.Reset()
		if code := ownercli.Run(ctx, append([]string{"set-card", card.Label}, args...), e); code != 0 {
			t.Fatalf("set-card %v: exit %d: %s", args, code, errb)
		}
		return out.String()
	}
	run("--currency", "EUR", "--daily", "100.00", "--per-purchase", "40", "--every-purchase")
	p, _ := s.CardPolicy(ctx, card.ID)
	if p.Currency != "EUR" || p.Rules.DailyCap == nil || p.Rules.DailyCap.Decimal() != "100.00" || p.Rules.PerPurchaseCap.Decimal() != "40.00" || !p.Rules.EveryPurchase {
		t.Fatalf("after set-card: %+v", p)
	}
	if got := run("--per-purchase", ""); !strings.Contains(got, "per_purchase 40.00 -> none") {
		t.Errorf("removing a limit said %q", got)
	}
	p, _ = s.CardPolicy(ctx, card.ID)
	if p.Rules.PerPurchaseCap != nil || p.Rules.DailyCap == nil || !p.Rules.EveryPurchase {
		t.Fatalf("set-card --per-purchase \"\" changed more than that: %+v", p.Rules)
	}
	if got := run("--every-purchase"); !strings.Contains(got, "no changes") {
		t.Errorf("the same change twice said %q", got)
	}
	errb.Reset()
	if code := ownercli.Run(ctx, []string{"set-card", card.Label, "--daily", "12.345"}, e); code == 0 || !strings.Contains(errb.String(), "plain decimal") {
		t.Errorf("a bad amount: exit %d, %q", code, errb)
	}
}
