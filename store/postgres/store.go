package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/store/internal/groupcommit"
	"github.com/agentvault/agentvault/vault"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is the Postgres vault.Store, owner.Store and policy.Ledger over one
// connection pool. A process opens one and hands it to the vault, the
// owner service and the ledger alike.
type Store struct {
	pool  *pgxpool.Pool
	audit *groupcommit.Writer[vault.AuditRecord, int64]
	// ledger batches concurrent reservations the same way (owner.go).
	ledger *groupcommit.Writer[policy.Reservation, error]
	once   sync.Once
	// noGroupCommit sends every audit record (and reservation) in its own transaction,
	// relying on Postgres sharing WAL flushes between concurrent commits
	// (the benchmark's baseline).
	noGroupCommit bool
}

// maxAuditBatch bounds the records of one audit group commit, and
// maxLedgerBatch the reservations of one ledger group commit.
const (
	maxAuditBatch  = 256
	maxLedgerBatch = 256
)

// ValidateDSN checks that dsn parses as a Postgres connection string
// (URL or key=value). Its error never repeats the DSN, which may hold a
// password.
func ValidateDSN(dsn string) error {
	if strings.TrimSpace(dsn) == "" {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "the Postgres DSN is empty")
	}
	if _, err := pgxpool.ParseConfig(dsn); err != nil {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "the Postgres DSN does not parse (postgres://user@host/db?... or key=value pairs)")
	}
	return nil
}

// Open connects to the database dsn names, checks that it is durable and
// applies pending migrations. The DSN may carry pgx pool settings
// (pool_max_conns) and runtime parameters (search_path).
func Open(ctx context.Context, dsn string) (*Store, error) {
	if err := ValidateDSN(dsn); err != nil {
		return nil, err
	}
	cfg, _ := pgxpool.ParseConfig(dsn)
	cfg.AfterConnect = checkDurability
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, connErr(err)
	}
	s := &Store{pool: pool}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, connErr(err)
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	s.audit = groupcommit.New(s.commitAudit, maxAuditBatch)
	s.ledger = groupcommit.New(s.commitReservations, maxLedgerBatch)
	return s, nil
}

// connErr reports a failed connection with the reason the network or the
// server gave ("connection refused", "password authentication failed for
// user ..."), never the DSN; the caller names the store (Describe). The
// cause stays for logs only.
func connErr(err error) error {
	var ae *agentvault.Error
	if errors.As(err, &ae) {
		return err
	}
	if r := connReason(err); r != "" {
		return agentvault.Wrap(agentvault.CodeInternal, err, "cannot connect to the Postgres store: %s", r)
	}
	return agentvault.Wrap(agentvault.CodeInternal, err, "cannot connect to the Postgres store")
}

// checkDurability refuses a connection whose server would acknowledge a
// commit before it is on disk: the store fails closed rather than run
// with weaker guarantees than documented (an audit record, a ledger entry
// and a decided approval must survive a crash: P12, P18, P22).
// synchronous_commit local, remote_write, on and remote_apply all flush
// the local WAL before acknowledging; off does not.
func checkDurability(ctx context.Context, c *pgx.Conn) error {
	var fsync, syncCommit string
	if err := c.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_commit')`).Scan(&fsync, &syncCommit); err != nil {
		return err
	}
	return durable(fsync, syncCommit)
}

// durable is the store's durability rule over the server's fsync and
// synchronous_commit settings (checkDurability at every connection,
// Health.Durable for proxyd doctor).
func durable(fsync, syncCommit string) error {
	if fsync != "on" || syncCommit == "off" {
		return agentvault.Errorf(agentvault.CodeInternal, "the Postgres store needs fsync on and synchronous_commit not off (fsync %q, synchronous_commit %q)", fsync, syncCommit)
	}
	return nil
}

// Close stops the audit writer and closes the pool; a second Close is a
// no-op.
func (s *Store) Close() error {
	s.once.Do(func() {
		if s.audit != nil {
			s.audit.Close()
		}
		if s.ledger != nil {
			s.ledger.Close()
		}
		s.pool.Close()
	})
	return nil
}

// SchemaVersion is the highest applied migration.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v *int64
	err := s.pool.QueryRow(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v)
	if v == nil {
		return 0, dbErr(err, "read schema version")
	}
	return int(*v), dbErr(err, "read schema version")
}

// migrateLock names the advisory lock migrations run under, per schema:
// replicas starting together apply each migration once.
const migrateLock = `SELECT pg_advisory_xact_lock(hashtextextended('agentvault-migrate:' || current_schema(), 0))`

func (s *Store) migrate(ctx context.Context) error {
	// A replica starting on a migrated database takes no lock.
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return dbErr(err, "read schema version")
	}
	if exists {
		if v, err := s.SchemaVersion(ctx); err == nil && v == LatestSchemaVersion() {
			return nil
		}
	}
	for v := 1; v < len(migrations); v++ {
		err := s.tx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, migrateLock); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, applied bigint NOT NULL)`); err != nil {
				return err
			}
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM schema_migrations WHERE version = $1`, v).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, applied) VALUES ($1, $2)`, v, time.Now().UnixNano())
			return err
		})
		if err != nil {
			return dbErr(err, fmt.Sprintf("apply migration %d", v))
		}
	}
	return nil
}

// tx runs fn in a read-committed transaction, committing when fn returns
// nil. Writers that check then write take an explicit lock first.
func (s *Store) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, fn)
}

// readTx runs fn in a read-only repeatable-read transaction: one
// consistent snapshot.
func (s *Store) readTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

// lockKey takes a transaction-scoped advisory lock on name (a card, a
// dedupe key): concurrent transactions, in this process or another,
// touching the same name run one after the other. Unrelated names that
// hash alike only wait for each other.
func lockKey(ctx context.Context, tx pgx.Tx, name string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, name)
	return err
}

// dbErr maps driver errors to coded errors. The cause is kept for logs; it
// holds SQL text and constraint names, never row content.
func dbErr(err error, op string) error {
	if err == nil {
		return nil
	}
	var ae *agentvault.Error
	if errors.As(err, &ae) {
		return err
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return vault.ErrNotFound
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" { // unique_violation
		return agentvault.Wrap(agentvault.CodeConflict, err, "vault store: %s: already exists", op)
	}
	return agentvault.Wrap(agentvault.CodeInternal, err, "vault store: %s failed", op)
}

func nanos(t time.Time) int64     { return t.UnixNano() }
func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// requireActiveKey holds a share lock on the key row until the
// transaction ends: Rotate (which locks the keys table) waits for this
// writer, or this writer sees the key retired.
func requireActiveKey(ctx context.Context, tx pgx.Tx, keyID string) error {
	var state string
	err := tx.QueryRow(ctx, `SELECT state FROM keys WHERE id = $1 FOR SHARE`, keyID).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && state != string(vault.KeyActive)) {
		return agentvault.Errorf(agentvault.CodeConflict, "data key is wrapped under a master key that is not active")
	}
	return err
}

// lockKeys serialises key changes against every writer of wrapped keys
// (EXCLUSIVE conflicts with the row share locks requireActiveKey takes).
func lockKeys(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `LOCK TABLE keys IN EXCLUSIVE MODE`)
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
	err = s.tx(ctx, func(tx pgx.Tx) error {
		if err := requireActiveKey(ctx, tx, rec.KeyID); err != nil {
			return err
		}
		// The upsert locks the item row, so concurrent puts of one id
		// replace each other whole; an id of another org is not touched.
		var id string
		err := tx.QueryRow(ctx, `
INSERT INTO items (id, org, owner, kind, label, created, updated, fields, key_id, wrapped_key, meta)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, kind = excluded.kind, label = excluded.label, created = excluded.created,
	updated = excluded.updated, fields = excluded.fields, key_id = excluded.key_id,
	wrapped_key = excluded.wrapped_key, meta = excluded.meta
WHERE items.org = excluded.org
RETURNING id`,
			rec.ID, rec.Org, rec.Owner, string(rec.Kind), rec.Label, nanos(rec.Created), nanos(rec.Updated),
			string(fields), rec.KeyID, rec.WrappedKey, rec.Meta).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return agentvault.Errorf(agentvault.CodeConflict, "item id exists in another org")
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM item_values WHERE item_id = $1`, rec.ID); err != nil {
			return err
		}
		for f, v := range rec.Values {
			if _, err := tx.Exec(ctx, `INSERT INTO item_values (item_id, field, value) VALUES ($1, $2, $3)`, rec.ID, string(f), v); err != nil {
				return err
			}
		}
		return nil
	})
	return dbErr(err, "put item")
}

const itemCols = `id, org, owner, kind, label, created, updated, fields, key_id, wrapped_key, meta`

func scanItem(row pgx.Row) (vault.ItemRecord, error) {
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

func loadValues(ctx context.Context, tx pgx.Tx, rec *vault.ItemRecord) error {
	rows, err := tx.Query(ctx, `SELECT field, value FROM item_values WHERE item_id = $1`, rec.ID)
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

func (s *Store) getItem(ctx context.Context, query string, args ...any) (vault.ItemRecord, error) {
	var rec vault.ItemRecord
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		var err error
		if rec, err = scanItem(tx.QueryRow(ctx, query, args...)); err != nil {
			return err
		}
		return loadValues(ctx, tx, &rec)
	})
	return rec, dbErr(err, "get item")
}

// GetItem implements vault.ItemStore.
func (s *Store) GetItem(ctx context.Context, org, id string) (vault.ItemRecord, error) {
	return s.getItem(ctx, `SELECT `+itemCols+` FROM items WHERE org = $1 AND id = $2`, org, id)
}

// GetItemByLabel implements vault.ItemStore.
func (s *Store) GetItemByLabel(ctx context.Context, org string, kind vault.Kind, label string) (vault.ItemRecord, error) {
	return s.getItem(ctx, `SELECT `+itemCols+` FROM items WHERE org = $1 AND kind = $2 AND label = $3`, org, string(kind), label)
}

// ListItems implements vault.ItemStore.
func (s *Store) ListItems(ctx context.Context, org string) ([]vault.ItemRecord, error) {
	var out []vault.ItemRecord
	err := s.readTx(ctx, func(tx pgx.Tx) error {
		out = nil
		rows, err := tx.Query(ctx, `SELECT `+itemCols+` FROM items WHERE org = $1 ORDER BY created, id`, org)
		if out, err = collect(rows, err, scanItem); err != nil {
			return err
		}
		for i := range out {
			if err := loadValues(ctx, tx, &out[i]); err != nil {
				return err
			}
		}
		return nil
	})
	return out, dbErr(err, "list items")
}

// DeleteItem implements vault.ItemStore.
func (s *Store) DeleteItem(ctx context.Context, org, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM items WHERE org = $1 AND id = $2`, org, id)
	if err != nil {
		return dbErr(err, "delete item")
	}
	if tag.RowsAffected() == 0 {
		return vault.ErrNotFound
	}
	return nil
}

// NextLabel implements vault.ItemStore. The upsert is atomic: concurrent
// callers, in any process, get distinct numbers.
func (s *Store) NextLabel(ctx context.Context, org string, kind vault.Kind) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `
INSERT INTO label_seq (org, kind, last) VALUES ($1, $2, 1)
ON CONFLICT (org, kind) DO UPDATE SET last = label_seq.last + 1
RETURNING last`, org, string(kind)).Scan(&n)
	return n, dbErr(err, "next label")
}

// AppendAudit implements vault.AuditStore with group commit: the record
// joins every other record waiting at that moment, one writer goroutine
// inserts them in one transaction, and each caller returns its own seq only
// after that transaction committed (fsync on, synchronous_commit not off:
// durable). A release never leaves before its record is durable (P12).
//
// Within a process seqs increase in the order callers are taken. Replicas
// appending at the same moment draw from one identity sequence, so seqs are
// unique and increase per replica, but a reader paging by AfterSeq may see
// a lower seq commit after a higher one from another replica.
func (s *Store) AppendAudit(ctx context.Context, r vault.AuditRecord) (int64, error) {
	if s.noGroupCommit {
		seqs, err := s.commitAudit(ctx, []vault.AuditRecord{r})
		if err != nil {
			return 0, err
		}
		return seqs[0], nil
	}
	seq, err := s.audit.Do(ctx, r)
	return seq, dbErr(err, "append audit")
}

// AuditCommits reports how many audit group commits this store ran and
// how many records they held (for metrics and benchmarks).
func (s *Store) AuditCommits() (commits, records int64) { return s.audit.Stats() }

const insertAudit = `
INSERT INTO audit (time, action, org, item_id, kind, field, destination, session, actor, purpose, value_hmac)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING seq`

func auditArgs(r vault.AuditRecord) []any {
	return []any{nanos(r.Time), r.Action, r.Org, r.ItemID, string(r.Kind), string(r.Field),
		r.Destination, r.Session, r.Actor, r.Purpose, r.ValueHMAC}
}

// commitAudit inserts records in one transaction (the inserts pipelined in
// one round trip), in order.
func (s *Store) commitAudit(ctx context.Context, recs []vault.AuditRecord) ([]int64, error) {
	seqs := make([]int64, len(recs))
	if len(recs) == 1 {
		// One statement is its own transaction: one round trip.
		for i, r := range recs {
			if err := s.pool.QueryRow(ctx, insertAudit, auditArgs(r)...).Scan(&seqs[i]); err != nil {
				return nil, dbErr(err, "append audit")
			}
		}
		return seqs, nil
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for _, r := range recs {
			b.Queue(insertAudit, auditArgs(r)...)
		}
		br := tx.SendBatch(ctx, b)
		for i := range recs {
			if err := br.QueryRow().Scan(&seqs[i]); err != nil {
				br.Close()
				return err
			}
		}
		return br.Close()
	})
	if err != nil {
		return nil, dbErr(err, "append audit")
	}
	return seqs, nil
}

// QueryAudit implements vault.AuditStore.
func (s *Store) QueryAudit(ctx context.Context, f vault.AuditFilter) ([]vault.AuditRecord, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.Org != "" {
		add("org = $%d", f.Org)
	}
	if f.ItemID != "" {
		add("item_id = $%d", f.ItemID)
	}
	if f.Session != "" {
		add("session = $%d", f.Session)
	}
	if f.Action != "" {
		add("action = $%d", f.Action)
	}
	if !f.Since.IsZero() {
		add("time >= $%d", nanos(f.Since))
	}
	if !f.Until.IsZero() {
		add("time < $%d", nanos(f.Until))
	}
	if f.AfterSeq > 0 {
		add("seq > $%d", f.AfterSeq)
	}
	q := `SELECT seq, time, action, org, item_id, kind, field, destination, session, actor, purpose, value_hmac FROM audit`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY seq"
	if f.Limit > 0 {
		args = append(args, f.Limit)
		q += fmt.Sprintf(" LIMIT $%d", len(args))
	}
	rows, err := s.pool.Query(ctx, q, args...)
	out, err := collect(rows, err, func(row pgx.Row) (vault.AuditRecord, error) {
		var r vault.AuditRecord
		var t int64
		var kind, field string
		if err := row.Scan(&r.Seq, &t, &r.Action, &r.Org, &r.ItemID, &kind, &field, &r.Destination, &r.Session, &r.Actor, &r.Purpose, &r.ValueHMAC); err != nil {
			return vault.AuditRecord{}, err
		}
		r.Time, r.Kind, r.Field = fromNanos(t), vault.Kind(kind), vault.Field(field)
		return r, nil
	})
	return out, dbErr(err, "query audit")
}

// PutBlob implements vault.BlobStore.
func (s *Store) PutBlob(ctx context.Context, b vault.BlobRecord) error {
	if b.Name == "" {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "blob needs a name")
	}
	q := `INSERT INTO blobs (name, key_id, wrapped_key, data, updated) VALUES ($1, $2, $3, $4, $5)`
	if !b.CreateOnly {
		q += ` ON CONFLICT (name) DO UPDATE SET key_id = excluded.key_id, wrapped_key = excluded.wrapped_key,
	data = excluded.data, updated = excluded.updated`
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := requireActiveKey(ctx, tx, b.KeyID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, q, b.Name, b.KeyID, b.WrappedKey, b.Data, nanos(b.Updated))
		return err
	})
	return dbErr(err, "put blob")
}

// GetBlob implements vault.BlobStore.
func (s *Store) GetBlob(ctx context.Context, name string) (vault.BlobRecord, error) {
	b := vault.BlobRecord{Name: name}
	var t int64
	err := s.pool.QueryRow(ctx, `SELECT key_id, wrapped_key, data, updated FROM blobs WHERE name = $1`, name).
		Scan(&b.KeyID, &b.WrappedKey, &b.Data, &t)
	b.Updated = fromNanos(t)
	return b, dbErr(err, "get blob")
}

// DeleteBlob implements vault.BlobStore.
func (s *Store) DeleteBlob(ctx context.Context, name string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM blobs WHERE name = $1`, name)
	if err != nil {
		return dbErr(err, "delete blob")
	}
	if tag.RowsAffected() == 0 {
		return vault.ErrNotFound
	}
	return nil
}

// Keys implements vault.KeyStore.
func (s *Store) Keys(ctx context.Context) ([]vault.KeyRecord, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, state, check_value, created FROM keys ORDER BY created, id`)
	out, err := collect(rows, err, func(row pgx.Row) (vault.KeyRecord, error) {
		var k vault.KeyRecord
		var state string
		var t int64
		if err := row.Scan(&k.ID, &state, &k.Check, &t); err != nil {
			return vault.KeyRecord{}, err
		}
		k.State, k.Created = vault.KeyState(state), fromNanos(t)
		return k, nil
	})
	return out, dbErr(err, "list keys")
}

// AddKey implements vault.KeyStore.
func (s *Store) AddKey(ctx context.Context, k vault.KeyRecord) error {
	if k.ID == "" || k.State != vault.KeyActive {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "the first key must have an id and be active")
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := lockKeys(ctx, tx); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM keys WHERE state = 'active'`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return agentvault.Errorf(agentvault.CodeConflict, "the store already has an active master key; rotate instead")
		}
		_, err := tx.Exec(ctx, `INSERT INTO keys (id, state, check_value, created) VALUES ($1, $2, $3, $4)`,
			k.ID, string(k.State), k.Check, nanos(k.Created))
		return err
	})
	return dbErr(err, "add key")
}

// Rotate implements vault.KeyStore. The keys table lock waits for every
// writer holding an active key (requireActiveKey) and keeps new ones out
// until the rotation committed: nothing is left wrapped under a key the
// rotation retires.
func (s *Store) Rotate(ctx context.Context, a vault.RotateArgs) error {
	if a.NewKey.ID == "" || a.Rewrap == nil {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "rotation needs a new key and a rewrap function")
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := lockKeys(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO keys (id, state, check_value, created) VALUES ($1, 'retired', $2, $3)`,
			a.NewKey.ID, a.NewKey.Check, nanos(a.NewKey.Created)); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT id, org, key_id, wrapped_key FROM items WHERE key_id <> $1`, a.NewKey.ID)
		todo, err := collect(rows, err, func(row pgx.Row) (vault.WrappedKey, error) {
			w := vault.WrappedKey{Owner: "item"}
			err := row.Scan(&w.ID, &w.Org, &w.KeyID, &w.Wrapped)
			return w, err
		})
		if err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT name, key_id, wrapped_key FROM blobs WHERE key_id <> $1`, a.NewKey.ID)
		blobs, err := collect(rows, err, func(row pgx.Row) (vault.WrappedKey, error) {
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
			q := `UPDATE items SET key_id = $1, wrapped_key = $2 WHERE id = $3`
			if w.Owner == "blob" {
				q = `UPDATE blobs SET key_id = $1, wrapped_key = $2 WHERE name = $3`
			}
			if _, err := tx.Exec(ctx, q, a.NewKey.ID, nw, w.ID); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `UPDATE keys SET state = CASE WHEN id = $1 THEN 'active' ELSE 'retired' END`, a.NewKey.ID)
		return err
	})
	return dbErr(err, "rotate key")
}

var _ vault.Store = (*Store)(nil)
