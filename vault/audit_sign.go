package vault

import (
	"context"

	"github.com/agentvault/agentvault"
)

// AuditSign is the audit action of a request class proxyd signed with the
// agent's identity (package botauth): a site the owner chose learned who
// the agent is. No value of the vault is involved.
const AuditSign = "sign"

// SignArgs is one signed request class: the site, the tag (Purpose, with
// the count of requests when the record sums a session's), the session
// and the key it ran under.
type SignArgs struct {
	Org, Destination, Session, Actor, Purpose string
}

// AuditSign records a signed request class. The caller must not send the
// signature when this fails.
func (v *Vault) AuditSign(ctx context.Context, a SignArgs) error {
	if a.Org == "" || a.Destination == "" || a.Purpose == "" {
		return invalid("a signing audit needs org, site and tag")
	}
	if _, err := v.store.AppendAudit(ctx, AuditRecord{
		Time: v.now().UTC(), Action: AuditSign, Org: a.Org, Destination: a.Destination,
		Session: a.Session, Actor: a.Actor, Purpose: a.Purpose,
	}); err != nil {
		return agentvault.Wrap(agentvault.CodeAuditUnavailable, err, "audit log unavailable; request not signed")
	}
	return nil
}
