package tokens

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault/item"
)

func card(id, label string, anySite bool, sites ...string) item.Item {
	return item.Item{ID: id, Kind: item.KindCard, Label: label,
		Fields: []item.Field{item.FieldNumber, item.FieldCVV, item.FieldHolder},
		Card: &item.CardMeta{Brand: "visa", Last4: "4242", NumberLen: 16, CVVLen: 3, ExpiryMonth: 11, ExpiryYear: 2029,
			HolderName: "Ada Lovelace", AnySite: anySite, Sites: sites}}
}

func login(id, label, site, website string, fields ...item.Field) item.Item {
	return item.Item{ID: id, Kind: item.KindLogin, Label: label, Fields: fields,
		Login: &item.LoginMeta{Site: site, Website: website, Email: "agent@example.org", PasswordLen: 24}}
}

func catalogItems() []item.Item {
	return []item.Item{
		card("c10", "10", true),
		card("c1", "1", false, "shop.example.com"),
		card("c2", "2", true),
		card("c3", "3", false, "other.example"),
		card("c4", "4", false, "example.com"),
		login("l1", "example", "example.com", "https://www.example.com/login", item.FieldEmail, item.FieldPassword),
		login("l2", "example-2", "example.com", "https://us.example.com/", item.FieldUsername, item.FieldPassword, item.FieldTOTP),
		login("l3", "github", "github.com", "https://github.com/login", item.FieldEmail, item.FieldPassword),
		login("l4", "bbc", "bbc.co.uk", "https://account.bbc.co.uk", item.FieldEmail, item.FieldPassword),
		{ID: "i1", Kind: item.KindIdentity, Label: "1", Fields: []item.Field{item.FieldName, item.FieldEmail},
			Identity: &item.IdentityMeta{Name: "Ada Lovelace", Email: "ada@example.org"}},
		{ID: "a1", Kind: item.KindAddress, Label: "1", Fields: []item.Field{item.FieldLine1, item.FieldCity, item.FieldPostalCode, item.FieldCountry},
			Address: &item.AddressMeta{Line1: "1 Analytical St", City: "London", PostalCode: "N1 9GU", Country: "GB"}},
		{ID: "bad", Kind: item.KindLogin, Label: "Bad_Label", Fields: []item.Field{item.FieldPassword}, Login: &item.LoginMeta{Site: "example.com"}},
	}
}

var allScope = policy.KeyScope{AllCards: true, AllLogins: true}

func labels[T any](es []T, f func(T) string) []string {
	var out []string
	for _, e := range es {
		out = append(out, f(e))
	}
	return out
}

func cardLabels(c Catalog) []string {
	return labels(c.Cards, func(e CardEntry) string { return e.Label })
}
func loginLabels(c Catalog) []string {
	return labels(c.Logins, func(e LoginEntry) string { return e.Label })
}

// TestP2_CatalogFilter checks the URL filter of seed 004, including the
// lookalike hosts P2 lists: a card or login bound to a site is never offered
// on another.
func TestP2_CatalogFilter(t *testing.T) {
	cases := []struct {
		name    string
		url     string
		scope   policy.KeyScope
		cards   []string
		logins  []string
		related []string
	}{
		{"no url", "", allScope, []string{"1", "2", "3", "4", "10"}, []string{"bbc", "example", "example-2", "github"}, nil},
		{"site card first then anySite", "https://shop.example.com/checkout", allScope, []string{"1", "4", "2", "10"}, []string{"example"}, []string{"us.example.com"}},
		{"sibling host is related", "https://www.example.com/", allScope, []string{"4", "2", "10"}, []string{"example"}, []string{"us.example.com"}},
		{"own host fills", "https://us.example.com/signin", allScope, []string{"4", "2", "10"}, []string{"example", "example-2"}, nil},
		{"subdomain of own host", "https://eu.us.example.com/", allScope, []string{"4", "2", "10"}, []string{"example", "example-2"}, nil},
		{"case, dot and port", "HTTPS://Shop.Example.COM.:8443/x", allScope, []string{"1", "4", "2", "10"}, []string{"example"}, []string{"us.example.com"}},
		{"co.uk", "https://www.bbc.co.uk/", allScope, []string{"2", "10"}, nil, []string{"account.bbc.co.uk"}},
		{"co.uk own", "https://account.bbc.co.uk/signin", allScope, []string{"2", "10"}, []string{"bbc"}, nil},
		{"lookalike", "https://example.com.evil.com/", allScope, []string{"2", "10"}, nil, nil},
		{"suffix trick", "https://notexample.com/", allScope, []string{"2", "10"}, nil, nil},
		{"userinfo trick", "https://example.com@evil.com/", allScope, []string{"2", "10"}, nil, nil},
		{"unparseable", "shop.example.com/checkout", allScope, []string{"2", "10"}, nil, nil},
		{"bad escape", "https://%zz/", allScope, []string{"2", "10"}, nil, nil},
		{"not http", "ftp://shop.example.com/", allScope, []string{"2", "10"}, nil, nil},
		{"scope first", "https://shop.example.com/", policy.KeyScope{CardIDs: []string{"c2", "c3"}, LoginIDs: []string{"l2"}}, []string{"2"}, nil, []string{"us.example.com"}},
		{"scope no url", "", policy.KeyScope{CardIDs: []string{"c3"}}, []string{"3"}, nil, nil},
		{"nothing in scope", "https://github.com/", policy.KeyScope{}, nil, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cat := BuildCatalog(catalogItems(), CatalogArgs{Suffix: "u7x2k", URL: c.url, Sees: c.scope.Sees})
			if got := cardLabels(cat); !slices.Equal(got, c.cards) {
				t.Errorf("cards %v want %v", got, c.cards)
			}
			if got := loginLabels(cat); !slices.Equal(got, c.logins) {
				t.Errorf("logins %v want %v", got, c.logins)
			}
			if !slices.Equal(cat.RelatedLogins, c.related) && !(len(cat.RelatedLogins) == 0 && len(c.related) == 0) {
				t.Errorf("related %v want %v", cat.RelatedLogins, c.related)
			}
			if cat.Identity == nil || cat.Identity.Name != "Ada Lovelace" || len(cat.Addresses) != 1 {
				t.Errorf("identity/addresses must be unfiltered")
			}
			raw, err := json.Marshal(cat)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(raw), "relatedLogins") != (c.url != "") {
				t.Errorf("relatedLogins presence wrong: %s", raw)
			}
		})
	}
}

func TestCatalogShape(t *testing.T) {
	cat := BuildCatalog(catalogItems(), CatalogArgs{Suffix: "u7x2k", URL: "https://shop.example.com/checkout", Sees: allScope.Sees})
	raw, _ := json.Marshal(cat)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"identity", "addresses", "cards", "logins", "relatedLogins"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("missing %q in %s", k, raw)
		}
	}
	c := m["cards"].([]any)[0].(map[string]any)
	if c["expiryMonth"] != 11.0 || c["expiryYear"] != 2029.0 || c["last4"] != "4242" || c["brand"] != "visa" || c["anySite"] != false {
		t.Fatalf("card entry %v", c)
	}
	tk := c["tokens"].(map[string]any)
	if tk["number"] != "av_card_1_number_u7x2k" || tk["cvv"] != "av_card_1_cvv_u7x2k" || tk["holder"] != "av_card_1_holder_u7x2k" {
		t.Fatalf("card tokens %v", tk)
	}
	l := m["logins"].([]any)[0].(map[string]any)
	lt := l["tokens"].(map[string]any)
	if lt["password"] != "av_login_example_password_u7x2k" || lt["email"] != "av_login_example_email_u7x2k" || lt["username"] != nil || lt["totp"] != nil {
		t.Fatalf("login tokens %v", lt)
	}
	if l["site"] != "example.com" || l["website"] != "https://www.example.com/login" {
		t.Fatalf("login entry %v", l)
	}
	a := m["addresses"].([]any)[0].(map[string]any)
	if a["tokens"].(map[string]any)["postal_code"] != "av_address_1_postal_code_u7x2k" || a["city"] != "London" || a["country"] != "GB" {
		t.Fatalf("address entry %v", a)
	}
	id := m["identity"].(map[string]any)["tokens"].(map[string]any)
	if id["name"] != "av_identity_1_name_u7x2k" || id["phone"] != nil {
		t.Fatalf("identity tokens %v", id)
	}
	// Every token in the catalog parses and carries the key's suffix.
	var walk func(v any)
	n := 0
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, y := range x {
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		case string:
			if strings.HasPrefix(x, Prefix) {
				tok, err := Parse(x)
				if err != nil || tok.Suffix != "u7x2k" {
					t.Fatalf("catalog token does not parse: %v", err)
				}
				n++
			}
		}
	}
	walk(m)
	if n < 10 {
		t.Fatalf("only %d tokens", n)
	}
	empty, _ := json.Marshal(BuildCatalog(nil, CatalogArgs{Suffix: "u7x2k"}))
	if string(empty) != `{"identity":null,"addresses":[],"cards":[],"logins":[]}` {
		t.Fatalf("empty catalog %s", empty)
	}
}

// TestP11_CatalogHoldsNoRealSecret builds a catalog from items created for
// known real values and checks none of them, nor a fragment that would
// narrow them down, is in the JSON.
func TestP11_CatalogHoldsNoRealSecret(t *testing.T) {
	realNumber, realCVV, realPassword := "4000056655665556", "737", "Xq9!zR2#wLp0"
	it := card("c1", "1", true)
	it.Card.Last4 = realNumber[12:]
	items := append(catalogItems(), it,
		login("l9", "shop", "shop.example", "https://shop.example", item.FieldEmail, item.FieldPassword))
	raw, _ := json.Marshal(BuildCatalog(items, CatalogArgs{Suffix: "u7x2k", Sees: allScope.Sees}))
	for _, secret := range []string{realNumber, realNumber[:12], realPassword, `"` + realCVV + `"`} {
		if strings.Contains(string(raw), secret) {
			t.Fatalf("catalog holds a real value (%d bytes)", len(secret))
		}
	}
}

// TestP2_CatalogHostRules names what changed when the catalog's own host
// normaliser gave way to package hostname: "www." is no longer ignored when
// a card's site is compared with the page (www.shop.example is its own
// host), and a site written as IDN or with "_" matches its canonical page
// host.
func TestP2_CatalogHostRules(t *testing.T) {
	items := []item.Item{
		card("cw", "1", false, "www.shop.example"),
		card("ci", "2", false, "Bücher.Example."),
		card("cu", "3", false, "my_shop.example"),
	}
	for _, tc := range []struct {
		url   string
		cards []string
	}{
		{"https://www.shop.example/pay", []string{"1"}},
		{"https://eu.www.shop.example/pay", []string{"1"}},
		{"https://shop.example/pay", nil}, // used to be offered: www. was ignored
		{"https://xn--bcher-kva.example/", []string{"2"}},
		{"https://bücher.example/", []string{"2"}},
		{"https://my_shop.example/", []string{"3"}},
	} {
		t.Run(tc.url, func(t *testing.T) {
			got := cardLabels(BuildCatalog(items, CatalogArgs{Suffix: "u7x2k", URL: tc.url, Sees: allScope.Sees}))
			if !slices.Equal(got, tc.cards) {
				t.Errorf("cards %v want %v", got, tc.cards)
			}
		})
	}
}
