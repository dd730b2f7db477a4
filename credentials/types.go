package credentials

import (
	"slices"
	"time"

	"github.com/agentvault/agentvault/authz"
)

// Role is a member's role in an organisation: the one role ladder of
// package authz (owner > admin > member).
type Role = authz.Role

const (
	RoleOwner  = authz.Owner
	RoleAdmin  = authz.Admin
	RoleMember = authz.Member
)

// Member is a person in an organisation. User is the person's sign-in (the
// dashboard account's email, lower case). Teams are team names.
type Member struct {
	Org   string
	User  string
	Role  Role
	Teams []string
}

// Principal is who is asking: a dashboard user or the user an agent's API
// key acts for.
type Principal struct {
	Org   string
	User  string
	Role  Role
	Teams []string
	// Consented: the person is asking themselves (signed in), or through a
	// key they bound to themselves or accepted on their own signed-in page.
	// A key someone else bound to them and they did not accept reaches only
	// the organisation's credentials (rules.go). The zero value is the
	// refusing one.
	Consented bool
}

// Principal is the member as a principal, asking themselves.
func (m Member) Principal() Principal {
	return Principal{Org: m.Org, User: m.User, Role: m.Role, Teams: slices.Clone(m.Teams), Consented: true}
}

// KeyBinding says which member an agent's API key acts for. A binding made
// by someone other than User is an offer until User accepts it on their own
// signed-in page (Service.AcceptKey).
type KeyBinding struct {
	KeyID string
	Org   string
	User  string
	// By is who made the binding.
	By string
	// Consented: User made the binding or accepted it.
	Consented bool
}

// Visibility says who a credential serves.
type Visibility string

const (
	// Personal: only its owner may use it or change its values; it cannot
	// be shared. Owners and admins see that it exists and may delete it.
	Personal Visibility = "personal"
	// Org: the organisation's; it serves every member who has no personal
	// credential of the same name. Owners and admins create it and grant
	// write to members or teams.
	Org Visibility = "org"
)

// Valid reports whether v is one of the visibilities above.
func (v Visibility) Valid() bool { return v == Personal || v == Org }

// Credential is a credential's metadata: never a value. ItemID names the
// vault item holding the values; it is empty until someone typed them.
type Credential struct {
	ID         string // "cred_" + hex
	Org        string
	Name       string
	Visibility Visibility
	Owner      string // the personal credential's owner; for org ones, who created it
	Fields     []string
	ItemID     string
	Created    time.Time
	Updated    time.Time
}

// HasValues reports whether the credential's values were typed.
func (c Credential) HasValues() bool { return c.ItemID != "" }

// Grant lets a member ("user:<email>") or a team ("team:<name>") change an
// organisation credential's values.
type Grant struct {
	Org          string
	CredentialID string
	Subject      string
	Write        bool
}

// LinkKind is what a one-time link is for.
type LinkKind string

const (
	// LinkEntry opens the dashboard form where the requester types values.
	LinkEntry LinkKind = "entry"
	// LinkUse is the URL a skill's runtime POSTs its token to once.
	LinkUse LinkKind = "use"
)

// LinkState is where a link is in its life; it only moves forward, once.
type LinkState string

const (
	LinkPending LinkState = "pending" // issued, not opened
	LinkOpened  LinkState = "opened"  // entry form shown to the requester
	LinkDone    LinkState = "done"    // values saved, or values handed out
)

// Link is a one-time link as stored: only the SHA-256 of its token.
type Link struct {
	TokenHash    []byte
	Kind         LinkKind
	Org          string
	User         string // who asked for it; the only one who may use it
	CredentialID string
	Fields       []string // entry links: the fields the form asks for
	State        LinkState
	Created      time.Time
	Expires      time.Time
}

// Lifetimes of one-time links (seed 003).
const (
	EntryLinkTTL = time.Hour
	UseLinkTTL   = 60 * time.Second
)
