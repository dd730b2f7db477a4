package policy

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/vault/item"
)

// KeyInfo is what the engine needs to know about the API key a fill runs
// under.
type KeyInfo struct {
	ID              string
	Scope           KeyScope
	CanCreateLogins bool
	Revoked         bool
}

// Sees reports whether the key may use the item: not revoked, and the item
// in its scope (KeyScope.Sees).
func (k KeyInfo) Sees(it item.Item) bool { return !k.Revoked && k.Scope.Sees(it) }

// CheckCreateLogins refuses a credential write (create_login and the other
// login writes) for a key the owner has not allowed to create logins.
func (k KeyInfo) CheckCreateLogins() error {
	if k.Revoked {
		return agentvault.Errorf(agentvault.CodeKeyRevoked, "this API key has been revoked")
	}
	if !k.CanCreateLogins {
		return agentvault.Errorf(agentvault.CodeSignupNotEnabled, "this API key may not create logins")
	}
	return nil
}

// DestinationApprovalWait is how long a fill on a new destination waits for
// the owner before it is refused with destination_unauthorized.
const DestinationApprovalWait = 15 * time.Minute

// CardPolicy is the owner's rules for one card. All amounts share the card's
// currency (the currency its limits are written in).
type CardPolicy struct {
	Paused            bool
	BlockedMerchants  []string // hosts or registrable domains; subdomains are blocked too
	PerPurchaseCap    *Amount
	DailyCap          *Amount
	MonthlyCap        *Amount
	ApprovalThreshold *Amount // a total over this asks the owner
	EveryPurchase     bool    // every purchase asks the owner
	LiveCVV           bool    // the CVV is never stored: the owner types it at the fill
	StrictAmount      bool    // a total the page does not show always asks the owner
}

// ApprovalKind says what an owner's yes was for.
type ApprovalKind string

const (
	ApprovalDestination ApprovalKind = "destination"
	ApprovalPurchase    ApprovalKind = "purchase"
	ApprovalCVV         ApprovalKind = "cvv_entry"
)

// Approval is a yes the owner has already given.
type Approval struct {
	Kind   ApprovalKind
	Site   string  // host or registrable domain it covers (with subdomains)
	ItemID string  // the card, for purchase and CVV approvals
	Amount *Amount // the total approved; nil when the owner approved an unknown total
	// Reason is what the owner was asked about (ReasonCVVAgain marks the
	// second approval of a purchase whose security code was spent).
	Reason Reason
}

// Args is everything one decision needs. The caller (owner.Service, from a
// Fill) completes it from the store; the engine reads nothing else.
type Args struct {
	APIKey KeyInfo
	Item   item.Item
	Field  item.Field
	// Destination is the normalised host the value would be typed on and
	// sent to: lower case, punycode, no trailing dot, no port.
	Destination string
	// Site is Destination's registrable domain. Left empty, the engine
	// derives it; given, it must agree.
	Site string
	// AuthorizedDestinations are the hosts or registrable domains the owner
	// allows fills on; an entry covers its subdomains.
	AuthorizedDestinations map[string]bool
	Card                   CardPolicy
	// Total is the checkout total read at the card-number fill; nil when the
	// page showed none.
	Total *Amount
	// SpentToday and SpentMonth are what the card has already spent, in the
	// card's currency (zero Amounts are fine).
	SpentToday Amount
	SpentMonth Amount
	Approvals  []Approval
	// CVVAgain is, for a card's security code, how many times in this
	// session its authorization has been asked for again after it was
	// spent, counting this one (0: the code follows its number's
	// authorization, unspent). Seed 004: filling the number authorizes the
	// code that follows exactly once; once an action or a purchase spent
	// it, the owner approves the same purchase a second time.
	CVVAgain int
}

// Reason says why a decision needs the owner. The values are the seed's.
type Reason string

const (
	ReasonNewDestination      Reason = "new_destination"
	ReasonOverThreshold       Reason = "over_threshold"
	ReasonEveryPurchase       Reason = "every_purchase"
	ReasonAmountMismatch      Reason = "amount_mismatch"
	ReasonAmountUnknown       Reason = "amount_unknown"
	ReasonAmountUnconvertible Reason = "amount_unconvertible"
	ReasonAmountUnknownStrict Reason = "amount_unknown_strict"
	ReasonCVVEntry            Reason = "cvv_entry"
	// ReasonCVVAgain: the security code's authorization was spent (by an
	// action after the number, or by a purchase the site accepted) and the
	// agent fills the code again; a purchase approval.
	ReasonCVVAgain Reason = "cvv_again"
)

// Decision is the engine's answer.
//
//   - Allow: release the value. For a card number, Charge is the total in
//     the card's currency to reserve in the Ledger (nil when there is none to
//     count).
//   - NeedsOwner: park the call and ask the owner (Reason says about what).
//     If the owner says yes, decide again with the Approval added; if the
//     wait ends without a yes, refuse with Code (destination_unauthorized,
//     approval_expired or cvv_entry_required; approval_denied on a no).
//   - Neither: refused with Code.
type Decision struct {
	Allow      bool
	Code       agentvault.Code
	Reason     Reason
	NeedsOwner bool
	Message    string // public, never a secret
	Site       string // the registrable domain decided on
	Charge     *Amount
}

// Err is the refusal as an error, or nil when the decision allows.
func (d Decision) Err() error {
	if d.Allow {
		return nil
	}
	return agentvault.Errorf(d.Code, "%s", d.Message)
}

// SiteFunc maps a host name to its registrable domain (eTLD+1). proxyd
// passes golang.org/x/net/publicsuffix.EffectiveTLDPlusOne (hostname.Registrable
// gives the same answer); tests pass a fixed table. Host names themselves
// are normalised by package hostname, never here.
type SiteFunc func(host string) (string, error)

// Engine applies the rules. It holds only configuration (the rate table and
// the public suffix lookup) and is safe for concurrent use; a config reload
// builds a new Engine.
type Engine struct {
	Rates  Rates
	SiteOf SiteFunc
}

// NewEngine returns an engine converting with rates and finding registrable
// domains with siteOf. With a nil siteOf every decision is refused.
func NewEngine(rates Rates, siteOf SiteFunc) *Engine { return &Engine{Rates: rates, SiteOf: siteOf} }

func refuse(code agentvault.Code, msg string) Decision {
	return Decision{Code: code, Message: msg}
}

func ask(code agentvault.Code, reason Reason, msg string) Decision {
	return Decision{Code: code, Reason: reason, NeedsOwner: true, Message: msg}
}

// Decide runs the rules in a fixed order: the key, the item's scope and its
// site binding, hard refusals for the card (pause, merchant block, caps),
// and only then what the owner may still allow (a new destination, a
// purchase approval, a live CVV). Asking the owner about a fill that would be
// refused anyway would waste their attention.
func (e *Engine) Decide(ctx context.Context, a Args) Decision {
	if err := ctx.Err(); err != nil {
		return refuse(agentvault.CodeTimeout, "decision cancelled")
	}
	if a.APIKey.Revoked {
		return refuse(agentvault.CodeKeyRevoked, "this API key has been revoked")
	}
	if a.APIKey.ID == "" {
		return refuse(agentvault.CodeInvalidAPIKey, "no API key")
	}
	dest, ok := normalizeHost(a.Destination)
	if !ok {
		return refuse(agentvault.CodeScopeDenied, "the destination is not a normalised host")
	}
	site, err := e.RegistrableDomain(dest)
	if err != nil {
		return refuse(agentvault.CodeScopeDenied, "the destination has no registrable domain")
	}
	if s, ok := normalizeHost(a.Site); a.Site != "" && (!ok || s != site) {
		return refuse(agentvault.CodeScopeDenied, "the destination and its site disagree")
	}
	d := e.decide(a, dest, site)
	d.Site = site
	return d
}

func (e *Engine) decide(a Args, dest, site string) Decision {
	it := a.Item
	if a.Field == "" {
		return refuse(agentvault.CodeInvalidInput, "no field named")
	}
	if !it.Has(a.Field) {
		return refuse(agentvault.CodeNotFound, "the item has no such field")
	}
	switch it.Kind {
	case item.KindCard:
		if !a.APIKey.Sees(it) {
			return refuse(agentvault.CodeScopeDenied, "this key may not use this card")
		}
		if it.Card == nil {
			return refuse(agentvault.CodeScopeDenied, "the card has no site rules")
		}
		if !e.ScopeAdmits(it, dest) {
			return refuse(agentvault.CodeScopeDenied, "this card is not allowed on "+dest)
		}
		return e.decideCard(a, dest, site)
	case item.KindLogin:
		if !a.APIKey.Sees(it) {
			return refuse(agentvault.CodeScopeDenied, "this key may not use this login")
		}
		if it.Login == nil || it.Login.Site == "" {
			return refuse(agentvault.CodeScopeDenied, "the login has no site")
		}
		if !e.ScopeAdmits(it, dest) {
			return refuse(agentvault.CodeScopeDenied, "this login belongs to another site")
		}
		// The login's own site is the owner's authorization for it: they
		// saved (or approved) a credential for exactly that domain.
		return Decision{Allow: true, Message: "allowed"}
	case item.KindIdentity, item.KindAddress:
		if d, ok := e.destinationGate(a, dest, site); !ok {
			return d
		}
		return Decision{Allow: true, Message: "allowed"}
	}
	return refuse(agentvault.CodeInvalidInput, "unknown item kind")
}

// destinationGate asks the owner about a destination they have not
// authorized (P1: deny by default).
func (e *Engine) destinationGate(a Args, dest, site string) (Decision, bool) {
	for h, on := range a.AuthorizedDestinations {
		if n, ok := normalizeHost(h); on && ok && hostname.Under(dest, n) {
			return Decision{}, true
		}
	}
	for _, ap := range a.Approvals {
		if ap.Kind == ApprovalDestination && approvalCovers(ap, dest, site) {
			return Decision{}, true
		}
	}
	return ask(agentvault.CodeDestinationUnauthorized, ReasonNewDestination,
		"the owner has not authorized "+dest+" yet"), false
}

func (e *Engine) decideCard(a Args, dest, site string) Decision {
	c := a.Card
	if c.Paused {
		return refuse(agentvault.CodeCardPaused, "the owner has paused this card")
	}
	for _, m := range c.BlockedMerchants {
		if n, ok := normalizeHost(m); ok && hostname.Under(dest, n) {
			return refuse(agentvault.CodeMerchantBlocked, "the owner has blocked this merchant for this card")
		}
	}
	var spend Decision
	if a.Field == item.FieldNumber {
		spend = e.spending(a, dest, site)
		if !spend.Allow && !spend.NeedsOwner {
			return spend
		}
	}
	if d, ok := e.destinationGate(a, dest, site); !ok {
		return d
	}
	if a.Field == item.FieldNumber {
		return spend
	}
	if a.Field == item.FieldCVV && a.CVVAgain > 0 {
		// One owner's yes per spent authorization: the n-th time the code
		// is asked for again needs n such approvals in this session.
		n := 0
		for _, ap := range a.Approvals {
			if ap.Kind == ApprovalPurchase && ap.Reason == ReasonCVVAgain && ap.ItemID == a.Item.ID && approvalCovers(ap, dest, site) {
				n++
			}
		}
		if n < a.CVVAgain {
			return ask(agentvault.CodeApprovalExpired, ReasonCVVAgain,
				"this card's security code was already used for this purchase: the owner approves the purchase again")
		}
	}
	if a.Field == item.FieldCVV && c.LiveCVV {
		for _, ap := range a.Approvals {
			if ap.Kind == ApprovalCVV && ap.ItemID == a.Item.ID && approvalCovers(ap, dest, site) {
				return Decision{Allow: true, Message: "allowed"}
			}
		}
		return ask(agentvault.CodeCVVEntryRequired, ReasonCVVEntry, "the owner types this card's security code")
	}
	return Decision{Allow: true, Message: "allowed"}
}

// cardCurrency is the currency the card's limits are written in, or "" when
// it has none. Limits in two currencies are a configuration error.
func cardCurrency(c CardPolicy) (string, bool) {
	cur := ""
	for _, l := range []*Amount{c.PerPurchaseCap, c.DailyCap, c.MonthlyCap, c.ApprovalThreshold} {
		if l == nil {
			continue
		}
		if cur != "" && l.Currency != cur {
			return "", false
		}
		cur = l.Currency
	}
	return cur, true
}

// spending checks a card-number fill against the real total (P18).
func (e *Engine) spending(a Args, dest, site string) Decision {
	c := a.Card
	cur, ok := cardCurrency(c)
	if !ok {
		return refuse(agentvault.CodeAmountUnconvertible, "the card's limits use different currencies")
	}
	hasCaps := c.PerPurchaseCap != nil || c.DailyCap != nil || c.MonthlyCap != nil
	hasThreshold := c.ApprovalThreshold != nil
	purchase := func() []Approval {
		var out []Approval
		for _, ap := range a.Approvals {
			// A yes to re-use a spent security code approves no card
			// number: that is a purchase of its own.
			if ap.Kind == ApprovalPurchase && ap.Reason != ReasonCVVAgain && ap.ItemID == a.Item.ID && approvalCovers(ap, dest, site) {
				out = append(out, ap)
			}
		}
		return out
	}()

	if a.Total == nil {
		if hasCaps {
			return refuse(agentvault.CodeCheckoutTotalUnknown, "the checkout total could not be read and this card has spending limits")
		}
		if hasThreshold || c.StrictAmount || c.EveryPurchase {
			for _, ap := range purchase {
				if ap.Amount == nil {
					return Decision{Allow: true, Message: "allowed: the owner approved this purchase"}
				}
			}
			switch {
			case c.StrictAmount:
				return ask(agentvault.CodeApprovalExpired, ReasonAmountUnknownStrict, "the checkout total could not be read; the owner decides")
			case hasThreshold:
				return ask(agentvault.CodeApprovalExpired, ReasonAmountUnknown, "the checkout total could not be read; the owner decides")
			default:
				return ask(agentvault.CodeApprovalExpired, ReasonEveryPurchase, "the owner approves every purchase with this card")
			}
		}
		return Decision{Allow: true, Message: "allowed"}
	}

	total := *a.Total
	if total.Minor < 0 {
		return refuse(agentvault.CodeAmountUnknown, "negative total")
	}
	if _, ok := currencyExp[total.Currency]; !ok {
		return refuse(agentvault.CodeAmountUnknown, "unknown currency")
	}
	charge := total
	if cur != "" {
		conv, err := e.Rates.Convert(total, cur)
		if err != nil {
			if hasCaps {
				return refuse(agentvault.CodeAmountUnconvertible, "no rate from "+total.Currency+" to the card's "+cur)
			}
			if covered(purchase, total, e.Rates) {
				return Decision{Allow: true, Message: "allowed: the owner approved this purchase", Charge: &total}
			}
			return ask(agentvault.CodeApprovalExpired, ReasonAmountUnconvertible, "the total's currency cannot be converted; the owner decides")
		}
		charge = conv
		if err := CheckCaps(conv, a.SpentToday, a.SpentMonth, Caps{PerPurchase: c.PerPurchaseCap, Daily: c.DailyCap, Monthly: c.MonthlyCap}); err != nil {
			return refuse(agentvault.ErrorCode(err), agentvault.ErrorMessage(err))
		}
	}
	over := false
	if hasThreshold {
		cmp, err := charge.Cmp(*c.ApprovalThreshold)
		if err != nil {
			return refuse(agentvault.CodeAmountUnconvertible, "cannot compare the total with the approval threshold")
		}
		over = cmp > 0
	}
	if over || c.EveryPurchase {
		if covered(purchase, total, e.Rates) {
			return Decision{Allow: true, Message: "allowed: the owner approved this purchase", Charge: &charge}
		}
		if len(purchase) > 0 {
			return ask(agentvault.CodeAmountMismatch, ReasonAmountMismatch, "the total differs from the one the owner approved")
		}
		if over {
			return ask(agentvault.CodeApprovalExpired, ReasonOverThreshold, "the total is over this card's approval threshold")
		}
		return ask(agentvault.CodeApprovalExpired, ReasonEveryPurchase, "the owner approves every purchase with this card")
	}
	return Decision{Allow: true, Message: "allowed", Charge: &charge}
}

// covered reports whether one of the approvals names a total at least as
// large as total (compared in the approval's currency).
func covered(approvals []Approval, total Amount, rates Rates) bool {
	for _, ap := range approvals {
		if ap.Amount == nil {
			continue
		}
		t, err := rates.Convert(total, ap.Amount.Currency)
		if err != nil {
			continue
		}
		if c, err := t.Cmp(*ap.Amount); err == nil && c <= 0 {
			return true
		}
	}
	return false
}

func approvalCovers(ap Approval, dest, site string) bool {
	n, ok := normalizeHost(ap.Site)
	return ok && (hostname.Under(dest, n) || n == site)
}

// normalizeHost is hostname.Bare as a (host, ok) pair: the canonical form
// of a bare host or IP literal, refusing ports, paths, userinfo and empty
// labels (P2). Names are canonicalised to punycode there, once. Each
// decision normalises the same few hosts (the destination, the item's
// sites, the owner's destinations) several times, so the answers are kept:
// Bare depends on its argument alone.
func normalizeHost(h string) (string, bool) {
	if a, ok := hostMemo.get(h); ok {
		return a.host, a.ok
	}
	n, err := hostname.Bare(strings.TrimSpace(h))
	hostMemo.put(h, normalized{n, err == nil})
	return n, err == nil
}

// hostMemoMax bounds the hosts normalizeHost keeps; past it the memo starts
// again empty.
const hostMemoMax = 1024

type normalized struct {
	host string
	ok   bool
}

var hostMemo memo

type memo struct {
	mu sync.RWMutex
	m  map[string]normalized
}

func (c *memo) get(h string) (normalized, bool) {
	c.mu.RLock()
	a, ok := c.m[h]
	c.mu.RUnlock()
	return a, ok
}

func (c *memo) put(h string, a normalized) {
	c.mu.Lock()
	if c.m == nil || len(c.m) >= hostMemoMax {
		c.m = map[string]normalized{}
	}
	c.m[h] = a
	c.mu.Unlock()
}

// RegistrableDomain is host's eTLD+1 by the public suffix list
// ("shop.example.co.uk" gives "example.co.uk"). An IP address is its own
// site. A bare public suffix ("com", "co.uk", "github.io") has none and is
// an error, as is an answer from SiteOf that host is not within.
func (e *Engine) RegistrableDomain(host string) (string, error) {
	h, ok := normalizeHost(host)
	if !ok {
		return "", agentvault.Errorf(agentvault.CodeScopeDenied, "not a host")
	}
	if hostname.IsIP(h) {
		return h, nil
	}
	if e.SiteOf == nil {
		return "", agentvault.Errorf(agentvault.CodeInternal, "no public suffix lookup configured")
	}
	rd, err := e.SiteOf(h)
	if err != nil {
		return "", agentvault.Wrap(agentvault.CodeScopeDenied, err, "no registrable domain")
	}
	rd, ok = normalizeHost(rd)
	if !ok || !hostname.Under(h, rd) || rd == "" {
		return "", agentvault.Errorf(agentvault.CodeScopeDenied, "no registrable domain")
	}
	return rd, nil
}
