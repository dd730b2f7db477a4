package broker

import (
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

// AuthorizeRequest is one authorize: bind a token to the page (or frame)
// about to be filled. proxyd reads it from the control API's wire form
// once, the checkout total parsed there (policy.ParseDecimal).
type AuthorizeRequest struct {
	Token string
	// PageURL is the top-level page, FrameURL the frame holding the field
	// when it differs (a payment iframe).
	PageURL, FrameURL string
	// Total is the checkout total the page shows, nil when none was read:
	// a card number is decided for it (P18).
	Total *policy.Amount
	// CVVSpent, on a card's security code, says the authorization its
	// number gave was spent by an action in between: the owner approves
	// the purchase again.
	CVVSpent bool
}

// Authorized says what to type for an authorized token: a stand-in for a
// secret field (StandIn; swapped for the real value on the wire), the real
// value of a non-secret one.
type Authorized struct {
	Value   string
	Kind    vault.Kind
	Field   vault.Field
	StandIn bool
}

// Report summarises a session for the agent: kinds and counts, never a
// value.
type Report struct {
	FilledFieldKinds     []string
	DeniedCount          int
	ConfirmationDetected bool
	// OrderTotal is the total the confirmation page showed, as mcpd read
	// it; reported back, never decided on.
	OrderTotal       *ShownTotal
	CredentialWrites []string
}

// ShownTotal is a total as a page showed it (amount and currency text).
type ShownTotal struct{ Amount, Currency string }
