package proxyd

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/tokens"
	"github.com/agentvault/agentvault/vault"
)

// The control API's account part (seed 004, Open an account) over
// owner.Accounts: the rules are there; here the answers become wire types,
// the approved login becomes its catalog entry under the key's token
// suffix, and each write is listed in the run report of the session the
// call names (credentialWrites, "label:change").

func rulesOf(r control.PasswordRules) vault.PasswordRules {
	return vault.PasswordRules{MinLength: r.MinLength, MaxLength: r.MaxLength, NoSymbols: r.NoSymbols,
		AllowedSymbols: r.AllowedSymbols, NoTripleRepeat: r.NoTripleRepeat}
}

// credentialWrite lists "label:change" in the named session's report when
// the session belongs to the same key. Best effort: the write happened
// whatever the report says, and a missing session is no error.
func (c *controlService) credentialWrite(ctx context.Context, apiKey, sessionID, label, change string) {
	if sessionID == "" {
		return
	}
	s, err := c.broker.Get(sessionID)
	if err != nil {
		return
	}
	k, err := c.broker.LookupKey(ctx, apiKey)
	if err != nil || k.ID != s.Key.ID {
		return
	}
	s.CredentialWritten(label + ":" + change)
}

func (c *controlService) accountsOn() (*owner.Accounts, error) {
	if c.accounts == nil {
		return nil, agentvault.Errorf(agentvault.CodeSignupNotEnabled, "this appliance does not open accounts")
	}
	return c.accounts, nil
}

func (c *controlService) CreateLogin(ctx context.Context, in control.CreateLoginIn) (control.SignupRequestOut, error) {
	acc, err := c.accountsOn()
	if err != nil {
		return control.SignupRequestOut{}, err
	}
	r, err := acc.CreateLogin(ctx, in.APIKey, owner.CreateLoginArgs{Website: in.Website, Email: in.Email, Username: in.Username, Rules: rulesOf(in.PasswordRules)})
	if err != nil && r.ID == "" {
		return control.SignupRequestOut{}, err
	}
	c.credentialWrite(ctx, in.APIKey, in.Session, acc.SignupLabel(ctx, r), "signup_requested")
	if err != nil {
		return control.SignupRequestOut{}, err
	}
	out := control.SignupRequestOut{RequestID: r.ID, Status: string(owner.SignupPending), ExpiresAt: r.Expires}
	if r.PreApproved {
		out.Status = string(owner.SignupApproved)
	}
	return out, nil
}

func (c *controlService) SignupRequest(ctx context.Context, in control.SignupRequestIn) (control.SignupRequestOut, error) {
	acc, err := c.accountsOn()
	if err != nil {
		return control.SignupRequestOut{}, err
	}
	a, err := acc.SignupRequest(ctx, in.APIKey, in.RequestID)
	if err != nil {
		return control.SignupRequestOut{}, err
	}
	return c.signupOut(ctx, in, a)
}

func (c *controlService) WaitSignup(ctx context.Context, in control.SignupRequestIn) (control.SignupRequestOut, error) {
	acc, err := c.accountsOn()
	if err != nil {
		return control.SignupRequestOut{}, err
	}
	wait := time.Duration(in.TimeoutMs) * time.Millisecond
	if wait <= 0 || wait > control.MaxWait {
		wait = control.MaxWait
	}
	a, err := acc.WaitSignup(ctx, in.APIKey, in.RequestID, wait)
	if err != nil {
		return control.SignupRequestOut{}, err
	}
	return c.signupOut(ctx, in, a)
}

// signupOut is the wire answer; an approved request carries the login's
// catalog entry, exactly as get_token_catalog lists it for this key.
func (c *controlService) signupOut(ctx context.Context, in control.SignupRequestIn, a owner.SignupAnswer) (control.SignupRequestOut, error) {
	out := control.SignupRequestOut{RequestID: a.Request.ID, Status: string(a.Status), ExpiresAt: a.Request.Expires}
	if a.Status != owner.SignupApproved || a.Login == nil {
		return out, nil
	}
	key, err := c.broker.LookupKey(ctx, in.APIKey)
	if err != nil {
		return control.SignupRequestOut{}, err
	}
	cat := tokens.BuildCatalog([]vault.Item{*a.Login}, tokens.CatalogArgs{Suffix: key.Suffix, Sees: policy.KeyScope{AllLogins: true}.Sees})
	if len(cat.Logins) != 1 {
		return control.SignupRequestOut{}, agentvault.Errorf(agentvault.CodeInternal, "the approved login has no catalog entry")
	}
	if out.Login, err = json.Marshal(cat.Logins[0]); err != nil {
		return control.SignupRequestOut{}, agentvault.Wrap(agentvault.CodeInternal, err, "cannot encode the login")
	}
	if p := a.Policy; p != nil {
		out.PasswordPolicy = &control.PasswordPolicy{Length: p.Length, Lowercase: p.Lowercase, Uppercase: p.Uppercase,
			Digits: p.Digits, Symbols: p.Symbols, NoTripleRepeat: p.NoTripleRepeat}
	}
	out.PasswordOwnerManaged = a.OwnerManaged
	c.credentialWrite(ctx, in.APIKey, in.Session, a.Login.Label, "created")
	return out, nil
}

func (c *controlService) SetLoginUsername(ctx context.Context, in control.LoginUsernameIn) (control.DoneOut, error) {
	acc, err := c.accountsOn()
	if err != nil {
		return control.DoneOut{}, err
	}
	it, err := acc.SetUsername(ctx, in.APIKey, in.Label, in.Username)
	if err != nil {
		return control.DoneOut{}, err
	}
	c.credentialWrite(ctx, in.APIKey, in.Session, it.Label, owner.ChangeUsernameSet)
	return control.DoneOut{Done: true}, nil
}

func (c *controlService) RotateLoginPassword(ctx context.Context, in control.LoginRotateIn) (control.DoneOut, error) {
	acc, err := c.accountsOn()
	if err != nil {
		return control.DoneOut{}, err
	}
	it, err := acc.RotatePassword(ctx, in.APIKey, in.Label, rulesOf(in.PasswordRules))
	if err != nil {
		return control.DoneOut{}, err
	}
	c.credentialWrite(ctx, in.APIKey, in.Session, it.Label, owner.ChangePasswordRotated)
	return control.DoneOut{Done: true}, nil
}

var _ control.AccountService = (*controlService)(nil)
