package owner

import (
	"context"
	"errors"
	"time"
)

// Event is what a Notifier is told. It carries the approval's public facts
// only: kind, reason, site, amount, ids and times, never a value.
type Event struct {
	Type     string // EventApprovalRequested, EventApprovalDecided or EventHandoffRequested
	Approval Approval
	// Handoff is set on EventHandoffRequested (Approval is then zero).
	Handoff *Handoff
	// DashboardURL is where the owner decides ("" when not configured).
	DashboardURL string
}

// Event types.
const (
	EventApprovalRequested = "approval.requested"
	EventApprovalDecided   = "approval.decided"
	// EventHandoffRequested: an agent handed a challenge (3-D Secure, a
	// code, a CAPTCHA) to the owner; the live view waits on the dashboard.
	EventHandoffRequested = "handoff.requested"
)

// Notifier tells the owner something happened. Implementations (webhook,
// SMTP) live in owner/notify; a failed notification never blocks the queue:
// the dashboard banner always shows pending approvals.
type Notifier interface {
	Notify(ctx context.Context, e Event) error
}

// Notifiers fans an event out to several notifiers and joins their errors.
type Notifiers []Notifier

// Notify implements Notifier.
func (ns Notifiers) Notify(ctx context.Context, e Event) error {
	var errs []error
	for _, n := range ns {
		if n == nil {
			continue
		}
		if err := n.Notify(ctx, e); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// notifyTimeout bounds one background notification.
const notifyTimeout = 15 * time.Second
