// Package vaultcli is the owner's command line for the vault, wired into
// proxyd as `proxyd vault ...`: add cards, logins, identities and addresses,
// list and show them (masked), remove them, rotate the master key.
//
// It must never take a secret (card number, CVV, password, TOTP seed) from
// argv or the environment: secrets come from stdin lines when stdin is not a
// terminal, or from no-echo prompts when it is. It must never print a secret:
// list and show print masks. Bad input exits 2 and writes nothing. It never
// chooses a store for a command: proxyd hands it the vault over the store
// the deployment's config names (SQLite or a Postgres shared by replicas).
package vaultcli
