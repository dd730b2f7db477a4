package vault

import (
	"context"
	"time"
)

// Store is what the Vault needs from a storage engine. It sees only clear
// identifiers and ciphertexts: it never holds a key and never decrypts.
// Engines live in subpackages (store/sqlite, later store/postgres) and must
// pass vault/storetest.Run. Nothing here assumes one process or one file:
// several proxyd replicas may share one Postgres store.
//
// Errors: ErrNotFound (returned as is) for a missing record; a unique
// violation (label, blob name, key id) is an *agentvault.Error with
// CodeConflict.
type Store interface {
	ItemStore
	AuditStore
	BlobStore
	KeyStore
	Close() error
}

// ItemStore keeps items. PutItem writes the item row, its wrapped data key
// and all its field ciphertexts in one transaction, replacing any previous
// version of the same id entirely; GetItem reads them from one snapshot.
type ItemStore interface {
	PutItem(ctx context.Context, rec ItemRecord) error
	GetItem(ctx context.Context, org, id string) (ItemRecord, error)
	GetItemByLabel(ctx context.Context, org string, kind Kind, label string) (ItemRecord, error)
	// ListItems returns the org's items ordered by creation time, then id.
	ListItems(ctx context.Context, org string) ([]ItemRecord, error)
	DeleteItem(ctx context.Context, org, id string) error
	// NextLabel returns the next number of the org's per-kind label
	// sequence, starting at 1. Numbers are never handed out twice, even
	// after the item holding one is deleted, and concurrent callers get
	// distinct numbers.
	NextLabel(ctx context.Context, org string, kind Kind) (int64, error)
}

// AuditStore is the append-only audit log.
type AuditStore interface {
	// AppendAudit stores rec and returns its sequence number, assigned by
	// the store, strictly increasing in append order.
	AppendAudit(ctx context.Context, rec AuditRecord) (int64, error)
	// QueryAudit returns matching records in append (Seq) order.
	QueryAudit(ctx context.Context, f AuditFilter) ([]AuditRecord, error)
}

// BlobStore keeps named sealed blobs (the MITM CA key, the audit key, the
// deployment secret).
type BlobStore interface {
	// PutBlob inserts or replaces. With rec.CreateOnly it fails with
	// CodeConflict when the name exists, so two replicas racing to create a
	// once-only secret agree on one.
	PutBlob(ctx context.Context, rec BlobRecord) error
	GetBlob(ctx context.Context, name string) (BlobRecord, error)
	DeleteBlob(ctx context.Context, name string) error
}

// KeyStore records which master keys exist, with a check value sealed by
// each so a wrong key is detected before anything is read.
type KeyStore interface {
	Keys(ctx context.Context) ([]KeyRecord, error)
	// AddKey registers the first key of an empty store as active. It fails
	// with CodeConflict if the id exists or another key is active.
	AddKey(ctx context.Context, rec KeyRecord) error
	// Rotate, in one transaction: registers args.NewKey, calls args.Rewrap
	// for every wrapped data key (items and blobs) not already under the
	// new key and stores what it returns, then makes the new key the only
	// active one and retires the others. If Rewrap fails nothing changes.
	Rotate(ctx context.Context, args RotateArgs) error
}

// ItemRecord is an item as stored. Only ID, Org, Owner, Kind, Label, the
// times and Fields are clear; Meta and Values are ciphertexts under the
// item's data key, WrappedKey is that data key under master key KeyID.
type ItemRecord struct {
	ID      string
	Org     string
	Owner   string
	Kind    Kind
	Label   string
	Created time.Time
	Updated time.Time
	Fields  []Field

	KeyID      string
	WrappedKey []byte
	Meta       []byte
	Values     map[Field][]byte
}

// BlobRecord is a named sealed blob: Data under its own data key, which is
// wrapped under master key KeyID.
type BlobRecord struct {
	Name       string
	KeyID      string
	WrappedKey []byte
	Data       []byte
	Updated    time.Time
	CreateOnly bool `json:"-"` // PutBlob option, not stored
}

// KeyState is a master key's place in its life.
type KeyState string

const (
	KeyActive  KeyState = "active"  // wraps new data keys
	KeyRetired KeyState = "retired" // wraps nothing any more; refused on open
)

// KeyRecord is a master key's public metadata.
type KeyRecord struct {
	ID      string
	State   KeyState
	Check   []byte // a constant sealed under the key, bound to its id
	Created time.Time
}

// WrappedKey is one data key handed to RotateArgs.Rewrap. Owner is "item"
// (Org and ID set) or "blob" (ID is the blob name).
type WrappedKey struct {
	Owner   string
	Org     string
	ID      string
	KeyID   string
	Wrapped []byte
}

// RotateArgs configures KeyStore.Rotate.
type RotateArgs struct {
	NewKey KeyRecord
	Rewrap func(WrappedKey) ([]byte, error)
}

// Audit actions.
const (
	AuditRelease = "release"
	AuditAdd     = "add"
	AuditRemove  = "remove"
	AuditUpdate  = "update"
	AuditRotate  = "rotate_key"
)

// AuditRecord is one audited event. It never holds a value: ValueHMAC is
// HMAC-SHA256 of the released value under the deployment's audit key, so an
// investigator holding a candidate value can check it, and nobody can
// recover it.
type AuditRecord struct {
	Seq         int64
	Time        time.Time
	Action      string
	Org         string
	ItemID      string
	Kind        Kind
	Field       Field
	Destination string // host the value was released for
	Session     string
	Actor       string
	Purpose     string
	ValueHMAC   []byte
}

// AuditFilter selects audit records; zero fields match everything.
type AuditFilter struct {
	Org      string
	ItemID   string
	Session  string
	Action   string
	Since    time.Time // inclusive
	Until    time.Time // exclusive
	AfterSeq int64     // for paging: only Seq > AfterSeq
	Limit    int       // 0: no limit
}
