// Package sqlite is the embedded vault.Store: one SQLite file (pure-Go
// modernc.org/sqlite, driver "sqlite") in WAL mode with a busy timeout,
// foreign keys on, IMMEDIATE write transactions and versioned migrations.
//
// It stores what vault hands it and nothing more: ids, org, owner, kind,
// label, times and field names in clear columns, everything else as
// ciphertext. It must never decrypt, hold a key, or log a row's content, and
// no SQLite-specific behaviour may leak through the vault.Store interface
// (vault/storetest is the contract a Postgres store will pass too).
package sqlite
