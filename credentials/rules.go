package credentials

import (
	"regexp"
	"slices"

	"github.com/agentvault/agentvault"
)

// Names and fields are identifiers a skill names in its SKILL.md and a
// runtime reads from JSON: a closed grammar keeps them out of HTML, logs and
// SQL trouble, and keeps user text out of error messages.
var (
	nameRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
	fieldRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,39}$`)
	teamRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,39}$`)
)

// MaxFields bounds the fields of one credential.
const MaxFields = 16

// ValidName reports whether s is a credential name ("sankhya",
// "erp-prod"): lower case letters, digits, '.', '_' and '-'.
func ValidName(s string) bool { return nameRE.MatchString(s) }

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

// CanSee: a member sees their own personal credentials and the
// organisation's; owners and admins also see that others' personal ones
// exist (name, owner, fields, whether they have values).
func CanSee(p Principal, c Credential) bool {
	if p.Org != c.Org {
		return false
	}
	return c.Visibility == Org || c.Owner == p.User || p.Role.Manages()
}

// CanUse: a personal credential serves only its owner, never an owner or
// admin of the organisation; an organisation credential serves every member.
func CanUse(p Principal, c Credential) bool {
	if p.Org != c.Org {
		return false
	}
	if c.Visibility == Personal {
		return c.Owner == p.User
	}
	return c.Visibility == Org
}

// CanWrite: only the owner changes a personal credential's values; an
// organisation credential's values are changed by owners and admins and by
// the members and teams granted write.
func CanWrite(p Principal, c Credential, grants []Grant) bool {
	if p.Org != c.Org {
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
// owners and admins.
func CanDelete(p Principal, c Credential) bool {
	if p.Org != c.Org {
		return false
	}
	if p.Role.Manages() {
		return true
	}
	return c.Visibility == Personal && c.Owner == p.User
}

// CanCreate: anyone creates personal credentials; only owners and admins
// create the organisation's.
func CanCreate(p Principal, v Visibility) bool {
	return v == Personal || (v == Org && p.Role.Manages())
}

// CanGrant: only owners and admins grant, and only on organisation
// credentials: a personal credential cannot be shared.
func CanGrant(p Principal, c Credential) error {
	if c.Visibility == Personal {
		return agentvault.Errorf(agentvault.CodeForbidden, "a personal credential cannot be shared; create an organisation credential (visibility \"org\") instead")
	}
	if p.Org != c.Org || !p.Role.Manages() {
		return agentvault.Errorf(agentvault.CodeForbidden, "only owners and admins grant access to organisation credentials")
	}
	return nil
}

// UserSubject and TeamSubject name grant subjects.
func UserSubject(user string) string { return "user:" + user }
func TeamSubject(team string) string { return "team:" + team }
