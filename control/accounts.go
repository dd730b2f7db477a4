package control

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Accounts (seed 004, "Open an account"): create_login and the login
// writes, and the reads of a signup request. No answer holds a password:
// the vault generates it and seals it; the agent gets the login's tokens.

// Paths of the account calls on the control API (all POST).
const (
	LoginCreatePath   = "/v1/logins/create"
	SignupRequestPath = "/v1/logins/signup"
	SignupWaitPath    = "/v1/logins/signup/wait"
	LoginUsernamePath = "/v1/logins/username"
	LoginRotatePath   = "/v1/logins/rotate"
)

// PasswordRules are the rules a site states (create_login,
// rotate_login_password); zero values mean not stated.
type PasswordRules struct {
	MinLength      int    `json:"minLength,omitempty"`
	MaxLength      int    `json:"maxLength,omitempty"`
	NoSymbols      bool   `json:"noSymbols,omitempty"`
	AllowedSymbols string `json:"allowedSymbols,omitempty"`
	NoTripleRepeat bool   `json:"noTripleRepeat,omitempty"`
}

// PasswordPolicy is what the vault generated: length, classes and symbol
// alphabet, never the value.
type PasswordPolicy struct {
	Length         int    `json:"length"`
	Lowercase      bool   `json:"lowercase"`
	Uppercase      bool   `json:"uppercase"`
	Digits         bool   `json:"digits"`
	Symbols        string `json:"symbols"`
	NoTripleRepeat bool   `json:"noTripleRepeat,omitempty"`
}

// CreateLoginIn is create_login. Session, when set, is the proxy session
// whose run report lists the write.
type CreateLoginIn struct {
	APIKey   string `json:"apiKey"`
	Session  string `json:"session,omitempty"`
	Website  string `json:"website"`
	Email    string `json:"email"`
	Username string `json:"username,omitempty"`
	PasswordRules
}

// SignupRequestIn reads (or waits on) a signup request.
type SignupRequestIn struct {
	APIKey    string `json:"apiKey"`
	Session   string `json:"session,omitempty"`
	RequestID string `json:"requestId"`
	// TimeoutMs bounds a wait (at most MaxWait); ignored by a read.
	TimeoutMs int `json:"timeoutMs,omitempty"`
}

// SignupRequestOut is a signup request as the agent reads it. Login is
// the login's catalog entry, exactly as get_token_catalog lists it, once
// approved.
type SignupRequestOut struct {
	RequestID            string          `json:"requestId"`
	Status               string          `json:"status"`
	ExpiresAt            time.Time       `json:"expiresAt"`
	Login                json.RawMessage `json:"login,omitempty"`
	PasswordPolicy       *PasswordPolicy `json:"passwordPolicy,omitempty"`
	PasswordOwnerManaged bool            `json:"passwordOwnerManaged,omitempty"`
}

// LoginUsernameIn is set_login_username.
type LoginUsernameIn struct {
	APIKey   string `json:"apiKey"`
	Session  string `json:"session,omitempty"`
	Label    string `json:"label"`
	Username string `json:"username"`
}

// LoginRotateIn is rotate_login_password.
type LoginRotateIn struct {
	APIKey  string `json:"apiKey"`
	Session string `json:"session,omitempty"`
	Label   string `json:"label"`
	PasswordRules
}

// AccountService is the control API's account part (Service embeds it).
type AccountService interface {
	CreateLogin(ctx context.Context, in CreateLoginIn) (SignupRequestOut, error)
	SignupRequest(ctx context.Context, in SignupRequestIn) (SignupRequestOut, error)
	WaitSignup(ctx context.Context, in SignupRequestIn) (SignupRequestOut, error)
	SetLoginUsername(ctx context.Context, in LoginUsernameIn) (DoneOut, error)
	RotateLoginPassword(ctx context.Context, in LoginRotateIn) (DoneOut, error)
}

func accountRoutes(rt routes, svc AccountService) {
	post(rt, LoginCreatePath, svc.CreateLogin)
	post(rt, SignupRequestPath, svc.SignupRequest)
	post(rt, SignupWaitPath, svc.WaitSignup)
	post(rt, LoginUsernamePath, svc.SetLoginUsername)
	post(rt, LoginRotatePath, svc.RotateLoginPassword)
}

// CreateLogin files a signup request.
func (c *Client) CreateLogin(ctx context.Context, in CreateLoginIn) (SignupRequestOut, error) {
	return call[SignupRequestOut](ctx, c, http.MethodPost, LoginCreatePath, in)
}

// SignupRequest reads a signup request once.
func (c *Client) SignupRequest(ctx context.Context, in SignupRequestIn) (SignupRequestOut, error) {
	return call[SignupRequestOut](ctx, c, http.MethodPost, SignupRequestPath, in)
}

// WaitSignup long-polls a signup request for at most in.TimeoutMs (capped
// at MaxWait by proxyd).
func (c *Client) WaitSignup(ctx context.Context, in SignupRequestIn) (SignupRequestOut, error) {
	return call[SignupRequestOut](ctx, c, http.MethodPost, SignupWaitPath, in)
}

// SetLoginUsername records the handle a site accepted.
func (c *Client) SetLoginUsername(ctx context.Context, in LoginUsernameIn) (DoneOut, error) {
	return call[DoneOut](ctx, c, http.MethodPost, LoginUsernamePath, in)
}

// RotateLoginPassword has the vault generate a new password.
func (c *Client) RotateLoginPassword(ctx context.Context, in LoginRotateIn) (DoneOut, error) {
	return call[DoneOut](ctx, c, http.MethodPost, LoginRotatePath, in)
}

var _ AccountService = (*Client)(nil)
