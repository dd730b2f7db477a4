package control

import (
	"context"
	"net/http"
	"time"
)

// Portal credentials (seed 003). mcpd's credential tools call these; every
// answer names credentials, fields and one-time URLs, never a value. The
// values themselves leave proxyd only on the credential-use listener, to a
// skill's runtime holding a use token (CredentialUsePath).

// Paths of the credential calls on the control API.
const (
	CredentialRequestPath = "/v1/credentials/request"
	CredentialListPath    = "/v1/credentials/list"
	CredentialUseCallPath = "/v1/credentials/use"
	CredentialDeletePath  = "/v1/credentials/delete"
	GrantSetPath          = "/v1/credentials/grant"
)

// CredentialUsePath is where a runtime POSTs {"token": "..."} on proxyd's
// credential-use listener (not the control API: no bearer token, the use
// token is the authority).
const CredentialUsePath = "/v1/credential-use"

// CredentialRequestIn is credential_request: the fields to type, and
// visibility "personal" (default) or "org".
type CredentialRequestIn struct {
	APIKey     string   `json:"apiKey"`
	Name       string   `json:"name"`
	Fields     []string `json:"fields"`
	Visibility string   `json:"visibility,omitempty"`
}

// CredentialRequestOut carries the one-time entry link for the requester.
type CredentialRequestOut struct {
	CredentialID string    `json:"credentialId"`
	Name         string    `json:"name"`
	Visibility   string    `json:"visibility"`
	URL          string    `json:"url"`
	ExpiresAt    time.Time `json:"expiresAt"`
}

// APIKeyIn is a call that needs only the agent's key.
type APIKeyIn struct {
	APIKey string `json:"apiKey"`
}

// CredentialInfo is one credential as credential_list shows it.
type CredentialInfo struct {
	CredentialID string   `json:"credentialId"`
	Name         string   `json:"name"`
	Visibility   string   `json:"visibility"`
	Owner        string   `json:"owner"`
	Fields       []string `json:"fields"`
	HasValues    bool     `json:"hasValues"`
	IsSelected   bool     `json:"isSelected"`
}

// CredentialListOut is credential_list's answer.
type CredentialListOut struct {
	Credentials []CredentialInfo `json:"credentials"`
}

// CredentialUseIn is credential_use.
type CredentialUseIn struct {
	APIKey string `json:"apiKey"`
	Name   string `json:"name"`
}

// CredentialUseOut is the one-time use URL, the token after '#'.
type CredentialUseOut struct {
	CredentialID string    `json:"credentialId"`
	Name         string    `json:"name"`
	URL          string    `json:"url"`
	ExpiresAt    time.Time `json:"expiresAt"`
}

// CredentialDeleteIn is credential_delete.
type CredentialDeleteIn struct {
	APIKey       string `json:"apiKey"`
	CredentialID string `json:"credentialId"`
}

// GrantSetIn is grant_set: subject "user:<email>" or "team:<name>".
type GrantSetIn struct {
	APIKey       string `json:"apiKey"`
	CredentialID string `json:"credentialId"`
	Subject      string `json:"subject"`
	Write        bool   `json:"write"`
}

// GrantSetOut echoes the grant as stored.
type GrantSetOut struct {
	CredentialID string `json:"credentialId"`
	Subject      string `json:"subject"`
	Write        bool   `json:"write"`
}

// DoneOut is an answer with nothing to say but that it worked.
type DoneOut struct {
	Done bool `json:"done"`
}

// CredentialUseRequest is the runtime's POST body on CredentialUsePath.
type CredentialUseRequest struct {
	Token string `json:"token"`
}

// CredentialUseAnswer is the runtime's answer, once: the values by field.
// It is written by proxyd's credential-use handler only; no other answer
// type holds a value.
type CredentialUseAnswer struct {
	Name   string            `json:"name"`
	Values map[string]string `json:"values"`
}

// CredentialService is the control API's credential part (Service embeds it).
type CredentialService interface {
	CredentialRequest(ctx context.Context, in CredentialRequestIn) (CredentialRequestOut, error)
	CredentialList(ctx context.Context, apiKey string) (CredentialListOut, error)
	CredentialUse(ctx context.Context, in CredentialUseIn) (CredentialUseOut, error)
	CredentialDelete(ctx context.Context, in CredentialDeleteIn) (DoneOut, error)
	GrantSet(ctx context.Context, in GrantSetIn) (GrantSetOut, error)
}

func credentialRoutes(rt routes, svc CredentialService) {
	post(rt, CredentialRequestPath, svc.CredentialRequest)
	post(rt, CredentialListPath, func(ctx context.Context, in APIKeyIn) (CredentialListOut, error) {
		return svc.CredentialList(ctx, in.APIKey)
	})
	post(rt, CredentialUseCallPath, svc.CredentialUse)
	post(rt, CredentialDeletePath, svc.CredentialDelete)
	post(rt, GrantSetPath, svc.GrantSet)
}

// CredentialRequest asks for a one-time entry link.
func (c *Client) CredentialRequest(ctx context.Context, in CredentialRequestIn) (CredentialRequestOut, error) {
	return call[CredentialRequestOut](ctx, c, http.MethodPost, CredentialRequestPath, in)
}

// CredentialList lists what the key's member may see, never a value.
func (c *Client) CredentialList(ctx context.Context, apiKey string) (CredentialListOut, error) {
	return call[CredentialListOut](ctx, c, http.MethodPost, CredentialListPath, APIKeyIn{APIKey: apiKey})
}

// CredentialUse asks for a one-time use URL.
func (c *Client) CredentialUse(ctx context.Context, in CredentialUseIn) (CredentialUseOut, error) {
	return call[CredentialUseOut](ctx, c, http.MethodPost, CredentialUseCallPath, in)
}

// CredentialDelete deletes a credential with its values, links and grants.
func (c *Client) CredentialDelete(ctx context.Context, in CredentialDeleteIn) (DoneOut, error) {
	return call[DoneOut](ctx, c, http.MethodPost, CredentialDeletePath, in)
}

// GrantSet gives or takes back write on an organisation credential.
func (c *Client) GrantSet(ctx context.Context, in GrantSetIn) (GrantSetOut, error) {
	return call[GrantSetOut](ctx, c, http.MethodPost, GrantSetPath, in)
}

var _ CredentialService = (*Client)(nil)
