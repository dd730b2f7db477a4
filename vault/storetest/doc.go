// Package storetest is the conformance suite every vault.Store passes:
// CRUD, not-found, per-item atomicity, label sequences under concurrency,
// audit ordering and filters, blobs, key registration and rotation. Each
// storage engine's tests call Run with a function opening a fresh, empty
// store. The suite must never depend on one engine's behaviour (no SQL, no
// file paths), so a Postgres store can pass it unchanged.
package storetest
