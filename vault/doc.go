// Package vault owns the real values: the Secret type, the item types, the
// envelope encryption that seals every field, the consumer-side Store
// interface the storage engines implement, and the Vault service that adds,
// lists, releases (with an audit record), rotates keys and seals blobs.
//
// Envelope: each item (and each blob) has its own random 256-bit data key
// (DEK). Field values and the item's metadata are sealed with that DEK under
// AES-256-GCM; the DEK itself is sealed ("wrapped") by the master key (KEK).
// Every ciphertext is self-describing (see seal.go) and its additional data
// binds the org, the item id and the field, so a ciphertext copied to another
// record, field or org does not open. Rotation re-wraps DEKs only.
//
// A login's TOTP seed is stored but never released: Release of the totp
// field returns the RFC 6238 code of the vault's clock (totp.go), audited
// with the code's HMAC (P23).
//
// The package must never: import a storage driver, goproxy, playwright or the
// MCP SDK; put a secret (or a value derived from it other than an HMAC under
// the audit key) into a log, an error, a panic or the store's clear columns;
// return a released value whose audit record was not written; hand out a
// stored TOTP seed.
package vault
