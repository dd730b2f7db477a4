package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/vault"
	"github.com/jackc/pgx/v5"
)

// This file implements owner.SignupRequestStore (Open an account): agents'
// signup requests and the counted changes to logins they made. No secret
// lives here: the password is generated into the vault when the login is
// made. Mirrors store/sqlite's migration 61 (signups.go).
const signupRequestsMigration = `
CREATE TABLE signup_requests (
	id           text COLLATE "C" PRIMARY KEY,
	org          text NOT NULL,
	api_key_id   text NOT NULL,
	site         text NOT NULL,
	email        text NOT NULL,
	username     text NOT NULL,
	rules        text NOT NULL,
	approval_id  text NOT NULL,
	pre_approved boolean NOT NULL,
	login_id     text NOT NULL,
	created      bigint NOT NULL,
	expires      bigint NOT NULL
);
CREATE INDEX signup_requests_org ON signup_requests (org, created);
CREATE TABLE login_changes (
	seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	org        text NOT NULL,
	api_key_id text NOT NULL,
	login_id   text NOT NULL,
	change     text NOT NULL,
	at         bigint NOT NULL
);
CREATE INDEX login_changes_org ON login_changes (org, at);
`

const signupCols = `id, org, api_key_id, site, email, username, rules, approval_id, pre_approved, login_id, created, expires`

// CreateSignupRequest implements owner.SignupRequestStore.
func (s *Store) CreateSignupRequest(ctx context.Context, r owner.SignupRequest) error {
	rules, err := json.Marshal(r.Rules)
	if err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "cannot encode password rules")
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO signup_requests (`+signupCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		r.ID, r.Org, r.APIKeyID, r.Site, r.Email, r.Username, string(rules), r.ApprovalID, r.PreApproved, r.LoginID, nanos(r.Created), nanos(r.Expires))
	return dbErr(err, "create signup request")
}

func scanSignup(row pgx.Row) (owner.SignupRequest, error) {
	var r owner.SignupRequest
	var rules string
	var created, expires int64
	if err := row.Scan(&r.ID, &r.Org, &r.APIKeyID, &r.Site, &r.Email, &r.Username, &rules, &r.ApprovalID, &r.PreApproved, &r.LoginID, &created, &expires); err != nil {
		return r, err
	}
	if err := json.Unmarshal([]byte(rules), &r.Rules); err != nil {
		return r, err
	}
	r.Created, r.Expires = fromNanos(created), fromNanos(expires)
	return r, nil
}

// GetSignupRequest implements owner.SignupRequestStore.
func (s *Store) GetSignupRequest(ctx context.Context, id string) (owner.SignupRequest, error) {
	r, err := scanSignup(s.pool.QueryRow(ctx, `SELECT `+signupCols+` FROM signup_requests WHERE id = $1`, id))
	return r, dbErr(err, "get signup request")
}

// ListSignupRequests implements owner.SignupRequestStore (oldest first).
func (s *Store) ListSignupRequests(ctx context.Context, org string, since time.Time) ([]owner.SignupRequest, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+signupCols+` FROM signup_requests WHERE org = $1 AND created >= $2 ORDER BY created, id`, org, nanos(since))
	out, err := collect(rows, err, scanSignup)
	return out, dbErr(err, "list signup requests")
}

// SetSignupLogin implements owner.SignupRequestStore: one conditional
// UPDATE (the row lock re-checks login_id), so two replicas racing record
// one login; the loser reads the request as stored.
func (s *Store) SetSignupLogin(ctx context.Context, id, loginID string) (owner.SignupRequest, error) {
	r, err := scanSignup(s.pool.QueryRow(ctx, `UPDATE signup_requests SET login_id = $1 WHERE id = $2 AND login_id = '' RETURNING `+signupCols, loginID, id))
	if err == nil {
		return r, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return owner.SignupRequest{}, dbErr(err, "set signup login")
	}
	cur, err := s.GetSignupRequest(ctx, id)
	if err != nil {
		return cur, err
	}
	if cur.LoginID == "" {
		return cur, vault.ErrNotFound
	}
	return cur, agentvault.Errorf(agentvault.CodeConflict, "this signup request already has its login")
}

// AppendLoginChange implements owner.SignupRequestStore.
func (s *Store) AppendLoginChange(ctx context.Context, c owner.LoginChange) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO login_changes (org, api_key_id, login_id, change, at) VALUES ($1, $2, $3, $4, $5)`,
		c.Org, c.APIKeyID, c.LoginID, c.Change, nanos(c.At))
	return dbErr(err, "append login change")
}

// ListLoginChanges implements owner.SignupRequestStore (in the order
// appended).
func (s *Store) ListLoginChanges(ctx context.Context, org string, since time.Time) ([]owner.LoginChange, error) {
	rows, err := s.pool.Query(ctx, `SELECT org, api_key_id, login_id, change, at FROM login_changes WHERE org = $1 AND at >= $2 ORDER BY seq`, org, nanos(since))
	out, err := collect(rows, err, func(row pgx.Row) (owner.LoginChange, error) {
		var c owner.LoginChange
		var at int64
		err := row.Scan(&c.Org, &c.APIKeyID, &c.LoginID, &c.Change, &at)
		c.At = fromNanos(at)
		return c, err
	})
	return out, dbErr(err, "list login changes")
}

var _ owner.SignupRequestStore = (*Store)(nil)
