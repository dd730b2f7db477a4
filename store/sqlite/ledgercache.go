package sqlite

import (
	"context"
	"database/sql"
)

// qDataVersion is SQLite's count of commits by other connections, as the
// connection that runs it sees them: it changes when any other connection
// (of this process or another) committed since the last time it was read,
// and never for this connection's own commits.
const qDataVersion = `PRAGMA data_version`

// maxLedgerTotals bounds ledgerCache: when full it is emptied.
const maxLedgerTotals = 4096

// ledgerCache is the durable writer's copy of the running totals
// (ledger_totals) it read or wrote in its own transactions, so a batch of
// reservations on one card reads them once, not once per reservation. It
// is exact only while no other connection has committed since: every
// transaction holding a reservation reads the writer connection's
// PRAGMA data_version right after BEGIN IMMEDIATE (the write lock is held
// from then on, so nobody else can commit until this transaction ends)
// and empties the cache when the number moved. A transaction that fails
// empties it too (its additions were rolled back), and so does a new
// writer connection (its data_version counts from another start). Only the
// writer goroutine uses it.
type ledgerCache struct {
	version int64
	valid   bool
	totals  map[ledgerKey]int64 // minor units
}

// ledgerKey is one row of ledger_totals.
type ledgerKey struct{ card, currency, period string }

// begin makes the cache exact for tx, the writer's new transaction.
func (c *ledgerCache) begin(ctx context.Context, s *Store, tx *sql.Tx) error {
	st, err := s.txStmt(ctx, tx, qDataVersion)
	if err != nil {
		return err
	}
	var v int64
	if err := st.QueryRowContext(ctx).Scan(&v); err != nil {
		return err
	}
	if !c.valid || v != c.version || len(c.totals) >= maxLedgerTotals {
		c.totals = map[ledgerKey]int64{}
	}
	c.version, c.valid = v, true
	return nil
}

// drop forgets everything: the next transaction reads the totals again.
func (c *ledgerCache) drop() { c.valid, c.totals = false, nil }

// get returns the day's and month's totals it holds, if it holds both.
func (c *ledgerCache) get(card, currency, day, month string) (int64, int64, bool) {
	if c == nil || !c.valid {
		return 0, 0, false
	}
	d, ok1 := c.totals[ledgerKey{card, currency, "d:" + day}]
	m, ok2 := c.totals[ledgerKey{card, currency, "m:" + month}]
	return d, m, ok1 && ok2
}

// set records the totals read from the file.
func (c *ledgerCache) set(card, currency, day, month string, d, m int64) {
	if c == nil || !c.valid {
		return
	}
	c.totals[ledgerKey{card, currency, "d:" + day}] = d
	c.totals[ledgerKey{card, currency, "m:" + month}] = m
}

// add records an entry the transaction wrote (the insert trigger's work).
func (c *ledgerCache) add(card, currency, day, month string, minor int64) {
	if c == nil || !c.valid {
		return
	}
	c.totals[ledgerKey{card, currency, "d:" + day}] += minor
	c.totals[ledgerKey{card, currency, "m:" + month}] += minor
}
