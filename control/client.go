package control

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentvault/agentvault"
)

// maxAnswer bounds what the client reads from proxyd; catalogs are small.
const maxAnswer = 4 << 20

// Client speaks the control API. It is safe for concurrent use.
type Client struct {
	bases []string
	cur   atomic.Int32 // index of the base that answered last
	token string
	hc    *http.Client
	// UnreachableHint ends the message of a call no replica answered:
	// what the caller's user changes (mcpd's flag by default).
	UnreachableHint string
}

// unreachable marks the error of a call that reached no proxyd
// (IsUnreachable).
type unreachable struct{ err error }

func (u *unreachable) Error() string { return u.err.Error() }
func (u *unreachable) Unwrap() error { return u.err }

// IsUnreachable reports whether err says no proxyd answered at all (the
// connection could not be made): nothing was sent, and the fix is to start
// proxyd or point at the right address.
func IsUnreachable(err error) bool {
	var u *unreachable
	return errors.As(err, &u)
}

func (c *Client) unreachableErr(err error) error {
	return agentvault.Wrap(agentvault.CodeUpstream, &unreachable{err}, "proxyd is not answering at %s: %s", strings.Join(c.bases, ", "), c.UnreachableHint)
}

// Reachable checks, without sending anything, that some replica accepts a
// connection (a TCP connect to each control address in turn, 2 s each):
// nil when one does, else the same error a call would get.
func (c *Client) Reachable(ctx context.Context) error {
	var last error
	for _, b := range c.bases {
		u, err := url.Parse(b)
		if err != nil || u.Host == "" {
			continue
		}
		host := u.Host
		if u.Port() == "" {
			port := "80"
			if u.Scheme == "https" {
				port = "443"
			}
			host = net.JoinHostPort(u.Hostname(), port)
		}
		d := net.Dialer{Timeout: 2 * time.Second}
		conn, err := d.DialContext(ctx, "tcp", host)
		if err == nil {
			conn.Close()
			return nil
		}
		last = err
	}
	if last == nil {
		return nil
	}
	return c.unreachableErr(last)
}

// NewClient returns a client for the control listener at baseURL (for
// example "http://127.0.0.1:7701") authenticating with the bearer token. A
// nil hc uses a client that ignores proxy environment variables.
//
// baseURL may list several proxyd replicas separated by commas (they share
// one store, so any of them serves any session): the client keeps to the
// one that answered last and moves to the next when a replica cannot be
// reached. A request that may have reached a replica is never sent to
// another, unless it only reads (GET).
func NewClient(baseURL, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{Proxy: nil}}
	}
	var bases []string
	for _, b := range strings.Split(baseURL, ",") {
		if b = strings.TrimRight(strings.TrimSpace(b), "/"); b != "" {
			bases = append(bases, b)
		}
	}
	if len(bases) == 0 {
		bases = []string{""}
	}
	return &Client{bases: bases, token: token, hc: hc, UnreachableHint: "start it, or check --control-url"}
}

// base is the replica requests go to now.
func (c *Client) base() string { return c.bases[int(c.cur.Load())%len(c.bases)] }

// notSent reports whether err says the request never reached a server:
// the connection could not be made, or its TLS handshake failed (the
// request, bearer token included, goes only over a finished handshake).
func notSent(err error) bool {
	var op *net.OpError
	var cv *tls.CertificateVerificationError
	var rh tls.RecordHeaderError
	var al tls.AlertError
	return errors.As(err, &op) && op.Op == "dial" || errors.As(err, &cv) || errors.As(err, &rh) || errors.As(err, &al)
}

// send does one request, trying the next replica while the current one
// cannot be reached (or, for a read, fails in transit).
func (c *Client) send(ctx context.Context, method, path string, body []byte, header http.Header) (*http.Response, error) {
	start := int(c.cur.Load())
	var lastErr error
	for i := range len(c.bases) {
		idx := (start + i) % len(c.bases)
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, c.bases[idx]+path, rd)
		if err != nil {
			return nil, agentvault.Wrap(agentvault.CodeInternal, err, "build control request")
		}
		maps.Copy(req.Header, header)
		req.Header.Set("Authorization", "Bearer "+c.token)
		resp, err := c.hc.Do(req)
		if err == nil {
			if idx != start {
				c.cur.Store(int32(idx))
			}
			return resp, nil
		}
		lastErr = err
		if ctx.Err() != nil || !(notSent(err) || method == http.MethodGet) {
			break
		}
	}
	if ctx.Err() == nil && notSent(lastErr) {
		return nil, c.unreachableErr(lastErr)
	}
	return nil, agentvault.Wrap(agentvault.CodeUpstream, lastErr, "control API unreachable")
}

// CreateSession opens a browser session under apiKey.
func (c *Client) CreateSession(ctx context.Context, apiKey string) (CreateSessionResponse, error) {
	return call[CreateSessionResponse](ctx, c, http.MethodPost, SessionsPath, CreateSessionRequest{APIKey: apiKey})
}

// Catalog returns the token catalog for apiKey, filtered for pageURL when it
// is not empty. The shape is the MCP tool reference's, passed through as is.
func (c *Client) Catalog(ctx context.Context, apiKey, pageURL string) (json.RawMessage, error) {
	q := url.Values{"apiKey": {apiKey}}
	if pageURL != "" {
		q.Set("url", pageURL)
	}
	return call[json.RawMessage](ctx, c, http.MethodGet, CatalogPath+"?"+q.Encode(), nil)
}

// PaymentIntegrations returns the payment integrations the proxy
// recognises, shipped and the owner's, as a JSON array (IntegrationsPath).
func (c *Client) PaymentIntegrations(ctx context.Context) (json.RawMessage, error) {
	return call[json.RawMessage](ctx, c, http.MethodGet, IntegrationsPath, nil)
}

// Authorize binds req.Token to the page in req for the session and returns
// what to type. When the owner must decide first, the error has code
// approval_pending and PendingOf(err) gives what to wait on.
func (c *Client) Authorize(ctx context.Context, sessionID string, req AuthorizeRequest) (AuthorizeResponse, error) {
	return callWaiting[AuthorizeResponse](ctx, c, http.MethodPost, sessionPath(sessionID, "authorize"), req)
}

// pendingError is the approval_pending error a 202 answer becomes.
func pendingError(p *Pending) error {
	return agentvault.Wrap(agentvault.CodeApprovalPending, p, "waiting for the owner (%s)", p.Reason)
}

// PendingOf returns the pending approval inside an Authorize or
// TakeTOTPCapture error.
func PendingOf(err error) (*Pending, bool) {
	var p *Pending
	if errors.As(err, &p) {
		return p, true
	}
	return nil, false
}

// Wait long-polls a pending approval for up to timeout (the server caps it
// at 25 s) and returns its status; call it again while Status is pending.
func (c *Client) Wait(ctx context.Context, waitID string, timeout time.Duration) (WaitAnswer, error) {
	p := WaitsPath + "/" + url.PathEscape(waitID) + "?timeout=" + url.QueryEscape(timeout.String())
	return call[WaitAnswer](ctx, c, http.MethodGet, p, nil)
}

// AuthenticateKey checks an agent's API key and returns what it is.
func (c *Client) AuthenticateKey(ctx context.Context, apiKey string) (KeyInfo, error) {
	return call[KeyInfo](ctx, c, http.MethodPost, KeysAuthenticatePath, AuthenticateKeyRequest{APIKey: apiKey})
}

// Event reports an observation (confirmation page, fill, credential write).
func (c *Client) Event(ctx context.Context, sessionID string, ev EventRequest) error {
	return c.do(ctx, http.MethodPost, sessionPath(sessionID, "events"), ev, nil)
}

// Report reads the session's report.
func (c *Client) Report(ctx context.Context, sessionID string) (Report, error) {
	return call[Report](ctx, c, http.MethodGet, sessionPath(sessionID, "report"), nil)
}

// CloseSession ends the session and returns its final report.
func (c *Client) CloseSession(ctx context.Context, sessionID string) (CloseResponse, error) {
	return call[CloseResponse](ctx, c, http.MethodDelete, sessionPath(sessionID, ""), nil)
}

// Recipes looks up the checkout recipes for pageURL (the four-slot answer,
// passed through as is). The caller strips the URL first.
func (c *Client) Recipes(ctx context.Context, pageURL string) (json.RawMessage, error) {
	return call[json.RawMessage](ctx, c, http.MethodGet, RecipesPath+"?"+url.Values{"url": {pageURL}}.Encode(), nil)
}

// SubmitRecipe sends a recipe submission; proxyd answers once screening
// finished or its own wait ran out (status pending).
func (c *Client) SubmitRecipe(ctx context.Context, req SubmitRecipeRequest) (RecipeSubmission, error) {
	return call[RecipeSubmission](ctx, c, http.MethodPost, SubmissionsPath, req)
}

// RecipeSubmission reads a submission, waiting up to wait (capped at 25 s
// by the server) while it is pending.
func (c *Client) RecipeSubmission(ctx context.Context, apiKey, id string, wait time.Duration) (RecipeSubmission, error) {
	q := url.Values{"apiKey": {apiKey}}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	return call[RecipeSubmission](ctx, c, http.MethodGet, SubmissionsPath+"/"+url.PathEscape(id)+"?"+q.Encode(), nil)
}

func sessionPath(id, sub string) string {
	p := SessionsPath + "/" + url.PathEscape(id)
	if sub != "" {
		p += "/" + sub
	}
	return p
}

// call does one request and decodes its 2xx answer into an Out: the shape
// of every client method that has an answer.
func call[Out any](ctx context.Context, c *Client, method, path string, in any) (Out, error) {
	var out Out
	err := c.do(ctx, method, path, in, &out)
	return out, err
}

// callWaiting is call for a call that may wait on the owner: a 202 answer
// is the approval_pending error PendingOf reads.
func callWaiting[Out any](ctx context.Context, c *Client, method, path string, in any) (Out, error) {
	var out, none Out
	var pending Pending
	status, err := c.doStatus(ctx, method, path, in, &out, &pending)
	if err == nil && status == http.StatusAccepted {
		return none, pendingError(&pending)
	}
	return out, err
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	_, err := c.doStatus(ctx, method, path, in, out, nil)
	return err
}

// doStatus sends a request and decodes a 2xx answer into out, or a 202 into
// accepted when it is not nil.
func (c *Client) doStatus(ctx context.Context, method, path string, in, out, accepted any) (int, error) {
	var body []byte
	header := http.Header{"Accept": {"application/json"}}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, agentvault.Wrap(agentvault.CodeInternal, err, "encode control request")
		}
		body = b
		header.Set("Content-Type", "application/json")
	}
	resp, err := c.send(ctx, method, path, body, header)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return resp.StatusCode, agentvault.Wrap(agentvault.CodeUpstream, err, "read control answer")
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, withRetryAfter(decodeError(resp.StatusCode, data), resp.Header)
	}
	if resp.StatusCode == http.StatusAccepted && accepted != nil {
		out = accepted
	}
	if out == nil || len(bytes.TrimSpace(data)) == 0 {
		return resp.StatusCode, nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return resp.StatusCode, agentvault.Wrap(agentvault.CodeInternal, err, "decode control answer")
	}
	return resp.StatusCode, nil
}

// retryAfterError is a refusal with the wait before trying again: one the
// client read back from a Retry-After header, so the agent is told it
// (seed 004: rate_limited, wait for Retry-After; egress_unavailable), or
// one proxyd built with RetryAfter. Like policy.RateLimitError, its
// RetryAfterDuration is what the server reads to write the header.
type retryAfterError struct {
	Err   error
	After time.Duration
}

func (e *retryAfterError) Error() string                     { return e.Err.Error() }
func (e *retryAfterError) Unwrap() error                     { return e.Err }
func (e *retryAfterError) RetryAfterDuration() time.Duration { return e.After }

// RetryAfter is err with the wait after which the caller may try again:
// the control API answers it with a Retry-After header and the client
// hands the same wait back, so mcpd words it for the agent (seed 004:
// egress_unavailable's seconds to wait).
func RetryAfter(err error, after time.Duration) error {
	return &retryAfterError{Err: err, After: after}
}

// withRetryAfter keeps a refusal's Retry-After, in whole seconds (the
// form the server writes; an HTTP date is not read).
func withRetryAfter(err error, h http.Header) error {
	secs, perr := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After")))
	if perr != nil || secs <= 0 {
		return err
	}
	return RetryAfter(err, time.Duration(secs)*time.Second)
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
