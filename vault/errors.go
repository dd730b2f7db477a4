package vault

import agentvault "github.com/agentvault/agentvault"

// Sentinels for states. They are returned as they are (never re-wrapped), so
// errors.Is(err, vault.ErrSealed) holds for every sealed condition.
var (
	// ErrSealed: the master key given does not open this vault (wrong key
	// file, retired key) or a ciphertext's key is unknown.
	ErrSealed = &agentvault.Error{Code: agentvault.CodeSealed, Message: "vault is sealed: the master key does not open it"}
	// ErrNotFound: no such item, blob or key in this org.
	ErrNotFound = &agentvault.Error{Code: agentvault.CodeNotFound, Message: "not found"}
)

// errCorrupt is what opening a malformed or tampered ciphertext returns. It
// names no value and no offset.
var errCorrupt = &agentvault.Error{Code: agentvault.CodeInternal, Message: "ciphertext is corrupt or does not belong to this record"}
