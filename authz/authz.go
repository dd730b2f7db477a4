package authz

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentvault/agentvault"
)

// Role is a person's role in the appliance's organisation.
type Role string

const (
	Owner  Role = "owner"
	Admin  Role = "admin"
	Member Role = "member"
)

// Roles lists the roles from the top down.
var Roles = []Role{Owner, Admin, Member}

// Valid reports whether r is one of the roles above.
func (r Role) Valid() bool { return r == Owner || r == Admin || r == Member }

// Rank orders roles: owner 3, admin 2, member 1, anything else 0.
func (r Role) Rank() int {
	switch r {
	case Owner:
		return 3
	case Admin:
		return 2
	case Member:
		return 1
	}
	return 0
}

// Manages reports whether the role manages people and the organisation's
// shared credentials (owner and admin).
func (r Role) Manages() bool { return r == Owner || r == Admin }

// Area is a part of the owner's powers that the owner may delegate to
// admins. An admin holds none of them until the owner delegates it.
type Area string

const (
	Approvals     Area = "approvals"     // purchase and site approvals, live hand-offs
	Cards         Area = "cards"         // cards and their rules (caps, thresholds, sites)
	Logins        Area = "logins"        // the vault's site logins
	Keys          Area = "keys"          // agents' API keys and their scopes
	Sites         Area = "sites"         // authorized sites, pre-approved sign-ups, sites the agent signs for
	Activity      Area = "activity"      // the activity log and audit records
	Apps          Area = "apps"          // connected apps and their hosted sessions
	Recipes       Area = "recipes"       // checkout recipe submissions
	Notifications Area = "notifications" // where the appliance notifies the owner
)

// Areas lists every delegable area, in the order the dashboard shows them.
var Areas = []Area{Approvals, Cards, Logins, Keys, Sites, Activity, Apps, Recipes, Notifications}

// AreaNames says what each area covers, for forms and messages.
var AreaNames = map[Area]string{
	Approvals:     "approve purchases and sites, and take over hand-offs",
	Cards:         "manage cards and their limits",
	Logins:        "manage saved logins",
	Keys:          "manage agents' API keys",
	Sites:         "manage authorized sites, sign-ups and the sites the agent signs its requests for",
	Activity:      "read the activity log",
	Apps:          "manage connected apps",
	Recipes:       "review checkout recipes",
	Notifications: "change notification settings",
}

// ValidArea reports whether a is one of Areas.
func ValidArea(a Area) bool { return slices.Contains(Areas, a) }

// Level is the least standing an action needs.
type Level int

const (
	// Public: anyone, signed in or not (the sign-in page, static assets).
	Public Level = iota + 1
	// Person: any signed-in person, for their own things only; the service
	// behind the action checks that the thing is theirs.
	Person
	// Manager: an owner or an admin (people and the organisation's shared
	// credentials).
	Manager
	// OwnerOnly: an owner, or an admin the owner delegated Rule.Area to.
	// With no Area, owners only.
	OwnerOnly
	// Agent: an agent's API key, within the key's scope; reached through
	// mcpd, which holds the control token, or, for a call marked OwnKey,
	// by the agent itself with its key as the bearer. A call that acts for
	// a person (Rule.ForPerson) needs that person's consent on the key.
	Agent
	// Shell: the owner at the appliance's host (the CLI reads the data
	// directory, master key included, so whoever runs it is the owner).
	Shell
)

// Rule is one action's entry.
type Rule struct {
	Level Level
	// Area, with OwnerOnly, is the part of the owner's powers an admin may
	// be delegated to take this action.
	Area Area
	// ForPerson marks an agent call that acts for the person the key is
	// bound to. Package credentials applies the consent rule to it: without
	// the person's consent on the key, the call reaches the organisation's
	// credentials and never the person's own.
	ForPerson bool
	// OwnKey marks an agent call an agent may also make itself, with its
	// own API key as the bearer instead of mcpd's control token: the calls
	// of an agent that drives its own browser (docs/byob.md). The control
	// API binds such a call to that key: the key it names, the sessions it
	// opened, the approvals its fills wait on.
	OwnKey bool
	// What the action does, in a few words: "approve purchases".
	What string
}

// Kind is what sort of subject asks.
type Kind int

const (
	Anonymous    Kind = iota // nobody signed in
	PersonKind               // a signed-in person (dashboard)
	AgentKind                // mcpd on an agent's behalf (control API)
	AgentKeyKind             // an agent itself, its API key as the bearer (control API)
	ShellKind                // the owner's shell on the appliance's host (CLI)
)

// Subject is who asks.
type Subject struct {
	Kind Kind
	// User and Role: the signed-in person.
	User string
	Role Role
	// Delegated: for an admin, the areas the owner delegated.
	Delegated []Area
}

// Anyone is a subject nobody signed in as.
var Anyone = Subject{Kind: Anonymous}

// ShellOwner is the owner at the appliance's shell.
var ShellOwner = Subject{Kind: ShellKind, Role: Owner}

// AgentCaller is mcpd calling the control API for an agent's key.
var AgentCaller = Subject{Kind: AgentKind}

// AgentKeyCaller is an agent calling the control API itself, with its own
// API key as the bearer.
var AgentKeyCaller = Subject{Kind: AgentKeyKind}

// PersonAs is a signed-in person with a role and, for an admin, the areas
// delegated to admins.
func PersonAs(user string, role Role, delegated []Area) Subject {
	return Subject{Kind: PersonKind, User: user, Role: role, Delegated: delegated}
}

// Surface is where an action is taken.
type Surface string

const (
	Dashboard Surface = "dashboard" // an HTTP route of the owner's dashboard ("GET /cards")
	CLI       Surface = "cli"       // a proxyd command ("owner create-key")
	Control   Surface = "control"   // a control API route ("POST /v1/sessions")
)

// Lookup returns the rule for an entry of a surface: a dashboard or control
// route pattern as registered with net/http ("POST /keys/{id}/revoke"), or
// a CLI command ("owner revoke").
func Lookup(s Surface, entry string) (Rule, bool) {
	r, ok := table[s][entry]
	return r, ok
}

// Entries lists a surface's entries, sorted.
func Entries(s Surface) []string {
	out := make([]string, 0, len(table[s]))
	for e := range table[s] {
		out = append(out, e)
	}
	slices.Sort(out)
	return out
}

// MustLookup is Lookup for route registration at start-up: an entry that
// is not in the table is a programming error, and the surface must not
// start with a route nobody decided on.
func MustLookup(s Surface, entry string) Rule {
	r, ok := Lookup(s, entry)
	if !ok {
		panic(fmt.Sprintf("authz: %s entry %q has no rule in authz's table; add one", s, entry))
	}
	return r
}

// Check decides whether sub may take the entry of surface s. The refusal
// is CodeForbidden with a message that says who can. An entry without a
// rule is refused.
func Check(sub Subject, s Surface, entry string) error {
	r, ok := Lookup(s, entry)
	if !ok {
		return agentvault.Errorf(agentvault.CodeForbidden, "this action has no rule in the appliance's table of who may do what, so nobody may take it")
	}
	return r.Allows(sub)
}

// Allows decides whether sub may take an action with this rule.
func (r Rule) Allows(sub Subject) error {
	if r.permits(sub) {
		return nil
	}
	return agentvault.Errorf(agentvault.CodeForbidden, "%s", r.WhoCan())
}

func (r Rule) permits(sub Subject) bool {
	switch r.Level {
	case Public:
		return true
	case Person:
		return sub.Kind == PersonKind && sub.Role.Valid()
	case Manager:
		return sub.Kind == PersonKind && sub.Role.Manages()
	case OwnerOnly:
		if sub.Kind == ShellKind {
			return true
		}
		if sub.Kind != PersonKind {
			return false
		}
		if sub.Role == Owner {
			return true
		}
		return sub.Role == Admin && r.Area != "" && slices.Contains(sub.Delegated, r.Area)
	case Agent:
		return sub.Kind == AgentKind || (sub.Kind == AgentKeyKind && r.OwnKey)
	case Shell:
		return sub.Kind == ShellKind
	}
	return false
}

// WhoCan says, in a sentence, who may take an action with this rule.
func (r Rule) WhoCan() string {
	what := r.What
	if what == "" {
		what = "do this"
	}
	switch r.Level {
	case Public:
		return "anyone may " + what
	case Person:
		return "only a signed-in person may " + what + ", and only for their own things"
	case Manager:
		return "only an owner or an admin may " + what
	case OwnerOnly:
		if r.Area != "" {
			return "only the owner may " + what + " (or an admin the owner allowed to " + AreaNames[r.Area] + ")"
		}
		return "only the owner may " + what
	case Agent:
		if r.OwnKey {
			return "only an agent's API key (its own bearer, or through mcpd) may " + what
		}
		return "only an agent's API key, through mcpd, may " + what
	case Shell:
		return "only the owner at the appliance's shell may " + what
	}
	return "nobody may " + what
}

// CanSee reports whether sub may take the entry (for showing or hiding a
// link: the route decides again when it is used).
func CanSee(sub Subject, s Surface, entry string) bool { return Check(sub, s, entry) == nil }

// SetRole is the one rule for giving a person a role. by is who asks;
// current is the person's role now ("" for someone new); next the role
// asked for; self whether by is changing their own role; owners how many
// owners the organisation has now.
//
//   - Roles change only from above: by must outrank the person's current
//     role, and may give at most a role below their own. The one exception
//     at the top: an owner may make another owner (there is no rank above
//     owner to ask).
//   - An owner may step down themselves, and an owner may change another
//     owner's role only down from owner, never while that would leave no
//     owner.
//   - There is always at least one owner.
func SetRole(by, current, next Role, self bool, owners int) error {
	if !next.Valid() {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "a role is owner, admin or member")
	}
	if current != "" && !current.Valid() {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "the person's current role is not one this appliance knows")
	}
	if !by.Valid() {
		return agentvault.Errorf(agentvault.CodeForbidden, "only a member of the organisation changes roles")
	}
	if current == next {
		return nil
	}
	if current == Owner && next != Owner && owners <= 1 {
		return agentvault.Errorf(agentvault.CodeForbidden, "this is the only owner; make someone else an owner first, there must always be one")
	}
	switch {
	case by == Owner:
		// An owner may change anyone below, step down, and make or unmake
		// other owners (the last-owner rule above still holds).
		return nil
	case self:
		return agentvault.Errorf(agentvault.CodeForbidden, "you cannot change your own role; ask an owner")
	case current != "" && current.Rank() >= by.Rank():
		return agentvault.Errorf(agentvault.CodeForbidden, "only someone above %s's role (%s) may change it; ask an owner", "this person", current)
	case next.Rank() >= by.Rank():
		return agentvault.Errorf(agentvault.CodeForbidden, "an %s may give only roles below their own (member); ask an owner for %s", by, next)
	}
	return nil
}

// ParseRole reads a role from a form or flag.
func ParseRole(s string) (Role, error) {
	r := Role(strings.ToLower(strings.TrimSpace(s)))
	if !r.Valid() {
		return "", agentvault.Errorf(agentvault.CodeInvalidInput, "a role is owner, admin or member")
	}
	return r, nil
}
