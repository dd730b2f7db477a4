package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
	"github.com/jackc/pgx/v5"
)

const sessionsMigration = `
CREATE TABLE proxy_sessions (
	id         text PRIMARY KEY,
	api_key_id text NOT NULL,
	org        text NOT NULL,
	suffix     text NOT NULL,
	scope      text NOT NULL,
	pwd_hash   bytea NOT NULL,
	created    bigint NOT NULL,
	last_used  bigint NOT NULL,
	ended      bigint NOT NULL DEFAULT 0,
	end_reason text NOT NULL DEFAULT ''
);
CREATE TABLE proxy_grants (
	session        text NOT NULL REFERENCES proxy_sessions (id) ON DELETE CASCADE,
	token          text NOT NULL,
	stand_in       text NOT NULL,
	item_id        text NOT NULL,
	kind           text NOT NULL,
	label          text NOT NULL,
	field          text NOT NULL,
	live           boolean NOT NULL,
	origins        text NOT NULL,
	site           text NOT NULL,
	site_port      integer NOT NULL,
	expires        bigint NOT NULL,
	one_purchase   boolean NOT NULL,
	purchase       integer NOT NULL,
	spent          boolean NOT NULL,
	claim          text NOT NULL DEFAULT '',
	claim_until    bigint NOT NULL DEFAULT 0,
	total_minor    bigint,
	total_currency text NOT NULL DEFAULT '',
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
	_, err = s.pool.Exec(ctx, `INSERT INTO proxy_sessions (id, api_key_id, org, suffix, scope, pwd_hash, created, last_used)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, r.ID, r.Key.ID, r.Key.Org, r.Key.Suffix, scope, r.PwdHash[:], nanos(r.Created), nanos(r.LastUsed))
	return dbErr(err, "create session")
}

const grantCols = `session, token, stand_in, item_id, kind, label, field, live, origins, site, site_port, expires,
	one_purchase, purchase, spent, total_minor, total_currency`

func scanGrant(row pgx.Row) (broker.GrantRecord, error) {
	var g broker.GrantRecord
	var kind, field, origins, cur string
	var expires int64
	var minor *int64
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
	return []any{g.Session, g.Token, g.StandIn, g.ItemID, string(g.Kind), g.Label, string(g.Field), g.Live, string(origins),
		g.Site, g.SitePort, nanos(g.Expires), g.OnePurchase, g.Purchase, g.Spent, minorOf(g.Total), cur}, nil
}

// GetSession implements broker.SessionStore: the session and its grants
// from one snapshot.
func (s *Store) GetSession(ctx context.Context, id string) (broker.SessionRecord, []broker.GrantRecord, error) {
	var r broker.SessionRecord
	var grants []broker.GrantRecord
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		var scope string
		var hash []byte
		var created, used, ended int64
		err := tx.QueryRow(ctx, `SELECT id, api_key_id, org, suffix, scope, pwd_hash, created, last_used, ended, end_reason
FROM proxy_sessions WHERE id = $1`, id).Scan(&r.ID, &r.Key.ID, &r.Key.Org, &r.Key.Suffix, &scope, &hash, &created, &used, &ended, &r.EndReason)
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
		rows, err := tx.Query(ctx, `SELECT `+grantCols+` FROM proxy_grants WHERE session = $1 ORDER BY token`, id)
		grants, err = collect(rows, err, scanGrant)
		return err
	})
	return r, grants, dbErr(err, "read session")
}

// EndSession implements broker.SessionStore.
func (s *Store) EndSession(ctx context.Context, id, reason string, at time.Time) error {
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE proxy_sessions SET ended = $2, end_reason = $3 WHERE id = $1 AND ended = 0`, id, nanos(at), reason); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM proxy_grants WHERE session = $1`, id)
		return err
	})
	return dbErr(err, "end session")
}

// PurgeSessions implements broker.SessionStore.
func (s *Store) PurgeSessions(ctx context.Context, a broker.PurgeArgs) (int64, error) {
	var n int64
	err := s.tx(ctx, func(tx pgx.Tx) error {
		const gone = `(ended != 0 AND ended < $1) OR last_used < $2 OR created < $3`
		args := []any{nanos(a.EndedBefore), nanos(a.UsedBefore), nanos(a.CreatedBefore)}
		if _, err := tx.Exec(ctx, `DELETE FROM proxy_grants WHERE session IN (SELECT id FROM proxy_sessions WHERE `+gone+`)`, args...); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM proxy_sessions WHERE `+gone, args...)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		return nil
	})
	return n, dbErr(err, "purge sessions")
}

// CountOpenSessions implements broker.SessionStore.
func (s *Store) CountOpenSessions(ctx context.Context, keyID string, usedSince, createdSince time.Time) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM proxy_sessions WHERE api_key_id = $1 AND ended = 0 AND last_used >= $2 AND created >= $3`,
		keyID, nanos(usedSince), nanos(createdSince)).Scan(&n)
	return n, dbErr(err, "count sessions")
}

// TouchSession implements broker.SessionStore.
func (s *Store) TouchSession(ctx context.Context, id string, at time.Time) error {
	_, err := s.pool.Exec(ctx, `UPDATE proxy_sessions SET last_used = greatest(last_used, $2) WHERE id = $1`, id, nanos(at))
	return dbErr(err, "touch session")
}

// openSession locks session id's row against an end until the transaction
// ends, and fails when it is ended or unknown.
func openSession(ctx context.Context, tx pgx.Tx, id string) error {
	var ended int64
	err := tx.QueryRow(ctx, `SELECT ended FROM proxy_sessions WHERE id = $1 FOR SHARE`, id).Scan(&ended)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && ended != 0 {
		return agentvault.Errorf(agentvault.CodeSessionEnded, "the session has ended")
	}
	return err
}

// PutGrant implements broker.SessionStore (broker.NextGrant decides).
func (s *Store) PutGrant(ctx context.Context, g broker.GrantRecord) (broker.GrantRecord, error) {
	var out broker.GrantRecord
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := openSession(ctx, tx, g.Session); err != nil {
			return err
		}
		var old *broker.GrantRecord
		prev, err := scanGrant(tx.QueryRow(ctx, `SELECT `+grantCols+` FROM proxy_grants WHERE session = $1 AND token = $2 FOR UPDATE`, g.Session, g.Token))
		switch {
		case err == nil:
			old = &prev
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		next, newUse := broker.NextGrant(old, g)
		args, err := grantArgs(next)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO proxy_grants (`+grantCols+`)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
ON CONFLICT (session, token) DO UPDATE SET stand_in = excluded.stand_in, item_id = excluded.item_id, kind = excluded.kind,
	label = excluded.label, field = excluded.field, live = excluded.live, origins = excluded.origins, site = excluded.site,
	site_port = excluded.site_port, expires = excluded.expires, one_purchase = excluded.one_purchase,
	purchase = excluded.purchase, spent = excluded.spent, total_minor = excluded.total_minor, total_currency = excluded.total_currency`, args...)
		if err != nil {
			return err
		}
		if newUse {
			if _, err := tx.Exec(ctx, `UPDATE proxy_grants SET claim = '', claim_until = 0 WHERE session = $1 AND token = $2`, g.Session, g.Token); err != nil {
				return err
			}
		}
		out = next
		return nil
	})
	return out, dbErr(err, "write grant")
}

// claimState reads a grant's use state under a row lock.
func claimState(ctx context.Context, tx pgx.Tx, session, token string) (broker.ClaimState, error) {
	if err := openSession(ctx, tx, session); err != nil {
		return broker.ClaimState{}, err
	}
	var st broker.ClaimState
	var until int64
	err := tx.QueryRow(ctx, `SELECT purchase, spent, claim, claim_until FROM proxy_grants WHERE session = $1 AND token = $2 FOR UPDATE`,
		session, token).Scan(&st.Purchase, &st.Spent, &st.Claim, &until)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, agentvault.Errorf(agentvault.CodeSessionEnded, "this authorization is gone: fill the field again")
	}
	if until != 0 {
		st.Until = fromNanos(until)
	}
	return st, err
}

func putClaimState(ctx context.Context, tx pgx.Tx, session, token string, st broker.ClaimState) error {
	var until int64
	if !st.Until.IsZero() {
		until = nanos(st.Until)
	}
	_, err := tx.Exec(ctx, `UPDATE proxy_grants SET spent = $3, claim = $4, claim_until = $5 WHERE session = $1 AND token = $2`,
		session, token, st.Spent, st.Claim, until)
	return err
}

// ClaimGrant implements broker.SessionStore: the grant's row is locked,
// so of two replicas claiming at once the second sees the first's claim
// (broker.ClaimState.Decide).
func (s *Store) ClaimGrant(ctx context.Context, a broker.ClaimArgs) error {
	var refused error
	err := s.tx(ctx, func(tx pgx.Tx) error {
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
	err := s.tx(ctx, func(tx pgx.Tx) error {
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
