package owner

import (
	"context"
	"time"

	"github.com/agentvault/agentvault/policy"
)

// Store is everything the owner side keeps. store/sqlite.Store implements
// it; owner/ownertest.Run is the contract. Missing records are
// vault.ErrNotFound; a duplicate insert is CodeConflict.
type Store interface {
	KeyStore
	PolicyStore
	DestinationStore
	ApprovalStore
	AccountStore
	SignupStore
	RefusalStore
	policy.Ledger
	// GetReservation reads one ledger entry (vault.ErrNotFound when none):
	// a retried authorize finds its own charge and does not count it
	// against itself.
	GetReservation(ctx context.Context, id string) (policy.Reservation, error)
}

// KeyStore keeps API keys.
type KeyStore interface {
	CreateAPIKey(ctx context.Context, k APIKey) error
	GetAPIKey(ctx context.Context, id string) (APIKey, error)
	ListAPIKeys(ctx context.Context, org string) ([]APIKey, error) // by creation
	SetAPIKeyScope(ctx context.Context, id string, s Scope) error
	// RevokeAPIKey keeps the first revocation time when called again.
	RevokeAPIKey(ctx context.Context, id string, at time.Time) error
}

// PolicyStore keeps card policies, one per card.
type PolicyStore interface {
	PutCardPolicy(ctx context.Context, p CardPolicy) error // insert or replace
	GetCardPolicy(ctx context.Context, org, cardID string) (CardPolicy, error)
	ListCardPolicies(ctx context.Context, org string) ([]CardPolicy, error)
	DeleteCardPolicy(ctx context.Context, org, cardID string) error
}

// DestinationStore keeps the owner's authorized destinations.
type DestinationStore interface {
	// AddDestination is idempotent: an existing host keeps its first record.
	AddDestination(ctx context.Context, d Destination) error
	RemoveDestination(ctx context.Context, org, host string) error
	ListDestinations(ctx context.Context, org string) ([]Destination, error) // by host
}

// ApprovalStore is the durable approval queue.
type ApprovalStore interface {
	// CreateApproval inserts a pending approval unless one with the same
	// dedupe key is still pending and unexpired at now, in which case it
	// returns that one and created=false. One transaction: two callers
	// racing with one key get one approval.
	CreateApproval(ctx context.Context, a Approval, dedupeKey string, now time.Time) (got Approval, created bool, err error)
	GetApproval(ctx context.Context, id string) (Approval, error)
	ListApprovals(ctx context.Context, f ApprovalFilter) ([]Approval, error)
	// DecideApproval moves a pending approval to approved or denied. An
	// approval already decided is returned with CodeConflict; one past its
	// expiry becomes expired and is returned with CodeApprovalExpired.
	// Approving a new_destination also adds its site to the authorized
	// destinations (AddedBy "approval:<id>") in the same transaction, so
	// whoever sees the approval sees the site authorized.
	DecideApproval(ctx context.Context, id string, status ApprovalStatus, by string, at time.Time) (Approval, error)
	// ExpireApprovals marks every pending approval whose expiry is at or
	// before now as expired and returns them.
	ExpireApprovals(ctx context.Context, now time.Time) ([]Approval, error)
}

// AccountStore keeps the owner's accounts and dashboard sessions.
type AccountStore interface {
	PutAccount(ctx context.Context, a Account) error // insert or replace by email
	GetAccount(ctx context.Context, email string) (Account, error)
	CountAccounts(ctx context.Context) (int, error)
	// ListAccounts lists every account by email, without password hashes.
	ListAccounts(ctx context.Context) ([]Account, error)
	PutDashSession(ctx context.Context, s DashSession) error
	GetDashSession(ctx context.Context, tokenHash []byte) (DashSession, error)
	DeleteDashSession(ctx context.Context, tokenHash []byte) error
	// DeleteDashSessions ends every session of email (after a password change).
	DeleteDashSessions(ctx context.Context, email string) error
	DeleteExpiredDashSessions(ctx context.Context, now time.Time) error
}

// SignupStore keeps pre-approved signups.
type SignupStore interface {
	AddSignup(ctx context.Context, s Signup) error // idempotent
	RemoveSignup(ctx context.Context, org, site, email string) error
	ListSignups(ctx context.Context, org string) ([]Signup, error)
}

// RefusalStore keeps the log of refused fills.
type RefusalStore interface {
	AppendRefusal(ctx context.Context, r Refusal) error
	// ListRefusals returns the org's refusals at or after since, newest
	// first, at most limit (0: no limit).
	ListRefusals(ctx context.Context, org string, since time.Time, limit int) ([]Refusal, error)
}
