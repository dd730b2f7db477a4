package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// This file implements owner.Store and policy.Ledger: the owner side's
// records live in the same database as the vault, in the tables of
// migration 2 and 3. Nothing here is a vault value; API key secrets,
// passwords and cookies arrive already hashed.

func jsonList(s []string) string {
	if s == nil {
		s = []string{}
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func parseList(s string) ([]string, error) {
	var out []string
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func nullNanos(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return nanos(t)
}

func fromNull(n *int64) time.Time {
	if n == nil {
		return time.Time{}
	}
	return fromNanos(*n)
}

func mustAffect(tag pgconn.CommandTag, err error, op string) error {
	if err != nil {
		return dbErr(err, op)
	}
	if tag.RowsAffected() == 0 {
		return dbErr(pgx.ErrNoRows, op)
	}
	return nil
}

// collect scans every row with scan.
func collect[T any](rows pgx.Rows, err error, scan func(pgx.Row) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// ---- API keys ----

const apiKeyCols = `id, org, name, secret_hash, all_cards, card_ids, all_logins, login_ids, can_create_logins, created, revoked_at`

func scanAPIKey(row pgx.Row) (owner.APIKey, error) {
	var k owner.APIKey
	var cards, logins string
	var created int64
	var revoked *int64
	if err := row.Scan(&k.ID, &k.Org, &k.Name, &k.SecretHash, &k.Scope.AllCards, &cards, &k.Scope.AllLogins, &logins,
		&k.Scope.CanCreateLogins, &created, &revoked); err != nil {
		return owner.APIKey{}, err
	}
	var err error
	if k.Scope.CardIDs, err = parseList(cards); err != nil {
		return owner.APIKey{}, err
	}
	if k.Scope.LoginIDs, err = parseList(logins); err != nil {
		return owner.APIKey{}, err
	}
	k.Created, k.RevokedAt = fromNanos(created), fromNull(revoked)
	return k, nil
}

// CreateAPIKey implements owner.KeyStore.
func (s *Store) CreateAPIKey(ctx context.Context, k owner.APIKey) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO api_keys (`+apiKeyCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		k.ID, k.Org, k.Name, k.SecretHash, k.Scope.AllCards, jsonList(k.Scope.CardIDs), k.Scope.AllLogins,
		jsonList(k.Scope.LoginIDs), k.Scope.CanCreateLogins, nanos(k.Created), nullNanos(k.RevokedAt))
	return dbErr(err, "create API key")
}

// GetAPIKey implements owner.KeyStore.
func (s *Store) GetAPIKey(ctx context.Context, id string) (owner.APIKey, error) {
	k, err := scanAPIKey(s.pool.QueryRow(ctx, `SELECT `+apiKeyCols+` FROM api_keys WHERE id = $1`, id))
	return k, dbErr(err, "read API key")
}

// ListAPIKeys implements owner.KeyStore.
func (s *Store) ListAPIKeys(ctx context.Context, org string) ([]owner.APIKey, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+apiKeyCols+` FROM api_keys WHERE org = $1 ORDER BY created, id`, org)
	out, err := collect(rows, err, scanAPIKey)
	return out, dbErr(err, "list API keys")
}

// SetAPIKeyScope implements owner.KeyStore.
func (s *Store) SetAPIKeyScope(ctx context.Context, id string, sc owner.Scope) error {
	tag, err := s.pool.Exec(ctx, `UPDATE api_keys SET all_cards = $1, card_ids = $2, all_logins = $3, login_ids = $4, can_create_logins = $5 WHERE id = $6`,
		sc.AllCards, jsonList(sc.CardIDs), sc.AllLogins, jsonList(sc.LoginIDs), sc.CanCreateLogins, id)
	return mustAffect(tag, err, "set API key scope")
}

// RevokeAPIKey implements owner.KeyStore.
func (s *Store) RevokeAPIKey(ctx context.Context, id string, at time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE api_keys SET revoked_at = coalesce(revoked_at, $1) WHERE id = $2`, nanos(at), id)
	return mustAffect(tag, err, "revoke API key")
}

// ---- card policies ----

const cardPolicyCols = `org, card_id, currency, paused, blocked_merchants, per_purchase_cap, daily_cap, monthly_cap, approval_threshold, every_purchase, live_cvv, strict_amount, updated, updated_by`

func minorOf(a *policy.Amount) any {
	if a == nil {
		return nil
	}
	return a.Minor
}

func amountOf(n *int64, cur string) *policy.Amount {
	if n == nil {
		return nil
	}
	return &policy.Amount{Minor: *n, Currency: cur}
}

// PutCardPolicy implements owner.PolicyStore. Every amount is stored in
// minor units of p.Currency; one in another currency is refused.
func (s *Store) PutCardPolicy(ctx context.Context, p owner.CardPolicy) error {
	r := p.Rules
	for _, a := range []*policy.Amount{r.PerPurchaseCap, r.DailyCap, r.MonthlyCap, r.ApprovalThreshold} {
		if a != nil && a.Currency != p.Currency {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "every limit of a card must be in its cap currency")
		}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO card_policies (`+cardPolicyCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT (org, card_id) DO UPDATE SET currency = excluded.currency, paused = excluded.paused,
	blocked_merchants = excluded.blocked_merchants, per_purchase_cap = excluded.per_purchase_cap, daily_cap = excluded.daily_cap,
	monthly_cap = excluded.monthly_cap, approval_threshold = excluded.approval_threshold, every_purchase = excluded.every_purchase,
	live_cvv = excluded.live_cvv, strict_amount = excluded.strict_amount, updated = excluded.updated, updated_by = excluded.updated_by`,
		p.Org, p.CardID, p.Currency, r.Paused, jsonList(r.BlockedMerchants), minorOf(r.PerPurchaseCap), minorOf(r.DailyCap),
		minorOf(r.MonthlyCap), minorOf(r.ApprovalThreshold), r.EveryPurchase, r.LiveCVV, r.StrictAmount,
		nanos(p.Updated), p.UpdatedBy)
	return dbErr(err, "store card policy")
}

func scanCardPolicy(row pgx.Row) (owner.CardPolicy, error) {
	var p owner.CardPolicy
	var blocked string
	var per, day, month, thr *int64
	var updated int64
	if err := row.Scan(&p.Org, &p.CardID, &p.Currency, &p.Rules.Paused, &blocked, &per, &day, &month, &thr,
		&p.Rules.EveryPurchase, &p.Rules.LiveCVV, &p.Rules.StrictAmount, &updated, &p.UpdatedBy); err != nil {
		return owner.CardPolicy{}, err
	}
	var err error
	if p.Rules.BlockedMerchants, err = parseList(blocked); err != nil {
		return owner.CardPolicy{}, err
	}
	p.Rules.PerPurchaseCap = amountOf(per, p.Currency)
	p.Rules.DailyCap = amountOf(day, p.Currency)
	p.Rules.MonthlyCap = amountOf(month, p.Currency)
	p.Rules.ApprovalThreshold = amountOf(thr, p.Currency)
	p.Updated = fromNanos(updated)
	return p, nil
}

// GetCardPolicy implements owner.PolicyStore.
func (s *Store) GetCardPolicy(ctx context.Context, org, cardID string) (owner.CardPolicy, error) {
	p, err := scanCardPolicy(s.pool.QueryRow(ctx, `SELECT `+cardPolicyCols+` FROM card_policies WHERE org = $1 AND card_id = $2`, org, cardID))
	return p, dbErr(err, "read card policy")
}

// ListCardPolicies implements owner.PolicyStore.
func (s *Store) ListCardPolicies(ctx context.Context, org string) ([]owner.CardPolicy, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+cardPolicyCols+` FROM card_policies WHERE org = $1 ORDER BY card_id`, org)
	out, err := collect(rows, err, scanCardPolicy)
	return out, dbErr(err, "list card policies")
}

// DeleteCardPolicy implements owner.PolicyStore.
func (s *Store) DeleteCardPolicy(ctx context.Context, org, cardID string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM card_policies WHERE org = $1 AND card_id = $2`, org, cardID)
	return mustAffect(tag, err, "delete card policy")
}

// ---- destinations ----

// AddDestination implements owner.DestinationStore.
func (s *Store) AddDestination(ctx context.Context, d owner.Destination) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO destinations (org, host, added_by, added) VALUES ($1, $2, $3, $4) ON CONFLICT (org, host) DO NOTHING`,
		d.Org, d.Host, d.AddedBy, nanos(d.Added))
	return dbErr(err, "add destination")
}

// RemoveDestination implements owner.DestinationStore.
func (s *Store) RemoveDestination(ctx context.Context, org, host string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM destinations WHERE org = $1 AND host = $2`, org, host)
	return mustAffect(tag, err, "remove destination")
}

// ListDestinations implements owner.DestinationStore.
func (s *Store) ListDestinations(ctx context.Context, org string) ([]owner.Destination, error) {
	rows, err := s.pool.Query(ctx, `SELECT org, host, added_by, added FROM destinations WHERE org = $1 ORDER BY host`, org)
	out, err := collect(rows, err, func(row pgx.Row) (owner.Destination, error) {
		var d owner.Destination
		var added int64
		err := row.Scan(&d.Org, &d.Host, &d.AddedBy, &added)
		d.Added = fromNanos(added)
		return d, err
	})
	return out, dbErr(err, "list destinations")
}

// ---- approvals ----

const approvalCols = `id, org, kind, reason, site, amount_minor, amount_currency, card_id, api_key_id, session, created, expires, status, decided_by, decided_at, item_id, page`

func scanApproval(row pgx.Row) (owner.Approval, error) {
	var a owner.Approval
	var kind, status, cur string
	var amount, decided *int64
	var created, expires int64
	if err := row.Scan(&a.ID, &a.Org, &kind, &a.Reason, &a.Site, &amount, &cur, &a.CardID, &a.APIKeyID, &a.Session,
		&created, &expires, &status, &a.DecidedBy, &decided, &a.ItemID, &a.Page); err != nil {
		return owner.Approval{}, err
	}
	a.Kind, a.Status = owner.ApprovalKind(kind), owner.ApprovalStatus(status)
	a.Amount = amountOf(amount, cur)
	a.Created, a.Expires, a.DecidedAt = fromNanos(created), fromNanos(expires), fromNull(decided)
	return a, nil
}

// CreateApproval implements owner.ApprovalStore. An advisory lock on the
// dedupe key makes concurrent requests for the same thing, from any
// replica, find one pending approval.
func (s *Store) CreateApproval(ctx context.Context, a owner.Approval, dedupeKey string, now time.Time) (owner.Approval, bool, error) {
	var got owner.Approval
	created := false
	err := s.tx(ctx, func(tx pgx.Tx) error {
		got, created = owner.Approval{}, false
		if err := lockKey(ctx, tx, "agentvault-approval:"+dedupeKey); err != nil {
			return err
		}
		// A stale pending twin would hold the unique slot: expire it first.
		if _, err := tx.Exec(ctx, `UPDATE approvals SET status = 'expired' WHERE dedupe = $1 AND status = 'pending' AND expires <= $2`, dedupeKey, nanos(now)); err != nil {
			return err
		}
		existing, err := scanApproval(tx.QueryRow(ctx, `SELECT `+approvalCols+` FROM approvals WHERE dedupe = $1 AND status = 'pending'`, dedupeKey))
		if err == nil {
			got = existing
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		cur := ""
		if a.Amount != nil {
			cur = a.Amount.Currency
		}
		_, err = tx.Exec(ctx, `INSERT INTO approvals (`+approvalCols+`, dedupe) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`,
			a.ID, a.Org, string(a.Kind), a.Reason, a.Site, minorOf(a.Amount), cur, a.CardID, a.APIKeyID, a.Session,
			nanos(a.Created), nanos(a.Expires), string(owner.StatusPending), "", nil, a.ItemID, a.Page, dedupeKey)
		if err != nil {
			return err
		}
		got, created = a, true
		got.Status, got.DecidedBy, got.DecidedAt = owner.StatusPending, "", time.Time{}
		return nil
	})
	if err != nil {
		return owner.Approval{}, false, dbErr(err, "create approval")
	}
	return got, created, nil
}

// GetApproval implements owner.ApprovalStore.
func (s *Store) GetApproval(ctx context.Context, id string) (owner.Approval, error) {
	a, err := scanApproval(s.pool.QueryRow(ctx, `SELECT `+approvalCols+` FROM approvals WHERE id = $1`, id))
	return a, dbErr(err, "read approval")
}

// ListApprovals implements owner.ApprovalStore (newest first).
func (s *Store) ListApprovals(ctx context.Context, f owner.ApprovalFilter) ([]owner.Approval, error) {
	var q strings.Builder
	q.WriteString(`SELECT ` + approvalCols + ` FROM approvals WHERE true`)
	var args []any
	for _, c := range []struct{ col, v string }{{"org", f.Org}, {"status", string(f.Status)}, {"api_key_id", f.APIKeyID}, {"session", f.Session}} {
		if c.v != "" {
			args = append(args, c.v)
			fmt.Fprintf(&q, ` AND %s = $%d`, c.col, len(args))
		}
	}
	q.WriteString(` ORDER BY created DESC, id DESC`)
	if f.Limit > 0 {
		args = append(args, f.Limit)
		fmt.Fprintf(&q, ` LIMIT $%d`, len(args))
	}
	rows, err := s.pool.Query(ctx, q.String(), args...)
	out, err := collect(rows, err, scanApproval)
	return out, dbErr(err, "list approvals")
}

// DecideApproval implements owner.ApprovalStore. The row lock makes two
// owners deciding at once (on any replica) decide it once.
func (s *Store) DecideApproval(ctx context.Context, id string, status owner.ApprovalStatus, by string, at time.Time) (owner.Approval, error) {
	if status != owner.StatusApproved && status != owner.StatusDenied {
		return owner.Approval{}, agentvault.Errorf(agentvault.CodeInvalidInput, "an approval is decided approved or denied")
	}
	var out owner.Approval
	var outErr error
	err := s.tx(ctx, func(tx pgx.Tx) error {
		out, outErr = owner.Approval{}, nil
		a, err := scanApproval(tx.QueryRow(ctx, `SELECT `+approvalCols+` FROM approvals WHERE id = $1 FOR UPDATE`, id))
		if err != nil {
			return err
		}
		switch {
		case a.Status != owner.StatusPending:
			out, outErr = a, agentvault.Errorf(agentvault.CodeConflict, "this approval was already %s", a.Status)
			return nil
		case !at.Before(a.Expires):
			if _, err := tx.Exec(ctx, `UPDATE approvals SET status = 'expired' WHERE id = $1`, id); err != nil {
				return err
			}
			a.Status = owner.StatusExpired
			out, outErr = a, agentvault.Errorf(agentvault.CodeApprovalExpired, "this approval has expired")
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE approvals SET status = $1, decided_by = $2, decided_at = $3 WHERE id = $4`,
			string(status), by, nanos(at), id); err != nil {
			return err
		}
		if status == owner.StatusApproved && a.Kind == owner.KindNewDestination {
			if _, err := tx.Exec(ctx, `INSERT INTO destinations (org, host, added_by, added) VALUES ($1, $2, $3, $4) ON CONFLICT (org, host) DO NOTHING`,
				a.Org, a.Site, "approval:"+a.ID, nanos(at)); err != nil {
				return err
			}
		}
		a.Status, a.DecidedBy, a.DecidedAt = status, by, fromNanos(nanos(at))
		out = a
		return nil
	})
	if err != nil {
		return owner.Approval{}, dbErr(err, "decide approval")
	}
	return out, outErr
}

// ExpireApprovals implements owner.ApprovalStore. One UPDATE: an approval
// decided meanwhile (row lock, re-checked) is not expired.
func (s *Store) ExpireApprovals(ctx context.Context, now time.Time) ([]owner.Approval, error) {
	rows, err := s.pool.Query(ctx, `UPDATE approvals SET status = 'expired' WHERE status = 'pending' AND expires <= $1 RETURNING `+approvalCols, nanos(now))
	out, err := collect(rows, err, scanApproval)
	if err != nil {
		return nil, dbErr(err, "expire approvals")
	}
	return out, nil
}

// ---- ledger (policy.Ledger) ----

// Reserve implements policy.Ledger: an advisory lock on the card, then the
// caps checked against the sums and the entry written, in one transaction.
// Two replicas or connections racing for the last of a cap take the card's
// lock in turn, and the second sees the first's entry (read committed: each
// statement after the lock reads what committed before it), so only one
// wins (P18). Within this process, reservations waiting at the same moment
// share that transaction and its commit (group commit, as the audit does):
// each is checked in turn against what the ones before it wrote, and each
// caller returns only after the commit holding its entry returned. If ctx
// ends first Reserve fails, and the entry may still be committed: the
// authorization then fails while its amount counts, and an authorize
// retried with the same id finds it counted once (P20).
func (s *Store) Reserve(ctx context.Context, r policy.Reservation) error {
	if err := ctx.Err(); err != nil {
		return agentvault.Wrap(agentvault.CodeTimeout, err, "reservation cancelled")
	}
	if r.ID == "" || r.CardID == "" || r.Day == "" || r.Month == "" || r.Amount.Currency == "" {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "incomplete reservation")
	}
	if r.Amount.Minor < 0 {
		return agentvault.Errorf(agentvault.CodeAmountUnknown, "negative amount")
	}
	if s.noGroupCommit || s.ledger == nil {
		refusals, err := s.commitReservations(ctx, []policy.Reservation{r})
		if err != nil {
			return err
		}
		return refusals[0]
	}
	refusal, err := s.ledger.Do(ctx, r)
	if err != nil {
		return dbErr(err, "reserve spending")
	}
	return refusal
}

// commitReservations writes rs in one transaction, in order, and returns
// each one's refusal (a cap it would break, an id reused for another
// purchase) or nil. The cards' locks are taken first, in sorted order, so
// two batches (two replicas) never wait for each other in a cycle. A
// refused reservation writes nothing and does not stop the others; any
// other error fails them all (groupcommit then retries each alone).
func (s *Store) commitReservations(ctx context.Context, rs []policy.Reservation) ([]error, error) {
	refusals := make([]error, len(rs))
	cards := make([]string, 0, len(rs))
	for _, r := range rs {
		cards = append(cards, r.CardID)
	}
	slices.Sort(cards)
	cards = slices.Compact(cards)
	err := s.tx(ctx, func(tx pgx.Tx) error {
		for _, c := range cards {
			if err := lockKey(ctx, tx, "agentvault-ledger:"+c); err != nil {
				return err
			}
		}
		for i, r := range rs {
			err := reserveIn(ctx, tx, r)
			var ae *agentvault.Error
			if errors.As(err, &ae) {
				refusals[i] = err
				continue
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, dbErr(err, "reserve spending")
	}
	return refusals, nil
}

// reserveIn checks r against the caps and writes it in tx, which holds the
// card's lock. It returns a coded error (and writes nothing) when r is
// refused.
func reserveIn(ctx context.Context, tx pgx.Tx, r policy.Reservation) error {
	var card, cur string
	var minor int64
	err := tx.QueryRow(ctx, `SELECT card_id, currency, minor FROM ledger WHERE id = $1`, r.ID).Scan(&card, &cur, &minor)
	if err == nil {
		if card != r.CardID || cur != r.Amount.Currency || minor != r.Amount.Minor {
			return agentvault.Errorf(agentvault.CodeConflict, "reservation id reused for another purchase")
		}
		return nil // the same authorization again: counted once (P20)
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	today, month, err := spent(ctx, tx, r.CardID, r.Day, r.Month, r.Amount.Currency)
	if err != nil {
		return err
	}
	if err := policy.CheckCaps(r.Amount, today, month, r.Caps); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO ledger (id, card_id, day, month, currency, minor, created) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		r.ID, r.CardID, r.Day, r.Month, r.Amount.Currency, r.Amount.Minor, time.Now().UnixNano())
	return err
}

func spent(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, cardID, day, month, cur string) (policy.Amount, policy.Amount, error) {
	var d, m int64
	err := q.QueryRow(ctx, `SELECT coalesce(sum(minor) FILTER (WHERE day = $3), 0)::bigint, coalesce(sum(minor) FILTER (WHERE month = $4), 0)::bigint
FROM ledger WHERE card_id = $1 AND currency = $2 AND (day = $3 OR month = $4)`, cardID, cur, day, month).Scan(&d, &m)
	if err != nil {
		return policy.Amount{}, policy.Amount{}, err
	}
	return policy.Amount{Minor: d, Currency: cur}, policy.Amount{Minor: m, Currency: cur}, nil
}

// GetReservation implements owner.Store. Caps are not stored; the
// returned reservation has none.
func (s *Store) GetReservation(ctx context.Context, id string) (policy.Reservation, error) {
	var r policy.Reservation
	err := s.pool.QueryRow(ctx, `SELECT id, card_id, day, month, currency, minor FROM ledger WHERE id = $1`, id).
		Scan(&r.ID, &r.CardID, &r.Day, &r.Month, &r.Amount.Currency, &r.Amount.Minor)
	return r, dbErr(err, "read reservation")
}

// Cancel implements policy.Ledger.
func (s *Store) Cancel(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM ledger WHERE id = $1`, id)
	return dbErr(err, "cancel reservation")
}

// Spent implements policy.Ledger.
func (s *Store) Spent(ctx context.Context, cardID, day, month, currency string) (policy.Amount, policy.Amount, error) {
	today, m, err := spent(ctx, s.pool, cardID, day, month, currency)
	return today, m, dbErr(err, "read spending")
}

// ---- owner accounts and dashboard sessions ----

// PutAccount implements owner.AccountStore.
func (s *Store) PutAccount(ctx context.Context, a owner.Account) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO owner_accounts (email, org, password_hash, created, updated) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (email) DO UPDATE SET org = excluded.org, password_hash = excluded.password_hash, updated = excluded.updated`,
		a.Email, a.Org, a.PasswordHash, nanos(a.Created), nanos(a.Updated))
	return dbErr(err, "store owner account")
}

// GetAccount implements owner.AccountStore.
func (s *Store) GetAccount(ctx context.Context, email string) (owner.Account, error) {
	var a owner.Account
	var created, updated int64
	err := s.pool.QueryRow(ctx, `SELECT email, org, password_hash, created, updated FROM owner_accounts WHERE email = $1`, email).
		Scan(&a.Email, &a.Org, &a.PasswordHash, &created, &updated)
	if err != nil {
		return owner.Account{}, dbErr(err, "read owner account")
	}
	a.Created, a.Updated = fromNanos(created), fromNanos(updated)
	return a, nil
}

// ListAccounts implements owner.AccountStore (by email, in SQLite's byte
// order).
func (s *Store) ListAccounts(ctx context.Context) ([]owner.Account, error) {
	rows, err := s.pool.Query(ctx, `SELECT email, org, created, updated FROM owner_accounts ORDER BY email COLLATE "C"`)
	out, err := collect(rows, err, func(row pgx.Row) (owner.Account, error) {
		var a owner.Account
		var created, updated int64
		err := row.Scan(&a.Email, &a.Org, &created, &updated)
		a.Created, a.Updated = fromNanos(created), fromNanos(updated)
		return a, err
	})
	return out, dbErr(err, "list owner accounts")
}

// CountAccounts implements owner.AccountStore.
func (s *Store) CountAccounts(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM owner_accounts`).Scan(&n)
	return n, dbErr(err, "count owner accounts")
}

// PutDashSession implements owner.AccountStore.
func (s *Store) PutDashSession(ctx context.Context, d owner.DashSession) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO dash_sessions (token_hash, email, created, expires) VALUES ($1, $2, $3, $4)`,
		d.TokenHash, d.Email, nanos(d.Created), nanos(d.Expires))
	return dbErr(err, "store dashboard session")
}

// GetDashSession implements owner.AccountStore.
func (s *Store) GetDashSession(ctx context.Context, tokenHash []byte) (owner.DashSession, error) {
	var d owner.DashSession
	var created, expires int64
	err := s.pool.QueryRow(ctx, `SELECT token_hash, email, created, expires FROM dash_sessions WHERE token_hash = $1`, tokenHash).
		Scan(&d.TokenHash, &d.Email, &created, &expires)
	if err != nil {
		return owner.DashSession{}, dbErr(err, "read dashboard session")
	}
	d.Created, d.Expires = fromNanos(created), fromNanos(expires)
	return d, nil
}

// DeleteDashSession implements owner.AccountStore.
func (s *Store) DeleteDashSession(ctx context.Context, tokenHash []byte) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM dash_sessions WHERE token_hash = $1`, tokenHash)
	return dbErr(err, "delete dashboard session")
}

// DeleteDashSessions implements owner.AccountStore.
func (s *Store) DeleteDashSessions(ctx context.Context, email string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM dash_sessions WHERE email = $1`, email)
	return dbErr(err, "delete dashboard sessions")
}

// DeleteExpiredDashSessions implements owner.AccountStore.
func (s *Store) DeleteExpiredDashSessions(ctx context.Context, now time.Time) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM dash_sessions WHERE expires <= $1`, nanos(now))
	return dbErr(err, "delete expired dashboard sessions")
}

// ---- pre-approved signups ----

// AddSignup implements owner.SignupStore.
func (s *Store) AddSignup(ctx context.Context, g owner.Signup) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO signups (org, site, email, added_by, added) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
		g.Org, g.Site, g.Email, g.AddedBy, nanos(g.Added))
	return dbErr(err, "add signup")
}

// RemoveSignup implements owner.SignupStore.
func (s *Store) RemoveSignup(ctx context.Context, org, site, email string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM signups WHERE org = $1 AND site = $2 AND email = $3`, org, site, email)
	return mustAffect(tag, err, "remove signup")
}

// ListSignups implements owner.SignupStore.
func (s *Store) ListSignups(ctx context.Context, org string) ([]owner.Signup, error) {
	rows, err := s.pool.Query(ctx, `SELECT org, site, email, added_by, added FROM signups WHERE org = $1 ORDER BY site, email`, org)
	out, err := collect(rows, err, func(row pgx.Row) (owner.Signup, error) {
		var g owner.Signup
		var added int64
		err := row.Scan(&g.Org, &g.Site, &g.Email, &g.AddedBy, &added)
		g.Added = fromNanos(added)
		return g, err
	})
	return out, dbErr(err, "list signups")
}

// ---- refusals ----

// AppendRefusal implements owner.RefusalStore.
func (s *Store) AppendRefusal(ctx context.Context, r owner.Refusal) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO refusals (org, time, api_key_id, session, item_id, kind, field, site, code) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		r.Org, nanos(r.Time), r.APIKeyID, r.Session, r.ItemID, r.Kind, r.Field, r.Site, r.Code)
	return dbErr(err, "append refusal")
}

// ListRefusals implements owner.RefusalStore.
func (s *Store) ListRefusals(ctx context.Context, org string, since time.Time, limit int) ([]owner.Refusal, error) {
	q := `SELECT seq, org, time, api_key_id, session, item_id, kind, field, site, code FROM refusals WHERE org = $1 AND time >= $2 ORDER BY seq DESC`
	args := []any{org, nanos(since)}
	if limit > 0 {
		q += ` LIMIT $3`
		args = append(args, limit)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	out, err := collect(rows, err, func(row pgx.Row) (owner.Refusal, error) {
		var r owner.Refusal
		var t int64
		err := row.Scan(&r.Seq, &r.Org, &t, &r.APIKeyID, &r.Session, &r.ItemID, &r.Kind, &r.Field, &r.Site, &r.Code)
		r.Time = fromNanos(t)
		return r, err
	})
	return out, dbErr(err, "list refusals")
}

var (
	_ owner.Store   = (*Store)(nil)
	_ policy.Ledger = (*Store)(nil)
)
