package postgres

import (
	"context"
	"time"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/credentials"
	"github.com/jackc/pgx/v5"
)

// This file implements credentials.Store (portal credentials): members,
// API key bindings, credentials, grants and one-time links. No value lives
// here: values are vault items (kind "credential"), link tokens are stored
// as SHA-256 hashes. Mirrors store/sqlite's migration 50 (credentials.go),
// with the member column named member ("user" is reserved in Postgres).
//
// The holder column is the personal credential's owner and empty for
// organisation ones, so one UNIQUE says "one personal credential per
// person and name, one organisation credential per name". Sort keys are
// COLLATE "C": lists come out in SQLite's (byte) order.
const credentialsMigration = `
CREATE TABLE cred_members (
	org    text NOT NULL,
	member text COLLATE "C" NOT NULL,
	role   text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
	teams  text NOT NULL,
	PRIMARY KEY (org, member)
);
CREATE TABLE cred_key_bindings (
	key_id text PRIMARY KEY,
	org    text NOT NULL,
	member text NOT NULL
);
CREATE TABLE credentials (
	id         text COLLATE "C" PRIMARY KEY,
	org        text NOT NULL,
	name       text COLLATE "C" NOT NULL,
	visibility text NOT NULL CHECK (visibility IN ('personal', 'org')),
	owner      text NOT NULL,
	holder     text NOT NULL,
	fields     text NOT NULL,
	item_id    text NOT NULL,
	created    bigint NOT NULL,
	updated    bigint NOT NULL,
	UNIQUE (org, visibility, holder, name)
);
CREATE TABLE cred_grants (
	credential_id text NOT NULL REFERENCES credentials (id) ON DELETE CASCADE,
	org           text NOT NULL,
	subject       text COLLATE "C" NOT NULL,
	PRIMARY KEY (credential_id, subject)
);
CREATE TABLE cred_links (
	token_hash    bytea PRIMARY KEY,
	kind          text NOT NULL CHECK (kind IN ('entry', 'use')),
	org           text NOT NULL,
	member        text NOT NULL,
	credential_id text NOT NULL REFERENCES credentials (id) ON DELETE CASCADE,
	fields        text NOT NULL,
	state         text NOT NULL CHECK (state IN ('pending', 'opened', 'done')),
	created       bigint NOT NULL,
	expires       bigint NOT NULL
);
CREATE INDEX cred_links_credential ON cred_links (credential_id);
`

// PutMember implements credentials.Store.
func (s *Store) PutMember(ctx context.Context, m credentials.Member) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO cred_members (org, member, role, teams) VALUES ($1, $2, $3, $4)
ON CONFLICT (org, member) DO UPDATE SET role = excluded.role, teams = excluded.teams`, m.Org, m.User, string(m.Role), jsonList(m.Teams))
	return dbErr(err, "put member")
}

func scanMember(row pgx.Row) (credentials.Member, error) {
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
	m, err := scanMember(s.pool.QueryRow(ctx, `SELECT org, member, role, teams FROM cred_members WHERE org = $1 AND member = $2`, org, user))
	return m, dbErr(err, "read member")
}

// ListMembers implements credentials.Store (by user).
func (s *Store) ListMembers(ctx context.Context, org string) ([]credentials.Member, error) {
	rows, err := s.pool.Query(ctx, `SELECT org, member, role, teams FROM cred_members WHERE org = $1 ORDER BY member`, org)
	out, err := collect(rows, err, scanMember)
	return out, dbErr(err, "list members")
}

// DeleteMember implements credentials.Store.
func (s *Store) DeleteMember(ctx context.Context, org, user string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM cred_members WHERE org = $1 AND member = $2`, org, user)
	return mustAffect(tag, err, "delete member")
}

// credKeyConsentMigration records who made each key binding and whether
// the person it binds consented (P24): bindings made before are offers
// until their person accepts them. Mirrors store/sqlite's migration 51.
const credKeyConsentMigration = `
ALTER TABLE cred_key_bindings ADD COLUMN bound_by text NOT NULL DEFAULT '';
ALTER TABLE cred_key_bindings ADD COLUMN consented boolean NOT NULL DEFAULT false;
`

// BindKey implements credentials.Store.
func (s *Store) BindKey(ctx context.Context, b credentials.KeyBinding) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO cred_key_bindings (key_id, org, member, bound_by, consented) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (key_id) DO UPDATE SET org = excluded.org, member = excluded.member, bound_by = excluded.bound_by, consented = excluded.consented`,
		b.KeyID, b.Org, b.User, b.By, b.Consented)
	return dbErr(err, "bind key")
}

const bindingCols = `key_id, org, member, bound_by, consented`

func scanBinding(row pgx.Row) (credentials.KeyBinding, error) {
	var b credentials.KeyBinding
	err := row.Scan(&b.KeyID, &b.Org, &b.User, &b.By, &b.Consented)
	return b, err
}

// GetKeyBinding implements credentials.Store.
func (s *Store) GetKeyBinding(ctx context.Context, keyID string) (credentials.KeyBinding, error) {
	b, err := scanBinding(s.pool.QueryRow(ctx, `SELECT `+bindingCols+` FROM cred_key_bindings WHERE key_id = $1`, keyID))
	return b, dbErr(err, "read key binding")
}

// ListKeyBindings implements credentials.Store (by key id, in SQLite's
// byte order).
func (s *Store) ListKeyBindings(ctx context.Context, org string) ([]credentials.KeyBinding, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+bindingCols+` FROM cred_key_bindings WHERE org = $1 ORDER BY key_id COLLATE "C"`, org)
	out, err := collect(rows, err, scanBinding)
	return out, dbErr(err, "list key bindings")
}

// ConsentKey implements credentials.Store.
func (s *Store) ConsentKey(ctx context.Context, org, keyID, user string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE cred_key_bindings SET consented = true WHERE key_id = $1 AND org = $2 AND member = $3`, keyID, org, user)
	return mustAffect(tag, err, "accept key")
}

const credCols = `id, org, name, visibility, owner, fields, item_id, created, updated`

func holderOf(c credentials.Credential) string {
	if c.Visibility == credentials.Personal {
		return c.Owner
	}
	return ""
}

// CreateCredential implements credentials.Store: a taken id or name is
// CodeConflict (the unique constraints, checked by Postgres).
func (s *Store) CreateCredential(ctx context.Context, c credentials.Credential) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO credentials (id, org, name, visibility, owner, holder, fields, item_id, created, updated)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, c.ID, c.Org, c.Name, string(c.Visibility), c.Owner, holderOf(c), jsonList(c.Fields),
		c.ItemID, nanos(c.Created), nanos(c.Updated))
	return dbErr(err, "create credential")
}

// UpdateCredential implements credentials.Store.
func (s *Store) UpdateCredential(ctx context.Context, c credentials.Credential) error {
	tag, err := s.pool.Exec(ctx, `UPDATE credentials SET fields = $1, item_id = $2, updated = $3 WHERE org = $4 AND id = $5`,
		jsonList(c.Fields), c.ItemID, nanos(c.Updated), c.Org, c.ID)
	return mustAffect(tag, err, "update credential")
}

func scanCredential(row pgx.Row) (credentials.Credential, error) {
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
	c, err := scanCredential(s.pool.QueryRow(ctx, `SELECT `+credCols+` FROM credentials WHERE org = $1 AND id = $2`, org, id))
	return c, dbErr(err, "read credential")
}

// ListCredentials implements credentials.Store (by name, then id).
func (s *Store) ListCredentials(ctx context.Context, org string) ([]credentials.Credential, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+credCols+` FROM credentials WHERE org = $1 ORDER BY name, id`, org)
	out, err := collect(rows, err, scanCredential)
	return out, dbErr(err, "list credentials")
}

// DeleteCredential implements credentials.Store: grants and links go in
// the same transaction (the foreign keys cascade; the deletes say so).
func (s *Store) DeleteCredential(ctx context.Context, org, id string) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM credentials WHERE org = $1 AND id = $2`, org, id)
		if err := mustAffect(tag, err, "delete credential"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM cred_grants WHERE credential_id = $1`, id); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM cred_links WHERE credential_id = $1`, id)
		return err
	})
	return dbErr(err, "delete credential")
}

// SetGrant implements credentials.Store.
func (s *Store) SetGrant(ctx context.Context, g credentials.Grant) error {
	if !g.Write {
		_, err := s.pool.Exec(ctx, `DELETE FROM cred_grants WHERE credential_id = $1 AND org = $2 AND subject = $3`, g.CredentialID, g.Org, g.Subject)
		return dbErr(err, "remove grant")
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO cred_grants (credential_id, org, subject) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		g.CredentialID, g.Org, g.Subject)
	return dbErr(err, "set grant")
}

// ListGrants implements credentials.Store (by subject).
func (s *Store) ListGrants(ctx context.Context, org, credentialID string) ([]credentials.Grant, error) {
	rows, err := s.pool.Query(ctx, `SELECT subject FROM cred_grants WHERE org = $1 AND credential_id = $2 ORDER BY subject`, org, credentialID)
	out, err := collect(rows, err, func(row pgx.Row) (credentials.Grant, error) {
		g := credentials.Grant{Org: org, CredentialID: credentialID, Write: true}
		return g, row.Scan(&g.Subject)
	})
	return out, dbErr(err, "list grants")
}

const linkCols = `token_hash, kind, org, member, credential_id, fields, state, created, expires`

func scanLink(row pgx.Row) (credentials.Link, error) {
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
	_, err := s.pool.Exec(ctx, `INSERT INTO cred_links (`+linkCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		l.TokenHash, string(l.Kind), l.Org, l.User, l.CredentialID, jsonList(l.Fields), string(l.State), nanos(l.Created), nanos(l.Expires))
	return dbErr(err, "put link")
}

// GetLink implements credentials.Store.
func (s *Store) GetLink(ctx context.Context, tokenHash []byte) (credentials.Link, error) {
	l, err := scanLink(s.pool.QueryRow(ctx, `SELECT `+linkCols+` FROM cred_links WHERE token_hash = $1`, tokenHash))
	return l, dbErr(err, "read link")
}

// AdvanceLink implements credentials.Store. The row lock makes callers
// racing on one link (on any replica) see it one after the other: one
// moves it, the others find it used.
func (s *Store) AdvanceLink(ctx context.Context, tokenHash []byte, kind credentials.LinkKind, from, to credentials.LinkState, now time.Time) (credentials.Link, error) {
	var l credentials.Link
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		l, err = scanLink(tx.QueryRow(ctx, `SELECT `+linkCols+` FROM cred_links WHERE token_hash = $1 AND kind = $2 FOR UPDATE`, tokenHash, string(kind)))
		if err != nil {
			return err
		}
		if l.State != from {
			return agentvault.Errorf(agentvault.CodeLinkUsed, "this one-time link was already used")
		}
		if !now.Before(l.Expires) {
			return agentvault.Errorf(agentvault.CodeLinkExpired, "this one-time link has expired; ask for a new one")
		}
		tag, err := tx.Exec(ctx, `UPDATE cred_links SET state = $1 WHERE token_hash = $2 AND state = $3`, string(to), tokenHash, string(from))
		if err := mustAffect(tag, err, "advance link"); err != nil {
			return err
		}
		l.State = to
		return nil
	})
	return l, dbErr(err, "advance link")
}

var _ credentials.Store = (*Store)(nil)
