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
// stays as small as the list of hot queries.
type stmtCache struct {
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

// prepared returns the statement for q on this file's handle.
func (s *Store) prepared(ctx context.Context, q string) (*sql.Stmt, error) {
	c := &s.h.stmts
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[q]; ok {
		return st, nil
	}
	st, err := s.db.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	c.m[q] = st
	return st, nil
}

// txStmt is q prepared for tx (its connection's copy of the cached one).
func (s *Store) txStmt(ctx context.Context, tx *sql.Tx, q string) (*sql.Stmt, error) {
	st, err := s.prepared(ctx, q)
	if err != nil {
		return nil, err
	}
	return tx.StmtContext(ctx, st), nil
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
