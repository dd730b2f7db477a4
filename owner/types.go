package owner

import (
	"slices"
	"time"

	"github.com/agentvault/agentvault/policy"
)

// Scope is what an API key may use, as the owner set it and the store
// keeps it: its items (Items, policy.KeyScope, the one rule of which items
// a key sees) and whether it may create logins.
type Scope struct {
	AllCards        bool
	CardIDs         []string // vault item ids, when not AllCards
	AllLogins       bool
	LoginIDs        []string // vault item ids, when not AllLogins
	CanCreateLogins bool
}

// APIKey is an agent credential as stored. The key an agent presents is
// "<ID>_<secret>"; only SecretHash (SHA-256 of the secret, which carries 256
// random bits, so a slow KDF buys nothing) is kept.
type APIKey struct {
	ID         string // "avk_" + 16 hex
	Org        string
	Name       string
	SecretHash []byte
	Scope      Scope
	Created    time.Time
	RevokedAt  time.Time // zero while the key is live
}

// Revoked reports whether the owner has revoked the key.
func (k APIKey) Revoked() bool { return !k.RevokedAt.IsZero() }

// Items is the scope's items as policy reads them.
func (s Scope) Items() policy.KeyScope {
	return policy.KeyScope{AllCards: s.AllCards, CardIDs: slices.Clone(s.CardIDs),
		AllLogins: s.AllLogins, LoginIDs: slices.Clone(s.LoginIDs)}
}

// Info is the key as policy sees it.
func (k APIKey) Info() policy.KeyInfo {
	return policy.KeyInfo{ID: k.ID, Scope: k.Scope.Items(), CanCreateLogins: k.Scope.CanCreateLogins, Revoked: k.Revoked()}
}

// CardPolicy is the owner's rules for one card (a vault item id). Whether a
// card is usable on any site or a list of sites lives in the vault item
// (vault.CardMeta); everything else is here. Every amount in Rules is in
// Currency, the card's cap currency.
type CardPolicy struct {
	Org       string
	CardID    string
	Currency  string // ISO 4217; empty when the card has no amount rules
	Rules     policy.CardPolicy
	Updated   time.Time
	UpdatedBy string
}

// Destination is a host or registrable domain the owner has authorized
// fills on (it covers its subdomains).
type Destination struct {
	Org     string
	Host    string
	AddedBy string // "owner:<email>", "approval:<id>", "config"
	Added   time.Time
}

// Signup is a site and email the owner has pre-approved for an agent to
// create an account with.
type Signup struct {
	Org     string
	Site    string
	Email   string
	AddedBy string
	Added   time.Time
}

// ApprovalKind is what the owner is asked about.
type ApprovalKind string

const (
	KindNewDestination ApprovalKind = "new_destination"
	KindPurchase       ApprovalKind = "purchase"
	KindCVVEntry       ApprovalKind = "cvv_entry"
	KindSignup         ApprovalKind = "signup"
	// KindTOTPReplace asks whether the authenticator seed an agent's
	// login.totp_secret capture read may replace the one a login holds
	// (ItemID the login, Site the page's host, Page the page). The seed
	// waits sealed in the vault, never in the approval (P24).
	KindTOTPReplace ApprovalKind = "totp_replace"
)

// Valid reports whether k is one of the kinds above.
func (k ApprovalKind) Valid() bool {
	switch k {
	case KindNewDestination, KindPurchase, KindCVVEntry, KindSignup, KindTOTPReplace:
		return true
	}
	return false
}

// ApprovalStatus is where an approval is in its life. Only pending moves,
// and only once.
type ApprovalStatus string

const (
	StatusPending  ApprovalStatus = "pending"
	StatusApproved ApprovalStatus = "approved"
	StatusDenied   ApprovalStatus = "denied"
	StatusExpired  ApprovalStatus = "expired"
)

// Approval is one question to the owner in the durable queue.
type Approval struct {
	ID     string // "apr_" + 16 hex
	Org    string
	Kind   ApprovalKind
	Reason string // policy.Reason for fills; free text from a closed set otherwise
	Site   string // host or registrable domain asked about
	Amount *policy.Amount
	CardID string // the card a purchase or CVV approval binds (its grant's item)
	// ItemID is the vault item (card or login) the fill that raised the
	// approval named, and Page the page it was filling (PageOf: scheme,
	// host and path). Both are for the owner's eyes only: they bind
	// nothing, and a new_destination approval shared by several fills
	// shows the first one's. Empty for signups and older approvals.
	ItemID    string
	Page      string
	APIKeyID  string
	Session   string
	Created   time.Time
	Expires   time.Time
	Status    ApprovalStatus
	DecidedBy string
	DecidedAt time.Time
}

// Done reports whether the approval has its final status.
func (a Approval) Done() bool { return a.Status != StatusPending }

// Grant is the approval as policy.Args.Approvals takes it, when it is an
// approved one a fill can use.
func (a Approval) Grant() (policy.Approval, bool) {
	if a.Status != StatusApproved {
		return policy.Approval{}, false
	}
	var kind policy.ApprovalKind
	switch a.Kind {
	case KindNewDestination:
		kind = policy.ApprovalDestination
	case KindPurchase:
		kind = policy.ApprovalPurchase
	case KindCVVEntry:
		kind = policy.ApprovalCVV
	default:
		return policy.Approval{}, false
	}
	g := policy.Approval{Kind: kind, Site: a.Site, ItemID: a.CardID, Reason: policy.Reason(a.Reason)}
	if a.Amount != nil {
		amt := *a.Amount
		g.Amount = &amt
	}
	return g, true
}

// ApprovalFilter selects approvals; zero fields match everything.
type ApprovalFilter struct {
	Org      string
	Status   ApprovalStatus
	APIKeyID string
	Session  string
	Limit    int // 0: no limit; newest first
}

// Account is the owner's sign-in for the dashboard.
type Account struct {
	Org          string
	Email        string // lower case
	PasswordHash string // argon2id, PHC string with its parameters
	Created      time.Time
	Updated      time.Time
}

// DashSession is a signed-in dashboard session. The cookie holds a random
// token; only its SHA-256 is stored.
type DashSession struct {
	TokenHash []byte
	Email     string
	Created   time.Time
	Expires   time.Time
}

// Refusal is a fill the rules refused, kept for the owner's Activity page.
// It names the item, field and site, never a value.
type Refusal struct {
	Seq      int64
	Org      string
	Time     time.Time
	APIKeyID string
	Session  string
	ItemID   string
	Kind     string // vault.Kind
	Field    string // vault.Field
	Site     string
	Code     string // the refusal's agentvault.Code
}
