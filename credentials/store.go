package credentials

import (
	"context"
	"time"
)

// Store keeps members, key bindings, credentials, grants and links. It
// never sees a value. store/sqlite implements it; credtest.Run is the
// contract. A missing record is vault.ErrNotFound (code not_found); a
// duplicate insert is CodeConflict.
type Store interface {
	PutMember(ctx context.Context, m Member) error // insert or replace, teams included
	GetMember(ctx context.Context, org, user string) (Member, error)
	ListMembers(ctx context.Context, org string) ([]Member, error) // by user
	DeleteMember(ctx context.Context, org, user string) error

	BindKey(ctx context.Context, b KeyBinding) error // insert or replace, consent included
	GetKeyBinding(ctx context.Context, keyID string) (KeyBinding, error)
	ListKeyBindings(ctx context.Context, org string) ([]KeyBinding, error) // by key id
	// ConsentKey marks the binding of keyID consented, in one step, only
	// while it binds the key to user in org: an offer moved to someone
	// else in between is vault.ErrNotFound, never accepted for them.
	ConsentKey(ctx context.Context, org, keyID, user string) error

	// CreateCredential fails with CodeConflict when the org already has a
	// credential of that name and visibility (for personal ones: of that
	// owner).
	CreateCredential(ctx context.Context, c Credential) error
	UpdateCredential(ctx context.Context, c Credential) error // fields, item, updated
	GetCredential(ctx context.Context, org, id string) (Credential, error)
	ListCredentials(ctx context.Context, org string) ([]Credential, error) // by name, then id
	// DeleteCredential removes the credential with its grants and links in
	// one transaction.
	DeleteCredential(ctx context.Context, org, id string) error

	// SetGrant inserts or replaces; a grant without Write is removed.
	SetGrant(ctx context.Context, g Grant) error
	ListGrants(ctx context.Context, org, credentialID string) ([]Grant, error) // by subject

	PutLink(ctx context.Context, l Link) error
	GetLink(ctx context.Context, tokenHash []byte) (Link, error)
	// AdvanceLink moves the link of that token hash and kind from state
	// from to state to, in one step, only when its expiry is after now: two
	// callers racing get one success. A link not in state from is
	// CodeLinkUsed; one past its expiry CodeLinkExpired; an unknown one (or
	// of another kind) vault.ErrNotFound.
	AdvanceLink(ctx context.Context, tokenHash []byte, kind LinkKind, from, to LinkState, now time.Time) (Link, error)
}
