package control

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentvault/agentvault"
)

// maxAnswer bounds what the client reads from proxyd; catalogs are small.
const maxAnswer = 4 << 20

// Client speaks the control API. It is safe for concurrent use.
type Client struct {
	base  string
	token string
	hc    *http.Client
}

// NewClient returns a client for the control listener at baseURL (for
// example "http://127.0.0.1:7701") authenticating with the bearer token. A
// nil hc uses a client that ignores proxy environment variables.
func NewClient(baseURL, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{Proxy: nil}}
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, hc: hc}
}

// CreateSession opens a browser session under apiKey.
func (c *Client) CreateSession(ctx context.Context, apiKey string) (CreateSessionResponse, error) {
	var out CreateSessionResponse
	err := c.do(ctx, http.MethodPost, SessionsPath, CreateSessionRequest{APIKey: apiKey}, &out)
	return out, err
}

// Catalog returns the token catalog for apiKey, filtered for pageURL when it
// is not empty. The shape is the MCP tool reference's, passed through as is.
func (c *Client) Catalog(ctx context.Context, apiKey, pageURL string) (json.RawMessage, error) {
	q := url.Values{"apiKey": {apiKey}}
	if pageURL != "" {
		q.Set("url", pageURL)
	}
	var out json.RawMessage
	err := c.do(ctx, http.MethodGet, CatalogPath+"?"+q.Encode(), nil, &out)
	return out, err
}

// Authorize binds req.Token to the page in req for the session and returns
// what to type.
func (c *Client) Authorize(ctx context.Context, sessionID string, req AuthorizeRequest) (AuthorizeResponse, error) {
	var out AuthorizeResponse
	err := c.do(ctx, http.MethodPost, sessionPath(sessionID, "authorize"), req, &out)
	return out, err
}

// Event reports an observation (confirmation page, fill, credential write).
func (c *Client) Event(ctx context.Context, sessionID string, ev EventRequest) error {
	return c.do(ctx, http.MethodPost, sessionPath(sessionID, "events"), ev, nil)
}

// Report reads the session's report.
func (c *Client) Report(ctx context.Context, sessionID string) (Report, error) {
	var out Report
	err := c.do(ctx, http.MethodGet, sessionPath(sessionID, "report"), nil, &out)
	return out, err
}

// CloseSession ends the session and returns its final report.
func (c *Client) CloseSession(ctx context.Context, sessionID string) (CloseResponse, error) {
	var out CloseResponse
	err := c.do(ctx, http.MethodDelete, sessionPath(sessionID, ""), nil, &out)
	return out, err
}

func sessionPath(id, sub string) string {
	p := SessionsPath + "/" + url.PathEscape(id)
	if sub != "" {
		p += "/" + sub
	}
	return p
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return agentvault.Wrap(agentvault.CodeInternal, err, "encode control request")
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "build control request")
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return agentvault.Wrap(agentvault.CodeUpstream, err, "control API unreachable")
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return agentvault.Wrap(agentvault.CodeUpstream, err, "read control answer")
	}
	if resp.StatusCode/100 != 2 {
		return decodeError(resp.StatusCode, data)
	}
	if out == nil || len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "decode control answer")
	}
	return nil
}

// decodeError turns an error answer back into the *agentvault.Error proxyd
// produced. An answer that is not an ErrorBody keeps only its status: its
// text could be anything.
func decodeError(status int, data []byte) error {
	var eb ErrorBody
	if err := json.Unmarshal(data, &eb); err == nil && eb.Code != "" {
		return &agentvault.Error{Code: agentvault.Code(eb.Code), Message: eb.Message}
	}
	code := agentvault.CodeInternal
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		code = agentvault.CodeUnauthorized
	case http.StatusNotFound:
		code = agentvault.CodeNotFound
	case http.StatusBadRequest:
		code = agentvault.CodeInvalidInput
	}
	return agentvault.Errorf(code, "control API answered %d", status)
}
