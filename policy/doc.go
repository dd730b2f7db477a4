// Package policy decides whether a vault value may be released for a fill:
// key scope, the site an item is bound to, the owner's authorized
// destinations, card pauses and merchant blocks, spending caps measured
// against the checkout's real total, and the purchases that need the owner's
// yes. It also owns the exact money type (Amount), currency conversion from a
// configured rate table (Rates), the spending ledger contract (Ledger, with an
// in-memory implementation) and the per-key rate limiter.
//
// Everything here is a pure decision over values the caller passes in: the
// package never does HTTP, never drives a browser, never reads the store and
// never sees a secret's value. It must never grow an import of goproxy,
// playwright, the MCP SDK or a storage driver, and it must never use floating
// point for money. A decision that cannot be made safely (an unknown total
// under a cap, an unconvertible currency) refuses or asks the owner; it never
// guesses in the agent's favour.
package policy
