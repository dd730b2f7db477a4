package proxyd

import (
	"context"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/vault"
)

// Page hints on the control API (seed 004): the kinds this appliance
// accepts, and TOTP enrolment (declare_page_hint login.totp_secret). The
// seed is read from the answer to mcpd's reload of the page the hint was
// declared on (the broker binds the capture to that URL and refuses a seed
// the request itself carried); here it goes to owner.Accounts.EnrollTOTP,
// which stores it on a login without one (audited by the vault, counted
// against the daily changes) and asks the owner before replacing one
// (take answers 202 pending; mcpd takes again with the wait id once the
// owner decided). A stored seed is listed in the session's report as
// "label:totp_enrolled".

// hintKinds are the kinds declare_page_hint accepts on this appliance.
var hintKinds = []control.HintKind{{
	Kind:         "order.total",
	Purpose:      "Where the checkout's order total is, when the vault cannot find it by convention; read again at the card fill and checked against the card's limits.",
	Reads:        []string{"text", "attribute"},
	Attributes:   []string{"aria-label", "content", "data-total", "data-amount", "value", "title"},
	FrameAllowed: true,
}, {
	Kind:          "login.totp_secret",
	Purpose:       "Where an authenticator enrolment page shows its secret (text or an otpauth:// URI); the vault reads it from the page's response and stores it on the login named by label, so tokens.totp fills become current codes. The page is loaded again and shows the secret masked. Declare it on the site's enrolment page itself: a secret the page echoed from its own address or form is refused (totp_seed_untrusted), and a login that already has a secret keeps it until the account owner approves the new one.",
	Reads:         []string{"text"},
	FrameAllowed:  false,
	Preconditions: "this session signed in as the login (fill_login); the page is https:// (or loopback http://)",
}}

// maxTOTPTake bounds how long a take waits for the enrolment document.
const maxTOTPTake = 30 * time.Second

func (c *controlService) HintKinds(ctx context.Context, in control.HintKindsIn) ([]control.HintKind, error) {
	if _, err := c.broker.Get(in.Session); err != nil {
		return nil, err
	}
	return hintKinds, nil
}

func (c *controlService) ArmTOTPCapture(ctx context.Context, in control.TOTPArmIn) (control.TOTPArmOut, error) {
	s, err := c.broker.Get(in.Session)
	if err != nil {
		return control.TOTPArmOut{}, err
	}
	if _, err := c.accountsOn(); err != nil {
		return control.TOTPArmOut{}, err
	}
	if in.PageURL == "" {
		return control.TOTPArmOut{}, agentvault.Errorf(agentvault.CodeInvalidHint, "the capture needs the page's URL: update mcpd to this proxyd's version")
	}
	id, err := c.broker.ArmTOTPCapture(ctx, s, in.Label, in.PageURL,
		broker.TOTPLocator{ID: in.Locator.ID, Tag: in.Locator.Tag, Index: in.Locator.Index})
	if err != nil {
		return control.TOTPArmOut{}, err
	}
	return control.TOTPArmOut{CaptureID: id}, nil
}

func (c *controlService) TakeTOTPCapture(ctx context.Context, in control.TOTPTakeIn) (control.TOTPTakeOut, error) {
	s, err := c.broker.Get(in.Session)
	if err != nil {
		return control.TOTPTakeOut{}, err
	}
	acc, err := c.accountsOn()
	if err != nil {
		return control.TOTPTakeOut{}, err
	}
	var it vault.Item
	if in.WaitID != "" {
		it, err = acc.FinishTOTPReplacement(ctx, s.Key.ID, s.ID, in.WaitID)
	} else {
		wait := time.Duration(in.TimeoutMs) * time.Millisecond
		if wait <= 0 || wait > maxTOTPTake {
			wait = maxTOTPTake
		}
		got, terr := c.broker.TakeTOTPCapture(ctx, s, in.CaptureID, wait)
		if terr != nil {
			return control.TOTPTakeOut{}, terr
		}
		defer got.Seed.Wipe()
		it, err = acc.EnrollTOTP(ctx, owner.TOTPEnrolment{KeyID: s.Key.ID, Session: s.ID, LoginID: got.Item.ID,
			Site: got.Site, Page: got.Page, Seed: got.Seed})
	}
	if a, ok := owner.PendingOf(err); ok {
		p := &control.Pending{Pending: true, WaitID: a.ID, Kind: string(a.Kind), Reason: a.Reason, Site: a.Site,
			Login: acc.LoginLabel(ctx, a.ItemID), ExpiresAt: a.Expires}
		return control.TOTPTakeOut{}, agentvault.Wrap(agentvault.CodeApprovalPending, p, "waiting for the owner (%s)", a.Reason)
	}
	if err != nil {
		return control.TOTPTakeOut{}, err
	}
	s.CredentialWritten(it.Label + ":" + owner.ChangeTOTPEnrolled)
	out := control.TOTPTakeOut{Stored: true, Digits: vault.TOTPDefaultDigits, Period: vault.TOTPDefaultPeriod}
	if m := it.Login; m != nil {
		if m.TOTPDigits != 0 {
			out.Digits = m.TOTPDigits
		}
		if m.TOTPPeriod != 0 {
			out.Period = m.TOTPPeriod
		}
	}
	return out, nil
}

var _ control.HintService = (*controlService)(nil)
