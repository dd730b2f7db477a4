package sqlite

import (
	"context"
	"encoding/json"
	"time"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/vault"
)

// This file implements owner.SignupRequestStore (seed 004, Open an
// account): agents' signup requests and the counted changes to logins they
// made. No secret lives here: the password is generated into the vault
// when the login is made.

// Migration 61 (numbered, beside 50).
func init() {
	numberedMigrations[61] = `
CREATE TABLE signup_requests (
	id           TEXT PRIMARY KEY,
	org          TEXT NOT NULL,
	api_key_id   TEXT NOT NULL,
	site         TEXT NOT NULL,
	email        TEXT NOT NULL,
	username     TEXT NOT NULL,
	rules        TEXT NOT NULL,
	approval_id  TEXT NOT NULL,
	pre_approved INTEGER NOT NULL,
	login_id     TEXT NOT NULL,
	created      INTEGER NOT NULL,
	expires      INTEGER NOT NULL
);
CREATE INDEX signup_requests_org ON signup_requests (org, created);
CREATE TABLE login_changes (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	org        TEXT NOT NULL,
	api_key_id TEXT NOT NULL,
	login_id   TEXT NOT NULL,
	change     TEXT NOT NULL,
	at         INTEGER NOT NULL
);
CREATE INDEX login_changes_org ON login_changes (org, at);
`
}

const signupCols = `id, org, api_key_id, site, email, username, rules, approval_id, pre_approved, login_id, created, expires`

// CreateSignupRequest implements owner.SignupRequestStore.
func (s *Store) CreateSignupRequest(ctx context.Context, r owner.SignupRequest) error {
	rules, err := json.Marshal(r.Rules)
	if err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "cannot encode password rules")
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO signup_requests (`+signupCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.Org, r.APIKeyID, r.Site, r.Email, r.Username, string(rules), r.ApprovalID, b2i(r.PreApproved), r.LoginID, nanos(r.Created), nanos(r.Expires))
	return dbErr(err, "create signup request")
}

func scanSignup(sc interface{ Scan(...any) error }) (owner.SignupRequest, error) {
	var r owner.SignupRequest
	var rules string
	var pre int
	var created, expires int64
	if err := sc.Scan(&r.ID, &r.Org, &r.APIKeyID, &r.Site, &r.Email, &r.Username, &rules, &r.ApprovalID, &pre, &r.LoginID, &created, &expires); err != nil {
		return r, err
	}
	if err := json.Unmarshal([]byte(rules), &r.Rules); err != nil {
		return r, err
	}
	r.PreApproved, r.Created, r.Expires = pre != 0, fromNanos(created), fromNanos(expires)
	return r, nil
}

// GetSignupRequest implements owner.SignupRequestStore.
func (s *Store) GetSignupRequest(ctx context.Context, id string) (owner.SignupRequest, error) {
	r, err := scanSignup(s.db.QueryRowContext(ctx, `SELECT `+signupCols+` FROM signup_requests WHERE id = ?`, id))
	return r, dbErr(err, "get signup request")
}

// ListSignupRequests implements owner.SignupRequestStore.
func (s *Store) ListSignupRequests(ctx context.Context, org string, since time.Time) ([]owner.SignupRequest, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+signupCols+` FROM signup_requests WHERE org = ? AND created >= ? ORDER BY created, id`, org, nanos(since))
	return collect(rows, err, "list signup requests", scanSignup)
}

// SetSignupLogin implements owner.SignupRequestStore: one conditional
// UPDATE, so two processes racing record one login.
func (s *Store) SetSignupLogin(ctx context.Context, id, loginID string) (owner.SignupRequest, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE signup_requests SET login_id = ? WHERE id = ? AND login_id = ''`, loginID, id)
	if err != nil {
		return owner.SignupRequest{}, dbErr(err, "set signup login")
	}
	n, err := res.RowsAffected()
	if err != nil {
		return owner.SignupRequest{}, dbErr(err, "set signup login")
	}
	cur, gerr := s.GetSignupRequest(ctx, id)
	if gerr != nil {
		return cur, gerr
	}
	if n == 0 {
		if cur.LoginID == "" {
			return cur, vault.ErrNotFound
		}
		return cur, agentvault.Errorf(agentvault.CodeConflict, "this signup request already has its login")
	}
	return cur, nil
}

// AppendLoginChange implements owner.SignupRequestStore.
func (s *Store) AppendLoginChange(ctx context.Context, c owner.LoginChange) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO login_changes (org, api_key_id, login_id, change, at) VALUES (?, ?, ?, ?, ?)`,
		c.Org, c.APIKeyID, c.LoginID, c.Change, nanos(c.At))
	return dbErr(err, "append login change")
}

// ListLoginChanges implements owner.SignupRequestStore.
func (s *Store) ListLoginChanges(ctx context.Context, org string, since time.Time) ([]owner.LoginChange, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT org, api_key_id, login_id, change, at FROM login_changes WHERE org = ? AND at >= ? ORDER BY seq`, org, nanos(since))
	return collect(rows, err, "list login changes", func(row scanner) (owner.LoginChange, error) {
		var c owner.LoginChange
		var at int64
		if err := row.Scan(&c.Org, &c.APIKeyID, &c.LoginID, &c.Change, &at); err != nil {
			return owner.LoginChange{}, err
		}
		c.At = fromNanos(at)
		return c, nil
	})
}

var _ owner.SignupRequestStore = (*Store)(nil)
