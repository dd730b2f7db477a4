package owner

import (
	"context"
	"errors"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/vault"
)

// TOTP enrolment only adds (P24: "a stored secret changes only from a
// source the owner trusts ... an existing TOTP seed only with the owner's
// approval"). A seed a login.totp_secret capture read is stored at once on
// a login that has none. A login that has one keeps it: the new seed is
// sealed in the vault as the blob stagedTOTPPrefix+approval id (never in
// the approval, never in a log) and the owner is asked (KindTOTPReplace,
// naming the login, the site and the page). Only a yes swaps it in; a no
// or an expiry deletes it. Whichever comes first settles it, once: the
// owner's decision in this process (Service.Decide), the agent collecting
// the answer (FinishTOTPReplacement), or the approval sweep every 30
// seconds (an expiry, or a decision another process took, e.g. the owner
// CLI).

// stagedTOTPPrefix names the blob of a staged seed.
const stagedTOTPPrefix = "totp-staged/"

// stagedScanLimit is how many recent approvals the first sweep after a
// start reads for seeds staged before it.
const stagedScanLimit = 500

// TOTPEnrolment is a seed a capture took from the page the hint was
// declared on.
type TOTPEnrolment struct {
	KeyID   string
	Session string
	LoginID string
	// Site is the page's host and Page its URL (the approval shows its
	// scheme, host and path).
	Site string
	Page string
	Seed vault.Secret
}

// EnrollTOTP stores e's seed on a login that has no authenticator seed
// (audited by the vault, counted against the daily changes). A login that
// has one is not changed: the seed is staged and the answer is an
// approval_pending error whose chain holds a *Pending (PendingOf); collect
// the owner's answer with FinishTOTPReplacement.
func (a *Accounts) EnrollTOTP(ctx context.Context, e TOTPEnrolment) (vault.Item, error) {
	if err := a.dailyBudget(ctx); err != nil {
		return vault.Item{}, err
	}
	a.totpMu.Lock()
	defer a.totpMu.Unlock()
	it, err := a.cfg.Vault.Get(ctx, a.svc.org, e.LoginID)
	if err != nil {
		return vault.Item{}, err
	}
	if it.Kind != vault.KindLogin || it.Login == nil {
		return vault.Item{}, agentvault.Errorf(agentvault.CodeNotFound, "no such login")
	}
	if it.Login.HasTOTP {
		return vault.Item{}, a.stageTOTP(ctx, it, e)
	}
	got, err := a.cfg.Vault.UpdateLogin(ctx, a.svc.org, it.ID, vault.LoginUpdate{TOTP: e.Seed, Actor: e.KeyID})
	if err != nil {
		return vault.Item{}, writeUnknown(err)
	}
	a.countChange(ctx, e.KeyID, it.ID, ChangeTOTPEnrolled)
	return got, nil
}

// stageTOTP seals e's seed and asks the owner. One replacement of a login
// waits at a time: the owner could not tell two apart. Called with totpMu
// held, so a decision in this process settles only once the seed is
// sealed.
func (a *Accounts) stageTOTP(ctx context.Context, it vault.Item, e TOTPEnrolment) error {
	// A replacement decided elsewhere but not settled yet lands before
	// this one is asked about, never after it.
	a.sweepLocked(ctx)
	pending, err := a.svc.Pending(ctx)
	if err != nil {
		return err
	}
	for _, p := range pending {
		if p.Kind == KindTOTPReplace && p.ItemID == it.ID {
			return agentvault.Errorf(agentvault.CodeConflict,
				"a new authenticator secret for this login already waits for the owner's approval (%s, until %s): wait for their answer before enrolling again",
				p.ID, p.Expires.UTC().Format("15:04 UTC"))
		}
	}
	ap, err := a.svc.RequestApproval(ctx, ApprovalRequest{Kind: KindTOTPReplace, Reason: string(KindTOTPReplace),
		Site: e.Site, ItemID: it.ID, Page: e.Page, APIKeyID: e.KeyID, Session: e.Session, Subject: randomHex(8)})
	if err != nil {
		return err
	}
	if err := a.cfg.Vault.SealBlob(ctx, stagedTOTPPrefix+ap.ID, e.Seed.InsecureRawBytes()); err != nil {
		// No question without its seed.
		if _, derr := a.svc.st.DecideApproval(ctx, ap.ID, StatusDenied, "appliance: the new secret could not be kept", a.svc.now().UTC()); derr != nil {
			a.svc.log.Warn("totp replacement left pending without its seed", "approval", ap.ID, "code", string(agentvault.ErrorCode(derr)))
		}
		a.svc.wake(ap.ID)
		return err
	}
	a.staged[ap.ID] = true
	a.svc.log.Info("totp replacement staged", "approval", ap.ID)
	return agentvault.Wrap(agentvault.CodeApprovalPending, &Pending{Approval: ap, Code: agentvault.CodeApprovalDenied},
		"this login already has an authenticator secret: waiting for the owner to approve replacing it")
}

// FinishTOTPReplacement collects the owner's answer on a replacement the
// key's session asked for (the approval id EnrollTOTP's Pending named):
// approved, the login with its new seed (swapped in now if nothing did
// yet); still pending, approval_pending again; otherwise the refusal.
// Another key's or session's approval reads as not found.
func (a *Accounts) FinishTOTPReplacement(ctx context.Context, keyID, session, approvalID string) (vault.Item, error) {
	ap, err := a.svc.Approval(ctx, approvalID)
	if err != nil || ap.Kind != KindTOTPReplace || ap.APIKeyID != keyID || ap.Session != session {
		return vault.Item{}, agentvault.Errorf(agentvault.CodeNotFound, "no such authenticator replacement for this session: declare the hint again")
	}
	if ap.Status == StatusPending {
		return vault.Item{}, agentvault.Wrap(agentvault.CodeApprovalPending, &Pending{Approval: ap, Code: agentvault.CodeApprovalDenied},
			"waiting for the owner to approve replacing the login's authenticator secret")
	}
	a.totpMu.Lock()
	defer a.totpMu.Unlock()
	return a.settle(ctx, ap)
}

// settle applies a decided replacement: a yes stores the staged seed on
// the login (once: the blob is gone after), anything else deletes it.
// Called with totpMu held.
func (a *Accounts) settle(ctx context.Context, ap Approval) (vault.Item, error) {
	name := stagedTOTPPrefix + ap.ID
	if ap.Status != StatusApproved {
		if err := a.cfg.Vault.RemoveBlob(ctx, name); err != nil {
			return vault.Item{}, err
		}
		delete(a.staged, ap.ID)
		a.svc.log.Info("totp replacement discarded", "approval", ap.ID, "status", string(ap.Status))
		return vault.Item{}, ap.Outcome()
	}
	raw, err := a.cfg.Vault.OpenBlob(ctx, name)
	if errors.Is(err, vault.ErrNotFound) {
		// Settled already (by the decision, the sweep or a replica).
		delete(a.staged, ap.ID)
		return a.cfg.Vault.Get(ctx, a.svc.org, ap.ItemID)
	}
	if err != nil {
		return vault.Item{}, err
	}
	defer clear(raw)
	seed := vault.NewSecret(raw)
	defer seed.Wipe()
	// The staged copy goes first: a seed once stored is never stored
	// again by a later settle, over a secret the owner may have set since.
	if err := a.cfg.Vault.RemoveBlob(ctx, name); err != nil {
		return vault.Item{}, err
	}
	delete(a.staged, ap.ID)
	got, err := a.cfg.Vault.UpdateLogin(ctx, a.svc.org, ap.ItemID, vault.LoginUpdate{TOTP: seed, Actor: "approval:" + ap.ID})
	if err != nil {
		// Kept for the next settle, which tries again.
		if serr := a.cfg.Vault.SealBlob(ctx, name, raw); serr != nil {
			a.svc.log.Warn("approved totp seed lost", "approval", ap.ID, "code", string(agentvault.ErrorCode(serr)))
		} else {
			a.staged[ap.ID] = true
		}
		return vault.Item{}, writeUnknown(err)
	}
	a.countChange(ctx, ap.APIKeyID, ap.ItemID, ChangeTOTPEnrolled)
	a.svc.log.Info("totp replacement stored", "approval", ap.ID)
	return got, nil
}

// sweepLocked settles every staged replacement whose approval is decided
// or expired. The first sweep after a start also reads the recent
// approvals for seeds staged before it. Called with totpMu held; failures
// are logged and retried at the next sweep.
func (a *Accounts) sweepLocked(ctx context.Context) {
	if !a.scanned {
		recent, err := a.svc.st.ListApprovals(ctx, ApprovalFilter{Org: a.svc.org, Limit: stagedScanLimit})
		if err != nil {
			a.svc.log.Warn("staged totp seeds not read", "code", string(agentvault.ErrorCode(err)))
		} else {
			a.scanned = true
			for _, ap := range recent {
				if ap.Kind == KindTOTPReplace {
					a.staged[ap.ID] = true
				}
			}
		}
	}
	for id := range a.staged {
		ap, err := a.svc.Approval(ctx, id)
		if errors.Is(err, vault.ErrNotFound) || agentvault.ErrorCode(err) == agentvault.CodeNotFound {
			delete(a.staged, id)
			continue
		}
		if err != nil || !ap.Done() {
			continue
		}
		if _, err := a.settle(ctx, ap); err != nil && ap.Status == StatusApproved {
			a.svc.log.Warn("totp replacement not settled", "approval", id, "code", string(agentvault.ErrorCode(err)))
		}
	}
}

// settleStaged settles a replacement the owner just decided. (An expired
// one is settled by the next sweep: SweepExpired runs under totpMu too.)
func (s *Service) settleStaged(ctx context.Context, ap Approval) {
	a := s.staged.Load()
	if a == nil {
		return // no Accounts in this process (the owner CLI): proxyd's sweep settles it
	}
	a.totpMu.Lock()
	defer a.totpMu.Unlock()
	if _, err := a.settle(ctx, ap); err != nil && ap.Status == StatusApproved {
		s.log.Warn("totp replacement not settled", "approval", ap.ID, "code", string(agentvault.ErrorCode(err)))
	}
}

// sweepStaged is the approval sweep's part for staged seeds.
func (s *Service) sweepStaged(ctx context.Context) {
	if a := s.staged.Load(); a != nil {
		a.totpMu.Lock()
		defer a.totpMu.Unlock()
		a.sweepLocked(ctx)
	}
}

// LoginLabel is the label of login id, "" when there is none.
func (a *Accounts) LoginLabel(ctx context.Context, id string) string {
	it, err := a.cfg.Vault.Get(ctx, a.svc.org, id)
	if err != nil {
		return ""
	}
	return it.Label
}
