package vault_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/vault"
)

func TestUpdateCard(t *testing.T) {
	ctx := context.Background()
	e, _ := mustEnv(t)
	it, err := e.v.AddCard(ctx, "o", "owner", card("4242424242424242", "737"))
	if err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	grace, none := "Grace Hopper", ""
	bill := &vault.AddressMeta{Line1: "1 Main St", City: "Springfield", PostalCode: "12345", Country: "US"}
	steps := []struct {
		name      string
		u         vault.CardUpdate
		wantAny   bool
		wantSites []string
		holder    string
		billing   bool
	}{
		{"sites replaced", vault.CardUpdate{Sites: []string{"Pay.Example.org", "shop.example.net", "pay.example.org"}}, false, []string{"pay.example.org", "shop.example.net"}, "Ada Lovelace", false},
		{"any site", vault.CardUpdate{AnySite: &yes}, true, nil, "Ada Lovelace", false},
		{"holder and billing", vault.CardUpdate{Holder: &grace, Billing: bill}, true, nil, "Grace Hopper", true},
		{"back to a list", vault.CardUpdate{AnySite: &no, Sites: []string{"books.example"}}, false, []string{"books.example"}, "Grace Hopper", true},
		{"holder removed, billing cleared", vault.CardUpdate{Holder: &none, ClearBilling: true}, false, []string{"books.example"}, "", false},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.u.Actor = "owner:test"
			if _, err := e.v.UpdateCard(ctx, "o", it.ID, s.u); err != nil {
				t.Fatal(err)
			}
			got, err := e.v.Get(ctx, "o", it.ID)
			if err != nil {
				t.Fatal(err)
			}
			c := got.Card
			if c.AnySite != s.wantAny || !slices.Equal(c.Sites, s.wantSites) || c.HolderName != s.holder || (c.Billing != nil) != s.billing {
				t.Fatalf("card now any=%v sites=%v holder=%q billing=%v", c.AnySite, c.Sites, c.HolderName, c.Billing != nil)
			}
			if c.Last4 != "4242" || c.CVVLen != 3 || got.Label != it.Label || !got.Created.Equal(it.Created) {
				t.Fatalf("unrelated metadata changed: %+v", got)
			}
			if got.Has(vault.FieldHolder) != (s.holder != "") {
				t.Fatalf("holder field present=%v", got.Has(vault.FieldHolder))
			}
			if s.holder != "" {
				h := release(t, e.v, got, vault.FieldHolder)
				if string(h.InsecureRawBytes()) != s.holder {
					t.Fatal("released holder is not the new one")
				}
			}
		})
	}
	// The number and CVV still open after the re-seal.
	if n := release(t, e.v, it, vault.FieldNumber); !n.Equal(vault.NewSecret([]byte("4242424242424242"))) {
		t.Fatal("number changed")
	}
	if c := release(t, e.v, it, vault.FieldCVV); !c.Equal(vault.NewSecret([]byte("737"))) {
		t.Fatal("CVV changed")
	}
	recs, _ := e.v.Audit(ctx, vault.AuditFilter{Org: "o", ItemID: it.ID, Action: vault.AuditUpdate})
	if len(recs) != len(steps) || recs[0].Actor != "owner:test" {
		t.Fatalf("%d update audit records", len(recs))
	}
}

func TestUpdateCardRefusals(t *testing.T) {
	ctx := context.Background()
	e, _ := mustEnv(t)
	it, err := e.v.AddCard(ctx, "o", "owner", card("4242424242424242", "737"))
	if err != nil {
		t.Fatal(err)
	}
	lg, err := e.v.AddLogin(ctx, "o", "owner", login("github.com", "a@example.com", "pw"))
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	long := string(make([]byte, 201))
	for name, u := range map[string]vault.CardUpdate{
		"both":          {AnySite: &yes, Sites: []string{"shop.example"}},
		"empty list":    {Sites: []string{}},
		"public suffix": {Sites: []string{"co.uk"}},
		"single label":  {Sites: []string{"localhost"}},
		"holder":        {Holder: &long},
		"billing":       {Billing: &vault.AddressMeta{Line1: "x"}},
		"billing twice": {Billing: &vault.AddressMeta{Line1: "1 Main St", City: "X", PostalCode: "1", Country: "US"}, ClearBilling: true},
	} {
		if _, err := e.v.UpdateCard(ctx, "o", it.ID, u); agentvault.ErrorCode(err) != agentvault.CodeInvalidInput {
			t.Errorf("%s: %v", name, err)
		}
	}
	got, _ := e.v.Get(ctx, "o", it.ID)
	if got.Card.AnySite || !slices.Equal(got.Card.Sites, []string{"shop.example.com"}) || !got.Updated.Equal(it.Updated) {
		t.Fatal("a refused update changed the card")
	}
	for name, id := range map[string]string{"login": lg.ID, "missing": "itm_nope"} {
		if _, err := e.v.UpdateCard(ctx, "o", id, vault.CardUpdate{AnySite: &yes}); !errors.Is(err, vault.ErrNotFound) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := e.v.UpdateCard(ctx, "other", it.ID, vault.CardUpdate{AnySite: &yes}); !errors.Is(err, vault.ErrNotFound) {
		t.Errorf("another org's card: %v", err)
	}
}

// TestCheckCardReportsEveryInput: CheckCard names each bad input once, and
// AddCard refuses with the first of them.
func TestCheckCardReportsEveryInput(t *testing.T) {
	in := vault.CardInput{Number: vault.NewSecret([]byte("4242424242424241")), CVV: vault.NewSecret([]byte("12")),
		ExpiryMonth: 13, ExpiryYear: 2030, Holder: "A\nB", Sites: []string{"com"}}
	probs := vault.CheckCard(in, testNow())
	var inputs []string
	for _, p := range probs {
		inputs = append(inputs, p.Input)
	}
	if !slices.Equal(inputs, []string{vault.InputNumber, vault.InputCVV, vault.InputExpiry, vault.InputHolder, vault.InputSites}) {
		t.Fatalf("inputs %v", inputs)
	}
	e, _ := mustEnv(t)
	_, err := e.v.AddCard(context.Background(), "o", "owner", in)
	if agentvault.ErrorMessage(err) != agentvault.ErrorMessage(probs[0].Err) {
		t.Fatalf("AddCard refused with %q", agentvault.ErrorMessage(err))
	}
	if p := vault.CheckCard(card("4242424242424242", "737"), testNow()); len(p) != 0 {
		t.Fatalf("a good card has problems: %v", p[0].Input)
	}
	lp := vault.CheckLogin(vault.LoginInput{Site: "co.uk", Email: "nope", Password: vault.NewSecret([]byte("a\nb"))})
	inputs = inputs[:0]
	for _, p := range lp {
		inputs = append(inputs, p.Input)
	}
	if !slices.Equal(inputs, []string{vault.InputSite, vault.InputEmail, vault.InputPassword}) {
		t.Fatalf("login inputs %v", inputs)
	}
}

// FreeLoginLabel forecasts the label AddLogin gives the next login for a
// site: the site's name while it is free, then "-2", "-3"...
func TestFreeLoginLabelForecastsAddLogin(t *testing.T) {
	ctx := context.Background()
	e, _ := mustEnv(t)
	for _, want := range []string{"github", "github-2", "github-3"} {
		got, err := e.v.FreeLoginLabel(ctx, "o", "github.com")
		if err != nil || got != want {
			t.Fatalf("forecast %q, %v; want %q", got, err, want)
		}
		it, err := e.v.AddLogin(ctx, "o", "owner", login("github.com", "a@example.com", "pw"))
		if err != nil || it.Label != want {
			t.Fatalf("AddLogin gave %q, %v; forecast was %q", it.Label, err, want)
		}
	}
	if got, err := e.v.FreeLoginLabel(ctx, "other-org", "github.com"); err != nil || got != "github" {
		t.Fatalf("another org's forecast: %q, %v", got, err)
	}
}
