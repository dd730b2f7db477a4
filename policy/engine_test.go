package policy

import (
	"context"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/vault/item"
	"golang.org/x/net/publicsuffix"
)

func amt(s string) *Amount { a := MustAmount(s); return &a }

func card() item.Item {
	return item.Item{ID: "itm_card1", Kind: item.KindCard, Label: "1",
		Fields: []item.Field{item.FieldNumber, item.FieldCVV, item.FieldHolder},
		Card:   &item.CardMeta{AnySite: true}}
}

func login(site string) item.Item {
	return item.Item{ID: "itm_login1", Kind: item.KindLogin, Label: "github",
		Fields: []item.Field{item.FieldEmail, item.FieldPassword},
		Login:  &item.LoginMeta{Site: site}}
}

func baseArgs() Args {
	return Args{
		APIKey:                 KeyInfo{ID: "key1", Scope: KeyScope{AllCards: true, AllLogins: true}},
		Item:                   card(),
		Field:                  item.FieldNumber,
		Destination:            "shop.example.com",
		AuthorizedDestinations: map[string]bool{"example.com": true},
	}
}

type want struct {
	allow      bool
	needsOwner bool
	code       agentvault.Code
	reason     Reason
	charge     string // "" for no charge
}

func check(t *testing.T, e *Engine, a Args, w want) Decision {
	t.Helper()
	d := e.Decide(context.Background(), a)
	if d.Allow != w.allow || d.NeedsOwner != w.needsOwner || d.Code != w.code || d.Reason != w.reason {
		t.Fatalf("decision = {allow:%v owner:%v code:%q reason:%q msg:%q}, want %+v",
			d.Allow, d.NeedsOwner, d.Code, d.Reason, d.Message, w)
	}
	if d.Allow && w.charge != "" {
		if d.Charge == nil || *d.Charge != MustAmount(w.charge) {
			t.Fatalf("charge = %v, want %s", d.Charge, w.charge)
		}
	}
	if d.Allow && w.charge == "" && d.Charge != nil && a.Card.PerPurchaseCap == nil && a.Total == nil {
		t.Fatalf("unexpected charge %v", d.Charge)
	}
	if (d.Err() == nil) != d.Allow {
		t.Fatalf("Err() disagrees with Allow")
	}
	return d
}

func TestScopeAndKeys(t *testing.T) {
	e := NewEngine(Rates{}, publicsuffix.EffectiveTLDPlusOne)
	cases := []struct {
		name string
		mod  func(*Args)
		w    want
	}{
		{"allowed", func(a *Args) {}, want{allow: true}},
		{"revoked key", func(a *Args) { a.APIKey.Revoked = true }, want{code: agentvault.CodeKeyRevoked}},
		{"no key", func(a *Args) { a.APIKey = KeyInfo{} }, want{code: agentvault.CodeInvalidAPIKey}},
		{"card outside key scope", func(a *Args) { a.APIKey.Scope.AllCards = false; a.APIKey.Scope.CardIDs = []string{"itm_other"} }, want{code: agentvault.CodeScopeDenied}},
		{"card in key scope", func(a *Args) { a.APIKey.Scope.AllCards = false; a.APIKey.Scope.CardIDs = []string{"itm_card1"} }, want{allow: true}},
		{"field the item lacks", func(a *Args) { a.Field = item.FieldPassword }, want{code: agentvault.CodeNotFound}},
		{"no field", func(a *Args) { a.Field = "" }, want{code: agentvault.CodeInvalidInput}},
		{"card listed site covers its subdomains", func(a *Args) { a.Item.Card = &item.CardMeta{Sites: []string{"example.com"}} }, want{allow: true}},
		// One scope rule (ScopeAdmits): a card's site is a host and its
		// subdomains, not every host of its registrable domain.
		{"card sibling host of a listed site", func(a *Args) { a.Item.Card = &item.CardMeta{Sites: []string{"www.example.com"}} }, want{code: agentvault.CodeScopeDenied}},
		{"card unlisted site", func(a *Args) { a.Item.Card = &item.CardMeta{Sites: []string{"other.com"}} }, want{code: agentvault.CodeScopeDenied}},
		{"card lookalike site", func(a *Args) {
			a.Item.Card = &item.CardMeta{Sites: []string{"example.com"}}
			a.Destination = "example.com.evil.com"
			a.AuthorizedDestinations["evil.com"] = true
		}, want{code: agentvault.CodeScopeDenied}},
		{"login on its domain", func(a *Args) {
			a.Item = login("example.com")
			a.Field = item.FieldPassword
			a.Destination = "example.com"
		}, want{allow: true}},
		{"login on a subdomain", func(a *Args) { a.Item = login("example.com"); a.Field = item.FieldPassword }, want{allow: true}},
		{"login on an unauthorized but own site", func(a *Args) {
			a.Item = login("example.com")
			a.Field = item.FieldPassword
			a.AuthorizedDestinations = nil
		}, want{allow: true}},
		{"login on another site", func(a *Args) {
			a.Item = login("github.com")
			a.Field = item.FieldPassword
		}, want{code: agentvault.CodeScopeDenied}},
		{"login suffix trick", func(a *Args) {
			a.Item = login("github.com")
			a.Field = item.FieldPassword
			a.Destination = "github.com.evil.com"
		}, want{code: agentvault.CodeScopeDenied}},
		{"login glued suffix", func(a *Args) {
			a.Item = login("github.com")
			a.Field = item.FieldPassword
			a.Destination = "evilgithub.com"
		}, want{code: agentvault.CodeScopeDenied}},
		{"login outside key scope", func(a *Args) {
			a.Item = login("example.com")
			a.Field = item.FieldPassword
			a.APIKey.Scope.AllLogins = false
		}, want{code: agentvault.CodeScopeDenied}},
		{"login upper-case trailing dot destination", func(a *Args) {
			a.Item = login("example.com")
			a.Field = item.FieldPassword
			a.Destination = "WWW.Example.COM."
		}, want{allow: true}},
		{"destination with port refused", func(a *Args) { a.Destination = "shop.example.com:8443" }, want{code: agentvault.CodeScopeDenied}},
		{"destination with userinfo refused", func(a *Args) { a.Destination = "example.com@evil.com" }, want{code: agentvault.CodeScopeDenied}},
		{"destination with path refused", func(a *Args) { a.Destination = "evil.com/example.com" }, want{code: agentvault.CodeScopeDenied}},
		// Behaviour change (package hostname): a Unicode name is no longer
		// refused outright but read as its punycode host, so a homograph of
		// an authorized site is a new destination the owner is asked about.
		{"unicode destination is its punycode host", func(a *Args) { a.Destination = "exаmple.com" },
			want{needsOwner: true, code: agentvault.CodeDestinationUnauthorized, reason: ReasonNewDestination}},
		{"idn login site matches its punycode destination", func(a *Args) {
			a.Item = login("bücher.example")
			a.Field = item.FieldPassword
			a.Destination = "shop.xn--bcher-kva.example"
		}, want{allow: true}},
		{"numeric last label refused", func(a *Args) { a.Destination = "example.123" }, want{code: agentvault.CodeScopeDenied}},
		{"bare public suffix refused", func(a *Args) { a.Destination = "co.uk" }, want{code: agentvault.CodeScopeDenied}},
		{"site disagreeing with destination", func(a *Args) { a.Site = "evil.com" }, want{code: agentvault.CodeScopeDenied}},
		{"site agreeing", func(a *Args) { a.Site = "example.com" }, want{allow: true}},
		{"identity needs authorized destination", func(a *Args) {
			a.Item = item.Item{ID: "itm_id", Kind: item.KindIdentity, Fields: []item.Field{item.FieldName}}
			a.Field = item.FieldName
			a.Destination = "new-shop.com"
		}, want{needsOwner: true, code: agentvault.CodeDestinationUnauthorized, reason: ReasonNewDestination}},
		{"address on authorized destination", func(a *Args) {
			a.Item = item.Item{ID: "itm_ad", Kind: item.KindAddress, Fields: []item.Field{item.FieldCity}}
			a.Field = item.FieldCity
		}, want{allow: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := baseArgs()
			tc.mod(&a)
			check(t, e, a, tc.w)
		})
	}
}

func TestP1_NewDestinationAsksOwner(t *testing.T) {
	e := NewEngine(Rates{}, publicsuffix.EffectiveTLDPlusOne)
	a := baseArgs()
	a.Destination = "pay.newshop.io"
	d := check(t, e, a, want{needsOwner: true, code: agentvault.CodeDestinationUnauthorized, reason: ReasonNewDestination})
	if d.Site != "newshop.io" {
		t.Fatalf("site = %q", d.Site)
	}
	// An approval for the site lets the fill through, subdomains included.
	a.Approvals = []Approval{{Kind: ApprovalDestination, Site: "newshop.io"}}
	check(t, e, a, want{allow: true})
	// An approval for another site does not.
	a.Approvals = []Approval{{Kind: ApprovalDestination, Site: "othershop.io"}}
	check(t, e, a, want{needsOwner: true, code: agentvault.CodeDestinationUnauthorized, reason: ReasonNewDestination})
	// A host entry covers only that host and below.
	a.Approvals = nil
	a.AuthorizedDestinations = map[string]bool{"www.newshop.io": true}
	check(t, e, a, want{needsOwner: true, code: agentvault.CodeDestinationUnauthorized, reason: ReasonNewDestination})
	// A false entry is not an authorization.
	a.AuthorizedDestinations = map[string]bool{"newshop.io": false}
	check(t, e, a, want{needsOwner: true, code: agentvault.CodeDestinationUnauthorized, reason: ReasonNewDestination})
}

func TestP18_CardRules(t *testing.T) {
	rates, err := ParseRates(map[string]string{"EUR/USD": "1.10"})
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(rates, publicsuffix.EffectiveTLDPlusOne)
	cases := []struct {
		name string
		mod  func(*Args)
		w    want
	}{
		{"no limits no total", func(a *Args) {}, want{allow: true}},
		{"no limits with total charges it", func(a *Args) { a.Total = amt("12.00 EUR") }, want{allow: true, charge: "12.00 EUR"}},
		{"paused", func(a *Args) { a.Card.Paused = true }, want{code: agentvault.CodeCardPaused}},
		{"paused wins over new destination", func(a *Args) { a.Card.Paused = true; a.Destination = "new.io" }, want{code: agentvault.CodeCardPaused}},
		{"merchant blocked", func(a *Args) { a.Card.BlockedMerchants = []string{"example.com"} }, want{code: agentvault.CodeMerchantBlocked}},
		{"merchant blocked host only", func(a *Args) { a.Card.BlockedMerchants = []string{"other.example.com"} }, want{allow: true}},
		{"merchant block applies to cvv", func(a *Args) { a.Field = item.FieldCVV; a.Card.BlockedMerchants = []string{"shop.example.com"} }, want{code: agentvault.CodeMerchantBlocked}},
		{"under per-purchase cap", func(a *Args) { a.Card.PerPurchaseCap = amt("50.00 EUR"); a.Total = amt("49.99 EUR") }, want{allow: true, charge: "49.99 EUR"}},
		{"at per-purchase cap", func(a *Args) { a.Card.PerPurchaseCap = amt("50.00 EUR"); a.Total = amt("50.00 EUR") }, want{allow: true, charge: "50.00 EUR"}},
		{"over per-purchase cap", func(a *Args) { a.Card.PerPurchaseCap = amt("50.00 EUR"); a.Total = amt("50.01 EUR") }, want{code: agentvault.CodeLimitReached}},
		{"daily cap with spending", func(a *Args) {
			a.Card.DailyCap = amt("100.00 EUR")
			a.SpentToday = MustAmount("90.00 EUR")
			a.Total = amt("10.01 EUR")
		}, want{code: agentvault.CodeDailyLimit}},
		{"daily cap exactly", func(a *Args) {
			a.Card.DailyCap = amt("100.00 EUR")
			a.SpentToday = MustAmount("90.00 EUR")
			a.Total = amt("10.00 EUR")
		}, want{allow: true, charge: "10.00 EUR"}},
		{"monthly cap", func(a *Args) {
			a.Card.MonthlyCap = amt("500.00 EUR")
			a.SpentMonth = MustAmount("450.00 EUR")
			a.Total = amt("60.00 EUR")
		}, want{code: agentvault.CodeMonthlyLimit}},
		{"caps and unknown total", func(a *Args) { a.Card.DailyCap = amt("100.00 EUR") }, want{code: agentvault.CodeCheckoutTotalUnknown}},
		{"caps and unknown total even if approved", func(a *Args) {
			a.Card.DailyCap = amt("100.00 EUR")
			a.Approvals = []Approval{{Kind: ApprovalPurchase, ItemID: "itm_card1", Site: "example.com"}}
		}, want{code: agentvault.CodeCheckoutTotalUnknown}},
		{"threshold and unknown total", func(a *Args) { a.Card.ApprovalThreshold = amt("20.00 EUR") }, want{needsOwner: true, code: agentvault.CodeApprovalExpired, reason: ReasonAmountUnknown}},
		{"threshold unknown total strict", func(a *Args) { a.Card.ApprovalThreshold = amt("20.00 EUR"); a.Card.StrictAmount = true }, want{needsOwner: true, code: agentvault.CodeApprovalExpired, reason: ReasonAmountUnknownStrict}},
		{"strict alone and unknown total", func(a *Args) { a.Card.StrictAmount = true }, want{needsOwner: true, code: agentvault.CodeApprovalExpired, reason: ReasonAmountUnknownStrict}},
		{"unknown total approved", func(a *Args) {
			a.Card.ApprovalThreshold = amt("20.00 EUR")
			a.Approvals = []Approval{{Kind: ApprovalPurchase, ItemID: "itm_card1", Site: "example.com"}}
		}, want{allow: true}},
		{"under threshold", func(a *Args) { a.Card.ApprovalThreshold = amt("20.00 EUR"); a.Total = amt("20.00 EUR") }, want{allow: true, charge: "20.00 EUR"}},
		{"over threshold", func(a *Args) { a.Card.ApprovalThreshold = amt("20.00 EUR"); a.Total = amt("20.01 EUR") }, want{needsOwner: true, code: agentvault.CodeApprovalExpired, reason: ReasonOverThreshold}},
		{"over threshold approved", func(a *Args) {
			a.Card.ApprovalThreshold = amt("20.00 EUR")
			a.Total = amt("25.00 EUR")
			a.Approvals = []Approval{{Kind: ApprovalPurchase, ItemID: "itm_card1", Site: "shop.example.com", Amount: amt("25.00 EUR")}}
		}, want{allow: true, charge: "25.00 EUR"}},
		{"approval for another card", func(a *Args) {
			a.Card.ApprovalThreshold = amt("20.00 EUR")
			a.Total = amt("25.00 EUR")
			a.Approvals = []Approval{{Kind: ApprovalPurchase, ItemID: "itm_card2", Site: "example.com", Amount: amt("25.00 EUR")}}
		}, want{needsOwner: true, code: agentvault.CodeApprovalExpired, reason: ReasonOverThreshold}},
		{"approval for another site", func(a *Args) {
			a.Card.ApprovalThreshold = amt("20.00 EUR")
			a.Total = amt("25.00 EUR")
			a.Approvals = []Approval{{Kind: ApprovalPurchase, ItemID: "itm_card1", Site: "other.com", Amount: amt("25.00 EUR")}}
		}, want{needsOwner: true, code: agentvault.CodeApprovalExpired, reason: ReasonOverThreshold}},
		{"total grew after approval", func(a *Args) {
			a.Card.ApprovalThreshold = amt("20.00 EUR")
			a.Total = amt("25.01 EUR")
			a.Approvals = []Approval{{Kind: ApprovalPurchase, ItemID: "itm_card1", Site: "example.com", Amount: amt("25.00 EUR")}}
		}, want{needsOwner: true, code: agentvault.CodeAmountMismatch, reason: ReasonAmountMismatch}},
		{"every purchase", func(a *Args) { a.Card.EveryPurchase = true; a.Total = amt("1.00 EUR") }, want{needsOwner: true, code: agentvault.CodeApprovalExpired, reason: ReasonEveryPurchase}},
		{"every purchase unknown total", func(a *Args) { a.Card.EveryPurchase = true }, want{needsOwner: true, code: agentvault.CodeApprovalExpired, reason: ReasonEveryPurchase}},
		{"every purchase approved", func(a *Args) {
			a.Card.EveryPurchase = true
			a.Total = amt("1.00 EUR")
			a.Approvals = []Approval{{Kind: ApprovalPurchase, ItemID: "itm_card1", Site: "example.com", Amount: amt("1.00 EUR")}}
		}, want{allow: true, charge: "1.00 EUR"}},
		{"cap checked before approval", func(a *Args) {
			a.Card.PerPurchaseCap = amt("30.00 EUR")
			a.Card.ApprovalThreshold = amt("20.00 EUR")
			a.Total = amt("40.00 EUR")
			a.Approvals = []Approval{{Kind: ApprovalPurchase, ItemID: "itm_card1", Site: "example.com", Amount: amt("40.00 EUR")}}
		}, want{code: agentvault.CodeLimitReached}},
		{"converted total under cap", func(a *Args) { a.Card.PerPurchaseCap = amt("100.00 USD"); a.Total = amt("90.00 EUR") }, want{allow: true, charge: "99.00 USD"}},
		{"converted total over cap", func(a *Args) { a.Card.PerPurchaseCap = amt("100.00 USD"); a.Total = amt("91.00 EUR") }, want{code: agentvault.CodeLimitReached}},
		{"inverse rate used", func(a *Args) { a.Card.PerPurchaseCap = amt("100.00 EUR"); a.Total = amt("110.00 USD") }, want{allow: true, charge: "100.00 EUR"}},
		{"unconvertible with caps", func(a *Args) { a.Card.PerPurchaseCap = amt("100.00 EUR"); a.Total = amt("10.00 GBP") }, want{code: agentvault.CodeAmountUnconvertible}},
		{"unconvertible with threshold", func(a *Args) { a.Card.ApprovalThreshold = amt("100.00 EUR"); a.Total = amt("10.00 GBP") }, want{needsOwner: true, code: agentvault.CodeApprovalExpired, reason: ReasonAmountUnconvertible}},
		{"unconvertible approved in its own currency", func(a *Args) {
			a.Card.ApprovalThreshold = amt("100.00 EUR")
			a.Total = amt("10.00 GBP")
			a.Approvals = []Approval{{Kind: ApprovalPurchase, ItemID: "itm_card1", Site: "example.com", Amount: amt("10.00 GBP")}}
		}, want{allow: true, charge: "10.00 GBP"}},
		{"limits in two currencies", func(a *Args) {
			a.Card.PerPurchaseCap = amt("100.00 EUR")
			a.Card.DailyCap = amt("100.00 USD")
			a.Total = amt("1.00 EUR")
		}, want{code: agentvault.CodeAmountUnconvertible}},
		{"negative total", func(a *Args) {
			a.Card.PerPurchaseCap = amt("100.00 EUR")
			a.Total = &Amount{Minor: -1, Currency: "EUR"}
		}, want{code: agentvault.CodeAmountUnknown}},
		{"holder field skips amounts", func(a *Args) { a.Field = item.FieldHolder; a.Card.DailyCap = amt("1.00 EUR") }, want{allow: true}},
		{"cap refusal before new destination", func(a *Args) {
			a.Card.PerPurchaseCap = amt("10.00 EUR")
			a.Total = amt("11.00 EUR")
			a.Destination = "new.io"
		}, want{code: agentvault.CodeLimitReached}},
		{"new destination before purchase approval", func(a *Args) {
			a.Card.ApprovalThreshold = amt("10.00 EUR")
			a.Total = amt("11.00 EUR")
			a.Destination = "new.io"
		}, want{needsOwner: true, code: agentvault.CodeDestinationUnauthorized, reason: ReasonNewDestination}},
		{"live cvv asks owner", func(a *Args) { a.Field = item.FieldCVV; a.Card.LiveCVV = true }, want{needsOwner: true, code: agentvault.CodeCVVEntryRequired, reason: ReasonCVVEntry}},
		{"live cvv entered", func(a *Args) {
			a.Field = item.FieldCVV
			a.Card.LiveCVV = true
			a.Approvals = []Approval{{Kind: ApprovalCVV, ItemID: "itm_card1", Site: "example.com"}}
		}, want{allow: true}},
		{"stored cvv", func(a *Args) { a.Field = item.FieldCVV }, want{allow: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := baseArgs()
			tc.mod(&a)
			check(t, e, a, tc.w)
		})
	}
}

func TestP18_CheckWireAmount(t *testing.T) {
	rates, _ := ParseRates(map[string]string{"EUR/USD": "1.10"})
	e := NewEngine(rates, publicsuffix.EffectiveTLDPlusOne)
	for _, tc := range []struct {
		name           string
		approved, seen string
		code           agentvault.Code
	}{
		{"same", "25.00 EUR", "25.00 EUR", ""},
		{"lower", "25.00 EUR", "24.00 EUR", ""},
		{"grew", "25.00 EUR", "25.01 EUR", agentvault.CodeAmountMismatch},
		{"converted grew", "25.00 EUR", "27.51 USD", agentvault.CodeAmountMismatch},
		{"converted same", "25.00 EUR", "27.50 USD", ""},
		{"unconvertible", "25.00 EUR", "1.00 GBP", agentvault.CodeAmountUnconvertible},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := e.CheckWireAmount(MustAmount(tc.approved), MustAmount(tc.seen))
			if agentvault.ErrorCode(err) != tc.code {
				t.Fatalf("code %q, want %q", agentvault.ErrorCode(err), tc.code)
			}
		})
	}
}

func TestNoSiteLookupRefuses(t *testing.T) {
	d := NewEngine(Rates{}, nil).Decide(context.Background(), baseArgs())
	if d.Allow || d.NeedsOwner {
		t.Fatalf("decided without a public suffix lookup: %+v", d)
	}
	// A lookup answering a domain the host is not within is not trusted.
	lying := func(string) (string, error) { return "other.com", nil }
	if d := NewEngine(Rates{}, lying).Decide(context.Background(), baseArgs()); d.Allow || d.Code != agentvault.CodeScopeDenied {
		t.Fatalf("lying lookup: %+v", d)
	}
}

func TestDecideCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if d := NewEngine(Rates{}, publicsuffix.EffectiveTLDPlusOne).Decide(ctx, baseArgs()); d.Allow || d.Code != agentvault.CodeTimeout {
		t.Fatalf("cancelled decision: %+v", d)
	}
}

func TestRegistrableDomain(t *testing.T) {
	for in, want := range map[string]string{
		"shop.example.co.uk": "example.co.uk",
		"WWW.Example.COM.":   "example.com",
		"a.b.github.io":      "b.github.io",
		"127.0.0.1":          "127.0.0.1",
		"::1":                "::1",
	} {
		got, err := NewEngine(Rates{}, publicsuffix.EffectiveTLDPlusOne).RegistrableDomain(in)
		if err != nil || got != want {
			t.Errorf("RegistrableDomain(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"com", "co.uk", "", "a..b.com", "xn--"} {
		if _, err := NewEngine(Rates{}, publicsuffix.EffectiveTLDPlusOne).RegistrableDomain(in); err == nil {
			t.Errorf("RegistrableDomain(%q) should fail", in)
		}
	}
}

func TestKeyScope(t *testing.T) {
	c, l := card(), login("example.com")
	id := item.Item{ID: "itm_id", Kind: item.KindIdentity}
	for _, tc := range []struct {
		name          string
		k             KeyInfo
		card, login   bool
		identity      bool
		createLoginOK bool
	}{
		{"all", KeyInfo{ID: "k", Scope: KeyScope{AllCards: true, AllLogins: true}, CanCreateLogins: true}, true, true, true, true},
		{"selected", KeyInfo{ID: "k", Scope: KeyScope{CardIDs: []string{"itm_card1"}, LoginIDs: []string{"itm_other"}}}, true, false, true, false},
		{"none", KeyInfo{ID: "k"}, false, false, true, false},
		{"revoked", KeyInfo{ID: "k", Scope: KeyScope{AllCards: true, AllLogins: true}, CanCreateLogins: true, Revoked: true}, false, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.k.Sees(c) != tc.card || tc.k.Sees(l) != tc.login || tc.k.Sees(id) != tc.identity {
				t.Fatalf("Sees: card %v login %v identity %v", tc.k.Sees(c), tc.k.Sees(l), tc.k.Sees(id))
			}
			if err := tc.k.CheckCreateLogins(); (err == nil) != tc.createLoginOK {
				t.Fatalf("CheckCreateLogins: %v", err)
			}
		})
	}
	if err := (KeyInfo{ID: "k"}).CheckCreateLogins(); agentvault.ErrorCode(err) != agentvault.CodeSignupNotEnabled {
		t.Fatalf("code %q", agentvault.ErrorCode(err))
	}
}

// TestP2_SiteBindingUsesRegistrableDomain runs P2's table through the
// engine: a login for a.com (and a card listed for a.com) is only released
// for a.com and its subdomains, whatever the destination looks like.
func TestP2_SiteBindingUsesRegistrableDomain(t *testing.T) {
	e := NewEngine(Rates{}, publicsuffix.EffectiveTLDPlusOne)
	for _, tc := range []struct {
		dest  string
		allow bool
	}{
		{"a.com", true},
		{"login.a.com", true},
		{"A.COM.", true},
		{"a.com.evil.com", false},
		{"evil.com/a.com", false},
		{"a.com@evil.com", false},
		{"evila.com", false},
		{"a.com:8443", false},
		{"xn--80a.com", false}, // a punycode look-alike is another domain
		{"[::ffff:7f00:1]", false},
		{"::ffff:127.0.0.1", false},
		{"a.com\x00.evil.com", false},
		{"", false},
	} {
		t.Run(tc.dest, func(t *testing.T) {
			a := baseArgs()
			a.AuthorizedDestinations = map[string]bool{"a.com": true, "evil.com": true, "evila.com": true, "xn--80a.com": true, "127.0.0.1": true}
			a.Destination = tc.dest
			a.Item = login("a.com")
			a.Field = item.FieldPassword
			if d := e.Decide(context.Background(), a); d.Allow != tc.allow {
				t.Fatalf("login: allow=%v code=%q", d.Allow, d.Code)
			}
			a.Item = card()
			a.Item.Card.AnySite = false
			a.Item.Card.Sites = []string{"a.com"}
			a.Field = item.FieldNumber
			if d := e.Decide(context.Background(), a); d.Allow != tc.allow {
				t.Fatalf("card: allow=%v code=%q", d.Allow, d.Code)
			}
		})
	}
}
