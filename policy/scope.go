package policy

import (
	"slices"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/vault/item"
)

// KeyScope is the one rule for which items an API key may use: every card
// or the listed item ids, the same for logins; identities and addresses
// always. Its zero value sees no card and no login. The broker's authorize,
// the engine's decisions and the token catalog (given Sees) all ask here.
type KeyScope struct {
	AllCards  bool
	CardIDs   []string // item ids, when not AllCards
	AllLogins bool
	LoginIDs  []string // item ids, when not AllLogins
}

// Sees reports whether the scope includes the item. An item of an unknown
// kind is not seen.
func (k KeyScope) Sees(it item.Item) bool {
	switch it.Kind {
	case item.KindCard:
		return k.AllCards || slices.Contains(k.CardIDs, it.ID)
	case item.KindLogin:
		return k.AllLogins || slices.Contains(k.LoginIDs, it.ID)
	case item.KindIdentity, item.KindAddress:
		return true
	}
	return false
}

// ScopeAdmits is the one rule for where an item may be used (P2). Every
// caller that asks "may this value go to this host" asks here: the engine's
// decision, proxyd's authorize and every release on the wire.
//
//   - A card: anywhere when the owner chose any site, else on one of its
//     sites or a subdomain of one (a card for shop.example is not usable on
//     other.example, even though both share .example's registrable domain).
//   - A login: on its site's registrable domain and that domain's
//     subdomains (accounts.example.com signs in for www.example.com).
//   - Identity and address data: anywhere (it is typed, not substituted).
//
// host is a normalised host name without a port.
func (e *Engine) ScopeAdmits(it item.Item, host string) bool {
	dest, ok := normalizeHost(host)
	if !ok {
		return false
	}
	switch it.Kind {
	case item.KindCard:
		if it.Card == nil {
			return false
		}
		if it.Card.AnySite {
			return true
		}
		for _, s := range it.Card.Sites {
			if n, ok := normalizeHost(s); ok && hostname.Under(dest, n) {
				return true
			}
		}
		return false
	case item.KindLogin:
		if it.Login == nil || it.Login.Site == "" {
			return false
		}
		site, ok := normalizeHost(it.Login.Site)
		if !ok {
			return false
		}
		reg, err := e.RegistrableDomain(dest)
		if err != nil {
			return false
		}
		siteReg, err := e.RegistrableDomain(site)
		return err == nil && reg == siteReg
	case item.KindIdentity, item.KindAddress:
		return true
	}
	return false
}

// Recheck is what every release on the wire asks before a granted value
// leaves (P21): the owner's state may have changed since the grant was
// made. It refuses when the key was revoked or no longer sees the item, the
// item's scope no longer admits the destination, the card was paused or the
// merchant blocked, or the destination is no longer authorized (the owner
// removed the site and no approval of this session covers it). Spending is
// not decided again: the grant already holds its reservation.
func (e *Engine) Recheck(a Args) error {
	if a.APIKey.Revoked {
		return agentvault.Errorf(agentvault.CodeKeyRevoked, "this API key has been revoked")
	}
	if !a.APIKey.Sees(a.Item) {
		return agentvault.Errorf(agentvault.CodeScopeDenied, "this key may no longer use this item")
	}
	dest, ok := normalizeHost(a.Destination)
	if !ok || !e.ScopeAdmits(a.Item, dest) {
		return agentvault.Errorf(agentvault.CodeScopeDenied, "this item may not be used on this destination")
	}
	site, err := e.RegistrableDomain(dest)
	if err != nil {
		return agentvault.Errorf(agentvault.CodeScopeDenied, "the destination has no registrable domain")
	}
	switch a.Item.Kind {
	case item.KindCard:
		if a.Card.Paused {
			return agentvault.Errorf(agentvault.CodeCardPaused, "the owner has paused this card")
		}
		for _, m := range a.Card.BlockedMerchants {
			if n, ok := normalizeHost(m); ok && hostname.Under(dest, n) {
				return agentvault.Errorf(agentvault.CodeMerchantBlocked, "the owner has blocked this merchant for this card")
			}
		}
		fallthrough
	case item.KindIdentity, item.KindAddress:
		if _, ok := e.destinationGate(a, dest, site); !ok {
			return agentvault.Errorf(agentvault.CodeDestinationUnauthorized, "the owner no longer authorizes this destination")
		}
	}
	return nil
}
