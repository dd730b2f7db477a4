package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/browser"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/mcpserver/hosted"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/skills"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Control is what mcpd needs from proxyd's control API (control.Client
// implements it).
type Control interface {
	CreateSession(ctx context.Context, apiKey string) (control.CreateSessionResponse, error)
	Catalog(ctx context.Context, apiKey, pageURL string) (json.RawMessage, error)
	Authorize(ctx context.Context, sessionID string, req control.AuthorizeRequest) (control.AuthorizeResponse, error)
	Event(ctx context.Context, sessionID string, ev control.EventRequest) error
	Report(ctx context.Context, sessionID string) (control.Report, error)
	CloseSession(ctx context.Context, sessionID string) (control.CloseResponse, error)
	// Wait long-polls a pending owner approval (authorize answered
	// approval_pending) for up to timeout.
	Wait(ctx context.Context, waitID string, timeout time.Duration) (control.WaitAnswer, error)
}

var _ Control = (*control.Client)(nil)

// Config wires a Server.
type Config struct {
	Control Control
	// APIKey is the agent's key (avk_...). It is sent to proxyd only.
	APIKey string
	// ProxyURL overrides the proxy address proxyd announces.
	ProxyURL string
	// DriverDir and ChromiumPath locate playwright's driver and Chromium.
	DriverDir, ChromiumPath string
	// Browser, when set, is a browser mcpd does not launch: a remote one
	// or a managed provider (browser.Remote; the zero value is local).
	Browser browser.Remote
	// ExtraTrustSPKI adds certificate SPKI hashes Chromium trusts besides
	// proxyd's CA.
	ExtraTrustSPKI []string
	// UnsafeDirectBrowser opens browser sessions without the proxy. Tests of
	// the tools without proxyd only: nothing is substituted on the wire.
	UnsafeDirectBrowser bool
	// Redactor scrubs page text and checks selectors after a fill; nil
	// means package redact.
	Redactor Redactor
	// OwnerWaitMax bounds how long one fill waits on the owner (default 15
	// minutes, the tool reference's wait for a new site); WaitPoll is one
	// long poll of that wait (default 20 s, at most proxyd's 25 s cap).
	OwnerWaitMax, WaitPoll time.Duration
	// Recipes is the recipe registry over the control API; nil uses
	// Control when it implements RecipeControl (control.Client does).
	Recipes RecipeControl
	// RegistryTimeout bounds one registry call (default 20 s);
	// RecipeScreenWait bounds a submission's wait for its screening
	// (default 45 s).
	RegistryTimeout, RecipeScreenWait time.Duration
	Logger                            *slog.Logger
	// browser_login (tools_browser_login.go): LoginBudget is its end-to-end
	// budget (default 120 s); Captcha the managed browser's solver (nil:
	// no captcha waits); ArtifactDir where its masked diagnostic captures
	// are kept for the owner, and get_session_outcome's receipt images
	// (receipt.go) (Main defaults it to <data>/mcpd/login-diagnostics; ""
	// keeps none and the answer degrades, as the seed allows a capture
	// that failed).
	LoginBudget time.Duration
	Captcha     CaptchaProvider
	ArtifactDir string
	// Credentials, when set, registers the portal credential tools
	// (tools_credentials.go); Skills, when set, skill_find and file_write
	// over that skill directory.
	Credentials CredentialControl
	Skills      *skills.Dir
	// Hosted, when set, applies the hosted server's rules (package hosted).
	Hosted *HostedConfig
	// Handoffs is the hand-off part of the control API; nil uses Control
	// when it implements HandoffControl. HandoffWait is the owner's time
	// (default 10 minutes).
	Handoffs    HandoffControl
	HandoffWait time.Duration
	// NetworkLog turns on get_network_log (a staging diagnostic).
	NetworkLog bool
}

// Server holds the MCP server, the shared browser and the sessions.
type Server struct {
	cfg Config
	log *slog.Logger
	mcp *mcp.Server
	red Redactor

	driverOnce sync.Once
	driverDone chan struct{}
	driver     *browser.Driver
	driverErr  error

	// launchMu serialises launching and closing the shared browser, so a
	// launch in progress never holds up the session map.
	launchMu sync.Mutex
	browser  *browser.Browser
	closed   bool
	metrics  *Metrics // nil unless Main built the server
	// proxydDown is set while proxyd was last seen not answering
	// (proxyd_down.go).
	proxydDown atomic.Bool

	mu       sync.Mutex
	sessions map[string]*Session // by handle
	current  string              // the handle a call without session uses

	// stopCtx ends with Close: a fill waiting on the owner stops waiting.
	stopCtx      context.Context
	stop         context.CancelFunc
	ownerWaitMax time.Duration
	waitPoll     time.Duration
	loginBudget  time.Duration
	captcha      CaptchaProvider

	// integrationOf recognises a payment integration's card frame
	// (policy.PaymentIntegration; tests swap it to mark a test frame).
	integrationOf func(frameURL string) (policy.Integration, bool)
	// integrations is the proxy's list, the owner's entries with the
	// shipped ones, read over the control API (cse.go).
	integrations *integrationCache

	recipes         RecipeControl
	registryTimeout time.Duration
	screenWait      time.Duration
	// calls is the call layer every tool call runs through (calls.go).
	calls *hosted.Calls
}

// New builds the server and registers the tools.
func New(cfg Config) (*Server, error) {
	if cfg.Control == nil {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "mcpserver: Control is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, red: cfg.Redactor, sessions: map[string]*Session{}, driverDone: make(chan struct{}),
		ownerWaitMax: cfg.OwnerWaitMax, waitPoll: cfg.WaitPoll, integrationOf: policy.PaymentIntegration,
		integrations: &integrationCache{},
		loginBudget:  cfg.LoginBudget, captcha: cfg.Captcha}
	s.stopCtx, s.stop = context.WithCancel(context.Background())
	if s.ownerWaitMax <= 0 {
		s.ownerWaitMax = defaultOwnerWaitMax
	}
	if s.waitPoll <= 0 || s.waitPoll > 25*time.Second {
		s.waitPoll = defaultWaitPoll
	}
	if s.red == nil {
		s.red = redactPkg{}
	}
	s.recipes = cfg.Recipes
	if rc, ok := cfg.Control.(RecipeControl); ok && s.recipes == nil {
		s.recipes = rc
	}
	s.registryTimeout, s.screenWait = cfg.RegistryTimeout, cfg.RecipeScreenWait
	if s.registryTimeout <= 0 {
		s.registryTimeout = defaultRegistryTimeout
	}
	if s.screenWait <= 0 {
		s.screenWait = defaultScreenWait
	}
	var apps hosted.AppReporter
	if ar, ok := cfg.Control.(hosted.AppReporter); ok {
		apps = ar
	}
	s.calls = hosted.New(hostedTools{s}, hosted.Options{APIKey: cfg.APIKey, Logger: s.log, Apps: apps, Stop: s.stopCtx})
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "agentvault-mcpd", Version: "0.1.0"}, &mcp.ServerOptions{
		Instructions: serverInstructions,
	})
	s.register()
	s.registerCredentials()
	s.registerAccounts()
	s.registerHints()
	s.registerBrowserLogin()
	s.calls.RegisterPending(s.mcp)
	if cfg.Hosted != nil {
		s.EnableHosted(*cfg.Hosted)
	}
	return s, nil
}

const serverInstructions = `agentvault fills checkouts and sign-ins with mock tokens (av_...) that the proxy swaps for real values only on the wire to sites the owner allows. Start with get_token_catalog and get_checkout_recipes (selectors other runs recorded for the site), then open_page, snapshot_page to orient, fill_checkout / fill_login with tokens, then get_session_outcome and get_run_report; finish with close_session. Every prose answer starts with a status line (status=ok|error ...); JSON answers carry status as their first key.`

// MCP returns the underlying server (to connect it to any transport).
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Run serves one MCP connection until it ends or ctx is done.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	return s.mcp.Run(ctx, hosted.Transport(t))
}

// Close ends every session (closing them on proxyd too) and the browser.
func (s *Server) Close() error {
	s.stop()
	s.mu.Lock()
	sessions := s.sessions
	s.sessions = map[string]*Session{}
	s.mu.Unlock()
	s.launchMu.Lock()
	b := s.browser
	s.browser = nil
	s.closed = true
	s.launchMu.Unlock()
	for _, ss := range sessions {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _ = s.closeSession(ctx, ss)
		cancel()
	}
	var err error
	if b != nil {
		err = b.Close()
	}
	s.driverOnce.Do(func() { close(s.driverDone) }) // no start after Close
	<-s.driverDone
	if s.driver != nil {
		err = errors.Join(err, s.driver.Stop())
	}
	return err
}

// Prewarm starts the playwright driver in the background, so that the
// first open_page only waits for Chromium. Calling it is optional.
func (s *Server) Prewarm() {
	s.driverOnce.Do(func() {
		go func() {
			defer close(s.driverDone)
			s.driver, s.driverErr = browser.StartDriver(s.driverConfig())
			if s.driverErr != nil {
				s.log.Warn("playwright driver did not start", "code", string(agentvault.ErrorCode(s.driverErr)))
			}
		}()
	})
}

func (s *Server) driverConfig() browser.Config {
	return browser.Config{DriverDir: s.cfg.DriverDir, ChromiumPath: s.cfg.ChromiumPath, Remote: s.cfg.Browser, Logger: s.log}
}

// getDriver returns the running driver, starting it now if Prewarm was not
// called.
func (s *Server) getDriver() (*browser.Driver, error) {
	s.Prewarm()
	<-s.driverDone
	if s.driver == nil {
		if s.driverErr == nil {
			return nil, agentvault.Errorf(agentvault.CodeInternal, "the server is closing")
		}
		return nil, s.driverErr
	}
	return s.driver, nil
}

type sessionArg interface{ Handle() string }

// toolFunc is a tool body: it gets the call's session (nil when the tool
// may run without one and none exists) and returns a finished result or an
// error that statusError turns into one.
type toolFunc[In any] func(ctx context.Context, in In) (*mcp.CallToolResult, error)

// addTool registers a tool with the status-line and error conventions
// applied in one place.
func addTool[In sessionArg](s *Server, name, desc string, readOnly bool, f toolFunc[In]) {
	tool := &mcp.Tool{Name: name, Description: desc, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: readOnly}}
	mcp.AddTool(s.mcp, tool, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		run := func(ctx context.Context) (res *mcp.CallToolResult) {
			start := time.Now()
			defer func() {
				if r := recover(); r != nil {
					// The panic value may quote anything: it is not logged or
					// shown, only the stack's shape for the operator.
					s.log.Error("tool panicked", "tool", name, "stack_bytes", len(debug.Stack()))
					res = statusError(agentvault.Errorf(agentvault.CodeInternal, "%s failed unexpectedly", name), nil)
				}
			}()
			call := &callState{req: req, tool: name, flight: hosted.FlightOf(ctx)}
			err := s.proxydCheck(ctx, name)
			var r *mcp.CallToolResult
			if err == nil {
				r, err = f(withCall(ctx, call), in)
			}
			if err != nil {
				err = s.proxydExplain(ctx, name, err)
				s.log.Info("tool", "tool", name, "status", "error", "code", string(agentvault.ErrorCode(err)), "ms", time.Since(start).Milliseconds())
				var fe *filledError
				if asFilled(err, &fe) {
					return withNotes(statusError(fe.err, &fe.filled), call.notes)
				}
				return withNotes(statusError(err, nil), call.notes)
			}
			s.log.Info("tool", "tool", name, "status", "ok", "ms", time.Since(start).Milliseconds())
			return withNotes(r, call.notes)
		}
		// The call layer (package hosted) applies the session, deadline and
		// retry rules, and may set in's session before run reads it.
		return s.calls.Dispatch(ctx, req, name, any(&in).(hosted.HandleSetter), run), nil, nil
	})
}

// withNotes appends what the call waited on (owner approvals) to a prose
// answer, one line each, skipping a line the answer already says.
func withNotes(r *mcp.CallToolResult, notes []string) *mcp.CallToolResult {
	if r == nil || len(notes) == 0 || len(r.Content) == 0 {
		return r
	}
	tc, ok := r.Content[0].(*mcp.TextContent)
	if !ok || strings.HasPrefix(tc.Text, "{") {
		return r
	}
	for _, n := range notes {
		if !strings.Contains(tc.Text, n) {
			tc.Text += "\n" + n
		}
	}
	return r
}

// filledError carries filled=N/M along with a fill tool's error.
type filledError struct {
	err    error
	filled [2]int
}

func (e *filledError) Error() string { return e.err.Error() }
func (e *filledError) Unwrap() error { return e.err }

func asFilled(err error, out **filledError) bool {
	fe, ok := err.(*filledError)
	if ok {
		*out = fe
	}
	return ok
}

func withFilled(err error, n, m int) error { return &filledError{err: err, filled: [2]int{n, m}} }

// lookup finds the session a call names, or the current one.
func (s *Server) lookup(handle string) (*Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if handle == "" {
		handle = s.current
	}
	if handle == "" {
		return nil, nil
	}
	ss, ok := s.sessions[handle]
	if !ok {
		return nil, agentvault.Errorf(agentvault.CodeSessionEnded, "This session has ended: it was closed, timed out, or the server restarted.")
	}
	return ss, nil
}

// pageSession returns the session of a page tool, refusing before
// open_page.
func (s *Server) pageSession(tool, handle string) (*Session, error) {
	ss, err := s.lookup(handle)
	if err != nil {
		return nil, err
	}
	if ss == nil || ss.page == nil {
		return nil, agentvault.Errorf(agentvault.CodeNoPage, "%s needs an open page: call open_page first.", tool)
	}
	if ss.handoff().parked {
		return nil, challengeRequired(tool)
	}
	if err := s.egressLost(ss); err != nil {
		return nil, err
	}
	return ss, nil
}

// ensureSession returns the call's session, opening one on proxyd when
// there is none yet.
func (s *Server) ensureSession(ctx context.Context, handle string) (*Session, error) {
	ss, err := s.lookup(handle)
	if err != nil || ss != nil {
		return ss, err
	}
	cs, err := s.cfg.Control.CreateSession(ctx, s.apiKeyOf(ctx))
	if err != nil {
		return nil, err
	}
	ss = newSession(cs)
	s.mu.Lock()
	s.sessions[cs.ID] = ss
	s.current = cs.ID
	s.mu.Unlock()
	s.log.Info("session opened", "session_bytes", len(cs.ID))
	return ss, nil
}

// ensureBrowser launches Chromium once, trusting proxyd's CA (or connects
// to the remote browser, or readies the managed provider, that
// Config.Browser names).
func (s *Server) ensureBrowser(spki string) (*browser.Browser, error) {
	s.launchMu.Lock()
	defer s.launchMu.Unlock()
	if s.closed {
		return nil, agentvault.Errorf(agentvault.CodeInternal, "the server is closing")
	}
	if s.browser != nil {
		if (spki == "" || s.browser.Trusts(spki)) && s.browser.Connected() {
			return s.browser, nil
		}
		// proxyd's CA changed (a restart with a new data dir): the flag is
		// process-wide, so the browser has to be relaunched. A browser
		// that went away (a remote one restarted) is reached again.
		_ = s.browser.Close()
		s.browser = nil
	}
	trust := append([]string(nil), s.cfg.ExtraTrustSPKI...)
	if spki != "" {
		trust = append(trust, spki)
	}
	d, err := s.getDriver()
	if err != nil {
		return nil, err
	}
	cfg := s.driverConfig()
	cfg.TrustSPKI = trust
	if s.cfg.Browser.Managed() {
		cfg.TrustPEM = s.caPEMOf(spki)
	}
	b, err := d.Launch(cfg)
	if err != nil {
		return nil, err
	}
	s.browser = b
	return b, nil
}

// caPEMOf is proxyd's CA certificate whose SPKI hash is spki, as a proxy
// session announced it (a managed provider is handed the certificate, not
// its hash); "" when no open session names it.
func (s *Server) caPEMOf(spki string) string {
	if spki == "" {
		return ""
	}
	s.mu.Lock()
	sessions := make([]*Session, 0, len(s.sessions))
	for _, ss := range s.sessions {
		sessions = append(sessions, ss)
	}
	s.mu.Unlock()
	for _, ss := range sessions {
		ss.seg.Lock()
		pem, match := ss.ctl.CAPEM, ss.ctl.CASPKI == spki
		ss.seg.Unlock()
		if match && pem != "" {
			return pem
		}
	}
	return ""
}

// prelaunch starts Chromium for a session that has no page yet, so that
// open_page finds it running.
func (s *Server) prelaunch(spki string) {
	if _, err := s.ensureBrowser(spki); err != nil {
		s.log.Warn("browser prelaunch failed", "code", string(agentvault.ErrorCode(err)))
	}
}

// closeSession ends a session on proxyd and closes its browser context.
func (s *Server) closeSession(ctx context.Context, ss *Session) (control.CloseResponse, error) {
	if ss.stopWaits != nil {
		ss.stopWaits()
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return ss.closeAnswer, ss.closeErr
	}
	ss.closed = true
	if ss.page != nil {
		if err := ss.page.Close(); err != nil {
			ss.teardownErr = "the browser context did not close cleanly"
		}
	}
	ss.events.Wait()
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	ss.closeAnswer, ss.closeErr = s.cfg.Control.CloseSession(ctx, ss.ctl.ID)
	s.mu.Lock()
	delete(s.sessions, ss.Handle)
	if s.current == ss.Handle {
		s.current = ""
	}
	s.mu.Unlock()
	return ss.closeAnswer, ss.closeErr
}

func ms(n int, def, max time.Duration) time.Duration {
	if n <= 0 {
		return def
	}
	d := time.Duration(n) * time.Millisecond
	if max > 0 && d > max {
		return max
	}
	return d
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
