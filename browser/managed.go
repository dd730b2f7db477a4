package browser

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
)

// The managed providers' session APIs, as their public references describe
// them (Steel: POST /v1/sessions, POST /v1/sessions/{id}/release, GET
// /v1/sessions/{id}/captchas/status, header steel-api-key; Browserbase: POST
// /v1/sessions, POST /v1/sessions/{id} with status REQUEST_RELEASE, POST
// /v1/certificates, header X-BB-API-Key). internal/managedtest is a local
// double of both.
//
// What goes to the provider: the session's proxy (proxyd's address with the
// session's own proxy credential), proxyd's CA certificate (Steel:
// caCertificates, PEM, as steel-browser's session service takes it;
// Browserbase: an uploaded certificate's id in proxySettings.caCertificates;
// neither is in the providers' public references yet), the viewport,
// the solver setting and a one-hour timeout (proxyd's own age limit for a
// session). What never leaves this file: the API key (a request header
// only), the proxy credential, the connect URL (it carries a key) and the
// provider's answers (an error says the HTTP status and what to check,
// never the body, which may echo any of them).

// managedTimeout bounds one call to a provider's API.
const managedTimeout = 45 * time.Second

// managedLifetime is the provider session's own timeout: proxyd ends a
// proxy session after an hour at most.
const managedLifetime = time.Hour

// captchaStatusEvery is how often Steel's captcha status is asked at most;
// a wait in between reuses the last answer.
const captchaStatusEvery = time.Second

type managedAPI struct {
	kind    Provider
	base    *url.URL
	key     APIKey
	project string
	solver  bool
	hc      *http.Client

	mu    sync.Mutex
	certs map[string]string // Browserbase: CA SPKI hash → uploaded certificate id
}

func newManagedAPI(r Remote) (*managedAPI, error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	raw := r.Endpoint
	if raw == "" {
		raw = defaultAPI[r.Kind()]
	}
	base, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "--browser-endpoint is not an absolute URL")
	}
	return &managedAPI{kind: r.Kind(), base: base, key: r.APIKey, project: r.Project, solver: r.SolverOn(),
		// Proxy variables in mcpd's environment must not steer the API
		// calls (the key travels in a header), and a redirect is not
		// followed: it would carry the key elsewhere.
		hc: &http.Client{Timeout: managedTimeout, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		certs: map[string]string{}}, nil
}

func (a *managedAPI) name() string {
	if a.kind == ProviderSteel {
		return "Steel"
	}
	return "Browserbase"
}

// managedSession is one provider session: its id and where to reach it.
type managedSession struct {
	id         string
	connectURL string // carries a key: never logged
}

// createArgs is what a new provider session is configured with.
type createArgs struct {
	proxy         *Proxy
	caPEM         string
	width, height int
}

// create starts a provider session with its proxy set to proxyd.
func (a *managedAPI) create(ctx context.Context, in createArgs) (managedSession, error) {
	if in.proxy != nil && loopback(hostOf(in.proxy.Server)) && !loopback(a.base.Hostname()) {
		return managedSession{}, agentvault.Errorf(agentvault.CodeInvalidInput,
			"proxyd's proxy at %s answers on this machine only, and a %s browser runs in the provider's cloud: start mcpd with --proxy set to the address the provider reaches proxyd at (docs/browsers.md)",
			in.proxy.Server, a.name())
	}
	switch a.kind {
	case ProviderSteel:
		return a.createSteel(ctx, in)
	default:
		return a.createBrowserbase(ctx, in)
	}
}

func (a *managedAPI) createSteel(ctx context.Context, in createArgs) (managedSession, error) {
	body := map[string]any{
		"solveCaptcha": a.solver,
		"timeout":      managedLifetime.Milliseconds(),
		"dimensions":   map[string]int{"width": in.width, "height": in.height},
	}
	if in.proxy != nil {
		u, err := url.Parse(in.proxy.Server)
		if err != nil || u.Host == "" {
			return managedSession{}, agentvault.Errorf(agentvault.CodeInternal, "the proxy address is not a URL")
		}
		u.User = url.UserPassword(in.proxy.Username, in.proxy.Password)
		body["proxyUrl"] = u.String()
	}
	if in.caPEM != "" {
		body["caCertificates"] = []string{in.caPEM}
	}
	var out struct {
		ID           string `json:"id"`
		WebsocketURL string `json:"websocketUrl"`
	}
	if err := a.do(ctx, http.MethodPost, "/v1/sessions", body, &out, "create a session"); err != nil {
		return managedSession{}, err
	}
	if out.ID == "" || out.WebsocketURL == "" {
		return managedSession{}, agentvault.Errorf(agentvault.CodeUpstream, "Steel created a session but named no id or websocketUrl")
	}
	// Steel's connect URL takes the API key as a query parameter.
	u, err := url.Parse(out.WebsocketURL)
	if err != nil {
		_ = a.release(ctx, out.ID)
		return managedSession{}, agentvault.Errorf(agentvault.CodeUpstream, "Steel's websocketUrl is not a URL")
	}
	q := u.Query()
	q.Set("apiKey", string(a.key))
	u.RawQuery = q.Encode()
	return managedSession{id: out.ID, connectURL: u.String()}, nil
}

func (a *managedAPI) createBrowserbase(ctx context.Context, in createArgs) (managedSession, error) {
	settings := map[string]any{
		"solveCaptchas": a.solver,
		"viewport":      map[string]int{"width": in.width, "height": in.height},
	}
	body := map[string]any{
		"browserSettings": settings,
		"timeout":         int(managedLifetime.Seconds()),
		"keepAlive":       false,
	}
	if a.project != "" {
		body["projectId"] = a.project
	}
	if in.proxy != nil {
		body["proxies"] = []map[string]any{{
			"type": "external", "server": in.proxy.Server,
			"username": in.proxy.Username, "password": in.proxy.Password,
		}}
	}
	if in.caPEM != "" {
		id, err := a.uploadCA(ctx, in.caPEM)
		if err != nil {
			return managedSession{}, err
		}
		body["proxySettings"] = map[string]any{"caCertificates": []string{id}}
	}
	var out struct {
		ID         string `json:"id"`
		ConnectURL string `json:"connectUrl"`
	}
	if err := a.do(ctx, http.MethodPost, "/v1/sessions", body, &out, "create a session"); err != nil {
		return managedSession{}, err
	}
	if out.ID == "" || out.ConnectURL == "" {
		return managedSession{}, agentvault.Errorf(agentvault.CodeUpstream, "Browserbase created a session but named no id or connectUrl")
	}
	return managedSession{id: out.ID, connectURL: out.ConnectURL}, nil
}

// uploadCA hands proxyd's CA certificate to Browserbase once per process
// and CA, and returns its certificate id.
func (a *managedAPI) uploadCA(ctx context.Context, caPEM string) (string, error) {
	spki, err := spkiOfPEM(caPEM)
	if err != nil {
		return "", err
	}
	a.mu.Lock()
	id, ok := a.certs[spki]
	a.mu.Unlock()
	if ok {
		return id, nil
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", "agentvault-proxy-ca.pem")
	if err != nil {
		return "", agentvault.Wrap(agentvault.CodeInternal, err, "prepare the CA upload")
	}
	_, _ = io.WriteString(fw, caPEM)
	_ = mw.Close()
	var out struct {
		ID string `json:"id"`
	}
	if err := a.send(ctx, http.MethodPost, "/v1/certificates", mw.FormDataContentType(), &buf, &out, "take proxyd's CA certificate"); err != nil {
		return "", err
	}
	if out.ID == "" {
		return "", agentvault.Errorf(agentvault.CodeUpstream, "Browserbase took the CA certificate but named no id")
	}
	a.mu.Lock()
	a.certs[spki] = out.ID
	a.mu.Unlock()
	return out.ID, nil
}

// release ends a provider session (the provider stops billing it).
func (a *managedAPI) release(ctx context.Context, id string) error {
	if a.kind == ProviderSteel {
		return a.do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(id)+"/release", map[string]any{}, nil, "release the session")
	}
	body := map[string]any{"status": "REQUEST_RELEASE"}
	if a.project != "" {
		body["projectId"] = a.project
	}
	return a.do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(id), body, nil, "release the session")
}

// steelCaptchaSolving asks Steel whether its solver works on a challenge
// in any page of the session.
func (a *managedAPI) steelCaptchaSolving(ctx context.Context, id string) (bool, error) {
	var pages []struct {
		IsSolvingCaptcha bool `json:"isSolvingCaptcha"`
	}
	if err := a.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(id)+"/captchas/status", nil, &pages, "report its captcha status"); err != nil {
		return false, err
	}
	for _, p := range pages {
		if p.IsSolvingCaptcha {
			return true, nil
		}
	}
	return false, nil
}

// do sends a JSON request and decodes a JSON answer into out (nil: the
// answer is drained).
func (a *managedAPI) do(ctx context.Context, method, path string, body any, out any, what string) error {
	var rd io.Reader
	ctype := ""
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return agentvault.Wrap(agentvault.CodeInternal, err, "encode the request to %s", a.name())
		}
		rd, ctype = bytes.NewReader(b), "application/json"
	}
	return a.send(ctx, method, path, ctype, rd, out, what)
}

func (a *managedAPI) send(ctx context.Context, method, path, ctype string, body io.Reader, out any, what string) error {
	ctx, cancel := context.WithTimeout(ctx, managedTimeout)
	defer cancel()
	u := *a.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "build the request to %s", a.name())
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Accept", "application/json")
	if a.kind == ProviderSteel {
		req.Header.Set("steel-api-key", string(a.key))
	} else {
		req.Header.Set("X-BB-API-Key", string(a.key))
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		// The transport's text names the URL only (no key: that is a
		// header), but a cause is kept fixed all the same.
		return agentvault.Wrap(agentvault.CodeUpstream, errors.New("provider request failed (text withheld)"),
			"%s's API at %s did not answer when asked to %s: check --browser-endpoint and the network", a.name(), a.base.Host, what)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		hint := "the provider's status"
		switch resp.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			hint = "the API key (" + APIKeyEnv(a.kind) + " or --browser-api-key-file)"
		case http.StatusPaymentRequired, http.StatusTooManyRequests:
			hint = "the account's plan and its concurrent session limit"
		case http.StatusBadRequest, http.StatusUnprocessableEntity:
			hint = "the settings mcpd sends (the provider may not offer one of them on this plan)"
		}
		return agentvault.Errorf(agentvault.CodeUpstream, "%s answered HTTP %d when asked to %s: check %s", a.name(), resp.StatusCode, what, hint)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(out); err != nil {
		return agentvault.Errorf(agentvault.CodeUpstream, "%s's answer when asked to %s is not the JSON its API documents", a.name(), what)
	}
	return nil
}

// spkiOfPEM is the base64 SHA-256 of the first certificate's public key,
// the form Chromium's --ignore-certificate-errors-spki-list takes.
func spkiOfPEM(s string) (string, error) {
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		return "", agentvault.Errorf(agentvault.CodeInvalidInput, "proxyd's CA is not a PEM certificate")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", agentvault.Wrap(agentvault.CodeInvalidInput, err, "proxyd's CA certificate does not parse")
	}
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:]), nil
}

// solverPickup is how long after a document arrives (its commit, then its
// DOMContentLoaded) its solver may take to announce a challenge there.
// Until then a challenge may be up that the solver has not picked up yet
// (the page's own text is no guide: a challenge page can look like any
// page), so the session counts as pending: without this, the
// post-credential challenge of seed 000 would be read as the signed-in page
// it replaced.
const solverPickup = 3 * time.Second

// solverState is a managed session's captcha solver as mcpd sees it.
type solverState struct {
	api *managedAPI
	id  string

	mu sync.Mutex
	// arrived is when the latest document of the session's pages
	// committed or was parsed.
	arrived time.Time
	// solving is Browserbase's: set by its "browserbase-solving-started"
	// console message, cleared by the next browserbase-solving-* message
	// or a navigation of a main frame.
	solving bool
	// asked and last are Steel's: the last status answer and when.
	asked time.Time
	last  bool
}

// bbSolvingPrefix starts every console message Browserbase's solver logs.
const bbSolvingPrefix = "browserbase-solving-"

// console reads one console message of the session's pages.
func (st *solverState) console(text string) {
	if !strings.HasPrefix(text, bbSolvingPrefix) {
		return
	}
	st.mu.Lock()
	st.solving = text == bbSolvingPrefix+"started"
	st.mu.Unlock()
}

// navigated is a main frame's navigation, seen before anything of the new
// document: it starts the pickup window and clears Browserbase's signal
// (nothing is solved there until the solver says so). A navigation within
// the document clears it too: a solve it interrupted is not waited for.
func (st *solverState) navigated() {
	st.mu.Lock()
	st.solving, st.arrived = false, time.Now()
	st.mu.Unlock()
}

// parsed is a document's DOMContentLoaded: a slow page's window starts
// again once its challenge can show.
func (st *solverState) parsed() {
	st.mu.Lock()
	st.arrived = time.Now()
	st.mu.Unlock()
}

func (st *solverState) pending(ctx context.Context) (bool, error) {
	st.mu.Lock()
	fresh := !st.arrived.IsZero() && time.Since(st.arrived) < solverPickup
	if fresh || st.api.kind != ProviderSteel {
		v := fresh || st.solving
		st.mu.Unlock()
		return v, nil
	}
	if !st.asked.IsZero() && time.Since(st.asked) < captchaStatusEvery {
		v := st.last
		st.mu.Unlock()
		return v, nil
	}
	st.mu.Unlock()
	v, err := st.api.steelCaptchaSolving(ctx, st.id)
	if err != nil {
		return false, err
	}
	st.mu.Lock()
	st.asked, st.last = time.Now(), v
	st.mu.Unlock()
	return v, nil
}
