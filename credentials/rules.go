package credentials

import (
	"regexp"
	"slices"

	"github.com/agentvault/agentvault"
)

// A credential's fields are identifiers a runtime reads from JSON, and a team
// name is shown and stored like a credential's name (whose grammar is package
// credname's): a closed grammar keeps them out of HTML, logs and SQL trouble,
// and keeps user text out of error messages.
var (
	fieldRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,39}$`)
	teamRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,39}$`)
)

// MaxFields bounds the fields of one credential.
const MaxFields = 16

// ValidTeam reports whether s is a team name.
func ValidTeam(s string) bool { return teamRE.MatchString(s) }

// CheckFields validates the fields a credential asks for: 1..MaxFields
// distinct identifiers ("username", "password", "apiKey").
func CheckFields(fields []string) error {
	if len(fields) == 0 || len(fields) > MaxFields {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "fields must list 1 to %d field names", MaxFields)
	}
	for i, f := range fields {
		if !fieldRE.MatchString(f) {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "fields[%d] is not a field name (a letter, then letters, digits or '_', at most 40)", i)
		}
		if slices.Contains(fields[:i], f) {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "fields[%d] repeats an earlier field", i)
		}
	}
	return nil
}

// Select is the credential a name gives user: their own personal one first,
// else the organisation's. Other members' personal credentials are never
// selected.
func Select(creds []Credential, user, name string) (Credential, bool) {
	var org *Credential
	for i := range creds {
		c := &creds[i]
		if c.Name != name {
			continue
		}
		if c.Visibility == Personal && c.Owner == user {
			return *c, true
		}
		if c.Visibility == Org && org == nil {
			org = c
		}
	}
	if org != nil {
		return *org, true
	}
	return Credential{}, false
}

// Consent (P24). An agent's key acts for a person with their consent only
// when they bound it to themselves or accepted it on their own signed-in
// page (KeyBinding.Consented), or when it is the appliance's default key
// and they are its only owner (Service.KeyPrincipal). Without consent the
// key reaches the organisation's credentials the way any member uses them
// and nothing that is the person's own: it never sees, uses, asks for or
// changes a personal credential, theirs or anyone's, and it takes none of
// their powers (creating or changing organisation credentials, deleting,
// granting). Otherwise whoever may bind keys could make their own key
// "be" another person and read that person's passwords.

// needsConsent is nil for a principal with consent, else the refusal that
// says how to give it.
func needsConsent(p Principal) error {
	if p.Consented {
		return nil
	}
	return forbidden("this API key was bound to %s by someone else and does not act for them until they accept it: they sign in to the dashboard and accept the key on their Credentials page", p.User)
}

// CanSee: a member sees their own personal credentials and the
// organisation's; owners and admins also see that others' personal ones
// exist (name, owner, fields, whether they have values). Without consent,
// only the organisation's.
func CanSee(p Principal, c Credential) bool {
	if p.Org != c.Org {
		return false
	}
	if c.Visibility == Org {
		return true
	}
	return p.Consented && (c.Owner == p.User || p.Role.Manages())
}

// CanUse: a personal credential serves only its owner, never an owner or
// admin of the organisation, and only with the owner's consent; an
// organisation credential serves every member.
func CanUse(p Principal, c Credential) bool {
	if p.Org != c.Org {
		return false
	}
	if c.Visibility == Personal {
		return p.Consented && c.Owner == p.User
	}
	return c.Visibility == Org
}

// CanWrite: only the owner changes a personal credential's values; an
// organisation credential's values are changed by owners and admins and by
// the members and teams granted write. All of it needs consent.
func CanWrite(p Principal, c Credential, grants []Grant) bool {
	if p.Org != c.Org || !p.Consented {
		return false
	}
	if c.Visibility == Personal {
		return c.Owner == p.User
	}
	if p.Role.Manages() {
		return true
	}
	for _, g := range grants {
		if !g.Write || g.CredentialID != c.ID {
			continue
		}
		if g.Subject == UserSubject(p.User) {
			return true
		}
		for _, t := range p.Teams {
			if g.Subject == TeamSubject(t) {
				return true
			}
		}
	}
	return false
}

// CanDelete: the owner of a personal credential, and the organisation's
// owners and admins (when someone leaves); organisation credentials only by
// owners and admins. All of it needs consent.
func CanDelete(p Principal, c Credential) bool {
	if p.Org != c.Org || !p.Consented {
		return false
	}
	if p.Role.Manages() {
		return true
	}
	return c.Visibility == Personal && c.Owner == p.User
}

// CanCreate: anyone creates personal credentials; only owners and admins
// create the organisation's. Both need consent.
func CanCreate(p Principal, v Visibility) bool {
	return p.Consented && (v == Personal || (v == Org && p.Role.Manages()))
}

// CanGrant: only owners and admins grant, with consent, and only on
// organisation credentials: a personal credential cannot be shared.
func CanGrant(p Principal, c Credential) error {
	if c.Visibility == Personal {
		return agentvault.Errorf(agentvault.CodeForbidden, "a personal credential cannot be shared; create an organisation credential (visibility \"org\") instead")
	}
	if err := needsConsent(p); err != nil {
		return err
	}
	if p.Org != c.Org || !p.Role.Manages() {
		return agentvault.Errorf(agentvault.CodeForbidden, "only owners and admins grant access to organisation credentials")
	}
	return nil
}

// CanTakeKey: a key that acts for holder with their consent is bound to
// someone else only by the holder or by someone above them (an owner for
// anyone). An admin must not turn an owner's or a fellow admin's agent into
// his own, nor hand it to another person.
func CanTakeKey(by, holder Principal) bool {
	return by.User == holder.User || by.Role == RoleOwner || by.Role.Rank() > holder.Role.Rank()
}

// CanChangeTeams: the teams of someone whose role stays the same are
// changed by an owner, or by a manager above that person: authz's ladder,
// which authz.SetRole applies to the role itself. current is "" for
// someone new.
func CanChangeTeams(by Principal, current Role) bool {
	return by.Role == RoleOwner || (by.Role.Manages() && current.Rank() < by.Role.Rank())
}

// UserSubject and TeamSubject name grant subjects.
func UserSubject(user string) string { return "user:" + user }
func TeamSubject(team string) string { return "team:" + team }
