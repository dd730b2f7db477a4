package credentials

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/authz"
	"github.com/agentvault/agentvault/credentials/credname"
	"github.com/agentvault/agentvault/vault"
)

// Values is what the Service needs from the vault: *vault.Vault implements
// it. Values are sealed per credential (org, item and field bound in the
// AAD) and every release is audited with an HMAC of the value (P12).
type Values interface {
	PutCredential(ctx context.Context, org, owner, id string, values []vault.CredentialValue) (vault.Item, error)
	ReleaseCredential(ctx context.Context, a vault.ReleaseArgs) ([]vault.CredentialValue, error)
	RemoveCredential(ctx context.Context, org, id, actor string) error
}

// Config builds a Service.
type Config struct {
	Store  Store
	Values Values
	// Accounts lists the dashboard accounts of org (their emails). An
	// account with no membership record is an owner of the organisation
	// (accounts are made by the owner's CLI), so a single-owner install
	// needs no member set-up. Nil: there are none.
	Accounts func(ctx context.Context, org string) ([]string, error)
	// DefaultKeyID names the API key the appliance made at its first start
	// (its file lives in the data directory beside the master key, so it
	// is the owner's). Unless a binding the person consented to says
	// otherwise, it acts for the owner of DefaultKeyOrg while that
	// organisation has exactly one owner. Empty: no key is special.
	DefaultKeyID  string
	DefaultKeyOrg string
	Now           func() time.Time // the clock every link lifetime is measured on
}

// Service applies the rules over the Store and the vault.
type Service struct {
	st            Store
	values        Values
	accounts      func(ctx context.Context, org string) ([]string, error)
	defaultKeyID  string
	defaultKeyOrg string
	now           func() time.Time
}

// New returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Values == nil {
		return nil, agentvault.Errorf(agentvault.CodeInternal, "credentials: store and vault are required")
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Service{st: cfg.Store, values: cfg.Values, accounts: cfg.Accounts,
		defaultKeyID: cfg.DefaultKeyID, defaultKeyOrg: cfg.DefaultKeyOrg, now: now}, nil
}

func forbidden(format string, args ...any) error {
	return agentvault.Errorf(agentvault.CodeForbidden, format, args...)
}

func isNotFound(err error) bool { return errors.Is(err, vault.ErrNotFound) }

// NormalizeUser is the one spelling of a user: trimmed, lower case.
func NormalizeUser(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// accountsOf is org's dashboard accounts, normalised.
func (s *Service) accountsOf(ctx context.Context, org string) ([]string, error) {
	if s.accounts == nil {
		return nil, nil
	}
	list, err := s.accounts(ctx, org)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(list))
	for _, a := range list {
		if a = NormalizeUser(a); a != "" {
			out = append(out, a)
		}
	}
	return out, nil
}

// memberOf is user's membership of org: their record, or, for a dashboard
// account with none, the owner role. Anyone else is vault.ErrNotFound.
// This is the one place that rule lives; owners counts by it.
func (s *Service) memberOf(ctx context.Context, org, user string) (Member, error) {
	m, err := s.st.GetMember(ctx, org, user)
	if err == nil || !isNotFound(err) {
		return m, err
	}
	if user != "" {
		acc, err := s.accountsOf(ctx, org)
		if err != nil {
			return Member{}, err
		}
		if slices.Contains(acc, user) {
			return Member{Org: org, User: user, Role: RoleOwner}, nil
		}
	}
	return Member{}, vault.ErrNotFound
}

// owners lists org's owners by memberOf's rule: members with the owner
// role, and dashboard accounts with no membership record.
func (s *Service) owners(ctx context.Context, org string) ([]string, error) {
	ms, err := s.st.ListMembers(ctx, org)
	if err != nil {
		return nil, err
	}
	acc, err := s.accountsOf(ctx, org)
	if err != nil {
		return nil, err
	}
	var out []string
	recorded := map[string]bool{}
	for _, m := range ms {
		recorded[m.User] = true
		if m.Role == RoleOwner {
			out = append(out, m.User)
		}
	}
	for _, a := range acc {
		if !recorded[a] && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out, nil
}

// PrincipalFor is user, asking themselves, as a principal of org: their
// membership, or, for a dashboard account with none, the owner role.
// Anyone else is forbidden.
func (s *Service) PrincipalFor(ctx context.Context, org, user string) (Principal, error) {
	m, err := s.memberOf(ctx, org, NormalizeUser(user))
	if isNotFound(err) {
		return Principal{}, forbidden("not a member of this organisation")
	}
	if err != nil {
		return Principal{}, err
	}
	return m.Principal(), nil
}

// KeyPrincipal is the person an agent's API key acts for, and whether with
// their consent: a binding they made or accepted; else, for the default
// key, the organisation's only owner; else a binding someone else made
// (Consented false: the organisation's credentials only, rules.go).
func (s *Service) KeyPrincipal(ctx context.Context, keyID string) (Principal, error) {
	b, err := s.st.GetKeyBinding(ctx, keyID)
	bound := err == nil
	if err != nil && !isNotFound(err) {
		return Principal{}, err
	}
	if bound && b.Consented {
		return s.PrincipalFor(ctx, b.Org, b.User)
	}
	if keyID != "" && keyID == s.defaultKeyID {
		p, err := s.defaultPrincipal(ctx)
		if err == nil || !bound {
			return p, err
		}
	}
	if !bound {
		return Principal{}, forbidden("this API key acts for nobody yet: an owner or admin offers it to a person on the dashboard (Credentials), and that person accepts it there")
	}
	p, err := s.PrincipalFor(ctx, b.Org, b.User)
	if err != nil {
		return Principal{}, err
	}
	p.Consented = false
	return p, nil
}

// defaultPrincipal is the default key's person without a consented
// binding: the organisation's owner, when it has exactly one.
func (s *Service) defaultPrincipal(ctx context.Context) (Principal, error) {
	owners, err := s.owners(ctx, s.defaultKeyOrg)
	if err != nil {
		return Principal{}, err
	}
	switch len(owners) {
	case 1:
		return s.PrincipalFor(ctx, s.defaultKeyOrg, owners[0])
	case 0:
		return Principal{}, forbidden("the default API key acts for the appliance's owner, and there is none yet: set a dashboard password first (proxyd owner set-password)")
	}
	return Principal{}, forbidden("this organisation has %d owners, so the default API key acts for one of them only once they bind it to themselves on the dashboard (Credentials)", len(owners))
}

// PutMember adds or changes a member. Owners and admins manage members;
// the role changes only by authz.SetRole (from above, never leaving the
// organisation without an owner), and the teams of someone whose role
// stays by CanChangeTeams.
func (s *Service) PutMember(ctx context.Context, by Principal, m Member) error {
	m.User = NormalizeUser(m.User)
	if m.Org != by.Org || !by.Role.Manages() || !by.Consented {
		return forbidden("only owners and admins manage members")
	}
	if !m.Role.Valid() || m.User == "" || len(m.User) > 200 || strings.ContainsAny(m.User, " \r\n\t\x00<>\"'") {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "a member needs a sign-in (email) and a role: owner, admin or member")
	}
	for i, t := range m.Teams {
		if !ValidTeam(t) {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "teams[%d] is not a team name (lower case letters, digits, '_' and '-')", i)
		}
	}
	cur, err := s.memberOf(ctx, m.Org, m.User)
	if err != nil && !isNotFound(err) {
		return err
	}
	owners, err := s.owners(ctx, m.Org)
	if err != nil {
		return err
	}
	if err := authz.SetRole(by.Role, cur.Role, m.Role, m.User == by.User, len(owners)); err != nil {
		return err
	}
	if cur.Role == m.Role && !slices.Equal(cur.Teams, m.Teams) && !CanChangeTeams(by, cur.Role) {
		return forbidden("only an owner, or someone above this person's role (%s), changes their teams; ask an owner", cur.Role)
	}
	return s.st.PutMember(ctx, m)
}

// Members lists the organisation's members.
func (s *Service) Members(ctx context.Context, by Principal) ([]Member, error) {
	if !by.Role.Manages() || !by.Consented {
		return nil, forbidden("only owners and admins list members")
	}
	return s.st.ListMembers(ctx, by.Org)
}

// BindKey makes an agent's API key act for a member. Bound by the member
// themselves it acts for them at once; bound by someone else it is an
// offer, which reaches only the organisation's credentials until the
// member accepts it on their own signed-in page (AcceptKey). A key that
// acts for someone with their consent moves to another person only by
// CanTakeKey.
func (s *Service) BindKey(ctx context.Context, by Principal, keyID, user string) (KeyBinding, error) {
	if !by.Role.Manages() || !by.Consented {
		return KeyBinding{}, forbidden("only owners and admins bind API keys")
	}
	keyID = strings.TrimSpace(keyID)
	if keyID == "" || len(keyID) > 200 {
		return KeyBinding{}, agentvault.Errorf(agentvault.CodeInvalidInput, "choose an API key")
	}
	user = NormalizeUser(user)
	if _, err := s.PrincipalFor(ctx, by.Org, user); err != nil {
		return KeyBinding{}, err
	}
	holder, err := s.KeyPrincipal(ctx, keyID)
	if err != nil && agentvault.ErrorCode(err) != agentvault.CodeForbidden {
		return KeyBinding{}, err
	}
	if err == nil && holder.Consented {
		if holder.Org == by.Org && holder.User == user {
			// Already theirs with their consent: an offer must not undo it.
			return KeyBinding{KeyID: keyID, Org: by.Org, User: user, Consented: true}, nil
		}
		if holder.Org != by.Org || !CanTakeKey(by, holder) {
			return KeyBinding{}, forbidden("this API key acts for someone whose role (%s) is not below yours; only they or an owner may bind it to another person", holder.Role)
		}
	}
	b := KeyBinding{KeyID: keyID, Org: by.Org, User: user, By: by.User, Consented: user == by.User}
	return b, s.st.BindKey(ctx, b)
}

// AcceptKey is p, signed in, accepting an API key offered to them: from
// then on it acts for them with their consent.
func (s *Service) AcceptKey(ctx context.Context, p Principal, keyID string) error {
	if !p.Consented {
		return forbidden("only the person themselves, signed in to the dashboard, accepts an API key")
	}
	err := s.st.ConsentKey(ctx, p.Org, strings.TrimSpace(keyID), p.User)
	if isNotFound(err) {
		return agentvault.Errorf(agentvault.CodeNotFound, "no API key is offered to you under that id")
	}
	return err
}

// KeyBindings lists the key bindings p may see: every one of the
// organisation for an owner or admin, the ones binding a key to p for
// anyone else.
func (s *Service) KeyBindings(ctx context.Context, p Principal) ([]KeyBinding, error) {
	if !p.Consented {
		return nil, needsConsent(p)
	}
	bs, err := s.st.ListKeyBindings(ctx, p.Org)
	if err != nil || p.Role.Manages() {
		return bs, err
	}
	return slices.DeleteFunc(bs, func(b KeyBinding) bool { return b.User != p.User }), nil
}

// NewToken returns a one-time link token (256 random bits, URL-safe) and
// the hash the store keeps.
func NewToken() (string, []byte, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", nil, agentvault.Wrap(agentvault.CodeInternal, err, "no randomness")
	}
	tok := base64.RawURLEncoding.EncodeToString(b)
	return tok, HashToken(tok), nil
}

// HashToken is what the store keeps of a link token.
func HashToken(tok string) []byte {
	h := sha256.Sum256([]byte(tok))
	return h[:]
}

func newID() (string, error) {
	b := make([]byte, 10)
	if _, err := rand.Read(b); err != nil {
		return "", agentvault.Wrap(agentvault.CodeInternal, err, "no randomness")
	}
	return "cred_" + hex.EncodeToString(b), nil
}

// RequestArgs is credential_request's input.
type RequestArgs struct {
	Name       string
	Fields     []string
	Visibility Visibility // empty: personal
}

// Issued is a one-time link just made. Token is shown once and never stored.
type Issued struct {
	Credential Credential
	Token      string
	Expires    time.Time
}

// Request finds or creates the credential name of p (their personal one, or
// the organisation's with visibility org) and issues a one-time entry link
// for the requester, valid EntryLinkTTL. Asking again with the same name
// replaces the values once the new ones are typed.
func (s *Service) Request(ctx context.Context, p Principal, a RequestArgs) (Issued, error) {
	if err := needsConsent(p); err != nil {
		return Issued{}, err
	}
	if a.Visibility == "" {
		a.Visibility = Personal
	}
	if !credname.Valid(a.Name) {
		return Issued{}, agentvault.Errorf(agentvault.CodeInvalidInput, "name must be lower case letters, digits, '.', '_' or '-' (at most 64)")
	}
	if !a.Visibility.Valid() {
		return Issued{}, agentvault.Errorf(agentvault.CodeInvalidInput, "visibility must be \"personal\" or \"org\"")
	}
	if err := CheckFields(a.Fields); err != nil {
		return Issued{}, err
	}
	creds, err := s.st.ListCredentials(ctx, p.Org)
	if err != nil {
		return Issued{}, err
	}
	now := s.now().UTC()
	var cred Credential
	found := false
	for _, c := range creds {
		if c.Name == a.Name && c.Visibility == a.Visibility && (a.Visibility == Org || c.Owner == p.User) {
			cred, found = c, true
			break
		}
	}
	if found {
		grants, err := s.st.ListGrants(ctx, p.Org, cred.ID)
		if err != nil {
			return Issued{}, err
		}
		if !CanWrite(p, cred, grants) {
			return Issued{}, forbidden("you may not change this organisation credential's values; an owner or admin can grant you write with grant_set")
		}
	} else {
		if !CanCreate(p, a.Visibility) {
			return Issued{}, forbidden("only owners and admins create organisation credentials")
		}
		id, err := newID()
		if err != nil {
			return Issued{}, err
		}
		cred = Credential{ID: id, Org: p.Org, Name: a.Name, Visibility: a.Visibility, Owner: p.User,
			Fields: slices.Clone(a.Fields), Created: now, Updated: now}
		if err := s.st.CreateCredential(ctx, cred); err != nil {
			return Issued{}, err
		}
	}
	tok, hash, err := NewToken()
	if err != nil {
		return Issued{}, err
	}
	l := Link{TokenHash: hash, Kind: LinkEntry, Org: p.Org, User: p.User, CredentialID: cred.ID,
		Fields: slices.Clone(a.Fields), State: LinkPending, Created: now, Expires: now.Add(EntryLinkTTL)}
	if err := s.st.PutLink(ctx, l); err != nil {
		return Issued{}, err
	}
	return Issued{Credential: cred, Token: tok, Expires: l.Expires}, nil
}

// Listed is one line of credential_list: never a value.
type Listed struct {
	Credential
	// IsSelected marks the credential credential_use gives p for its name.
	IsSelected bool
	// CanUse is false for other members' personal credentials an owner or
	// admin sees.
	CanUse bool
}

// List is every credential p may see, by name.
func (s *Service) List(ctx context.Context, p Principal) ([]Listed, error) {
	creds, err := s.st.ListCredentials(ctx, p.Org)
	if err != nil {
		return nil, err
	}
	out := []Listed{}
	for _, c := range creds {
		if !CanSee(p, c) {
			continue
		}
		sel, ok := Select(creds, p.User, c.Name)
		out = append(out, Listed{Credential: c, IsSelected: ok && sel.ID == c.ID, CanUse: CanUse(p, c)})
	}
	return out, nil
}

// Get is one credential p may see.
func (s *Service) Get(ctx context.Context, p Principal, id string) (Credential, error) {
	c, err := s.st.GetCredential(ctx, p.Org, id)
	if err != nil || !CanSee(p, c) {
		return Credential{}, agentvault.Errorf(agentvault.CodeNotFound, "no such credential")
	}
	return c, nil
}

func notFoundName(name string) error {
	if !credname.Valid(name) {
		return agentvault.Errorf(agentvault.CodeNotFound, "no credential of that name for you; ask for yours with credential_request")
	}
	return agentvault.Errorf(agentvault.CodeNotFound, "no credential %q for you (neither yours nor the organisation's); ask for yours with credential_request", name)
}

// Use issues a one-time use URL token for the credential name selects for
// p: their own, else the organisation's; neither is not_found. The token is
// valid UseLinkTTL and for one POST.
func (s *Service) Use(ctx context.Context, p Principal, name string) (Issued, error) {
	if !credname.Valid(name) {
		return Issued{}, notFoundName(name)
	}
	creds, err := s.st.ListCredentials(ctx, p.Org)
	if err != nil {
		return Issued{}, err
	}
	c, ok := Select(creds, p.User, name)
	if ok && c.Visibility == Personal && !p.Consented {
		return Issued{}, needsConsent(p)
	}
	if !ok || !CanUse(p, c) {
		return Issued{}, notFoundName(name)
	}
	if !c.HasValues() {
		return Issued{}, agentvault.Errorf(agentvault.CodeNotFound, "credential %q has no values yet; open its credential_request link and type them", name)
	}
	tok, hash, err := NewToken()
	if err != nil {
		return Issued{}, err
	}
	now := s.now().UTC()
	l := Link{TokenHash: hash, Kind: LinkUse, Org: p.Org, User: p.User, CredentialID: c.ID,
		State: LinkPending, Created: now, Expires: now.Add(UseLinkTTL)}
	if err := s.st.PutLink(ctx, l); err != nil {
		return Issued{}, err
	}
	return Issued{Credential: c, Token: tok, Expires: l.Expires}, nil
}

// Redeemed is what the runtime gets for a use token, once. The caller wipes
// the values after writing them out.
type Redeemed struct {
	Name   string
	Values []vault.CredentialValue
}

// Redeem spends a use token: once, before its expiry, and only while the
// user it was issued to may still use the credential. The release is
// audited (the credential, the person, the time; an HMAC of each value).
func (s *Service) Redeem(ctx context.Context, token string) (Redeemed, error) {
	if token == "" || len(token) > 100 {
		return Redeemed{}, agentvault.Errorf(agentvault.CodeNotFound, "unknown or spent credential link")
	}
	l, err := s.st.AdvanceLink(ctx, HashToken(token), LinkUse, LinkPending, LinkDone, s.now().UTC())
	if isNotFound(err) {
		return Redeemed{}, agentvault.Errorf(agentvault.CodeNotFound, "unknown or spent credential link")
	}
	if err != nil {
		return Redeemed{}, err
	}
	p, err := s.PrincipalFor(ctx, l.Org, l.User)
	if err != nil {
		return Redeemed{}, err
	}
	c, err := s.st.GetCredential(ctx, l.Org, l.CredentialID)
	if err != nil || !CanUse(p, c) || !c.HasValues() {
		return Redeemed{}, agentvault.Errorf(agentvault.CodeNotFound, "the credential is gone or no longer yours to use")
	}
	vals, err := s.values.ReleaseCredential(ctx, vault.ReleaseArgs{Org: c.Org, ItemID: c.ItemID,
		Destination: "runtime", Session: c.ID, Actor: p.User, Purpose: "credential_use"})
	if err != nil {
		return Redeemed{}, err
	}
	return Redeemed{Name: c.Name, Values: vals}, nil
}

// OpenEntry opens an entry link for the dashboard form: only the requester,
// only once, within EntryLinkTTL. It returns the credential and the fields
// to ask for.
func (s *Service) OpenEntry(ctx context.Context, p Principal, token string) (Credential, Link, error) {
	l, err := s.entryLink(ctx, p, token)
	if err != nil {
		return Credential{}, Link{}, err
	}
	if l, err = s.st.AdvanceLink(ctx, l.TokenHash, LinkEntry, LinkPending, LinkOpened, s.now().UTC()); err != nil {
		return Credential{}, Link{}, err
	}
	c, err := s.st.GetCredential(ctx, l.Org, l.CredentialID)
	if err != nil {
		return Credential{}, Link{}, agentvault.Errorf(agentvault.CodeNotFound, "the credential of this link was deleted")
	}
	return c, l, nil
}

func (s *Service) entryLink(ctx context.Context, p Principal, token string) (Link, error) {
	if token == "" || len(token) > 100 {
		return Link{}, agentvault.Errorf(agentvault.CodeNotFound, "unknown credential link")
	}
	l, err := s.st.GetLink(ctx, HashToken(token))
	if err != nil || l.Kind != LinkEntry {
		return Link{}, agentvault.Errorf(agentvault.CodeNotFound, "unknown credential link")
	}
	if l.Org != p.Org || l.User != p.User {
		return Link{}, forbidden("this link is for the person who requested it; sign in as them and open it again")
	}
	return l, nil
}

// SubmitEntry saves the values typed in an opened entry form (exactly the
// link's fields), replacing any earlier values, and spends the link.
func (s *Service) SubmitEntry(ctx context.Context, p Principal, token string, values map[string]vault.Secret) (Credential, error) {
	l, err := s.entryLink(ctx, p, token)
	if err != nil {
		return Credential{}, err
	}
	if len(values) != len(l.Fields) {
		return Credential{}, agentvault.Errorf(agentvault.CodeInvalidInput, "type a value for every field")
	}
	vals := make([]vault.CredentialValue, 0, len(l.Fields))
	for _, f := range l.Fields {
		v, ok := values[f]
		if !ok || v.IsZero() {
			return Credential{}, agentvault.Errorf(agentvault.CodeInvalidInput, "type a value for every field")
		}
		vals = append(vals, vault.CredentialValue{Field: vault.Field(f), Value: v})
	}
	if l, err = s.st.AdvanceLink(ctx, l.TokenHash, LinkEntry, LinkOpened, LinkDone, s.now().UTC()); err != nil {
		return Credential{}, err
	}
	c, err := s.st.GetCredential(ctx, l.Org, l.CredentialID)
	if err != nil {
		return Credential{}, agentvault.Errorf(agentvault.CodeNotFound, "the credential of this link was deleted")
	}
	grants, err := s.st.ListGrants(ctx, c.Org, c.ID)
	if err != nil {
		return Credential{}, err
	}
	if !CanWrite(p, c, grants) {
		return Credential{}, forbidden("you may no longer change this credential's values")
	}
	it, err := s.values.PutCredential(ctx, c.Org, p.User, c.ItemID, vals)
	if isNotFound(err) && c.ItemID != "" {
		it, err = s.values.PutCredential(ctx, c.Org, p.User, "", vals)
	}
	if err != nil {
		return Credential{}, err
	}
	c.ItemID, c.Fields, c.Updated = it.ID, slices.Clone(l.Fields), s.now().UTC()
	if err := s.st.UpdateCredential(ctx, c); err != nil {
		return Credential{}, err
	}
	return c, nil
}

// Delete erases a credential's values, its open links and its grants. The
// owner of a personal credential and the organisation's owners and admins
// may; an admin deleting a member's credential never sees its values.
func (s *Service) Delete(ctx context.Context, p Principal, id string) error {
	if err := needsConsent(p); err != nil {
		return err
	}
	c, err := s.Get(ctx, p, id)
	if err != nil {
		return err
	}
	if !CanDelete(p, c) {
		return forbidden("only its owner, or an owner or admin of the organisation, deletes this credential")
	}
	if c.ItemID != "" {
		if err := s.values.RemoveCredential(ctx, c.Org, c.ItemID, p.User); err != nil {
			return err
		}
	}
	return s.st.DeleteCredential(ctx, c.Org, c.ID)
}

// SetGrant gives (write true) or takes back (write false) a member's or a
// team's right to change an organisation credential's values. subject is
// "user:<email>" or "team:<name>".
func (s *Service) SetGrant(ctx context.Context, p Principal, id, subject string, write bool) (Grant, error) {
	c, err := s.Get(ctx, p, id)
	if err != nil {
		return Grant{}, err
	}
	if err := CanGrant(p, c); err != nil {
		return Grant{}, err
	}
	kind, who, ok := strings.Cut(subject, ":")
	switch {
	case ok && kind == "team" && ValidTeam(who):
	case ok && kind == "user" && who != "":
		who = NormalizeUser(who)
		if _, err := s.PrincipalFor(ctx, p.Org, who); err != nil {
			return Grant{}, agentvault.Errorf(agentvault.CodeNotFound, "no such member")
		}
	default:
		return Grant{}, agentvault.Errorf(agentvault.CodeInvalidInput, "subject must be \"user:<email>\" or \"team:<name>\"")
	}
	g := Grant{Org: p.Org, CredentialID: c.ID, Subject: kind + ":" + who, Write: write}
	return g, s.st.SetGrant(ctx, g)
}

// Grants lists an organisation credential's grants.
func (s *Service) Grants(ctx context.Context, p Principal, id string) ([]Grant, error) {
	c, err := s.Get(ctx, p, id)
	if err != nil {
		return nil, err
	}
	return s.st.ListGrants(ctx, p.Org, c.ID)
}
