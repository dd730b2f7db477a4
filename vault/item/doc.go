// Package item is the vault's vocabulary without the vault: what an item is
// (Kind, Field and its constants, Item and its metadata types), the opaque
// Secret a real value travels in, and the login label rule. Packages that
// only name items and fields (tokens, policy, and through them mcpd) import
// this leaf instead of package vault, so they do not link the envelope
// crypto, the store interface or the Vault service.
//
// Package vault re-declares every name here (type aliases and constants
// referring to this package), so vault.Item and item.Item are one type and
// either name may be used; each rule has its home here, not a copy there.
//
// The package must never: import anything but the standard library and the
// root package; hold a sealed value, a key or a store; print a Secret's bytes
// (every way of printing one prints REDACTED).
package item
