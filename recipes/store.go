package recipes

import (
	"context"
	"time"

	"github.com/agentvault/agentvault"
)

// SubmissionStatus is where a submission is in its review.
type SubmissionStatus string

const (
	// SubmissionPending: screening has not finished; poll again.
	SubmissionPending SubmissionStatus = "pending"
	// SubmissionApproved: the owner accepted it; the recipe is live.
	SubmissionApproved SubmissionStatus = "approved"
	// SubmissionMerged: the owner accepted it into the existing recipe of
	// the same store.
	SubmissionMerged SubmissionStatus = "merged"
	// SubmissionRejected: the verdict names the rule it broke.
	SubmissionRejected SubmissionStatus = "rejected"
	// SubmissionNeedsHuman: screening passed; the owner decides.
	SubmissionNeedsHuman SubmissionStatus = "needs_human"
)

// Submission is an agent's contribution and its review.
type Submission struct {
	ID     string
	Status SubmissionStatus
	// Verdict is empty while pending; then the screening's finding, and
	// finally the owner's decision (for a rejection, the rule it broke).
	Verdict string
	// Recipe is what the agent sent, checked and normalised; the owner may
	// edit it before accepting.
	Recipe Recipe
	Note   string
	// VerificationRequested asks the owner to publish Note as the
	// recipe's evidence and mark it verified.
	VerificationRequested bool
	// Submitter is the API key id that sent it (the budget is per key).
	Submitter string
	// MergeInto is the id of the published recipe of the same store, when
	// screening found one; MergedInto is set once the owner accepted.
	MergeInto string
	Created   time.Time
	Updated   time.Time
	DecidedBy string
}

// Budget bounds submissions per submitter: at most Max created after
// Since.
type Budget struct {
	Max   int
	Since time.Time
}

// SubmissionFilter selects submissions for the owner's page.
type SubmissionFilter struct {
	Statuses []SubmissionStatus // empty: all
	Limit    int                // 0: 100
}

// Published is a recipe in the registry with its bookkeeping.
type Published struct {
	Recipe    Recipe
	Updated   time.Time
	UpdatedBy string
}

// Store keeps the registry: published recipes and submissions. store/sqlite
// implements it; recipes/recipestest is its contract.
type Store interface {
	// PutRecipe inserts or replaces a published recipe by kind and id.
	PutRecipe(ctx context.Context, p Published) error
	// GetRecipe returns a published recipe, or ErrNotFound.
	GetRecipe(ctx context.Context, kind Kind, id string) (Published, error)
	// ListRecipes returns every published recipe, ordered by kind and id.
	ListRecipes(ctx context.Context) ([]Published, error)

	// AddSubmission stores a new submission unless its submitter already
	// has b.Max submissions created after b.Since; then it refuses with
	// rate_limited and reports the oldest of them (OldestError). The count
	// and the insert are one transaction.
	AddSubmission(ctx context.Context, s Submission, b Budget) error
	// GetSubmission returns a submission, or ErrNotFound.
	GetSubmission(ctx context.Context, id string) (Submission, error)
	// ListSubmissions returns submissions, newest first.
	ListSubmissions(ctx context.Context, f SubmissionFilter) ([]Submission, error)
	// UpdateSubmission replaces s when its stored status is from, and in
	// the same transaction publishes p when it is not nil. A submission in
	// another state is a conflict; an unknown id ErrNotFound.
	UpdateSubmission(ctx context.Context, s Submission, from SubmissionStatus, p *Published) error
}

// ErrNotFound is a recipe or submission id the registry does not have.
var ErrNotFound = agentvault.Errorf(agentvault.CodeNotFound, "no such recipe or submission")

// OldestError is AddSubmission's refusal when the budget is spent: the
// oldest counted submission's time says when a slot frees up.
type OldestError struct {
	Oldest time.Time
}

func (e *OldestError) Error() string { return "submission budget spent" }
