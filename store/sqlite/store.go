package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/store/internal/groupcommit"
	"github.com/agentvault/agentvault/vault"
	sqlite3 "modernc.org/sqlite"
	sqlite3lib "modernc.org/sqlite/lib"
)

// Store is the SQLite vault.Store (and the owner stores, owner.go). Every
// Store of one process on one file shares a single *sql.DB: see Open.
type Store struct {
	db   *sql.DB
	h    *handle
	once sync.Once
	err  error
	// noGroupCommit writes every audit record in its own transaction
	// (the benchmark's baseline).
	noGroupCommit bool
}

// handle is this process's one database handle on one file.
type handle struct {
	file os.FileInfo // identity (device and inode) of the database file
	db   *sql.DB
	refs int
	// durable is the file's one writer of the records a caller may act on
	// only once they are on disk: audit records (AppendAudit, P12) and
	// spending reservations (Reserve, owner.go, P18). Whatever of both
	// waits at one moment shares one IMMEDIATE transaction and one fsync
	// (group commit): a purchase's authorize and another's release commit
	// together, and no second writer of this process waits on SQLite's
	// write lock behind the first.
	durable *groupcommit.Writer[durableOp, durableResult]
	// wconn is the durable writer's own connection (only its goroutine
	// uses it), and wsync the synchronous level it was last set to.
	wconn *sql.Conn
	wsync int
	// ledger is the writer's copy of the running totals (ledgercache.go).
	ledger ledgerCache
	stmts  stmtCache
	// cache holds the owner state and items purchases re-read, valid for
	// one version of the file (readcache.go).
	cache readCache
}

// handles are this process's open databases. POSIX advisory locks belong
// to the process, and closing any descriptor on a file drops every lock
// the process holds on it (sqlite.org/howtocorrupt.html, section 2.2).
// SQLite copes with several connections of one library in one process, but
// anything that opens and closes the file itself while a connection is
// live (as Open used to, to create it 0600) silently unlocks the
// database: another process (a backup, `sqlite3 vault.db`) then takes the
// exclusive lock when it closes, checkpoints, and unlinks the live WAL,
// and every commit after that goes into a deleted file. So a second Open
// of a file that is already open here shares the live handle instead of
// touching the file, and only the last Close closes it.
var handles struct {
	sync.Mutex
	open []*handle
}

// Pragmas every connection gets (the DSN applies them per connection):
//   - WAL: readers do not block the writer.
//   - synchronous=FULL: in WAL mode NORMAL makes a commit durable only at
//     the next checkpoint, so after a power cut or an OS crash the last
//     commits can roll back. An audit record written before a value went
//     upstream, a ledger entry and a decided approval must survive that
//     too (P12, P18, P22), so every commit fsyncs the WAL. One exception,
//     on the durable writer's own connection (commitDurable): a group
//     commit holding only reservations, none of which lets a value leave
//     by itself, is written at NORMAL; the commit of the audit record that
//     must precede the value's release is FULL, and its fsync of the WAL
//     makes every reservation written before it durable too.
//   - busy_timeout: another process (the owner CLI, a second proxyd
//     replica) holding the write lock makes writers wait, not fail.
//   - foreign keys on; IMMEDIATE write transactions (no deadlocked
//     read-to-write upgrades).
const (
	busyTimeoutMS = 10000
	syncFull      = 2 // PRAGMA synchronous value of FULL
)

const (
	// maxIdleConns covers the readers of 64 concurrent purchases: at 16,
	// the 17th connection in use was closed when handed back and opened
	// again for the next call (5% of a purchase's CPU with 64 buyers).
	maxIdleConns = 64
	connMaxIdle  = time.Minute
)

func dsn(path string) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeoutMS))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// Open opens the database at path (creating it with mode 0600 if needed)
// and applies pending migrations. Within one process every Open of the same
// file (by any path spelling) returns a Store sharing one handle; the file
// is closed when the last of them is closed.
func Open(path string) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "vault database path must be non-empty and hold no '?' or '#'")
	}
	handles.Lock()
	defer handles.Unlock()
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := createPrivate(path); err != nil {
			return nil, err
		}
		if fi, err = os.Stat(path); err != nil {
			return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot open the vault database")
		}
	case err != nil:
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot open the vault database")
	default:
		for _, h := range handles.open {
			if os.SameFile(h.file, fi) {
				h.refs++
				return &Store{db: h.db, h: h}, nil
			}
		}
	}
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot open the vault database")
	}
	// Keep the connections a busy proxy uses open: database/sql keeps 2
	// idle by default, so under a few concurrent purchases most calls
	// opened a new connection (open the file, apply the pragmas, parse the
	// whole schema: 12% of a purchase's CPU) and re-prepared every
	// statement on it. Idle ones close after a while, so memory goes back
	// to what it was after a load (P14).
	db.SetMaxIdleConns(maxIdleConns)
	db.SetConnMaxIdleTime(connMaxIdle)
	s := &Store{db: db}
	if err := s.checkDurability(context.Background()); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.migrate(context.Background()); err != nil {
		db.Close()
		return nil, err
	}
	s.h = &handle{file: fi, db: db, refs: 1}
	if err := s.prepareHot(context.Background()); err != nil {
		s.h.stmts.close()
		db.Close()
		return nil, err
	}
	s.h.durable = groupcommit.New(s.commitDurableOnWriter, maxDurableBatch)
	handles.open = append(handles.open, s.h)
	return s, nil
}

// createPrivate creates a missing database file with mode 0600, so it and
// the -wal and -shm files SQLite derives from it are private from the
// start. O_EXCL: a file that appeared meanwhile (another process) is left
// alone; this process holds no lock on a file it just created.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "cannot create the vault database")
	}
	return f.Close()
}

// checkDurability refuses a database where the pragmas did not take (a
// file system without shared memory cannot do WAL): the store fails
// closed rather than run with weaker guarantees than documented.
func (s *Store) checkDurability(ctx context.Context) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return dbErr(err, "open connection")
	}
	defer conn.Close()
	var mode string
	var syncMode, busy int
	if err := conn.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return dbErr(err, "read journal mode")
	}
	if err := conn.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&syncMode); err != nil {
		return dbErr(err, "read synchronous")
	}
	if err := conn.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy); err != nil {
		return dbErr(err, "read busy timeout")
	}
	if !strings.EqualFold(mode, "wal") || syncMode != syncFull || busy != busyTimeoutMS {
		return agentvault.Errorf(agentvault.CodeInternal, "vault database is not in WAL mode with synchronous=FULL (journal %q, synchronous %d)", mode, syncMode)
	}
	return nil
}

// Close releases this Store. The shared handle is closed, and the file
// with it, when the last Store of the process on this file is closed;
// closing a Store twice is a no-op.
func (s *Store) Close() error {
	s.once.Do(func() {
		handles.Lock()
		defer handles.Unlock()
		if s.h == nil {
			s.err = s.db.Close()
			return
		}
		if s.h.refs--; s.h.refs > 0 {
			return
		}
		handles.open = slices.DeleteFunc(handles.open, func(h *handle) bool { return h == s.h })
		s.h.durable.Close()
		s.h.dropWriterConn()
		s.h.stmts.close()
		s.err = s.db.Close()
	})
	return s.err
}

// SchemaVersion is the highest applied migration.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v)
	return int(v.Int64), dbErr(err, "read schema version")
}

func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied INTEGER NOT NULL)`); err != nil {
		return dbErr(err, "create migrations table")
	}
	all := schema()
	for v := 1; v < len(all); v++ {
		if all[v] == "" {
			continue // a gap below a numbered migration
		}
		err := s.tx(ctx, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, v).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, all[v]); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied) VALUES (?, ?)`, v, time.Now().UnixNano())
			return err
		})
		if err != nil {
			return dbErr(err, fmt.Sprintf("apply migration %d", v))
		}
	}
	return nil
}

// tx runs fn in an IMMEDIATE transaction, committing when fn returns nil.
func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	return commitTx(tx, err, fn)
}

// commitTx runs fn in tx (as BeginTx answered) and commits when fn returns
// nil, else rolls back.
func commitTx(tx *sql.Tx, err error, fn func(*sql.Tx) error) error {
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// readTx runs fn in a deferred read transaction: one consistent snapshot.
func (s *Store) readTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(tx)
}

// dbErr maps driver errors to coded errors. The cause is kept for logs; it
// holds SQL text and constraint names, never row content.
// scanner is a row to scan: a *sql.Row or the current row of *sql.Rows.
type scanner = interface{ Scan(...any) error }

// collect reads every row of a query's answer with scan: the one loop of
// each list query, its errors named by what. It closes rows.
func collect[T any](rows *sql.Rows, err error, what string, scan func(row scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, dbErr(err, what)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, dbErr(err, what)
		}
		out = append(out, v)
	}
	return out, dbErr(rows.Err(), what)
}

func dbErr(err error, op string) error {
	if err == nil {
		return nil
	}
	var ae *agentvault.Error
	if errors.As(err, &ae) {
		return err
	}
	if errors.Is(err, sql.ErrNoRows) {
		return vault.ErrNotFound
	}
	var se *sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3lib.SQLITE_CONSTRAINT_UNIQUE, sqlite3lib.SQLITE_CONSTRAINT_PRIMARYKEY:
			return agentvault.Wrap(agentvault.CodeConflict, err, "vault store: %s: already exists", op)
		}
	}
	return agentvault.Wrap(agentvault.CodeInternal, err, "vault store: %s failed", op)
}

func nanos(t time.Time) int64     { return t.UnixNano() }
func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func requireActiveKey(ctx context.Context, tx *sql.Tx, keyID string) error {
	var state string
	err := tx.QueryRowContext(ctx, `SELECT state FROM keys WHERE id = ?`, keyID).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && state != string(vault.KeyActive)) {
		return agentvault.Errorf(agentvault.CodeConflict, "data key is wrapped under a master key that is not active")
	}
	return err
}

// PutItem implements vault.ItemStore.
func (s *Store) PutItem(ctx context.Context, rec vault.ItemRecord) error {
	if rec.ID == "" || rec.Org == "" || rec.Kind == "" || rec.Label == "" {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "item record needs id, org, kind and label")
	}
	fields, err := json.Marshal(rec.Fields)
	if err != nil {
		return dbErr(err, "encode fields")
	}
	err = s.tx(ctx, func(tx *sql.Tx) error {
		if err := requireActiveKey(ctx, tx, rec.KeyID); err != nil {
			return err
		}
		var org string
		switch err := tx.QueryRowContext(ctx, `SELECT org FROM items WHERE id = ?`, rec.ID).Scan(&org); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case org != rec.Org:
			return agentvault.Errorf(agentvault.CodeConflict, "item id exists in another org")
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM item_values WHERE item_id = ?`, rec.ID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `
INSERT INTO items (id, org, owner, kind, label, created, updated, fields, key_id, wrapped_key, meta)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, kind = excluded.kind, label = excluded.label, created = excluded.created,
	updated = excluded.updated, fields = excluded.fields, key_id = excluded.key_id,
	wrapped_key = excluded.wrapped_key, meta = excluded.meta`,
			rec.ID, rec.Org, rec.Owner, string(rec.Kind), rec.Label, nanos(rec.Created), nanos(rec.Updated),
			string(fields), rec.KeyID, rec.WrappedKey, rec.Meta)
		if err != nil {
			return err
		}
		for f, v := range rec.Values {
			if _, err := tx.ExecContext(ctx, `INSERT INTO item_values (item_id, field, value) VALUES (?, ?, ?)`, rec.ID, string(f), v); err != nil {
				return err
			}
		}
		return nil
	})
	return dbErr(err, "put item")
}

const itemCols = `id, org, owner, kind, label, created, updated, fields, key_id, wrapped_key, meta`

func scanItem(row interface{ Scan(...any) error }) (vault.ItemRecord, error) {
	var (
		rec              vault.ItemRecord
		kind, fields     string
		created, updated int64
	)
	err := row.Scan(&rec.ID, &rec.Org, &rec.Owner, &kind, &rec.Label, &created, &updated, &fields, &rec.KeyID, &rec.WrappedKey, &rec.Meta)
	if err != nil {
		return rec, err
	}
	rec.Kind = vault.Kind(kind)
	rec.Created, rec.Updated = fromNanos(created), fromNanos(updated)
	if err := json.Unmarshal([]byte(fields), &rec.Fields); err != nil {
		return rec, err
	}
	return rec, nil
}

func (s *Store) loadValues(ctx context.Context, tx *sql.Tx, rec *vault.ItemRecord) error {
	rows, err := s.txQuery(ctx, tx, qItemValues, rec.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	rec.Values = map[vault.Field][]byte{}
	for rows.Next() {
		var f string
		var v []byte
		if err := rows.Scan(&f, &v); err != nil {
			return err
		}
		rec.Values[vault.Field(f)] = v
	}
	return rows.Err()
}

// getItem reads one item and its values with one statement (the item's
// columns on each of its value rows): one statement reads one snapshot,
// so the item and its values agree without a transaction around two
// queries (BEGIN, two statements, COMMIT cost a purchase twice over).
func (s *Store) getItem(ctx context.Context, query string, args ...any) (vault.ItemRecord, error) {
	rows, err := s.query(ctx, query, args...)
	if err != nil {
		return vault.ItemRecord{}, dbErr(err, "get item")
	}
	defer rows.Close()
	var (
		rec              vault.ItemRecord
		kind, fields     string
		created, updated int64
		field            sql.NullString
		value            []byte
	)
	n := 0
	for rows.Next() {
		if err := rows.Scan(&rec.ID, &rec.Org, &rec.Owner, &kind, &rec.Label, &created, &updated, &fields, &rec.KeyID,
			&rec.WrappedKey, &rec.Meta, &field, &value); err != nil {
			return vault.ItemRecord{}, dbErr(err, "get item")
		}
		if n == 0 {
			rec.Kind = vault.Kind(kind)
			rec.Created, rec.Updated = fromNanos(created), fromNanos(updated)
			if err := json.Unmarshal([]byte(fields), &rec.Fields); err != nil {
				return vault.ItemRecord{}, dbErr(err, "get item")
			}
			rec.Values = map[vault.Field][]byte{}
		}
		n++
		if field.Valid {
			rec.Values[vault.Field(field.String)] = value
		}
	}
	if err := rows.Err(); err != nil {
		return vault.ItemRecord{}, dbErr(err, "get item")
	}
	if n == 0 {
		return vault.ItemRecord{}, vault.ErrNotFound
	}
	return rec, nil
}

// GetItem implements vault.ItemStore, through the read cache.
func (s *Store) GetItem(ctx context.Context, org, id string) (vault.ItemRecord, error) {
	return cached(ctx, s, cacheKey{kind: cacheItemByID, a: org, b: id}, cloneItem, func() (vault.ItemRecord, error) {
		return s.getItem(ctx, qItemByID, org, id)
	})
}

// GetItemByLabel implements vault.ItemStore, through the read cache.
func (s *Store) GetItemByLabel(ctx context.Context, org string, kind vault.Kind, label string) (vault.ItemRecord, error) {
	return cached(ctx, s, cacheKey{kind: cacheItemByLabel, a: org, b: string(kind), c: label}, cloneItem, func() (vault.ItemRecord, error) {
		return s.getItem(ctx, qItemByLabel, org, string(kind), label)
	})
}

// ListItems implements vault.ItemStore.
func (s *Store) ListItems(ctx context.Context, org string) ([]vault.ItemRecord, error) {
	var out []vault.ItemRecord
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+itemCols+` FROM items WHERE org = ? ORDER BY created, id`, org)
		if out, err = collect(rows, err, "list items", scanItem); err != nil {
			return err
		}
		for i := range out {
			if err := s.loadValues(ctx, tx, &out[i]); err != nil {
				return err
			}
		}
		return nil
	})
	return out, dbErr(err, "list items")
}

// DeleteItem implements vault.ItemStore.
func (s *Store) DeleteItem(ctx context.Context, org, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM items WHERE org = ? AND id = ?`, org, id)
	if err != nil {
		return dbErr(err, "delete item")
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return vault.ErrNotFound
	}
	return nil
}

// NextLabel implements vault.ItemStore.
func (s *Store) NextLabel(ctx context.Context, org string, kind vault.Kind) (int64, error) {
	var n int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `
INSERT INTO label_seq (org, kind, last) VALUES (?, ?, 1)
ON CONFLICT (org, kind) DO UPDATE SET last = last + 1
RETURNING last`, org, string(kind)).Scan(&n)
	})
	return n, dbErr(err, "next label")
}

// maxDurableBatch bounds the records (audit and reservations) of one
// group commit.
const maxDurableBatch = 256

// durableOp is one record for the durable writer: an audit record or a
// reservation (exactly one is set).
type durableOp struct {
	audit *vault.AuditRecord
	resv  *policy.Reservation
}

// durableResult is one record's answer: an audit record's seq, or a
// reservation's refusal (nil: counted).
type durableResult struct {
	seq     int64
	refusal error
}

// durableDo commits op through the file's durable writer (group commit),
// or alone in its own transaction (the benchmarks' baseline).
func (s *Store) durableDo(ctx context.Context, op durableOp) (durableResult, error) {
	if s.noGroupCommit || s.h == nil || s.h.durable == nil {
		rs, err := s.commitDurable(ctx, []durableOp{op})
		if err != nil {
			return durableResult{}, err
		}
		return rs[0], nil
	}
	return s.h.durable.Do(ctx, op)
}

// AppendAudit implements vault.AuditStore with group commit: the record
// joins every other record waiting at that moment (audit records and
// reservations), one writer goroutine inserts them in one IMMEDIATE
// transaction, and each caller returns its own seq only after that
// transaction committed (synchronous=FULL: the WAL is fsynced). One fsync
// serves many releases, and a release still never leaves before its record
// is durable (P12).
func (s *Store) AppendAudit(ctx context.Context, r vault.AuditRecord) (int64, error) {
	res, err := s.durableDo(ctx, durableOp{audit: &r})
	if err != nil {
		return 0, dbErr(err, "append audit")
	}
	return res.seq, nil
}

// AuditCommits reports how many group commits of the durable writer ran on
// this file in this process and how many records (audit records and
// reservations) they held (for metrics and benchmarks).
func (s *Store) AuditCommits() (commits, records int64) {
	if s.h == nil || s.h.durable == nil {
		return 0, 0
	}
	return s.h.durable.Stats()
}

// commitDurable writes ops in one transaction, in order: audit seqs
// increase in the order the callers were taken, and each reservation is
// checked against the totals the ones before it left. A refused
// reservation writes nothing and does not stop the others; any other error
// fails them all (groupcommit then retries each alone).
func (s *Store) commitDurable(ctx context.Context, ops []durableOp) ([]durableResult, error) {
	return s.commitDurableIn(ctx, ops, s.tx, nil)
}

// syncNormal is PRAGMA synchronous's NORMAL.
const syncNormal = 1

// commitDurableOnWriter is commitDurable on the writer goroutine's own
// connection, at the synchronous level the batch needs. A batch holding an
// audit record commits at FULL: the record is on disk before its caller
// returns, and the value it audits leaves only then (P12). A batch of
// reservations alone commits at NORMAL, which in WAL mode writes the WAL
// but does not fsync it: a kill -9 loses nothing (the written pages are
// the kernel's), and an OS crash can lose only reservations no value left
// under since. A reservation lets nothing leave by itself (the broker's
// release of the card comes later, and audits it first), and the WAL is
// one file appended in order, so the FULL commit of that release's audit
// record fsyncs every reservation written before it (P18: the card goes
// out only with its reservation durable). A grant whose reservation an
// OS crash took back is gone with it (after a crash proxyd counts every
// one-purchase grant used), so no card can leave against a lost
// reservation. Checkpoints still fsync at NORMAL.
func (s *Store) commitDurableOnWriter(ctx context.Context, ops []durableOp) ([]durableResult, error) {
	h := s.h
	if h.wconn == nil {
		c, err := s.db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		h.wconn, h.wsync = c, syncFull
	}
	level, reserves := syncNormal, false
	for _, op := range ops {
		if op.audit != nil {
			level = syncFull
		} else {
			reserves = true
		}
	}
	if level != h.wsync {
		if _, err := h.wconn.ExecContext(ctx, `PRAGMA synchronous = `+strconv.Itoa(level)); err != nil {
			h.dropWriterConn()
			return nil, err
		}
		h.wsync = level
	}
	out, err := s.commitDurableIn(ctx, ops, func(ctx context.Context, fn func(*sql.Tx) error) error {
		tx, err := h.wconn.BeginTx(ctx, nil)
		if err == nil && reserves {
			if err = h.ledger.begin(ctx, s, tx); err != nil {
				_ = tx.Rollback()
			}
		}
		return commitTx(tx, err, fn)
	}, &h.ledger)
	if err != nil {
		// Whatever state the connection is in, the next batch gets a new one.
		h.dropWriterConn()
	}
	return out, err
}

// dropWriterConn discards the writer's connection: closed, never handed
// back to the pool, where another writer could find it at NORMAL.
func (h *handle) dropWriterConn() {
	if h.wconn == nil {
		return
	}
	_ = h.wconn.Raw(func(any) error { return driver.ErrBadConn })
	_ = h.wconn.Close()
	h.wconn = nil
	h.ledger.drop()
}

// commitDurableIn is commitDurable's body, in a transaction that inTx runs;
// lc (nil: none) holds the totals the writer's transactions left.
func (s *Store) commitDurableIn(ctx context.Context, ops []durableOp, inTx func(context.Context, func(*sql.Tx) error) error, lc *ledgerCache) ([]durableResult, error) {
	out := make([]durableResult, len(ops))
	err := inTx(ctx, func(tx *sql.Tx) error {
		var put *sql.Stmt
		for i, op := range ops {
			if op.resv != nil {
				err := s.reserveIn(ctx, tx, *op.resv, lc)
				var ae *agentvault.Error
				if errors.As(err, &ae) {
					out[i].refusal = err
					continue
				}
				if err != nil {
					return err
				}
				continue
			}
			if put == nil {
				var err error
				if put, err = s.txStmt(ctx, tx, qAuditPut); err != nil {
					return err
				}
			}
			r := op.audit
			res, err := put.ExecContext(ctx, nanos(r.Time), r.Action, r.Org, r.ItemID, string(r.Kind), string(r.Field),
				r.Destination, r.Session, r.Actor, r.Purpose, r.ValueHMAC)
			if err != nil {
				return err
			}
			if out[i].seq, err = res.LastInsertId(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// QueryAudit implements vault.AuditStore.
func (s *Store) QueryAudit(ctx context.Context, f vault.AuditFilter) ([]vault.AuditRecord, error) {
	var where []string
	var args []any
	add := func(cond string, v any) { where = append(where, cond); args = append(args, v) }
	if f.Org != "" {
		add("org = ?", f.Org)
	}
	if f.ItemID != "" {
		add("item_id = ?", f.ItemID)
	}
	if f.Session != "" {
		add("session = ?", f.Session)
	}
	if f.Action != "" {
		add("action = ?", f.Action)
	}
	if !f.Since.IsZero() {
		add("time >= ?", nanos(f.Since))
	}
	if !f.Until.IsZero() {
		add("time < ?", nanos(f.Until))
	}
	if f.AfterSeq > 0 {
		add("seq > ?", f.AfterSeq)
	}
	q := `SELECT seq, time, action, org, item_id, kind, field, destination, session, actor, purpose, value_hmac FROM audit`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY seq"
	if f.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	return collect(rows, err, "query audit", func(row scanner) (vault.AuditRecord, error) {
		var r vault.AuditRecord
		var t int64
		var kind, field string
		if err := row.Scan(&r.Seq, &t, &r.Action, &r.Org, &r.ItemID, &kind, &field, &r.Destination, &r.Session, &r.Actor, &r.Purpose, &r.ValueHMAC); err != nil {
			return vault.AuditRecord{}, err
		}
		r.Time, r.Kind, r.Field = fromNanos(t), vault.Kind(kind), vault.Field(field)
		return r, nil
	})
}

// PutBlob implements vault.BlobStore.
func (s *Store) PutBlob(ctx context.Context, b vault.BlobRecord) error {
	if b.Name == "" {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "blob needs a name")
	}
	q := `INSERT INTO blobs (name, key_id, wrapped_key, data, updated) VALUES (?, ?, ?, ?, ?)`
	if !b.CreateOnly {
		q += ` ON CONFLICT (name) DO UPDATE SET key_id = excluded.key_id, wrapped_key = excluded.wrapped_key,
	data = excluded.data, updated = excluded.updated`
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if err := requireActiveKey(ctx, tx, b.KeyID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, q, b.Name, b.KeyID, b.WrappedKey, b.Data, nanos(b.Updated))
		return err
	})
	return dbErr(err, "put blob")
}

// GetBlob implements vault.BlobStore.
func (s *Store) GetBlob(ctx context.Context, name string) (vault.BlobRecord, error) {
	b := vault.BlobRecord{Name: name}
	var t int64
	err := s.db.QueryRowContext(ctx, `SELECT key_id, wrapped_key, data, updated FROM blobs WHERE name = ?`, name).
		Scan(&b.KeyID, &b.WrappedKey, &b.Data, &t)
	b.Updated = fromNanos(t)
	return b, dbErr(err, "get blob")
}

// DeleteBlob implements vault.BlobStore.
func (s *Store) DeleteBlob(ctx context.Context, name string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM blobs WHERE name = ?`, name)
	if err != nil {
		return dbErr(err, "delete blob")
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return vault.ErrNotFound
	}
	return nil
}

// Keys implements vault.KeyStore.
func (s *Store) Keys(ctx context.Context) ([]vault.KeyRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, state, check_value, created FROM keys ORDER BY created, id`)
	return collect(rows, err, "list keys", func(row scanner) (vault.KeyRecord, error) {
		var k vault.KeyRecord
		var state string
		var t int64
		if err := row.Scan(&k.ID, &state, &k.Check, &t); err != nil {
			return vault.KeyRecord{}, err
		}
		k.State, k.Created = vault.KeyState(state), fromNanos(t)
		return k, nil
	})
}

// AddKey implements vault.KeyStore.
func (s *Store) AddKey(ctx context.Context, k vault.KeyRecord) error {
	if k.ID == "" || k.State != vault.KeyActive {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "the first key must have an id and be active")
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM keys WHERE state = 'active'`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return agentvault.Errorf(agentvault.CodeConflict, "the store already has an active master key; rotate instead")
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO keys (id, state, check_value, created) VALUES (?, ?, ?, ?)`,
			k.ID, string(k.State), k.Check, nanos(k.Created))
		return err
	})
	return dbErr(err, "add key")
}

// Rotate implements vault.KeyStore.
func (s *Store) Rotate(ctx context.Context, a vault.RotateArgs) error {
	if a.NewKey.ID == "" || a.Rewrap == nil {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "rotation needs a new key and a rewrap function")
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO keys (id, state, check_value, created) VALUES (?, 'retired', ?, ?)`,
			a.NewKey.ID, a.NewKey.Check, nanos(a.NewKey.Created)); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT id, org, key_id, wrapped_key FROM items WHERE key_id <> ?`, a.NewKey.ID)
		todo, err := collect(rows, err, "rotate key", func(row scanner) (vault.WrappedKey, error) {
			w := vault.WrappedKey{Owner: "item"}
			err := row.Scan(&w.ID, &w.Org, &w.KeyID, &w.Wrapped)
			return w, err
		})
		if err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, `SELECT name, key_id, wrapped_key FROM blobs WHERE key_id <> ?`, a.NewKey.ID)
		blobs, err := collect(rows, err, "rotate key", func(row scanner) (vault.WrappedKey, error) {
			w := vault.WrappedKey{Owner: "blob"}
			err := row.Scan(&w.ID, &w.KeyID, &w.Wrapped)
			return w, err
		})
		if err != nil {
			return err
		}
		todo = append(todo, blobs...)
		for _, w := range todo {
			nw, err := a.Rewrap(w)
			if err != nil {
				return err
			}
			q := `UPDATE items SET key_id = ?, wrapped_key = ? WHERE id = ?`
			if w.Owner == "blob" {
				q = `UPDATE blobs SET key_id = ?, wrapped_key = ? WHERE name = ?`
			}
			if _, err := tx.ExecContext(ctx, q, a.NewKey.ID, nw, w.ID); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE keys SET state = CASE WHEN id = ? THEN 'active' ELSE 'retired' END`, a.NewKey.ID); err != nil {
			return err
		}
		return nil
	})
	return dbErr(err, "rotate key")
}

var _ vault.Store = (*Store)(nil)
