package tokens

import (
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/vault/item"
)

// CatalogArgs are the inputs of BuildCatalog.
type CatalogArgs struct {
	Suffix string // the key's token suffix (see Suffix)
	URL    string // optional: narrow cards and logins to this page's site
	// Sees is the key's scope check (policy.KeyScope.Sees, the one rule;
	// this package keeps no copy of it): a card or login it does not see is
	// left out. nil: no card and no login is listed.
	Sees func(item.Item) bool
}

// Catalog is the answer of get_token_catalog (seed 004). It is built from
// item metadata only and therefore never holds a real card number, CVV or
// password; tokens are strings the proxy swaps on the wire.
type Catalog struct {
	Identity  *IdentityEntry `json:"identity"`
	Addresses []AddressEntry `json:"addresses"`
	Cards     []CardEntry    `json:"cards"`
	Logins    []LoginEntry   `json:"logins"`
	// RelatedLogins lists, under a URL, the hosts of logins on the same
	// registrable domain but another host: they do not fill here.
	RelatedLogins []string `json:"relatedLogins,omitempty"`
	// ByURL reports that a URL filter was applied; relatedLogins is then
	// always present in JSON, possibly empty.
	ByURL bool `json:"-"`
}

// MarshalJSON writes relatedLogins (as [] when empty) exactly when the
// catalog was filtered by URL, and empty lists as [] rather than null.
func (c Catalog) MarshalJSON() ([]byte, error) {
	type plain Catalog
	p := plain(c)
	p.Addresses = nonNil(p.Addresses)
	p.Cards = nonNil(p.Cards)
	p.Logins = nonNil(p.Logins)
	if !c.ByURL {
		p.RelatedLogins = nil
		return json.Marshal(p)
	}
	return json.Marshal(struct {
		plain
		RelatedLogins []string `json:"relatedLogins"`
	}{p, nonNil(c.RelatedLogins)})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Tokens maps a field name to its token string. Only fields the item
// holds appear.
type Tokens map[item.Field]string

// IdentityEntry is the owner's identity: values typed as themselves.
type IdentityEntry struct {
	Label  string `json:"label"`
	Name   string `json:"name,omitempty"`
	Email  string `json:"email,omitempty"`
	Phone  string `json:"phone,omitempty"`
	Tokens Tokens `json:"tokens"`
}

// AddressEntry is a postal address, shown coarsely.
type AddressEntry struct {
	Label   string `json:"label"`
	Country string `json:"country,omitempty"`
	City    string `json:"city,omitempty"`
	Tokens  Tokens `json:"tokens"`
}

// CardEntry is what an agent may know about a card.
type CardEntry struct {
	Label       string   `json:"label"`
	Brand       string   `json:"brand,omitempty"`
	Last4       string   `json:"last4,omitempty"`
	ExpiryMonth int      `json:"expiryMonth"`
	ExpiryYear  int      `json:"expiryYear"`
	AnySite     bool     `json:"anySite"`
	Sites       []string `json:"sites"`
	Tokens      Tokens   `json:"tokens"`
}

// LoginEntry is a login's catalog entry.
type LoginEntry struct {
	Label   string `json:"label"`
	Website string `json:"website,omitempty"`
	Site    string `json:"site"`
	Tokens  Tokens `json:"tokens"`
}

// BuildCatalog lists the tokens a key may use, following seed 004:
//
//   - the key's scope (args.Sees) is applied first (cards and logins only);
//   - without a URL every card and login in scope is listed, by label;
//   - under a URL, cards registered for the URL's site come first, then
//     anySite cards; other cards drop out. A URL that does not parse (an
//     absolute http or https URL with a host is required) matches no site:
//     only anySite cards remain and no login;
//   - under a URL, a login is listed when the URL's host is the login's home
//     host or below it. The home host is the host of its website, "www."
//     ignored, when that lies within the login's site, else the site
//     itself. The login's site (item.LoginMeta.Site) is its registrable
//     domain, so a URL is on the login's site when its host is that domain
//     or below it. So a login for example.com fills on checkout.example.com,
//     while one whose website is us.example.com does not fill on
//     www.example.com: its host goes to relatedLogins instead. Logins of
//     other registrable domains never appear, not even as related;
//   - identity (the first by label) and addresses are never filtered.
//
// Items whose label breaks the token grammar are left out: no token could
// name them.
func BuildCatalog(items []item.Item, args CatalogArgs) Catalog {
	items = slices.Clone(items)
	slices.SortStableFunc(items, func(a, b item.Item) int { return compareLabels(a.Label, b.Label) })
	cat := Catalog{Addresses: []AddressEntry{}, Cards: []CardEntry{}, Logins: []LoginEntry{}}
	tok := func(it item.Item, f item.Field) string {
		return Token{Kind: it.Kind, Label: it.Label, Field: f, Suffix: args.Suffix}.String()
	}
	tokensFor := func(it item.Item, always ...item.Field) Tokens {
		t := Tokens{}
		for _, f := range kindFields[it.Kind] {
			if it.Has(f) || slices.Contains(always, f) {
				t[f] = tok(it, f)
			}
		}
		return t
	}

	var host string
	hostOK := false
	if args.URL != "" {
		cat.ByURL = true
		cat.RelatedLogins = []string{}
		host, hostOK = urlHost(args.URL)
	}

	var siteCards, anyCards []CardEntry
	for _, it := range items {
		if !ValidLabel(it.Label) {
			continue
		}
		// Cards and logins are listed only as far as the key's scope
		// sees them (the scope check given, never a copy of it).
		if (it.Kind == item.KindCard || it.Kind == item.KindLogin) && (args.Sees == nil || !args.Sees(it)) {
			continue
		}
		switch it.Kind {
		case item.KindIdentity:
			if cat.Identity != nil {
				continue
			}
			e := &IdentityEntry{Label: it.Label, Tokens: tokensFor(it)}
			if m := it.Identity; m != nil {
				e.Name, e.Email, e.Phone = m.Name, m.Email, m.Phone
			}
			cat.Identity = e
		case item.KindAddress:
			e := AddressEntry{Label: it.Label, Tokens: tokensFor(it)}
			if m := it.Address; m != nil {
				e.Country, e.City = m.Country, m.City
			}
			cat.Addresses = append(cat.Addresses, e)
		case item.KindCard:
			m := valueOf(it.Card)
			// The CVV token is listed even when no CVV is stored: a
			// live-CVV card is filled with it and the owner types the code.
			e := CardEntry{
				Label: it.Label, Brand: m.Brand, Last4: m.Last4,
				ExpiryMonth: m.ExpiryMonth, ExpiryYear: m.ExpiryYear,
				AnySite: m.AnySite, Sites: nonNil(slices.Clone(m.Sites)),
				Tokens: tokensFor(it, item.FieldNumber, item.FieldCVV),
			}
			if m.HolderName != "" {
				e.Tokens[item.FieldHolder] = tok(it, item.FieldHolder)
			}
			switch {
			case !cat.ByURL:
				siteCards = append(siteCards, e)
			case hostOK && !m.AnySite && slices.ContainsFunc(m.Sites, func(s string) bool { return hostWithin(host, s) }):
				siteCards = append(siteCards, e)
			case m.AnySite:
				anyCards = append(anyCards, e)
			}
		case item.KindLogin:
			m := valueOf(it.Login)
			e := LoginEntry{Label: it.Label, Website: m.Website, Site: m.Site, Tokens: tokensFor(it)}
			if !cat.ByURL {
				cat.Logins = append(cat.Logins, e)
				continue
			}
			if !hostOK {
				continue
			}
			// Site is the login's registrable domain (eTLD+1), so "the
			// URL is on this site" is "host is site or below it": no
			// public suffix lookup needed.
			site := normHost(m.Site)
			if site == "" || !hostWithin(host, site) {
				continue
			}
			// The login's home is its sign-in page's host, except that a
			// sign-in page on www.<site> is the site's front door: such a
			// login belongs to the whole site. (Host names never drop
			// "www."; this is the catalog's choice of home, said here.)
			home := site
			if wh, ok := urlHost(m.Website); ok && hostWithin(wh, site) && wh != "www."+site {
				home = wh
			}
			if hostWithin(host, home) {
				cat.Logins = append(cat.Logins, e)
			} else if !slices.Contains(cat.RelatedLogins, home) {
				cat.RelatedLogins = append(cat.RelatedLogins, home)
			}
		}
	}
	cat.Cards = append(append(cat.Cards, siteCards...), anyCards...)
	slices.Sort(cat.RelatedLogins)
	return cat
}

// compareLabels orders "2" before "10" and numbers before names.
func compareLabels(a, b string) int {
	na, ea := strconv.Atoi(a)
	nb, eb := strconv.Atoi(b)
	switch {
	case ea == nil && eb == nil:
		return na - nb
	case ea == nil:
		return -1
	case eb == nil:
		return 1
	}
	return strings.Compare(a, b)
}

// urlHost returns the normalized host of an absolute http(s) URL.
func urlHost(raw string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" {
		return "", false
	}
	h := normHost(u.Hostname())
	return h, h != ""
}

// normHost is the canonical form of a host (package hostname, the same
// normalisation the proxy applies to destinations, P2), or "" for a name
// it refuses. Stored sites may be written loosely: space, case, trailing
// dot, IDN.
func normHost(h string) string {
	n, err := hostname.Bare(strings.TrimSpace(h))
	if err != nil {
		return ""
	}
	return n
}

// hostWithin reports whether host is site or a subdomain of it
// (hostname.Under). "www." is not ignored: www.example.com is its own host.
func hostWithin(host, site string) bool {
	return hostname.Under(host, normHost(site))
}

// valueOf is *p, or the zero value for nil (an item without its metadata).
func valueOf[T any](p *T) T {
	var v T
	if p != nil {
		v = *p
	}
	return v
}
