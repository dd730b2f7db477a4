package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

// Migration 70 (numbered): proxy sessions and their grants
// (broker.SessionStore), so a restarted proxyd keeps its sessions. An ended
// session stays as a tombstone; its grants go. Mirrors store/postgres's
// migration 5.
func init() {
	numberedMigrations[sessionsMigration] = sessionsSchema
	numberedMigrations[sessionsByKeyMigration] = sessionsByKeySchema
}

// Migration 71: open sessions are counted per API key (the cap holds
// across replicas) and purged by age. Mirrors store/postgres's migration 9.
const sessionsByKeyMigration = 71

const sessionsByKeySchema = `
CREATE INDEX proxy_sessions_key ON proxy_sessions (api_key_id, ended);
`

const sessionsMigration = 70

const sessionsSchema = `
CREATE TABLE proxy_sessions (
	id         TEXT PRIMARY KEY,
	api_key_id TEXT NOT NULL,
	org        TEXT NOT NULL,
	suffix     TEXT NOT NULL,
	scope      TEXT NOT NULL,
	pwd_hash   BLOB NOT NULL,
	created    INTEGER NOT NULL,
	last_used  INTEGER NOT NULL,
	ended      INTEGER NOT NULL DEFAULT 0,
	end_reason TEXT NOT NULL DEFAULT ''
);
CREATE TABLE proxy_grants (
	session        TEXT NOT NULL REFERENCES proxy_sessions (id) ON DELETE CASCADE,
	token          TEXT NOT NULL,
	stand_in       TEXT NOT NULL,
	item_id        TEXT NOT NULL,
	kind           TEXT NOT NULL,
	label          TEXT NOT NULL,
	field          TEXT NOT NULL,
	live           INTEGER NOT NULL,
	origins        TEXT NOT NULL,
	site           TEXT NOT NULL,
	site_port      INTEGER NOT NULL,
	expires        INTEGER NOT NULL,
	one_purchase   INTEGER NOT NULL,
	purchase       INTEGER NOT NULL,
	spent          INTEGER NOT NULL,
	claim          TEXT NOT NULL DEFAULT '',
	claim_until    INTEGER NOT NULL DEFAULT 0,
	total_minor    INTEGER,
	total_currency TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (session, token)
);
`

// scopeJSON encodes an API key's item scope.
func scopeJSON(sc policy.KeyScope) (string, error) {
	b, err := json.Marshal(sc)
	return string(b), err
}

// scopeOf decodes a stored scope; "" (no scope) sees no card and no login.
func scopeOf(s string) (policy.KeyScope, error) {
	var sc policy.KeyScope
	if s == "" {
		return sc, nil
	}
	return sc, json.Unmarshal([]byte(s), &sc)
}

// CreateSession implements broker.SessionStore.
func (s *Store) CreateSession(ctx context.Context, r broker.SessionRecord) error {
	scope, err := scopeJSON(r.Key.Scope)
	if err != nil {
		return dbErr(err, "encode session scope")
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO proxy_sessions (id, api_key_id, org, suffix, scope, pwd_hash, created, last_used)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, r.ID, r.Key.ID, r.Key.Org, r.Key.Suffix, scope, r.PwdHash[:], nanos(r.Created), nanos(r.LastUsed))
	return dbErr(err, "create session")
}

const grantCols = `session, token, stand_in, item_id, kind, label, field, live, origins, site, site_port, expires,
	one_purchase, purchase, spent, total_minor, total_currency`

func scanGrant(row interface{ Scan(...any) error }) (broker.GrantRecord, error) {
	var g broker.GrantRecord
	var kind, field, origins, cur string
	var expires int64
	var minor sql.NullInt64
	if err := row.Scan(&g.Session, &g.Token, &g.StandIn, &g.ItemID, &kind, &g.Label, &field, &g.Live, &origins,
		&g.Site, &g.SitePort, &expires, &g.OnePurchase, &g.Purchase, &g.Spent, &minor, &cur); err != nil {
		return g, err
	}
	g.Kind, g.Field, g.Expires = vault.Kind(kind), vault.Field(field), fromNanos(expires)
	if err := json.Unmarshal([]byte(origins), &g.Origins); err != nil {
		return g, err
	}
	g.Total = amountOf(minor, cur)
	return g, nil
}

func grantArgs(g broker.GrantRecord) ([]any, error) {
	origins, err := json.Marshal(g.Origins)
	if err != nil {
		return nil, err
	}
	if g.Origins == nil {
		origins = []byte("[]")
	}
	cur := ""
	if g.Total != nil {
		cur = g.Total.Currency
	}
	return []any{g.Session, g.Token, g.StandIn, g.ItemID, string(g.Kind), g.Label, string(g.Field), b2i(g.Live), string(origins),
		g.Site, g.SitePort, nanos(g.Expires), b2i(g.OnePurchase), g.Purchase, b2i(g.Spent), minorOf(g.Total), cur}, nil
}

// GetSession implements broker.SessionStore: the session and its grants
// from one read transaction.
func (s *Store) GetSession(ctx context.Context, id string) (broker.SessionRecord, []broker.GrantRecord, error) {
	var r broker.SessionRecord
	var grants []broker.GrantRecord
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		var scope string
		var hash []byte
		var created, used, ended int64
		err := tx.QueryRowContext(ctx, `SELECT id, api_key_id, org, suffix, scope, pwd_hash, created, last_used, ended, end_reason
FROM proxy_sessions WHERE id = ?`, id).Scan(&r.ID, &r.Key.ID, &r.Key.Org, &r.Key.Suffix, &scope, &hash, &created, &used, &ended, &r.EndReason)
		if err != nil {
			return err
		}
		if len(hash) != len(r.PwdHash) {
			return agentvault.Errorf(agentvault.CodeInternal, "stored session is malformed")
		}
		copy(r.PwdHash[:], hash)
		if r.Key.Scope, err = scopeOf(scope); err != nil {
			return err
		}
		r.Created, r.LastUsed = fromNanos(created), fromNanos(used)
		if ended != 0 {
			r.Ended = fromNanos(ended)
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+grantCols+` FROM proxy_grants WHERE session = ? ORDER BY token`, id)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			g, err := scanGrant(rows)
			if err != nil {
				return err
			}
			grants = append(grants, g)
		}
		return rows.Err()
	})
	return r, grants, dbErr(err, "read session")
}

// EndSession implements broker.SessionStore.
func (s *Store) EndSession(ctx context.Context, id, reason string, at time.Time) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE proxy_sessions SET ended = ?, end_reason = ? WHERE id = ? AND ended = 0`, nanos(at), reason, id); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM proxy_grants WHERE session = ?`, id)
		return err
	})
	return dbErr(err, "end session")
}

// PurgeSessions implements broker.SessionStore.
func (s *Store) PurgeSessions(ctx context.Context, a broker.PurgeArgs) (int64, error) {
	var n int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		const gone = `(ended != 0 AND ended < ?) OR last_used < ? OR created < ?`
		args := []any{nanos(a.EndedBefore), nanos(a.UsedBefore), nanos(a.CreatedBefore)}
		if _, err := tx.ExecContext(ctx, `DELETE FROM proxy_grants WHERE session IN (SELECT id FROM proxy_sessions WHERE `+gone+`)`, args...); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM proxy_sessions WHERE `+gone, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, dbErr(err, "purge sessions")
}

// CountOpenSessions implements broker.SessionStore.
func (s *Store) CountOpenSessions(ctx context.Context, keyID string, usedSince, createdSince time.Time) (int, error) {
	var n int
	err := s.queryRow(ctx, `SELECT count(*) FROM proxy_sessions WHERE api_key_id = ? AND ended = 0 AND last_used >= ? AND created >= ?`,
		keyID, nanos(usedSince), nanos(createdSince)).Scan(&n)
	return n, dbErr(err, "count sessions")
}

// TouchSession implements broker.SessionStore.
func (s *Store) TouchSession(ctx context.Context, id string, at time.Time) error {
	_, err := s.db.ExecContext(ctx, `UPDATE proxy_sessions SET last_used = max(last_used, ?) WHERE id = ?`, nanos(at), id)
	return dbErr(err, "touch session")
}

// openSession fails when session id is ended or unknown. Write
// transactions begin IMMEDIATE (one writer at a time), so it stays so
// until the transaction ends.
func openSession(ctx context.Context, tx *sql.Tx, id string) error {
	var ended int64
	err := tx.QueryRowContext(ctx, `SELECT ended FROM proxy_sessions WHERE id = ?`, id).Scan(&ended)
	if errors.Is(err, sql.ErrNoRows) || err == nil && ended != 0 {
		return agentvault.Errorf(agentvault.CodeSessionEnded, "the session has ended")
	}
	return err
}

// PutGrant implements broker.SessionStore (broker.NextGrant decides).
func (s *Store) PutGrant(ctx context.Context, g broker.GrantRecord) (broker.GrantRecord, error) {
	var out broker.GrantRecord
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = putGrant(ctx, tx, g)
		return err
	})
	return out, dbErr(err, "write grant")
}

// PutGrants implements broker.GrantBatchWriter: the grants of open
// sessions, written in one transaction (one durable commit). A grant of a
// session that has ended is skipped.
func (s *Store) PutGrants(ctx context.Context, gs []broker.GrantRecord) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		for _, g := range gs {
			if _, err := putGrant(ctx, tx, g); err != nil && agentvault.ErrorCode(err) != agentvault.CodeSessionEnded {
				return err
			}
		}
		return nil
	})
	return dbErr(err, "write grants")
}

// putGrant is PutGrant inside tx.
func putGrant(ctx context.Context, tx *sql.Tx, g broker.GrantRecord) (broker.GrantRecord, error) {
	var out broker.GrantRecord
	err := func() error {
		if err := openSession(ctx, tx, g.Session); err != nil {
			return err
		}
		var old *broker.GrantRecord
		prev, err := scanGrant(tx.QueryRowContext(ctx, `SELECT `+grantCols+` FROM proxy_grants WHERE session = ? AND token = ?`, g.Session, g.Token))
		switch {
		case err == nil:
			old = &prev
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		next, newUse := broker.NextGrant(old, g)
		args, err := grantArgs(next)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO proxy_grants (`+grantCols+`)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (session, token) DO UPDATE SET stand_in = excluded.stand_in, item_id = excluded.item_id, kind = excluded.kind,
	label = excluded.label, field = excluded.field, live = excluded.live, origins = excluded.origins, site = excluded.site,
	site_port = excluded.site_port, expires = excluded.expires, one_purchase = excluded.one_purchase,
	purchase = excluded.purchase, spent = excluded.spent, total_minor = excluded.total_minor, total_currency = excluded.total_currency`, args...)
		if err != nil {
			return err
		}
		if newUse {
			if _, err := tx.ExecContext(ctx, `UPDATE proxy_grants SET claim = '', claim_until = 0 WHERE session = ? AND token = ?`, g.Session, g.Token); err != nil {
				return err
			}
		}
		out = next
		return nil
	}()
	return out, err
}

// claimState reads a grant's use state inside a write transaction.
func claimState(ctx context.Context, tx *sql.Tx, session, token string) (broker.ClaimState, error) {
	if err := openSession(ctx, tx, session); err != nil {
		return broker.ClaimState{}, err
	}
	var st broker.ClaimState
	var until int64
	err := tx.QueryRowContext(ctx, `SELECT purchase, spent, claim, claim_until FROM proxy_grants WHERE session = ? AND token = ?`,
		session, token).Scan(&st.Purchase, &st.Spent, &st.Claim, &until)
	if errors.Is(err, sql.ErrNoRows) {
		return st, agentvault.Errorf(agentvault.CodeSessionEnded, "this authorization is gone: fill the field again")
	}
	if until != 0 {
		st.Until = fromNanos(until)
	}
	return st, err
}

func putClaimState(ctx context.Context, tx *sql.Tx, session, token string, st broker.ClaimState) error {
	var until int64
	if !st.Until.IsZero() {
		until = nanos(st.Until)
	}
	_, err := tx.ExecContext(ctx, `UPDATE proxy_grants SET spent = ?, claim = ?, claim_until = ? WHERE session = ? AND token = ?`,
		b2i(st.Spent), st.Claim, until, session, token)
	return err
}

// ClaimGrant implements broker.SessionStore in one IMMEDIATE transaction
// (broker.ClaimState.Decide).
func (s *Store) ClaimGrant(ctx context.Context, a broker.ClaimArgs) error {
	var refused error
	err := s.tx(ctx, func(tx *sql.Tx) error {
		st, err := claimState(ctx, tx, a.Session, a.Token)
		if err != nil {
			return err
		}
		next, refusal := st.Decide(a)
		refused = refusal
		if next == st {
			return nil
		}
		return putClaimState(ctx, tx, a.Session, a.Token, next)
	})
	if err != nil {
		return dbErr(err, "claim grant")
	}
	return refused
}

// SettleGrant implements broker.SessionStore.
func (s *Store) SettleGrant(ctx context.Context, a broker.SettleArgs) error {
	err := s.tx(ctx, func(tx *sql.Tx) error {
		st, err := claimState(ctx, tx, a.Session, a.Token)
		if err != nil {
			return err
		}
		if next := st.Settle(a); next != st {
			return putClaimState(ctx, tx, a.Session, a.Token, next)
		}
		return nil
	})
	if agentvault.ErrorCode(err) == agentvault.CodeSessionEnded {
		return nil // ended since: nothing to settle
	}
	return dbErr(err, "settle grant")
}

var _ broker.SessionStore = (*Store)(nil)
