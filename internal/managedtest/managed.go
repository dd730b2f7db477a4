package managedtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Kind is the provider the double plays.
type Kind string

const (
	Steel       Kind = "steel_cloud"
	Browserbase Kind = "browserbase"
)

// Options configures the double.
type Options struct {
	Kind Kind
	// APIKey is the key the API and the connect URL accept.
	APIKey string
	// Chromium locates the browser each session starts (its trust and
	// proxy come from the session's settings).
	Chromium ChromiumOptions
	// CaptchaSelector is the CSS of the challenge the solver works on in a
	// session created with solving on.
	CaptchaSelector string
	// Solve clears a challenge the solver found (a real solver computes
	// the answer; a test site hands it over). Nil: the solver works on
	// forever, as does Hold.
	Solve func(ctx context.Context, p *Page) error
	// SolveAfter is how long the solver works before it solves (default
	// one second), so that a client sees it busy.
	SolveAfter time.Duration
}

// Record is what a client asked for when it created a session, and what
// happened to it.
type Record struct {
	ID string
	// ProxyHost is the customer's proxy (host:port); ProxyCredential is
	// whether a proxy user and password came with it.
	ProxyHost       string
	ProxyCredential bool
	SolveCaptcha    bool
	// TrustedSPKI is the SPKI hash of the CA the session's browser was
	// told to trust ("" none).
	TrustedSPKI   string
	Width, Height int
	Released      bool
	// Signals are the solver's signals, in order: "started", "finished".
	Signals []string
}

// Server is a local double of a managed browser provider's session API
// (Steel Cloud or Browserbase, as their public references describe them),
// with a real Chromium per session behind it.
type Server struct {
	// URL is the API's base URL (--browser-endpoint).
	URL string

	opts Options
	srv  *httptest.Server
	hold atomic.Bool

	statusQueries atomic.Int32

	mu       sync.Mutex
	sessions map[string]*session
	order    []string
	certs    map[string]string // Browserbase certificate id → PEM
}

type session struct {
	rec        Record
	chrome     *Chromium
	chain      *chainProxy
	signingKey string
	stop       context.CancelFunc
	solverDone chan struct{}

	mu    sync.Mutex
	pages map[string]*pageState // target id → the solver's view
}

type pageState struct {
	url             string
	solving         bool
	started, acted  time.Time
	created, update time.Time
}

// Start serves the double on loopback; the test's end releases every
// session left and stops it.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Kind != Steel && opts.Kind != Browserbase {
		t.Fatalf("managedtest: unknown provider %q", opts.Kind)
	}
	if opts.SolveAfter == 0 {
		opts.SolveAfter = time.Second
	}
	s := &Server{opts: opts, sessions: map[string]*session{}, certs: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sessions", s.create)
	mux.HandleFunc("GET /connect/{id}", s.connect)
	if opts.Kind == Steel {
		mux.HandleFunc("POST /v1/sessions/{id}/release", s.release)
		mux.HandleFunc("GET /v1/sessions/{id}/captchas/status", s.captchaStatus)
	} else {
		mux.HandleFunc("POST /v1/sessions/{id}", s.update)
		mux.HandleFunc("POST /v1/certificates", s.upload)
	}
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Hold makes the solver work on every challenge without ever solving it
// (a solver that never finishes), or lets it solve again.
func (s *Server) Hold(on bool) { s.hold.Store(on) }

// Records lists the sessions created, oldest first.
func (s *Server) Records() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Record
	for _, id := range s.order {
		ss := s.sessions[id]
		ss.mu.Lock()
		r := ss.rec
		r.Signals = append([]string(nil), ss.rec.Signals...)
		ss.mu.Unlock()
		out = append(out, r)
	}
	return out
}

// StatusQueries is how many times Steel's captcha status was asked for.
func (s *Server) StatusQueries() int { return int(s.statusQueries.Load()) }

// Close releases every session still running and stops the API.
func (s *Server) Close() {
	s.mu.Lock()
	var open []*session
	for _, ss := range s.sessions {
		open = append(open, ss)
	}
	s.mu.Unlock()
	for _, ss := range open {
		s.end(ss)
	}
	s.srv.Close()
}

func (s *Server) authorized(r *http.Request) bool {
	h := "X-BB-API-Key"
	if s.opts.Kind == Steel {
		h = "steel-api-key"
	}
	return s.opts.APIKey != "" && r.Header.Get(h) == s.opts.APIKey
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// create starts a session: a proxy chained to the customer's, a Chromium
// behind it trusting the CA given, and the solver when asked for.
func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "invalid API key"})
		return
	}
	var body struct {
		// Steel
		ProxyURL       string   `json:"proxyUrl"`
		SolveCaptcha   bool     `json:"solveCaptcha"`
		CACertificates []string `json:"caCertificates"`
		Dimensions     *struct {
			Width, Height int
		} `json:"dimensions"`
		// Browserbase
		BrowserSettings *struct {
			SolveCaptchas *bool `json:"solveCaptchas"`
			Viewport      *struct {
				Width, Height int
			} `json:"viewport"`
		} `json:"browserSettings"`
		Proxies       json.RawMessage `json:"proxies"`
		ProxySettings *struct {
			CACertificates []string `json:"caCertificates"`
		} `json:"proxySettings"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "body is not JSON"})
		return
	}
	rec := Record{ID: randomID(8)}
	var proxyUser, proxyPass, caPEM string
	if s.opts.Kind == Steel {
		rec.SolveCaptcha = body.SolveCaptcha
		if body.Dimensions != nil {
			rec.Width, rec.Height = body.Dimensions.Width, body.Dimensions.Height
		}
		if body.ProxyURL != "" {
			u, err := url.Parse(body.ProxyURL)
			if err != nil || u.Host == "" {
				writeJSON(w, http.StatusBadRequest, map[string]string{"message": "proxyUrl is not a URL"})
				return
			}
			rec.ProxyHost = u.Host
			if u.User != nil {
				proxyUser = u.User.Username()
				proxyPass, _ = u.User.Password()
			}
		}
		if len(body.CACertificates) > 0 {
			caPEM = body.CACertificates[0]
		}
	} else {
		rec.SolveCaptcha = true // on by default
		if bs := body.BrowserSettings; bs != nil {
			if bs.SolveCaptchas != nil {
				rec.SolveCaptcha = *bs.SolveCaptchas
			}
			if bs.Viewport != nil {
				rec.Width, rec.Height = bs.Viewport.Width, bs.Viewport.Height
			}
		}
		var proxies []struct {
			Type     string `json:"type"`
			Server   string `json:"server"`
			Username string `json:"username"`
			Password string `json:"password"`
		}
		if len(body.Proxies) > 0 && body.Proxies[0] == '[' {
			if err := json.Unmarshal(body.Proxies, &proxies); err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"message": "proxies is not a list of proxy configurations"})
				return
			}
		}
		for _, p := range proxies {
			if p.Type != "external" {
				continue
			}
			u, err := url.Parse(p.Server)
			if err != nil || u.Host == "" {
				writeJSON(w, http.StatusBadRequest, map[string]string{"message": "proxies[].server is not a URL"})
				return
			}
			rec.ProxyHost, proxyUser, proxyPass = u.Host, p.Username, p.Password
		}
		if body.ProxySettings != nil && len(body.ProxySettings.CACertificates) > 0 {
			s.mu.Lock()
			caPEM = s.certs[body.ProxySettings.CACertificates[0]]
			s.mu.Unlock()
			if caPEM == "" {
				writeJSON(w, http.StatusBadRequest, map[string]string{"message": "unknown certificate id"})
				return
			}
		}
	}
	rec.ProxyCredential = proxyUser != "" && proxyPass != ""
	copts := s.opts.Chromium
	copts.Width, copts.Height = rec.Width, rec.Height
	if caPEM != "" {
		spki, err := spkiOf(caPEM)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"message": "caCertificates holds no certificate"})
			return
		}
		rec.TrustedSPKI = spki
		copts.TrustSPKI = []string{spki}
	}
	ss := &session{rec: rec, signingKey: randomID(16), pages: map[string]*pageState{}}
	if rec.ProxyHost != "" {
		chain, err := startChain(rec.ProxyHost, proxyUser, proxyPass)
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"message": "proxy chain did not start"})
			return
		}
		ss.chain = chain
		copts.ProxyServer = chain.URL()
	}
	chrome, err := startChromium(copts)
	if err != nil {
		if ss.chain != nil {
			ss.chain.close()
		}
		writeJSON(w, http.StatusInternalServerError, map[string]string{"message": "browser did not start"})
		return
	}
	ss.chrome = chrome
	ctx, cancel := context.WithCancel(context.Background())
	ss.stop = cancel
	ss.solverDone = make(chan struct{})
	if rec.SolveCaptcha && s.opts.CaptchaSelector != "" {
		go s.solver(ctx, ss)
	} else {
		close(ss.solverDone)
	}
	s.mu.Lock()
	s.sessions[rec.ID] = ss
	s.order = append(s.order, rec.ID)
	s.mu.Unlock()
	ws := "ws" + strings.TrimPrefix(s.URL, "http") + "/connect/" + rec.ID
	now := time.Now().UTC().Format(time.RFC3339)
	if s.opts.Kind == Steel {
		writeJSON(w, http.StatusOK, map[string]any{
			"id": rec.ID, "status": "live", "createdAt": now, "websocketUrl": ws + "?sessionId=" + rec.ID,
			"debugUrl": s.URL + "/debug/" + rec.ID, "sessionViewerUrl": s.URL + "/viewer/" + rec.ID,
			"solveCaptcha": rec.SolveCaptcha, "proxySource": map[bool]any{true: "external", false: nil}[rec.ProxyHost != ""],
			"dimensions": map[string]int{"width": rec.Width, "height": rec.Height},
		})
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{
		"id": rec.ID, "status": "RUNNING", "createdAt": now, "updatedAt": now, "startedAt": now,
		"connectUrl": ws + "?signingKey=" + ss.signingKey, "signingKey": ss.signingKey, "keepAlive": false, "proxyBytes": 0,
	})
}

func (s *Server) lookup(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}

// end stops a session's solver, browser and proxy chain.
func (s *Server) end(ss *session) {
	ss.mu.Lock()
	if ss.rec.Released {
		ss.mu.Unlock()
		return
	}
	ss.rec.Released = true
	ss.mu.Unlock()
	ss.stop()
	<-ss.solverDone
	ss.chrome.Close()
	if ss.chain != nil {
		ss.chain.close()
	}
}

// release is Steel's POST /v1/sessions/{id}/release.
func (s *Server) release(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "invalid API key"})
		return
	}
	ss := s.lookup(r.PathValue("id"))
	if ss == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "no such session"})
		return
	}
	s.end(ss)
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "message": "Session released"})
}

// update is Browserbase's POST /v1/sessions/{id}: REQUEST_RELEASE ends it.
func (s *Server) update(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "invalid API key"})
		return
	}
	var body struct {
		Status string `json:"status"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&body); err != nil || body.Status != "REQUEST_RELEASE" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "status must be REQUEST_RELEASE"})
		return
	}
	ss := s.lookup(r.PathValue("id"))
	if ss == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "no such session"})
		return
	}
	s.end(ss)
	now := time.Now().UTC().Format(time.RFC3339)
	writeJSON(w, http.StatusOK, map[string]any{"id": ss.rec.ID, "status": "COMPLETED", "updatedAt": now, "endedAt": now, "keepAlive": false})
}

// upload is Browserbase's POST /v1/certificates (multipart, field file).
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "invalid API key"})
		return
	}
	f, _, err := r.FormFile("file")
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "no file"})
		return
	}
	b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	if _, err := spkiOf(string(b)); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "not a PEM certificate"})
		return
	}
	id := randomID(8)
	s.mu.Lock()
	s.certs[id] = string(b)
	s.mu.Unlock()
	now := time.Now().UTC().Format(time.RFC3339)
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "createdAt": now, "updatedAt": now})
}

// captchaStatus is Steel's GET /v1/sessions/{id}/captchas/status: one entry
// per page with isSolvingCaptcha.
func (s *Server) captchaStatus(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "invalid API key"})
		return
	}
	s.statusQueries.Add(1)
	ss := s.lookup(r.PathValue("id"))
	if ss == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "no such session"})
		return
	}
	out := []map[string]any{}
	ss.mu.Lock()
	for id, p := range ss.pages {
		out = append(out, map[string]any{"pageId": id, "url": p.url, "isSolvingCaptcha": p.solving, "tasks": []any{},
			"created": p.created.UnixMilli(), "lastUpdated": p.update.UnixMilli()})
	}
	ss.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// connect hands the client's WebSocket to the session's Chromium, once the
// connect URL's key is right (Steel: the API key; Browserbase: the
// session's signing key).
func (s *Server) connect(w http.ResponseWriter, r *http.Request) {
	ss := s.lookup(r.PathValue("id"))
	if ss == nil {
		http.Error(w, "no such session", http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	ok := q.Get("apiKey") == s.opts.APIKey && q.Get("sessionId") == ss.rec.ID
	if s.opts.Kind == Browserbase {
		ok = q.Get("signingKey") == ss.signingKey
	}
	ss.mu.Lock()
	released := ss.rec.Released
	ss.mu.Unlock()
	if !ok || released {
		http.Error(w, "not authorized for this session", http.StatusUnauthorized)
		return
	}
	target, err := url.Parse(ss.chrome.WSURL)
	if err != nil {
		http.Error(w, "browser gone", http.StatusBadGateway)
		return
	}
	up, err := net.DialTimeout("tcp", target.Host, 10*time.Second)
	if err != nil {
		http.Error(w, "browser gone", http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "no hijack", http.StatusInternalServerError)
		return
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	head := "GET " + target.RequestURI() + " HTTP/1.1\r\nHost: " + target.Host + "\r\n"
	for k, vs := range r.Header {
		if strings.EqualFold(k, "Origin") || strings.EqualFold(k, "Host") {
			continue
		}
		for _, v := range vs {
			head += k + ": " + v + "\r\n"
		}
	}
	if _, err := io.WriteString(up, head+"\r\n"); err != nil {
		up.Close()
		c.Close()
		return
	}
	go func() {
		defer up.Close()
		defer c.Close()
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(up, brw); done <- struct{}{} }()
		go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
		<-done
	}()
}

// solverVisible is true while the challenge shows in the page.
func solverVisible(sel string) string {
	q, _ := json.Marshal(sel)
	return `(() => { const e = document.querySelector(` + string(q) + `); if (!e) return false; const r = e.getBoundingClientRect(); const st = getComputedStyle(e); return r.width > 0 && r.height > 0 && st.display !== 'none' && st.visibility !== 'hidden'; })()`
}

// solver plays the provider's captcha solver: it watches every page of
// the session over its own DevTools connection, works on a challenge it
// sees (Browserbase says so in the page's console, Steel in its status
// API), and clears it with Options.Solve unless held.
func (s *Server) solver(ctx context.Context, ss *session) {
	defer close(ss.solverDone)
	c, err := dialCDP(ss.chrome.WSURL)
	if err != nil {
		return
	}
	defer c.close()
	attached := map[string]*Page{}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		raw, err := c.call(ctx, "", "Target.getTargets", nil)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		var tg struct {
			TargetInfos []struct {
				TargetID string `json:"targetId"`
				Type     string `json:"type"`
				URL      string `json:"url"`
			} `json:"targetInfos"`
		}
		_ = json.Unmarshal(raw, &tg)
		live := map[string]bool{}
		for _, ti := range tg.TargetInfos {
			if ti.Type != "page" {
				continue
			}
			live[ti.TargetID] = true
			p := attached[ti.TargetID]
			if p == nil {
				r, err := c.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": ti.TargetID, "flatten": true})
				if err != nil {
					continue
				}
				var a struct {
					SessionID string `json:"sessionId"`
				}
				_ = json.Unmarshal(r, &a)
				p = &Page{c: c, session: a.SessionID}
				attached[ti.TargetID] = p
			}
			s.step(ctx, ss, ti.TargetID, ti.URL, p)
		}
		for id := range attached {
			if !live[id] {
				delete(attached, id)
				ss.mu.Lock()
				delete(ss.pages, id)
				ss.mu.Unlock()
			}
		}
	}
}

// step moves one page's solver state on.
func (s *Server) step(ctx context.Context, ss *session, id, pageURL string, p *Page) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := p.Eval(cctx, solverVisible(s.opts.CaptchaSelector))
	if err != nil {
		return // navigating: the next tick looks again
	}
	visible := string(v) == "true"
	now := time.Now()
	ss.mu.Lock()
	st := ss.pages[id]
	if st == nil {
		st = &pageState{created: now}
		ss.pages[id] = st
	}
	st.url = pageURL
	var signal string
	solve := false
	switch {
	case !st.solving && visible:
		st.solving, st.started, st.acted, st.update = true, now, time.Time{}, now
		signal = "started"
	case st.solving && !visible:
		st.solving, st.update = false, now
		signal = "finished"
	case st.solving && !s.hold.Load() && s.opts.Solve != nil && now.Sub(st.started) >= s.opts.SolveAfter &&
		(st.acted.IsZero() || now.Sub(st.acted) > 3*time.Second):
		st.acted = now
		solve = true
	}
	if signal != "" {
		ss.rec.Signals = append(ss.rec.Signals, signal)
	}
	ss.mu.Unlock()
	if signal != "" && s.opts.Kind == Browserbase {
		// Browserbase's solver logs its progress to the page's console.
		_, _ = p.Eval(cctx, fmt.Sprintf("console.log(%q)", "browserbase-solving-"+signal))
	}
	if solve {
		_ = s.opts.Solve(cctx, p)
	}
}

// spkiOf is the base64 SHA-256 of a PEM certificate's public key.
func spkiOf(s string) (string, error) {
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		return "", fmt.Errorf("no PEM block")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:]), nil
}
