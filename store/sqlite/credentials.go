package sqlite

import (
	"context"
	"database/sql"
	"time"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/credentials"
)

// This file implements credentials.Store (seed 003, portal credentials):
// members, API key bindings, credentials, grants and one-time links. No
// value lives here: values are vault items (kind "credential"), link tokens
// are stored as SHA-256 hashes.

// Migration 50 (numbered, so the recipes migrations can take the next
// positional numbers without a clash). The holder column is the personal
// credential's owner and ” for organisation ones, so one UNIQUE says "one
// personal credential per person and name, one organisation credential per
// name".
func init() {
	numberedMigrations[50] = `
CREATE TABLE cred_members (
	org   TEXT NOT NULL,
	user  TEXT NOT NULL,
	role  TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
	teams TEXT NOT NULL,
	PRIMARY KEY (org, user)
);
CREATE TABLE cred_key_bindings (
	key_id TEXT PRIMARY KEY,
	org    TEXT NOT NULL,
	user   TEXT NOT NULL
);
CREATE TABLE credentials (
	id         TEXT PRIMARY KEY,
	org        TEXT NOT NULL,
	name       TEXT NOT NULL,
	visibility TEXT NOT NULL CHECK (visibility IN ('personal', 'org')),
	owner      TEXT NOT NULL,
	holder     TEXT NOT NULL,
	fields     TEXT NOT NULL,
	item_id    TEXT NOT NULL,
	created    INTEGER NOT NULL,
	updated    INTEGER NOT NULL,
	UNIQUE (org, visibility, holder, name)
);
CREATE TABLE cred_grants (
	credential_id TEXT NOT NULL REFERENCES credentials (id) ON DELETE CASCADE,
	org           TEXT NOT NULL,
	subject       TEXT NOT NULL,
	PRIMARY KEY (credential_id, subject)
);
CREATE TABLE cred_links (
	token_hash    BLOB PRIMARY KEY,
	kind          TEXT NOT NULL CHECK (kind IN ('entry', 'use')),
	org           TEXT NOT NULL,
	user          TEXT NOT NULL,
	credential_id TEXT NOT NULL REFERENCES credentials (id) ON DELETE CASCADE,
	fields        TEXT NOT NULL,
	state         TEXT NOT NULL CHECK (state IN ('pending', 'opened', 'done')),
	created       INTEGER NOT NULL,
	expires       INTEGER NOT NULL
);
CREATE INDEX cred_links_credential ON cred_links (credential_id);
`
}

// PutMember implements credentials.Store.
func (s *Store) PutMember(ctx context.Context, m credentials.Member) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO cred_members (org, user, role, teams) VALUES (?, ?, ?, ?)
ON CONFLICT (org, user) DO UPDATE SET role = excluded.role, teams = excluded.teams`, m.Org, m.User, string(m.Role), jsonList(m.Teams))
	return dbErr(err, "put member")
}

func scanMember(row interface{ Scan(...any) error }) (credentials.Member, error) {
	var m credentials.Member
	var role, teams string
	if err := row.Scan(&m.Org, &m.User, &role, &teams); err != nil {
		return m, err
	}
	m.Role = credentials.Role(role)
	var err error
	m.Teams, err = parseList(teams)
	return m, err
}

// GetMember implements credentials.Store.
func (s *Store) GetMember(ctx context.Context, org, user string) (credentials.Member, error) {
	m, err := scanMember(s.db.QueryRowContext(ctx, `SELECT org, user, role, teams FROM cred_members WHERE org = ? AND user = ?`, org, user))
	return m, dbErr(err, "read member")
}

// ListMembers implements credentials.Store.
func (s *Store) ListMembers(ctx context.Context, org string) ([]credentials.Member, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT org, user, role, teams FROM cred_members WHERE org = ? ORDER BY user`, org)
	return collect(rows, err, "list members", scanMember)
}

// DeleteMember implements credentials.Store.
func (s *Store) DeleteMember(ctx context.Context, org, user string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM cred_members WHERE org = ? AND user = ?`, org, user)
	return mustAffect(res, err, "delete member")
}

// credKeyConsentMigration records who made each key binding and whether
// the person it binds consented (P24): bindings made before are offers
// until their person accepts them.
const credKeyConsentMigration = 51

func init() {
	numberedMigrations[credKeyConsentMigration] = `
ALTER TABLE cred_key_bindings ADD COLUMN bound_by TEXT NOT NULL DEFAULT '';
ALTER TABLE cred_key_bindings ADD COLUMN consented INTEGER NOT NULL DEFAULT 0;
`
}

// BindKey implements credentials.Store.
func (s *Store) BindKey(ctx context.Context, b credentials.KeyBinding) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO cred_key_bindings (key_id, org, user, bound_by, consented) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (key_id) DO UPDATE SET org = excluded.org, user = excluded.user, bound_by = excluded.bound_by, consented = excluded.consented`,
		b.KeyID, b.Org, b.User, b.By, b2i(b.Consented))
	return dbErr(err, "bind key")
}

const bindingCols = `key_id, org, user, bound_by, consented`

func scanBinding(row interface{ Scan(...any) error }) (credentials.KeyBinding, error) {
	var b credentials.KeyBinding
	var consented int
	err := row.Scan(&b.KeyID, &b.Org, &b.User, &b.By, &consented)
	b.Consented = consented != 0
	return b, err
}

// GetKeyBinding implements credentials.Store.
func (s *Store) GetKeyBinding(ctx context.Context, keyID string) (credentials.KeyBinding, error) {
	b, err := scanBinding(s.db.QueryRowContext(ctx, `SELECT `+bindingCols+` FROM cred_key_bindings WHERE key_id = ?`, keyID))
	return b, dbErr(err, "read key binding")
}

// ListKeyBindings implements credentials.Store.
func (s *Store) ListKeyBindings(ctx context.Context, org string) ([]credentials.KeyBinding, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+bindingCols+` FROM cred_key_bindings WHERE org = ? ORDER BY key_id`, org)
	return collect(rows, err, "list key bindings", scanBinding)
}

// ConsentKey implements credentials.Store.
func (s *Store) ConsentKey(ctx context.Context, org, keyID, user string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE cred_key_bindings SET consented = 1 WHERE key_id = ? AND org = ? AND user = ?`, keyID, org, user)
	return mustAffect(res, err, "accept key")
}

const credCols = `id, org, name, visibility, owner, fields, item_id, created, updated`

func holderOf(c credentials.Credential) string {
	if c.Visibility == credentials.Personal {
		return c.Owner
	}
	return ""
}

// CreateCredential implements credentials.Store.
func (s *Store) CreateCredential(ctx context.Context, c credentials.Credential) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO credentials (id, org, name, visibility, owner, holder, fields, item_id, created, updated)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, c.ID, c.Org, c.Name, string(c.Visibility), c.Owner, holderOf(c), jsonList(c.Fields), c.ItemID, nanos(c.Created), nanos(c.Updated))
	return dbErr(err, "create credential")
}

// UpdateCredential implements credentials.Store.
func (s *Store) UpdateCredential(ctx context.Context, c credentials.Credential) error {
	res, err := s.db.ExecContext(ctx, `UPDATE credentials SET fields = ?, item_id = ?, updated = ? WHERE org = ? AND id = ?`,
		jsonList(c.Fields), c.ItemID, nanos(c.Updated), c.Org, c.ID)
	return mustAffect(res, err, "update credential")
}

func scanCredential(row interface{ Scan(...any) error }) (credentials.Credential, error) {
	var c credentials.Credential
	var vis, fields string
	var created, updated int64
	if err := row.Scan(&c.ID, &c.Org, &c.Name, &vis, &c.Owner, &fields, &c.ItemID, &created, &updated); err != nil {
		return c, err
	}
	c.Visibility, c.Created, c.Updated = credentials.Visibility(vis), fromNanos(created), fromNanos(updated)
	var err error
	c.Fields, err = parseList(fields)
	return c, err
}

// GetCredential implements credentials.Store.
func (s *Store) GetCredential(ctx context.Context, org, id string) (credentials.Credential, error) {
	c, err := scanCredential(s.db.QueryRowContext(ctx, `SELECT `+credCols+` FROM credentials WHERE org = ? AND id = ?`, org, id))
	return c, dbErr(err, "read credential")
}

// ListCredentials implements credentials.Store.
func (s *Store) ListCredentials(ctx context.Context, org string) ([]credentials.Credential, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+credCols+` FROM credentials WHERE org = ? ORDER BY name, id`, org)
	return collect(rows, err, "list credentials", scanCredential)
}

// DeleteCredential implements credentials.Store: grants and links go in
// the same transaction.
func (s *Store) DeleteCredential(ctx context.Context, org, id string) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM credentials WHERE org = ? AND id = ?`, org, id)
		if err := mustAffect(res, err, "delete credential"); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM cred_grants WHERE credential_id = ?`, id); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM cred_links WHERE credential_id = ?`, id)
		return err
	})
	return dbErr(err, "delete credential")
}

// SetGrant implements credentials.Store.
func (s *Store) SetGrant(ctx context.Context, g credentials.Grant) error {
	if !g.Write {
		_, err := s.db.ExecContext(ctx, `DELETE FROM cred_grants WHERE credential_id = ? AND org = ? AND subject = ?`, g.CredentialID, g.Org, g.Subject)
		return dbErr(err, "remove grant")
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO cred_grants (credential_id, org, subject) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
		g.CredentialID, g.Org, g.Subject)
	return dbErr(err, "set grant")
}

// ListGrants implements credentials.Store.
func (s *Store) ListGrants(ctx context.Context, org, credentialID string) ([]credentials.Grant, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT subject FROM cred_grants WHERE org = ? AND credential_id = ? ORDER BY subject`, org, credentialID)
	return collect(rows, err, "list grants", func(row scanner) (credentials.Grant, error) {
		g := credentials.Grant{Org: org, CredentialID: credentialID, Write: true}
		if err := row.Scan(&g.Subject); err != nil {
			return credentials.Grant{}, err
		}
		return g, nil
	})
}

const linkCols = `token_hash, kind, org, user, credential_id, fields, state, created, expires`

func scanLink(row interface{ Scan(...any) error }) (credentials.Link, error) {
	var l credentials.Link
	var kind, state, fields string
	var created, expires int64
	if err := row.Scan(&l.TokenHash, &kind, &l.Org, &l.User, &l.CredentialID, &fields, &state, &created, &expires); err != nil {
		return l, err
	}
	l.Kind, l.State, l.Created, l.Expires = credentials.LinkKind(kind), credentials.LinkState(state), fromNanos(created), fromNanos(expires)
	var err error
	l.Fields, err = parseList(fields)
	return l, err
}

// PutLink implements credentials.Store.
func (s *Store) PutLink(ctx context.Context, l credentials.Link) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO cred_links (`+linkCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		l.TokenHash, string(l.Kind), l.Org, l.User, l.CredentialID, jsonList(l.Fields), string(l.State), nanos(l.Created), nanos(l.Expires))
	return dbErr(err, "put link")
}

// GetLink implements credentials.Store.
func (s *Store) GetLink(ctx context.Context, tokenHash []byte) (credentials.Link, error) {
	l, err := scanLink(s.db.QueryRowContext(ctx, `SELECT `+linkCols+` FROM cred_links WHERE token_hash = ?`, tokenHash))
	return l, dbErr(err, "read link")
}

// AdvanceLink implements credentials.Store in one IMMEDIATE transaction.
func (s *Store) AdvanceLink(ctx context.Context, tokenHash []byte, kind credentials.LinkKind, from, to credentials.LinkState, now time.Time) (credentials.Link, error) {
	var l credentials.Link
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		l, err = scanLink(tx.QueryRowContext(ctx, `SELECT `+linkCols+` FROM cred_links WHERE token_hash = ? AND kind = ?`, tokenHash, string(kind)))
		if err != nil {
			return err
		}
		if l.State != from {
			return agentvault.Errorf(agentvault.CodeLinkUsed, "this one-time link was already used")
		}
		if !now.Before(l.Expires) {
			return agentvault.Errorf(agentvault.CodeLinkExpired, "this one-time link has expired; ask for a new one")
		}
		res, err := tx.ExecContext(ctx, `UPDATE cred_links SET state = ? WHERE token_hash = ? AND state = ?`, string(to), tokenHash, string(from))
		if err := mustAffect(res, err, "advance link"); err != nil {
			return err
		}
		l.State = to
		return nil
	})
	return l, dbErr(err, "advance link")
}

var _ credentials.Store = (*Store)(nil)
