// Package postgres is the shared storage adapter of every store interface
// the domain packages declare, for deployments that outgrow one SQLite file
// (several proxyd replicas on one database): vault.Store (items, blobs, the
// audit log), owner.Store (keys, card rules, sites, approvals, sign-ups,
// refusals), owner.SignupRequestStore (agents' signup requests),
// policy.Ledger (spending), broker.SessionStore, recipes.Store (the recipe
// registry) and credentials.Store (portal credentials), over one pgx
// connection pool, with numbered migrations. It passes the same
// conformance suites as store/sqlite (vault/storetest, owner/ownertest,
// policy/ledgertest, broker/sessionstoretest, recipes/recipestest,
// credentials/credtest).
//
// What SQLite gets from its single writer lock, this package takes with
// explicit locks, so that several processes on one database keep every
// promise: a per-card advisory transaction lock around the cap check and
// the ledger insert (P18), a per-dedupe-key lock for approvals, a
// per-submitter lock around the recipe budget's count and insert, row
// locks for decisions (approvals, recipe reviews, one-time links, a signup
// request's login), and a table lock on keys for AddKey and Rotate against
// concurrent writers (no item wrapped under a key being retired).
//
// Durability: every connection is checked to run with fsync on and
// synchronous_commit not off; the store refuses to work otherwise (P22).
// Audit records are group-committed (store/internal/groupcommit): waiting
// records share one transaction, and AppendAudit returns only after it
// committed (P12). Reservations are group-committed the same way (the
// batch's cards locked in sorted order, each reservation checked after
// the ones before it, P18).
//
// It stores what the domain packages hand it and nothing more: ids, org,
// owner, kind, label, times and field names in clear columns, everything
// else as ciphertext. It must never decrypt, hold a key, or log a row's
// content or the DSN (which may hold a password).
package postgres
