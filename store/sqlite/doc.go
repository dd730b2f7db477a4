// Package sqlite is the embedded storage adapter of every store interface
// the domain packages declare: vault.Store (items, blobs, the audit log),
// owner.Store (keys, card rules, sites, approvals, sign-ups, refusals) and
// policy.Ledger (spending). Adapters sit together under store/ (a Postgres
// one beside it), and no domain package imports them (deps_test.go). One
// SQLite file (pure-Go modernc.org/sqlite, driver "sqlite") in WAL mode with
// synchronous=FULL, a busy timeout, foreign keys on, IMMEDIATE write
// transactions and versioned migrations. Audit records and reservations
// go through one durable writer (store/internal/groupcommit, on a
// connection of its own): whatever of both waits at the same moment shares
// one transaction, AppendAudit returns only after that transaction
// committed and fsynced (P12), and each reservation is checked against the
// caps after the ones before it in the batch (P18). A batch of
// reservations alone is committed without its own fsync (synchronous
// NORMAL, which a kill -9 does not undo); the fsync of the next audit
// record, which precedes any value's release, makes them durable with it
// (store.go's commitDurableOnWriter says why that is enough).
// The ledger's day and month totals are kept by triggers (migration 90,
// one upsert since migration 271); the durable writer keeps the totals its
// own transactions left while PRAGMA data_version shows no other writer
// (ledgercache.go); a purchase's queries are prepared once per pooled
// connection.
// The owner state and items a purchase re-reads (API key, card rules,
// sites, approvals, items) are cached per handle and checked on every call
// against a version that triggers on their tables bump in every writer's
// transaction, whichever process writes (migration 72, readcache.go); a
// row that is not there is cached as such until the version moves.
//
// A process holds one handle per database file: Open of a file that is
// already open in the process shares the live handle, and only the last
// Close closes it. A second handle that opens and closes the file would
// drop the process's POSIX locks on it, and another process reading the
// file could then unlink the live WAL (P22).
//
// It stores what the domain packages hand it and nothing more: ids, org, owner, kind,
// label, times and field names in clear columns, everything else as
// ciphertext. It must never decrypt, hold a key, or log a row's content, and
// no SQLite-specific behaviour may leak through the interfaces
// (vault/storetest, owner/ownertest and policy/ledgertest are the contracts a
// Postgres store will pass too).
package sqlite
