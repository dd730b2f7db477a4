package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
)

// This file implements owner.Store: the owner side's records live in the
// same file as the vault, in the tables of migration 2. Nothing here is a
// vault value; API key secrets, passwords and cookies arrive already hashed.

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

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

func fromNull(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return fromNanos(n.Int64)
}

// ---- API keys ----

const apiKeyCols = `id, org, name, secret_hash, all_cards, card_ids, all_logins, login_ids, can_create_logins, created, revoked_at`

func scanAPIKey(row interface{ Scan(...any) error }) (owner.APIKey, error) {
	var k owner.APIKey
	var allCards, allLogins, canCreate int
	var cards, logins string
	var created int64
	var revoked sql.NullInt64
	if err := row.Scan(&k.ID, &k.Org, &k.Name, &k.SecretHash, &allCards, &cards, &allLogins, &logins, &canCreate, &created, &revoked); err != nil {
		return owner.APIKey{}, err
	}
	var err error
	if k.Scope.CardIDs, err = parseList(cards); err != nil {
		return owner.APIKey{}, err
	}
	if k.Scope.LoginIDs, err = parseList(logins); err != nil {
		return owner.APIKey{}, err
	}
	k.Scope.AllCards, k.Scope.AllLogins, k.Scope.CanCreateLogins = allCards == 1, allLogins == 1, canCreate == 1
	k.Created, k.RevokedAt = fromNanos(created), fromNull(revoked)
	return k, nil
}

// CreateAPIKey implements owner.KeyStore.
func (s *Store) CreateAPIKey(ctx context.Context, k owner.APIKey) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO api_keys (`+apiKeyCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.Org, k.Name, k.SecretHash, b2i(k.Scope.AllCards), jsonList(k.Scope.CardIDs), b2i(k.Scope.AllLogins),
		jsonList(k.Scope.LoginIDs), b2i(k.Scope.CanCreateLogins), nanos(k.Created), nullNanos(k.RevokedAt))
	return dbErr(err, "create API key")
}

const qAPIKey = `SELECT ` + apiKeyCols + ` FROM api_keys WHERE id = ?`

// GetAPIKey implements owner.KeyStore, through the read cache.
func (s *Store) GetAPIKey(ctx context.Context, id string) (owner.APIKey, error) {
	return cached(ctx, s, cacheKey{kind: cacheAPIKey, a: id}, cloneAPIKey, func() (owner.APIKey, error) {
		return s.getAPIKey(ctx, id)
	})
}

func (s *Store) getAPIKey(ctx context.Context, id string) (owner.APIKey, error) {
	k, err := scanAPIKey(s.queryRow(ctx, qAPIKey, id))
	return k, dbErr(err, "read API key")
}

// ListAPIKeys implements owner.KeyStore.
func (s *Store) ListAPIKeys(ctx context.Context, org string) ([]owner.APIKey, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+apiKeyCols+` FROM api_keys WHERE org = ? ORDER BY created, id`, org)
	return collect(rows, err, "list API keys", scanAPIKey)
}

func mustAffect(res sql.Result, err error, op string) error {
	if err != nil {
		return dbErr(err, op)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return dbErr(err, op)
	}
	if n == 0 {
		return dbErr(sql.ErrNoRows, op)
	}
	return nil
}

// SetAPIKeyScope implements owner.KeyStore.
func (s *Store) SetAPIKeyScope(ctx context.Context, id string, sc owner.Scope) error {
	res, err := s.db.ExecContext(ctx, `UPDATE api_keys SET all_cards = ?, card_ids = ?, all_logins = ?, login_ids = ?, can_create_logins = ? WHERE id = ?`,
		b2i(sc.AllCards), jsonList(sc.CardIDs), b2i(sc.AllLogins), jsonList(sc.LoginIDs), b2i(sc.CanCreateLogins), id)
	return mustAffect(res, err, "set API key scope")
}

// RevokeAPIKey implements owner.KeyStore.
func (s *Store) RevokeAPIKey(ctx context.Context, id string, at time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?`, nanos(at), id)
	return mustAffect(res, err, "revoke API key")
}

// ---- card policies ----

const cardPolicyCols = `org, card_id, currency, paused, blocked_merchants, per_purchase_cap, daily_cap, monthly_cap, approval_threshold, every_purchase, live_cvv, strict_amount, updated, updated_by`

func minorOf(a *policy.Amount) any {
	if a == nil {
		return nil
	}
	return a.Minor
}

func amountOf(n sql.NullInt64, cur string) *policy.Amount {
	if !n.Valid {
		return nil
	}
	return &policy.Amount{Minor: n.Int64, Currency: cur}
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
	_, err := s.db.ExecContext(ctx, `INSERT OR REPLACE INTO card_policies (`+cardPolicyCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		p.Org, p.CardID, p.Currency, b2i(r.Paused), jsonList(r.BlockedMerchants), minorOf(r.PerPurchaseCap), minorOf(r.DailyCap),
		minorOf(r.MonthlyCap), minorOf(r.ApprovalThreshold), b2i(r.EveryPurchase), b2i(r.LiveCVV), b2i(r.StrictAmount),
		nanos(p.Updated), p.UpdatedBy)
	return dbErr(err, "store card policy")
}

func scanCardPolicy(row interface{ Scan(...any) error }) (owner.CardPolicy, error) {
	var p owner.CardPolicy
	var paused, every, live, strict int
	var blocked string
	var per, day, month, thr sql.NullInt64
	var updated int64
	if err := row.Scan(&p.Org, &p.CardID, &p.Currency, &paused, &blocked, &per, &day, &month, &thr, &every, &live, &strict, &updated, &p.UpdatedBy); err != nil {
		return owner.CardPolicy{}, err
	}
	var err error
	if p.Rules.BlockedMerchants, err = parseList(blocked); err != nil {
		return owner.CardPolicy{}, err
	}
	p.Rules.Paused, p.Rules.EveryPurchase, p.Rules.LiveCVV, p.Rules.StrictAmount = paused == 1, every == 1, live == 1, strict == 1
	p.Rules.PerPurchaseCap = amountOf(per, p.Currency)
	p.Rules.DailyCap = amountOf(day, p.Currency)
	p.Rules.MonthlyCap = amountOf(month, p.Currency)
	p.Rules.ApprovalThreshold = amountOf(thr, p.Currency)
	p.Updated = fromNanos(updated)
	return p, nil
}

const qCardPolicy = `SELECT ` + cardPolicyCols + ` FROM card_policies WHERE org = ? AND card_id = ?`

// GetCardPolicy implements owner.PolicyStore, through the read cache.
func (s *Store) GetCardPolicy(ctx context.Context, org, cardID string) (owner.CardPolicy, error) {
	return cached(ctx, s, cacheKey{kind: cacheCardPolicy, a: org, b: cardID}, cloneCardPolicy, func() (owner.CardPolicy, error) {
		p, err := scanCardPolicy(s.queryRow(ctx, qCardPolicy, org, cardID))
		return p, dbErr(err, "read card policy")
	})
}

// ListCardPolicies implements owner.PolicyStore.
func (s *Store) ListCardPolicies(ctx context.Context, org string) ([]owner.CardPolicy, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+cardPolicyCols+` FROM card_policies WHERE org = ? ORDER BY card_id`, org)
	return collect(rows, err, "list card policies", scanCardPolicy)
}

// DeleteCardPolicy implements owner.PolicyStore.
func (s *Store) DeleteCardPolicy(ctx context.Context, org, cardID string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM card_policies WHERE org = ? AND card_id = ?`, org, cardID)
	return mustAffect(res, err, "delete card policy")
}

// ---- destinations ----

// AddDestination implements owner.DestinationStore.
func (s *Store) AddDestination(ctx context.Context, d owner.Destination) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO destinations (org, host, added_by, added) VALUES (?, ?, ?, ?) ON CONFLICT (org, host) DO NOTHING`,
		d.Org, d.Host, d.AddedBy, nanos(d.Added))
	return dbErr(err, "add destination")
}

// RemoveDestination implements owner.DestinationStore.
func (s *Store) RemoveDestination(ctx context.Context, org, host string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM destinations WHERE org = ? AND host = ?`, org, host)
	return mustAffect(res, err, "remove destination")
}

const qDestinations = `SELECT org, host, added_by, added FROM destinations WHERE org = ? ORDER BY host`

// ListDestinations implements owner.DestinationStore, through the read cache.
func (s *Store) ListDestinations(ctx context.Context, org string) ([]owner.Destination, error) {
	return cached(ctx, s, cacheKey{kind: cacheDestinations, a: org}, cloneDestinations, func() ([]owner.Destination, error) {
		return s.listDestinations(ctx, org)
	})
}

func (s *Store) listDestinations(ctx context.Context, org string) ([]owner.Destination, error) {
	rows, err := s.query(ctx, qDestinations, org)
	return collect(rows, err, "list destinations", func(row scanner) (owner.Destination, error) {
		var d owner.Destination
		var added int64
		if err := row.Scan(&d.Org, &d.Host, &d.AddedBy, &added); err != nil {
			return owner.Destination{}, err
		}
		d.Added = fromNanos(added)
		return d, nil
	})
}

// ---- approvals ----

const approvalCols = `id, org, kind, reason, site, amount_minor, amount_currency, card_id, api_key_id, session, created, expires, status, decided_by, decided_at, item_id, page`

func scanApproval(row interface{ Scan(...any) error }) (owner.Approval, error) {
	var a owner.Approval
	var kind, status, cur string
	var amount, decided sql.NullInt64
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

// CreateApproval implements owner.ApprovalStore.
func (s *Store) CreateApproval(ctx context.Context, a owner.Approval, dedupeKey string, now time.Time) (owner.Approval, bool, error) {
	var got owner.Approval
	created := false
	err := s.tx(ctx, func(tx *sql.Tx) error {
		// A stale pending twin would hold the unique slot: expire it first.
		if _, err := tx.ExecContext(ctx, `UPDATE approvals SET status = 'expired' WHERE dedupe = ? AND status = 'pending' AND expires <= ?`, dedupeKey, nanos(now)); err != nil {
			return err
		}
		existing, err := scanApproval(tx.QueryRowContext(ctx, `SELECT `+approvalCols+` FROM approvals WHERE dedupe = ? AND status = 'pending'`, dedupeKey))
		if err == nil {
			got = existing
			return nil
		}
		if err != sql.ErrNoRows {
			return err
		}
		cur := ""
		if a.Amount != nil {
			cur = a.Amount.Currency
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO approvals (`+approvalCols+`, dedupe) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
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
	a, err := scanApproval(s.queryRow(ctx, `SELECT `+approvalCols+` FROM approvals WHERE id = ?`, id))
	return a, dbErr(err, "read approval")
}

// ListApprovals implements owner.ApprovalStore (newest first), through
// the read cache.
func (s *Store) ListApprovals(ctx context.Context, f owner.ApprovalFilter) ([]owner.Approval, error) {
	k := cacheKey{kind: cacheApprovals, a: f.Org, b: string(f.Status), c: f.APIKeyID, d: f.Session, n: f.Limit}
	return cached(ctx, s, k, cloneApprovals, func() ([]owner.Approval, error) { return s.listApprovals(ctx, f) })
}

func (s *Store) listApprovals(ctx context.Context, f owner.ApprovalFilter) ([]owner.Approval, error) {
	q := `SELECT ` + approvalCols + ` FROM approvals WHERE 1 = 1`
	var args []any
	// A known status is written into the text, not bound: with status = ?
	// SQLite must re-plan the statement on every binding (the partial index
	// on pending approvals may or may not apply to the value), which undid
	// the statement cache (a tenth of a purchase's CPU). The four values
	// are this package's constants, never input.
	status := string(f.Status)
	switch f.Status {
	case owner.StatusPending, owner.StatusApproved, owner.StatusDenied, owner.StatusExpired:
		q += ` AND status = '` + status + `'`
		status = ""
	}
	for _, c := range []struct{ col, v string }{{"org", f.Org}, {"status", status}, {"api_key_id", f.APIKeyID}, {"session", f.Session}} {
		if c.v != "" {
			q += ` AND ` + c.col + ` = ?`
			args = append(args, c.v)
		}
	}
	q += ` ORDER BY created DESC, id DESC`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := s.query(ctx, q, args...) // one of a few fixed texts: cached
	return collect(rows, err, "list approvals", scanApproval)
}

// DecideApproval implements owner.ApprovalStore.
func (s *Store) DecideApproval(ctx context.Context, id string, status owner.ApprovalStatus, by string, at time.Time) (owner.Approval, error) {
	if status != owner.StatusApproved && status != owner.StatusDenied {
		return owner.Approval{}, agentvault.Errorf(agentvault.CodeInvalidInput, "an approval is decided approved or denied")
	}
	var out owner.Approval
	var outErr error
	err := s.tx(ctx, func(tx *sql.Tx) error {
		a, err := scanApproval(tx.QueryRowContext(ctx, `SELECT `+approvalCols+` FROM approvals WHERE id = ?`, id))
		if err != nil {
			return err
		}
		switch {
		case a.Status != owner.StatusPending:
			out, outErr = a, agentvault.Errorf(agentvault.CodeConflict, "this approval was already %s", a.Status)
			return nil
		case !at.Before(a.Expires):
			if _, err := tx.ExecContext(ctx, `UPDATE approvals SET status = 'expired' WHERE id = ?`, id); err != nil {
				return err
			}
			a.Status = owner.StatusExpired
			out, outErr = a, agentvault.Errorf(agentvault.CodeApprovalExpired, "this approval has expired")
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE approvals SET status = ?, decided_by = ?, decided_at = ? WHERE id = ?`,
			string(status), by, nanos(at), id); err != nil {
			return err
		}
		if status == owner.StatusApproved && a.Kind == owner.KindNewDestination {
			if _, err := tx.ExecContext(ctx, `INSERT INTO destinations (org, host, added_by, added) VALUES (?, ?, ?, ?) ON CONFLICT (org, host) DO NOTHING`,
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

// ExpireApprovals implements owner.ApprovalStore.
func (s *Store) ExpireApprovals(ctx context.Context, now time.Time) ([]owner.Approval, error) {
	var out []owner.Approval
	err := s.tx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+approvalCols+` FROM approvals WHERE status = 'pending' AND expires <= ?`, nanos(now))
		if err != nil {
			return err
		}
		for rows.Next() {
			a, err := scanApproval(rows)
			if err != nil {
				rows.Close()
				return err
			}
			a.Status = owner.StatusExpired
			out = append(out, a)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE approvals SET status = 'expired' WHERE status = 'pending' AND expires <= ?`, nanos(now))
		return err
	})
	if err != nil {
		return nil, dbErr(err, "expire approvals")
	}
	return out, nil
}

// ---- ledger (policy.Ledger) ----

// Reserve implements policy.Ledger: the caps are checked against the
// card's running totals and the entry written inside one IMMEDIATE
// transaction (the store's _txlock), so two processes or connections
// racing for the last of a cap are serialised by SQLite's write lock and
// only one wins (P18). Within this process, reservations and audit records
// waiting at the same moment share that transaction and its fsync (group
// commit, store.go's durable writer): each reservation is checked in turn
// against the totals the ones before it left, and each caller returns only
// after the commit holding its entry returned. If ctx ends first Reserve fails, and the entry may still
// be committed: the authorization then fails while its amount counts, and
// an authorize retried with the same id finds it counted once (P20).
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
	res, err := s.durableDo(ctx, durableOp{resv: &r})
	if err != nil {
		return dbErr(err, "reserve spending")
	}
	return res.refusal
}

const (
	qLedgerEntry = `SELECT card_id, currency, minor FROM ledger WHERE id = ?`
	qLedgerPut   = `INSERT INTO ledger (id, card_id, day, month, currency, minor, created) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`
	// qSpent reads the running totals (migration 90) of a card's day and
	// month in one currency; a period with no entry yet reads 0.
	qSpent = `SELECT coalesce(sum(CASE WHEN period = ?3 THEN minor END), 0), coalesce(sum(CASE WHEN period = ?4 THEN minor END), 0)
FROM ledger_totals WHERE card_id = ?1 AND currency = ?2 AND period IN (?3, ?4)`
)

// reserveIn checks r against the caps and writes it in tx. It returns a
// coded error (and writes nothing) when r is refused. The usual
// reservation is new: its totals are read, the caps checked and the entry
// inserted, two statements. The entry's id is looked up only when the
// insert found it taken or the caps refused: the same authorization again
// is counted once and never refused (P20), another purchase under the same
// id is a conflict. lc (nil: none) is the durable writer's copy of the
// totals, read from the file only for a card and period it does not hold.
func (s *Store) reserveIn(ctx context.Context, tx *sql.Tx, r policy.Reservation, lc *ledgerCache) error {
	cur := r.Amount.Currency
	var today, month policy.Amount
	if d, m, ok := lc.get(r.CardID, cur, r.Day, r.Month); ok {
		today, month = policy.Amount{Minor: d, Currency: cur}, policy.Amount{Minor: m, Currency: cur}
	} else {
		sp, err := s.txStmt(ctx, tx, qSpent)
		if err != nil {
			return err
		}
		if today, month, err = spent(ctx, sp, r.CardID, r.Day, r.Month, cur); err != nil {
			return err
		}
		lc.set(r.CardID, cur, r.Day, r.Month, today.Minor, month.Minor)
	}
	if capErr := policy.CheckCaps(r.Amount, today, month, r.Caps); capErr != nil {
		if same, err := s.reservedIn(ctx, tx, r); err != nil || same {
			return err
		}
		return capErr
	}
	put, err := s.txStmt(ctx, tx, qLedgerPut)
	if err != nil {
		return err
	}
	res, err := put.ExecContext(ctx, r.ID, r.CardID, r.Day, r.Month, r.Amount.Currency, r.Amount.Minor, time.Now().UnixNano())
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 1 {
		lc.add(r.CardID, cur, r.Day, r.Month, r.Amount.Minor)
		return nil
	}
	_, err = s.reservedIn(ctx, tx, r) // the id was taken
	return err
}

// reservedIn reports whether r's id is already in the ledger for the same
// purchase (card, currency, amount); the id held by another purchase is a
// coded conflict.
func (s *Store) reservedIn(ctx context.Context, tx *sql.Tx, r policy.Reservation) (bool, error) {
	get, err := s.txStmt(ctx, tx, qLedgerEntry)
	if err != nil {
		return false, err
	}
	var card, cur string
	var minor int64
	err = get.QueryRowContext(ctx, r.ID).Scan(&card, &cur, &minor)
	if err == sql.ErrNoRows {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if card != r.CardID || cur != r.Amount.Currency || minor != r.Amount.Minor {
		return false, agentvault.Errorf(agentvault.CodeConflict, "reservation id reused for another purchase")
	}
	return true, nil
}

func spent(ctx context.Context, q *sql.Stmt, cardID, day, month, cur string) (policy.Amount, policy.Amount, error) {
	var d, m int64
	if err := q.QueryRowContext(ctx, cardID, cur, "d:"+day, "m:"+month).Scan(&d, &m); err != nil {
		return policy.Amount{}, policy.Amount{}, err
	}
	return policy.Amount{Minor: d, Currency: cur}, policy.Amount{Minor: m, Currency: cur}, nil
}

// GetReservation implements owner.Store. Caps are not stored; the
// returned reservation has none.
func (s *Store) GetReservation(ctx context.Context, id string) (policy.Reservation, error) {
	var r policy.Reservation
	err := s.queryRow(ctx, `SELECT id, card_id, day, month, currency, minor FROM ledger WHERE id = ?`, id).
		Scan(&r.ID, &r.CardID, &r.Day, &r.Month, &r.Amount.Currency, &r.Amount.Minor)
	return r, dbErr(err, "read reservation")
}

// Cancel implements policy.Ledger.
func (s *Store) Cancel(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM ledger WHERE id = ?`, id)
	return dbErr(err, "cancel reservation")
}

// Spent implements policy.Ledger.
func (s *Store) Spent(ctx context.Context, cardID, day, month, currency string) (policy.Amount, policy.Amount, error) {
	sp, err := s.prepared(ctx, qSpent)
	if err != nil {
		return policy.Amount{}, policy.Amount{}, dbErr(err, "read spending")
	}
	today, m, err := spent(ctx, sp, cardID, day, month, currency)
	return today, m, dbErr(err, "read spending")
}

// ---- owner accounts and dashboard sessions ----

// PutAccount implements owner.AccountStore.
func (s *Store) PutAccount(ctx context.Context, a owner.Account) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO owner_accounts (email, org, password_hash, created, updated) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (email) DO UPDATE SET org = excluded.org, password_hash = excluded.password_hash, updated = excluded.updated`,
		a.Email, a.Org, a.PasswordHash, nanos(a.Created), nanos(a.Updated))
	return dbErr(err, "store owner account")
}

// GetAccount implements owner.AccountStore.
func (s *Store) GetAccount(ctx context.Context, email string) (owner.Account, error) {
	var a owner.Account
	var created, updated int64
	err := s.db.QueryRowContext(ctx, `SELECT email, org, password_hash, created, updated FROM owner_accounts WHERE email = ?`, email).
		Scan(&a.Email, &a.Org, &a.PasswordHash, &created, &updated)
	if err != nil {
		return owner.Account{}, dbErr(err, "read owner account")
	}
	a.Created, a.Updated = fromNanos(created), fromNanos(updated)
	return a, nil
}

// ListAccounts implements owner.AccountStore.
func (s *Store) ListAccounts(ctx context.Context) ([]owner.Account, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT email, org, created, updated FROM owner_accounts ORDER BY email`)
	return collect(rows, err, "list owner accounts", func(row scanner) (owner.Account, error) {
		var a owner.Account
		var created, updated int64
		if err := row.Scan(&a.Email, &a.Org, &created, &updated); err != nil {
			return owner.Account{}, err
		}
		a.Created, a.Updated = fromNanos(created), fromNanos(updated)
		return a, nil
	})
}

// CountAccounts implements owner.AccountStore.
func (s *Store) CountAccounts(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM owner_accounts`).Scan(&n)
	return n, dbErr(err, "count owner accounts")
}

// PutDashSession implements owner.AccountStore.
func (s *Store) PutDashSession(ctx context.Context, d owner.DashSession) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO dash_sessions (token_hash, email, created, expires) VALUES (?, ?, ?, ?)`,
		d.TokenHash, d.Email, nanos(d.Created), nanos(d.Expires))
	return dbErr(err, "store dashboard session")
}

// GetDashSession implements owner.AccountStore.
func (s *Store) GetDashSession(ctx context.Context, tokenHash []byte) (owner.DashSession, error) {
	var d owner.DashSession
	var created, expires int64
	err := s.db.QueryRowContext(ctx, `SELECT token_hash, email, created, expires FROM dash_sessions WHERE token_hash = ?`, tokenHash).
		Scan(&d.TokenHash, &d.Email, &created, &expires)
	if err != nil {
		return owner.DashSession{}, dbErr(err, "read dashboard session")
	}
	d.Created, d.Expires = fromNanos(created), fromNanos(expires)
	return d, nil
}

// DeleteDashSession implements owner.AccountStore.
func (s *Store) DeleteDashSession(ctx context.Context, tokenHash []byte) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM dash_sessions WHERE token_hash = ?`, tokenHash)
	return dbErr(err, "delete dashboard session")
}

// DeleteDashSessions implements owner.AccountStore.
func (s *Store) DeleteDashSessions(ctx context.Context, email string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM dash_sessions WHERE email = ?`, email)
	return dbErr(err, "delete dashboard sessions")
}

// DeleteExpiredDashSessions implements owner.AccountStore.
func (s *Store) DeleteExpiredDashSessions(ctx context.Context, now time.Time) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM dash_sessions WHERE expires <= ?`, nanos(now))
	return dbErr(err, "delete expired dashboard sessions")
}

// ---- pre-approved signups ----

// AddSignup implements owner.SignupStore.
func (s *Store) AddSignup(ctx context.Context, g owner.Signup) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO signups (org, site, email, added_by, added) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		g.Org, g.Site, g.Email, g.AddedBy, nanos(g.Added))
	return dbErr(err, "add signup")
}

// RemoveSignup implements owner.SignupStore.
func (s *Store) RemoveSignup(ctx context.Context, org, site, email string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM signups WHERE org = ? AND site = ? AND email = ?`, org, site, email)
	return mustAffect(res, err, "remove signup")
}

// ListSignups implements owner.SignupStore.
func (s *Store) ListSignups(ctx context.Context, org string) ([]owner.Signup, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT org, site, email, added_by, added FROM signups WHERE org = ? ORDER BY site, email`, org)
	return collect(rows, err, "list signups", func(row scanner) (owner.Signup, error) {
		var g owner.Signup
		var added int64
		if err := row.Scan(&g.Org, &g.Site, &g.Email, &g.AddedBy, &added); err != nil {
			return owner.Signup{}, err
		}
		g.Added = fromNanos(added)
		return g, nil
	})
}

// ---- refusals ----

// AppendRefusal implements owner.RefusalStore.
func (s *Store) AppendRefusal(ctx context.Context, r owner.Refusal) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO refusals (org, time, api_key_id, session, item_id, kind, field, site, code) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.Org, nanos(r.Time), r.APIKeyID, r.Session, r.ItemID, r.Kind, r.Field, r.Site, r.Code)
	return dbErr(err, "append refusal")
}

// ListRefusals implements owner.RefusalStore.
func (s *Store) ListRefusals(ctx context.Context, org string, since time.Time, limit int) ([]owner.Refusal, error) {
	q := `SELECT seq, org, time, api_key_id, session, item_id, kind, field, site, code FROM refusals WHERE org = ? AND time >= ? ORDER BY seq DESC`
	args := []any{org, nanos(since)}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	return collect(rows, err, "list refusals", func(row scanner) (owner.Refusal, error) {
		var r owner.Refusal
		var t int64
		if err := row.Scan(&r.Seq, &r.Org, &t, &r.APIKeyID, &r.Session, &r.ItemID, &r.Kind, &r.Field, &r.Site, &r.Code); err != nil {
			return owner.Refusal{}, err
		}
		r.Time = fromNanos(t)
		return r, nil
	})
}

var (
	_ owner.Store   = (*Store)(nil)
	_ policy.Ledger = (*Store)(nil)
)
