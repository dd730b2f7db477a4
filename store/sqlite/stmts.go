package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache holds a handle's prepared statements by query text. Parsing
// and planning a statement cost a fifth of a purchase's CPU when every
// call prepared its own (database/sql's QueryRow on a *sql.DB prepares,
// runs and finalizes). A *sql.Stmt is prepared once per pooled connection
// and kept; tx.StmtContext reuses the copy of the transaction's connection.
// Only fixed query texts go in (never one built from input), so the cache
// stays as small as the list of queries.
type stmtCache struct {
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

// The queries of a purchase (authorize, release, audit), prepared when the
// file is opened, on the connection Open used: a statement prepared later
// from inside a transaction would take (open) a second connection to do it.
const (
	// An item with its values, a row per value (one row of NULLs for an
	// item with none): see getItem.
	qItemByID = `SELECT ` + itemCols + `, item_values.field, item_values.value FROM items
LEFT JOIN item_values ON item_values.item_id = items.id WHERE items.org = ? AND items.id = ?`
	qItemByLabel = `SELECT ` + itemCols + `, item_values.field, item_values.value FROM items
LEFT JOIN item_values ON item_values.item_id = items.id WHERE items.org = ? AND items.kind = ? AND items.label = ?`
	qItemValues = `SELECT field, value FROM item_values WHERE item_id = ?`
	qAuditPut   = `
INSERT INTO audit (time, action, org, item_id, kind, field, destination, session, actor, purpose, value_hmac)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

var hotQueries = []string{qItemByID, qItemByLabel, qItemValues, qAuditPut, qLedgerEntry, qLedgerPut, qSpent, qDataVersion, qStoreVersion,
	qAPIKey, qCardPolicy, qDestinations}

// prepareHot fills the cache with hotQueries.
func (s *Store) prepareHot(ctx context.Context) error {
	for _, q := range hotQueries {
		if _, err := s.prepared(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// prepared returns the cached statement for q, preparing it on the pool
// if needed. Not for use inside a transaction (see txStmt). The cache's
// lock is never held while the pool is asked for a connection: a caller
// waiting for one with the lock held would stall every transaction that
// needs the lock to go on and give its connection back (txStmt), a
// deadlock once the pool is bounded and busy. Two callers preparing the
// same query keep the first statement and close the second.
func (s *Store) prepared(ctx context.Context, q string) (*sql.Stmt, error) {
	c := &s.h.stmts
	c.mu.Lock()
	st, ok := c.m[q]
	c.mu.Unlock()
	if ok {
		return st, nil
	}
	st, err := s.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if first, ok := c.m[q]; ok {
		st.Close()
		return first, nil
	}
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	c.m[q] = st
	return st, nil
}

// txStmt is q for tx: the transaction's connection's copy of the cached
// statement, or, for a query not cached, one prepared on that connection
// for the transaction alone (closed with it).
func (s *Store) txStmt(ctx context.Context, tx *sql.Tx, q string) (*sql.Stmt, error) {
	c := &s.h.stmts
	c.mu.Lock()
	st, ok := c.m[q]
	c.mu.Unlock()
	if ok {
		return tx.StmtContext(ctx, st), nil
	}
	return tx.PrepareContext(ctx, q)
}

// close finalizes every cached statement (the handle is closing).
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = nil
}

// queryRow is s.db.QueryRowContext through the statement cache.
func (s *Store) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	st, err := s.prepared(ctx, q)
	if err != nil {
		return s.db.QueryRowContext(ctx, q, args...) // carries the same error
	}
	return st.QueryRowContext(ctx, args...)
}

// query is s.db.QueryContext through the statement cache.
func (s *Store) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := s.prepared(ctx, q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// txQueryRow is tx.QueryRowContext through the statement cache.
func (s *Store) txQueryRow(ctx context.Context, tx *sql.Tx, q string, args ...any) *sql.Row {
	st, err := s.txStmt(ctx, tx, q)
	if err != nil {
		return tx.QueryRowContext(ctx, q, args...) // carries the same error
	}
	return st.QueryRowContext(ctx, args...)
}

// txQuery is tx.QueryContext through the statement cache.
func (s *Store) txQuery(ctx context.Context, tx *sql.Tx, q string, args ...any) (*sql.Rows, error) {
	st, err := s.txStmt(ctx, tx, q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}
