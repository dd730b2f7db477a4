package hosted

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The hosted server (seed 004, "On the hosted server"). A browser belongs
// to a session the agent names on each call with the `session` argument,
// not to the server process; a session belongs to the connection that
// started it. A connection is the API key the client authenticated with
// (the owner's connected app), or the server's own key when keys are off.
// No Mcp-Session-Id header is issued (streamable HTTP runs stateless), so
// the handle in the answer text is the only way back to a session.

// Config turns on the hosted server's rules. Zero fields take the seed's
// values.
type Config struct {
	// Now is the clock of the session limits (tests inject one).
	Now func() time.Time
	// CallDeadline: a call still running after it answers pending (25 s).
	// CallLimit and HandoffLimit end a call with hard_timeout (4 and 12
	// minutes).
	CallDeadline, CallLimit, HandoffLimit time.Duration
	// IdleLimit ends a session no call used for that long (13 minutes);
	// AgeLimit one whose browser opened that long ago (56 minutes).
	IdleLimit, AgeLimit time.Duration
	// SweepEvery is how often the limits are checked (15 s); negative
	// disables the sweeper (tests sweep by hand).
	SweepEvery time.Duration
}

const (
	maxHandleLen = 200
	endedKeep    = time.Hour
	endedMax     = 100
	// slotGrace: a session of another connection that no call used in its
	// first 2 minutes may be closed to make room at the session limit.
	slotGrace = 2 * time.Minute
)

// End reasons, as the first ended-session message names them.
const (
	reasonIdle       = "it was idle too long"
	reasonAge        = "its browser was near the proxy's one-hour limit for a session"
	reasonCredential = "its credential was about to lapse"
	reasonLimitOwn   = "the account was at its browser session limit and another session of this connection needed the slot"
	reasonLimitOther = "no call had used it in the 2 minutes since it started, and this account's hosted apps needed its browser session slot"
	reasonClosed     = "it was asked to (close_session)"
	reasonOwner      = "the account holder ended it on the dashboard"
)

// startsSession: without a session, these tools start one (open_page with
// a browser, the others without). A first call of any other tool is refused
// before it runs.
var startsSession = map[string]bool{
	"open_page": true, "get_token_catalog": true, "create_login": true, "get_signup_request": true,
	"wait_for_signup_approval": true, "set_login_username": true, "rotate_login_password": true,
}

// runsAlone: without a session these run on their own and name no handle.
var runsAlone = map[string]bool{"get_checkout_recipes": true, "submit_checkout_recipe": true, "get_recipe_submission": true}

// noTouch: calls that do not reach the browser do not keep a session from
// being idle.
var noTouch = map[string]bool{"get_run_report": true}

// Tools is what the call layer needs of the tool server it runs calls for
// (package mcpserver's Server): its sessions, and the wording of its
// answers, whose status line the call layer adds to but does not define.
type Tools interface {
	// Open starts a session under apiKey (a proxy session and the tool
	// server's own state on it), known from now on by handle. An error
	// coded too_many_sessions lets the session table make room and try
	// once more.
	Open(ctx context.Context, apiKey, handle string) (Session, error)
	// Error is the answer for err: the tool server's one mapping of an
	// error to an isError result.
	Error(err error) *mcp.CallToolResult
	// Pending is the answer of a call that is still running.
	Pending(p Pending) *mcp.CallToolResult
	// AddStatus adds pairs to the status an answer starts with (its status
	// line, or a JSON answer's first keys).
	AddStatus(res *mcp.CallToolResult, pairs [][2]string)
	// Code is the code an answer's status names, "" when none.
	Code(res *mcp.CallToolResult) agentvault.Code
}

// Session is one of the tool server's sessions, as the session table sees
// it.
type Session interface {
	// ProxyID is its proxy session's id, the key the dashboard lists it by.
	ProxyID() string
	// Expires is when its proxy credential lapses; zero when it does not.
	Expires() time.Time
	// HasPage reports whether it shows a page (open_page got one).
	HasPage() bool
	// PageHost is the host of the page it shows, and whether the session
	// was free to be read (a running call holds it; then ok is false).
	PageHost() (host string, ok bool)
	// Close ends it: the proxy session and the browser context. Closing
	// twice is harmless.
	Close(ctx context.Context)
	// Found is what its close found, for the ended-session message.
	Found() *Found
}

// Options are the parts of the tool server the call layer uses.
type Options struct {
	// APIKey is the key of the local connection (stdio, or HTTP without
	// keys), and of a connection that brought none.
	APIKey string
	Logger *slog.Logger
	// Apps keeps the dashboard's list of connected apps; nil: none.
	Apps AppReporter
	// Stop ends with the server: the sweeper, reports and waits stop.
	Stop context.Context
}

// Calls is the call layer of one MCP server: every tool call runs through
// Dispatch. On the local server it keeps the retry rules (replay.go) and
// the call deadlines (pending.go) for the one connection; with Enable, the
// hosted server's rules besides.
type Calls struct {
	tools Tools
	opts  Options
	log   *slog.Logger
	// closeAnywayOnce adds closeAnyway to the server once (Handler).
	closeAnywayOnce sync.Once

	mu sync.Mutex
	// hosted holds the hosted server's connections (nil on the local
	// server); local is the one connection of the local server, or of a
	// hosted server without API keys.
	hosted *table
	local  *conn
}

// New builds the call layer for tools.
func New(tools Tools, opts Options) *Calls {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Stop == nil {
		opts.Stop = context.Background()
	}
	return &Calls{tools: tools, opts: opts, log: opts.Logger, local: newConn("local", "", opts.APIKey)}
}

// table is the hosted server's connections.
type table struct {
	cfg   Config
	mu    sync.Mutex
	conns map[string]*conn
}

func (cl *Calls) table() *table {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.hosted
}

func (h *table) now() time.Time {
	if h != nil && h.cfg.Now != nil {
		return h.cfg.Now()
	}
	return time.Now()
}

func (h *table) idle() time.Duration { return durOr(h.cfg.IdleLimit, 13*time.Minute) }
func (h *table) age() time.Duration  { return durOr(h.cfg.AgeLimit, 56*time.Minute) }

func durOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// conn is one connection: its sessions, the records of the ones that
// ended, its running and kept calls, and its pending answers.
type conn struct {
	id     string
	name   string
	apiKey string

	mu       sync.Mutex
	live     map[string]*hsession
	ended    []*endedRec
	flights  map[string]*Flight
	firsts   map[string]firstCall
	pendings map[string]*Flight
	replay   replayCache
}

type firstCall struct {
	handle string
	at     time.Time
}

func newConn(id, name, key string) *conn {
	return &conn{id: id, name: name, apiKey: key, live: map[string]*hsession{}, flights: map[string]*Flight{},
		firsts: map[string]firstCall{}, pendings: map[string]*Flight{}}
}

func (c *conn) addPending(id string, f *Flight) {
	c.mu.Lock()
	c.pendings[id] = f
	c.mu.Unlock()
}

func (c *conn) pending(id string) *Flight {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pendings[id]
}

// uncollected counts the calls that answered pending and whose answer
// nobody fetched.
func (c *conn) uncollected() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, f := range c.pendings {
		f.mu.Lock()
		if !f.fetched {
			n++
		}
		f.mu.Unlock()
	}
	return n
}

// hsession is a live hosted session.
type hsession struct {
	handle      string
	conn        *conn
	ss          Session
	started     time.Time
	opened      time.Time // browser opened; zero until open_page got a page
	lastUsed    time.Time
	calls       int
	inFlight    int
	credExpires time.Time
	ending      *endedRec // ended while a call was in flight
	pageHost    string    // the page's host, as last reported (apps.go)
}

// endedRec is what is left of an ended session: why, and what its close
// found.
type endedRec struct {
	handle string
	reason string
	at     time.Time

	mu    sync.Mutex
	found *Found
	// closed is closed once found is set: a call refused while the close
	// runs (on another goroutine) waits for what it found, briefly.
	closed chan struct{}
	// answer is close_session's first answer, returned again when it is
	// sent again for the same handle.
	answer *mcp.CallToolResult
}

// Found is what a session's close found, as the first ended-session
// message gives it (the tool server reads it: Session.Found).
type Found struct {
	Reports        []control.Report `json:"reports,omitempty"`
	CoversWholeRun *bool            `json:"coversWholeRun,omitempty"`
	VaultWrites    []string         `json:"vaultWrites,omitempty"`
	TeardownError  string           `json:"teardownError,omitempty"`
	Note           string           `json:"note,omitempty"`
}

// closeWait bounds how long a refused call waits for a close running on
// another goroutine (the seed gives the proxy 5 seconds for this read).
const closeWait = 5 * time.Second

func (r *endedRec) message() string {
	r.mu.Lock()
	f, closed := r.found, r.closed
	r.mu.Unlock()
	if f == nil && closed != nil {
		select {
		case <-closed:
		case <-time.After(closeWait):
		}
		r.mu.Lock()
		f = r.found
		r.mu.Unlock()
	}
	if f == nil {
		f = &Found{Note: "The close had not finished yet. Do NOT read this as nothing having been filled."}
	}
	b, _ := json.Marshal(f)
	return fmt.Sprintf("This session has ended: the gateway closed it because %s. What its close found: %s", r.reason, b)
}

const endedNoRecord = "This session has ended: it was closed, timed out, or the gateway restarted."

func randomHandle(prefix string, n int) string {
	b := make([]byte, (n*5+7)/8)
	_, _ = rand.Read(b)
	return prefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))[:n]
}

// connOf is the connection a call came on.
func (cl *Calls) connOf(req *mcp.CallToolRequest) *conn {
	if req == nil {
		return cl.local
	}
	return cl.connOfExtra(req.Extra)
}

// connOfExtra is the connection of a request with extra.
func (cl *Calls) connOfExtra(extra *mcp.RequestExtra) *conn {
	if cl.table() == nil || extra == nil || extra.TokenInfo == nil || extra.TokenInfo.UserID == "" {
		return cl.local
	}
	ti := extra.TokenInfo
	key, _ := ti.Extra[tokenInfoKey].(string)
	name, _ := ti.Extra[tokenInfoName].(string)
	h := cl.table()
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.conns[ti.UserID]
	if c == nil {
		c = newConn(ti.UserID, name, key)
		h.conns[ti.UserID] = c
	}
	c.mu.Lock()
	c.apiKey, c.name = key, name
	c.mu.Unlock()
	return c
}

// APIKey is the API key a call's proxyd sessions and catalog use: the
// connection's own on the hosted server, the configured one otherwise. ctx
// is the call's.
func (cl *Calls) APIKey(ctx context.Context) string {
	if c := connFrom(ctx); c != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.apiKey != "" {
			return c.apiKey
		}
	}
	return cl.opts.APIKey
}

// rpcIDOf is the JSON-RPC id of a call, as the HTTP layer found it in the
// request body or idTransport in the message (rpcIDHeader).
func rpcIDOf(req *mcp.CallToolRequest) string {
	if req == nil || req.Extra == nil || req.Extra.Header == nil {
		return ""
	}
	return req.Extra.Header.Get(rpcIDHeader)
}

func argsOf(req *mcp.CallToolRequest) json.RawMessage {
	if req == nil || req.Params == nil {
		return nil
	}
	return req.Params.Arguments
}

// SessionArg is the optional session handle every tool accepts.
type SessionArg struct {
	Session string `json:"session,omitempty" jsonschema:"Handle of the session an earlier answer named (s_...). Leave it out on the local server: calls use the session open_page started."`
}

// Handle is the session the call names, "" for none.
func (a SessionArg) Handle() string { return a.Session }

// SetHandle names the session the call runs on.
func (a *SessionArg) SetHandle(h string) { a.Session = h }

// HandleSetter is a tool's input whose session can be read and set (every
// tool input embeds SessionArg).
type HandleSetter interface {
	Handle() string
	SetHandle(string)
}

// Dispatch runs one tool call (run) under the server's rules: on the local
// server a wait on the owner answers pending unless the client waits with
// progress notifications; on the hosted server every rule of seed 004. On
// the hosted server it may set in's session before run reads it.
func (cl *Calls) Dispatch(ctx context.Context, req *mcp.CallToolRequest, tool string, in HandleSetter, run func(context.Context) *mcp.CallToolResult) *mcp.CallToolResult {
	if r, ok := ctx.Value(reachedKey{}).(*atomic.Bool); ok {
		r.Store(true)
	}
	c := cl.connOf(req)
	if cl.table() == nil {
		return cl.dispatchLocal(ctx, req, c, tool, run)
	}
	return cl.dispatchHosted(ctx, req, c, tool, in, run)
}

// dispatchLocal runs a call on the local server (stdio, or any transport
// but the hosted HTTP one). A retransmission of a call that changes
// something (same tool, arguments and JSON-RPC id, which idTransport hands
// over, and an idempotency key if the client sent one) joins the running
// call or gets its first answer for 2 minutes, as on the hosted server
// (P20). The transport is one client, so the id alone tells it.
func (cl *Calls) dispatchLocal(ctx context.Context, req *mcp.CallToolRequest, c *conn, tool string, run func(context.Context) *mcp.CallToolResult) *mcp.CallToolResult {
	now := time.Now()
	idem, err := idempotencyKeyOf(req)
	if err != nil {
		return cl.tools.Error(err)
	}
	rpcID := rpcIDOf(req)
	kept := rpcID != "" && isKept(tool, argsOf(req))
	key := flightKeyOf(tool, canonicalArgs(argsOf(req)), "", rpcID, idem)
	var f *Flight
	if kept {
		// The kept answer and the running flight are looked up under
		// c.mu, which finish holds while it ends the flight: a call sent
		// again finds one or the other, never a gap between them, nor a
		// flight that has already answered.
		c.mu.Lock()
		if res := c.replay.get(key, now); res != nil {
			c.mu.Unlock()
			cl.log.Info("tool", "tool", tool, "status", "replayed")
			return res
		}
		if running := c.flights[key]; running != nil {
			c.mu.Unlock()
			cl.log.Info("tool", "tool", tool, "status", "joined")
			return cl.awaitFlight(ctx, c, running, 0, req.Params.GetProgressToken() == nil)
		}
		f = newFlight(tool, now, req)
		c.flights[key] = f
		c.mu.Unlock()
	} else {
		f = newFlight(tool, now, req)
	}
	finish := func(res *mcp.CallToolResult) {
		if kept {
			// Kept and out of the flights in one step under c.mu, before
			// the answer goes out: the client may send the call again the
			// moment it has the answer, and then finds it kept, or (a
			// failed call) no flight, and runs it. f.mu is never taken
			// under c.mu (pendingAnswer takes them the other way round).
			c.mu.Lock()
			if keepsAnswer(cl.tools, res) {
				c.replay.put(key, res, 1, time.Now())
			}
			if c.flights[key] == f {
				delete(c.flights, key)
			}
			c.mu.Unlock()
		}
		f.complete(res, time.Now())
	}
	if req != nil && req.Params != nil && req.Params.GetProgressToken() != nil {
		// A host that waits with progress notifications: the call
		// blocks, as before.
		res := run(withFlight(ctx, f))
		finish(res)
		return cloneResult(res)
	}
	go func() { finish(run(withFlight(context.WithoutCancel(ctx), f))) }()
	return cl.awaitFlight(ctx, c, f, 0, true)
}

func (cl *Calls) refusal(code agentvault.Code, ended bool, format string, args ...any) *mcp.CallToolResult {
	r := cl.tools.Error(agentvault.Errorf(code, format, args...))
	if ended {
		r = withSession(cl.tools, r, "", true)
	}
	return r
}

func (cl *Calls) dispatchHosted(ctx context.Context, req *mcp.CallToolRequest, c *conn, tool string, in HandleSetter, run func(context.Context) *mcp.CallToolResult) *mcp.CallToolResult {
	h := cl.table()
	now := h.now()
	handle := in.Handle()
	fromHeader := false
	if handle == "" && req != nil && req.Extra != nil && req.Extra.Header != nil {
		if v := req.Extra.Header.Get("Mcp-Session-Id"); v != "" {
			handle, fromHeader = v, true
		}
	}
	if len(handle) > maxHandleLen {
		return cl.refusal(agentvault.CodeInvalidParams, false, "session is longer than %d characters: pass the handle an earlier answer named (s_...).", maxHandleLen)
	}
	if res := cl.refuseUnchosen(req, tool); res != nil {
		cl.log.Info("tool", "tool", tool, "status", "not_chosen")
		return res
	}
	idem, err := idempotencyKeyOf(req)
	if err != nil {
		return cl.tools.Error(err)
	}
	args := canonicalArgs(argsOf(req))
	rpcID := rpcIDOf(req)
	// Only the client that made a call gets its answer again or joins it
	// (replay.go): a call on a session proves it with the handle, a first
	// call only with its idempotency key. Without either it runs on its
	// own, whatever another client on this API key sent.
	proven := handle != "" || idem != ""
	kept := proven && rpcID != "" && isKept(tool, argsOf(req))
	replayKey := flightKeyOf(tool, args, handle, rpcID, idem)
	if kept {
		if res := c.replay.get(replayKey, now); res != nil {
			cl.log.Info("tool", "tool", tool, "status", "replayed")
			return res
		}
	}
	// The same call at the same time: on the same session, or a first call
	// under the same idempotency key (its retransmission too, before the
	// first one finished).
	joinKey := ""
	switch {
	case handle != "":
		joinKey = flightKeyOf(tool, args, handle, "", "")
	case idem != "":
		joinKey = flightKeyOf(tool, args, "", "", idem)
	}
	// A retransmitted first call never starts a second session: it runs
	// again on the session the first one started.
	firstKey := flightKeyOf(tool, args, "", rpcID, idem)
	firstProven := handle == "" && rpcID != "" && idem != ""
	if firstProven {
		c.mu.Lock()
		if fc, ok := c.firsts[firstKey]; ok && now.Sub(fc.at) < replayKeep {
			handle = fc.handle
		}
		c.mu.Unlock()
	}
	f := newFlight(tool, now, req)
	if joinKey != "" {
		c.mu.Lock()
		if kept {
			if res := c.replay.get(replayKey, now); res != nil {
				c.mu.Unlock()
				cl.log.Info("tool", "tool", tool, "status", "replayed")
				return res
			}
		}
		if running := c.flights[joinKey]; running != nil {
			c.mu.Unlock()
			return cl.awaitFlight(ctx, c, running, cl.callDeadline(), true)
		}
		c.flights[joinKey] = f
		c.mu.Unlock()
	}
	done := func(res *mcp.CallToolResult, keep bool, weight int) {
		// As in dispatchLocal: kept and out of the flights in one step
		// under c.mu, where a call sent again looks them up, before the
		// answer goes out (f.mu is not taken under c.mu).
		c.mu.Lock()
		if keep && kept && keepsAnswer(cl.tools, res) {
			c.replay.put(replayKey, res, weight, h.now())
		}
		if joinKey != "" && c.flights[joinKey] == f {
			delete(c.flights, joinKey)
		}
		c.mu.Unlock()
		f.complete(res, h.now())
	}
	if handle != "" {
		// The owner may have ended it on the dashboard.
		cl.syncApps(ctx, c)
	}
	res, hs, started, earlier := cl.hostedSession(ctx, c, tool, handle, fromHeader)
	if res != nil {
		done(res, false, 0)
		return cloneResult(res)
	}
	if c.uncollected() >= maxPending {
		cl.leave(hs, false)
		if started {
			cl.dropStarted(hs)
		}
		done(cl.refusal(agentvault.CodeTooManyPending, false,
			"This connection has %d calls whose answers nobody fetched: call get_pending_result for them before starting more.", maxPending), false, 0)
		return cloneResult(f.result())
	}
	if started && firstProven {
		c.mu.Lock()
		c.firsts[firstKey] = firstCall{handle: hs.handle, at: now}
		c.mu.Unlock()
	}
	if hs == nil {
		// A tool that runs on its own without a session (with the
		// connection's key, as every call of it).
		go func() { done(run(withConn(withFlight(context.WithoutCancel(ctx), f), c)), true, 1) }()
		return cl.awaitFlight(ctx, c, f, cl.callDeadline(), true)
	}
	in.SetHandle(hs.handle)
	f.mu.Lock()
	f.handle = hs.handle
	f.mu.Unlock()
	closing := tool == "close_session"
	var rec *endedRec
	running := 0
	if closing {
		// It takes the session out of use at once: no new call enters.
		rec = cl.detach(hs, reasonClosed)
		c.mu.Lock()
		running = hs.inFlight - 1 // the calls besides this one
		c.mu.Unlock()
	}
	limit := h.hardLimit(tool)
	callCtx, cancel := context.WithTimeout(withFlight(context.WithoutCancel(ctx), f), limit)
	callCtx = withConn(callCtx, c)
	timer := time.AfterFunc(limit, func() {
		res := withSession(cl.tools, cl.tools.Error(hardTimeout(tool, limit)), hs.handle, false)
		done(res, true, 1)
	})
	go func() {
		defer cancel()
		res := run(callCtx)
		timer.Stop()
		failedFirst := started && res.IsError && !loginWrites[tool] && (tool != "open_page" || !hs.ss.HasPage())
		switch {
		case closing:
			if res.IsError && cl.tools.Code(res) == agentvault.CodeInternal {
				res = cl.closeAfterInternalError(hs)
			}
			if running > 0 && cl.awaitOthers(callCtx, hs) {
				res.Content = append(res.Content, &mcp.TextContent{Text: finishedAfterwards(hs.ss.Found())})
			}
			res = withSession(cl.tools, res, hs.handle, true)
			rec.mu.Lock()
			rec.answer = cloneResult(res)
			rec.mu.Unlock()
			rec.setFound(hs.ss.Found())
		case failedFirst:
			// A first call that fails starts no session.
			cl.leave(hs, false)
			cl.dropStarted(hs)
			c.mu.Lock()
			delete(c.firsts, firstKey)
			c.mu.Unlock()
			done(res, false, 0)
			return
		default:
			if earlier != nil {
				res = withEarlier(res, earlier)
			}
			if started && tool == "open_page" && !res.IsError {
				if line := cl.otherBrowsers(c, hs); line != "" {
					res.Content = append(res.Content, &mcp.TextContent{Text: line})
				}
			}
			ended := cl.leave(hs, !noTouch[tool])
			res = withSession(cl.tools, res, hs.handle, ended)
		}
		if closing {
			cl.leave(hs, false)
			cl.syncAppsLater(c)
		}
		weight := 1
		if started {
			weight = 2
		}
		done(res, true, weight)
	}()
	return cl.awaitFlight(ctx, c, f, cl.callDeadline(), true)
}

// otherBrowsers names the connection's other open browsers, for an
// open_page that started a new one (seed 004, open_page), or "". One API key
// is one connection, but any number of clients may share it, and a handle
// is the secret that lets a client act on a session (P24): so a browser is
// named by the host of its page and its times only, never by its handle or
// the rest of its address. A client that holds a handle knows which is its
// own.
func (cl *Calls) otherBrowsers(c *conn, hs *hsession) string {
	now := cl.table().now()
	type other struct {
		host         string
		opened, used time.Time
		busy         bool
		ss           Session
	}
	var others []other
	c.mu.Lock()
	for _, o := range c.live {
		// opened is set once a call left the session with a page (leave):
		// it is read here without taking the tool server's session, which
		// a running call may hold for minutes.
		if o == hs || o.opened.IsZero() {
			continue
		}
		others = append(others, other{host: o.pageHost, opened: o.opened, used: o.lastUsed, busy: o.inFlight > 0, ss: o.ss})
	}
	c.mu.Unlock()
	if len(others) == 0 {
		return ""
	}
	sort.Slice(others, func(i, j int) bool { return others[i].opened.Before(others[j].opened) })
	names := make([]string, 0, len(others))
	for _, o := range others {
		if h, ok := o.ss.PageHost(); ok && h != "" {
			o.host = h
		}
		where := "one on " + o.host
		if o.host == "" {
			where = "one whose site could not be read now"
		}
		n := fmt.Sprintf("%s (opened %s, last used %s", where, ago(now.Sub(o.opened)), ago(now.Sub(o.used)))
		if o.busy {
			n += ", a call running on it now"
		}
		names = append(names, n+")")
	}
	plural := "browser"
	if len(names) > 1 {
		plural = "browsers"
	}
	return fmt.Sprintf("This connection already has %d other open %s: %s. Handles are not listed here. To reuse one whose handle you hold, pass that handle as `session` instead of opening the site again; close one you no longer need with close_session.",
		len(names), plural, strings.Join(names, "; "))
}

// ago says how long ago d was, in whole minutes.
func ago(d time.Duration) string {
	switch m := int(d / time.Minute); {
	case m < 1:
		return "under a minute ago"
	case m == 1:
		return "1 minute ago"
	default:
		return fmt.Sprintf("%d minutes ago", m)
	}
}

// reachedKey marks, in a close_session call's context, whether the call
// reached Dispatch (closeAnyway).
type reachedKey struct{}

// closeAnyway is the hosted server's receiving middleware for a
// close_session refused for its arguments before it reached Dispatch (the
// SDK's schema check): the session its `session` names is closed anyway,
// and the refusal says so (seed 004, "Closing a hosted session").
func (cl *Calls) closeAnyway(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
		if method != "tools/call" || !ok || p.Name != "close_session" || cl.table() == nil {
			return next(ctx, method, req)
		}
		reached := new(atomic.Bool)
		res, err := next(context.WithValue(ctx, reachedKey{}, reached), method, req)
		r, ok := res.(*mcp.CallToolResult)
		if err != nil || !ok || !r.IsError || reached.Load() {
			return res, err
		}
		var args struct {
			Session string `json:"session"`
		}
		if json.Unmarshal(p.Arguments, &args) != nil || args.Session == "" {
			return res, err
		}
		c := cl.connOfExtra(req.GetExtra())
		c.mu.Lock()
		hs := c.live[args.Session]
		c.mu.Unlock()
		if hs == nil {
			return res, err
		}
		cl.endSession(hs, reasonClosed)
		var why []string
		for _, ct := range r.Content {
			if tc, ok := ct.(*mcp.TextContent); ok {
				why = append(why, tc.Text)
			}
		}
		cl.log.Info("tool", "tool", "close_session", "status", "closed_anyway")
		out := cl.tools.Error(agentvault.Errorf(agentvault.CodeInvalidParams, "close_session's arguments were refused: %s. The session is closed anyway.", strings.Join(why, " ")))
		return withSession(cl.tools, out, hs.handle, true), nil
	}
}

// closeAfterInternalError is close_session's answer when the tool failed
// inside (seed 004, "Closing a hosted session"): the layer closes the
// session itself (Session.Close does nothing twice) and says what the close
// found.
func (cl *Calls) closeAfterInternalError(hs *hsession) *mcp.CallToolResult {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hs.ss.Close(ctx)
	f := hs.ss.Found()
	if f == nil {
		f = &Found{Note: NoReportNote}
	}
	b, _ := json.Marshal(f)
	return cl.tools.Error(agentvault.Errorf(agentvault.CodeInternal, "close_session hit an internal error, but the session is closed. What its close found: %s", b))
}

// NoReportNote is what a close that could read nothing found (seed 004,
// "When a session ends").
const NoReportNote = "No report could be read for that session. Do NOT read this as nothing having been filled."

// awaitOthers waits until close_session is the only call left on hs (the
// calls that were running when it closed have finished), or until ctx
// ends. It reports whether they finished.
func (cl *Calls) awaitOthers(ctx context.Context, hs *hsession) bool {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		hs.conn.mu.Lock()
		others := hs.inFlight - 1
		hs.conn.mu.Unlock()
		if others <= 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// finishedAfterwards is close_session's line for calls that were still
// running when the session closed and finished after it, with what the
// final close found.
func finishedAfterwards(f *Found) string {
	b, _ := json.Marshal(f)
	return "Calls still running when the session closed finished afterwards. What the final close found: " + string(b)
}

type connKey struct{}

func withConn(ctx context.Context, c *conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

func connFrom(ctx context.Context) *conn {
	c, _ := ctx.Value(connKey{}).(*conn)
	return c
}

// Replaced records that the session named handle runs on a new proxy
// session (the old one died under it): its credential lapses at expires,
// and its browser counts as opened anew. ctx is the call's.
func (cl *Calls) Replaced(ctx context.Context, handle string, expires time.Time) {
	c := connFrom(ctx)
	if c == nil {
		return
	}
	c.mu.Lock()
	if hs := c.live[handle]; hs != nil {
		hs.credExpires = expires
		hs.opened = time.Time{}
	}
	c.mu.Unlock()
}

// Running is how many calls run on the live session named handle now (0
// when no connection has one by that name).
func (cl *Calls) Running(handle string) int {
	conns := []*conn{cl.local}
	if h := cl.table(); h != nil {
		h.mu.Lock()
		for _, c := range h.conns {
			conns = append(conns, c)
		}
		h.mu.Unlock()
	}
	for _, c := range conns {
		c.mu.Lock()
		hs := c.live[handle]
		n := 0
		if hs != nil {
			n = hs.inFlight
		}
		c.mu.Unlock()
		if hs != nil {
			return n
		}
	}
	return 0
}

func (r *endedRec) setFound(f *Found) {
	r.mu.Lock()
	first := r.found == nil
	r.found = f
	r.mu.Unlock()
	if first && r.closed != nil {
		close(r.closed)
	}
}

// withEarlier adds what the close of the session an old Mcp-Session-Id
// named found, when a new session was started in its place.
func withEarlier(res *mcp.CallToolResult, rec *endedRec) *mcp.CallToolResult {
	msg := strings.TrimPrefix(rec.message(), "This session has ended: ")
	res.Content = append(res.Content, &mcp.TextContent{Text: "The earlier session your client named in its Mcp-Session-Id header has ended, so this call started a new one: " + msg})
	return res
}

// hostedSession resolves the session a call runs on (entering it), or the
// refusal it gets before it runs.
func (cl *Calls) hostedSession(ctx context.Context, c *conn, tool, handle string, fromHeader bool) (res *mcp.CallToolResult, hs *hsession, started bool, earlier *endedRec) {
	h := cl.table()
	if handle != "" {
		c.mu.Lock()
		hs = c.live[handle]
		var rec *endedRec
		if hs == nil {
			for _, r := range c.ended {
				if r.handle == handle && h.now().Sub(r.at) < endedKeep {
					rec = r
				}
			}
		} else {
			hs.inFlight++
			hs.calls++
		}
		c.mu.Unlock()
		if hs != nil {
			return nil, hs, false, nil
		}
		if !(fromHeader && startsSession[tool]) {
			if rec != nil {
				rec.mu.Lock()
				again := rec.answer
				rec.mu.Unlock()
				if tool == "close_session" && again != nil {
					return again, nil, false, nil
				}
				return cl.refusal(agentvault.CodeSessionEnded, true, "%s", rec.message()), nil, false, nil
			}
			return cl.refusal(agentvault.CodeSessionEnded, true, "%s", endedNoRecord), nil, false, nil
		}
		earlier = rec
	}
	if runsAlone[tool] {
		return nil, nil, false, nil
	}
	if !startsSession[tool] {
		return cl.refusal(agentvault.CodeNoPage, false,
			"%s needs a browser session: call open_page first, then pass the `session` it returns on this call.", tool), nil, false, nil
	}
	hs, err := cl.startHosted(ctx, c)
	if err != nil {
		return cl.tools.Error(err), nil, false, nil
	}
	return nil, hs, true, earlier
}

// startHosted opens a session for c (Tools.Open). At the key's session
// limit it closes an idle session of this connection (or one no call used
// in the 2 minutes since it started) to make room, once.
func (cl *Calls) startHosted(ctx context.Context, c *conn) (*hsession, error) {
	h := cl.table()
	c.mu.Lock()
	key := c.apiKey
	c.mu.Unlock()
	if key == "" {
		key = cl.opts.APIKey
	}
	handle := randomHandle("s_", 16)
	ss, err := cl.tools.Open(ctx, key, handle)
	if agentvault.ErrorCode(err) == agentvault.CodeTooManySessions {
		if v, why := cl.victim(c); v != nil {
			if rec := cl.detach(v, why); rec != nil {
				cl.finishEnd(v, rec)
			}
			ss, err = cl.tools.Open(ctx, key, handle)
		}
	}
	if err != nil {
		return nil, err
	}
	now := h.now()
	hs := &hsession{handle: handle, conn: c, ss: ss, started: now, lastUsed: now, calls: 1, inFlight: 1, credExpires: ss.Expires()}
	c.mu.Lock()
	c.live[handle] = hs
	c.mu.Unlock()
	cl.log.Info("hosted session opened", "conn", c.id)
	cl.syncAppsLater(c)
	return hs, nil
}

// Enable turns on the hosted server's rules (mcpd over HTTP). Call it
// before serving; a second call changes nothing.
func (cl *Calls) Enable(cfg Config) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.hosted != nil {
		return
	}
	cl.hosted = &table{cfg: cfg, conns: map[string]*conn{}}
	cl.runSweeper(cl.hosted)
}

// Hosted reports whether the hosted server's rules are on.
func (cl *Calls) Hosted() bool { return cl.table() != nil }

// victim picks the session to close at the session limit.
func (cl *Calls) victim(c *conn) (*hsession, string) {
	h := cl.table()
	now := h.now()
	var best *hsession
	c.mu.Lock()
	for _, hs := range c.live {
		if hs.inFlight == 0 && (best == nil || hs.lastUsed.Before(best.lastUsed)) {
			best = hs
		}
	}
	c.mu.Unlock()
	if best != nil {
		return best, reasonLimitOwn
	}
	h.mu.Lock()
	conns := make([]*conn, 0, len(h.conns))
	for _, o := range h.conns {
		conns = append(conns, o)
	}
	h.mu.Unlock()
	for _, o := range conns {
		o.mu.Lock()
		for _, hs := range o.live {
			if hs.inFlight == 0 && hs.calls <= 1 && now.Sub(hs.started) >= slotGrace {
				best = hs
			}
		}
		o.mu.Unlock()
		if best != nil {
			return best, reasonLimitOther
		}
	}
	return nil, ""
}

// leave ends a call on hs. touch records a use. It returns whether the
// session has ended (closing it when this was its last running call).
func (cl *Calls) leave(hs *hsession, touch bool) bool {
	if hs == nil {
		return false
	}
	c := hs.conn
	c.mu.Lock()
	hs.inFlight--
	if touch {
		hs.lastUsed = cl.table().now()
	}
	if hs.opened.IsZero() && hs.ss != nil && hs.ss.HasPage() {
		hs.opened = cl.table().now()
	}
	rec, last := hs.ending, hs.inFlight == 0
	c.mu.Unlock()
	if rec != nil && last {
		go cl.finishEnd(hs, rec)
	}
	return rec != nil
}

// dropStarted closes a session a failed first call started: no handle came
// back, so no record is kept either.
func (cl *Calls) dropStarted(hs *hsession) {
	c := hs.conn
	c.mu.Lock()
	delete(c.live, hs.handle)
	c.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		hs.ss.Close(ctx)
	}()
}

// detach takes hs out of use (no new call enters) and records why.
func (cl *Calls) detach(hs *hsession, reason string) *endedRec {
	c := hs.conn
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.live[hs.handle] != hs {
		return nil
	}
	delete(c.live, hs.handle)
	rec := &endedRec{handle: hs.handle, reason: reason, at: cl.table().now(), closed: make(chan struct{})}
	c.ended = append(c.ended, rec)
	if len(c.ended) > endedMax {
		c.ended = append([]*endedRec(nil), c.ended[len(c.ended)-endedMax:]...)
	}
	if reason != reasonClosed {
		hs.ending = rec
	}
	cl.log.Info("hosted session ended", "conn", c.id, "reason", reason)
	return rec
}

// endSession ends hs for reason: at once when no call runs on it, else
// when the last running call leaves.
func (cl *Calls) endSession(hs *hsession, reason string) {
	rec := cl.detach(hs, reason)
	if rec == nil {
		return
	}
	hs.conn.mu.Lock()
	idle := hs.inFlight == 0
	hs.conn.mu.Unlock()
	if idle {
		cl.finishEnd(hs, rec)
	}
}

func (cl *Calls) finishEnd(hs *hsession, rec *endedRec) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hs.ss.Close(ctx)
	rec.setFound(hs.ss.Found())
	cl.syncAppsLater(hs.conn)
}

// Sweep ends the sessions past a limit and forgets what is too old to
// keep. The sweeper calls it every Config.SweepEvery; with the sweeper off
// (tests), call it by hand.
func (cl *Calls) Sweep() {
	h := cl.table()
	if h == nil {
		return
	}
	now := h.now()
	h.mu.Lock()
	conns := make([]*conn, 0, len(h.conns)+1)
	for _, c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	conns = append(conns, cl.local)
	type end struct {
		hs     *hsession
		reason string
	}
	var ends []end
	for _, c := range conns {
		c.mu.Lock()
		for _, hs := range c.live {
			switch {
			case !hs.credExpires.IsZero() && !now.Before(hs.credExpires.Add(-time.Minute)):
				ends = append(ends, end{hs, reasonCredential})
			case hs.inFlight > 0:
			case now.Sub(hs.lastUsed) >= h.idle():
				ends = append(ends, end{hs, reasonIdle})
			case !hs.opened.IsZero() && now.Sub(hs.opened) >= h.age():
				ends = append(ends, end{hs, reasonAge})
			}
		}
		kept := c.ended[:0]
		for _, r := range c.ended {
			if now.Sub(r.at) < endedKeep {
				kept = append(kept, r)
			}
		}
		c.ended = kept
		for k, fc := range c.firsts {
			if now.Sub(fc.at) >= replayKeep {
				delete(c.firsts, k)
			}
		}
		for id, f := range c.pendings {
			f.mu.Lock()
			old := f.res != nil && now.Sub(f.ended) >= pendingKeep
			f.mu.Unlock()
			if old {
				delete(c.pendings, id)
			}
		}
		c.mu.Unlock()
	}
	for _, e := range ends {
		cl.endSession(e.hs, e.reason)
	}
	for _, c := range conns {
		cl.syncApps(cl.opts.Stop, c)
	}
}

func (cl *Calls) runSweeper(h *table) {
	every := h.cfg.SweepEvery
	if every < 0 {
		return
	}
	if every == 0 {
		every = 15 * time.Second
	}
	t := time.NewTicker(every)
	go func() {
		defer t.Stop()
		for {
			select {
			case <-cl.opts.Stop.Done():
				return
			case <-t.C:
				cl.Sweep()
			}
		}
	}()
}

// withSession adds the hosted status fields (session=, session_ended=) to
// an answer's status, and the handle line at its end.
func withSession(t Tools, res *mcp.CallToolResult, handle string, ended bool) *mcp.CallToolResult {
	if res == nil || len(res.Content) == 0 {
		return res
	}
	var extra [][2]string
	if handle != "" {
		extra = append(extra, [2]string{"session", handle})
	}
	if ended {
		extra = append(extra, [2]string{"session_ended", "true"})
	}
	if len(extra) > 0 {
		t.AddStatus(res, extra)
	}
	if handle != "" {
		res.Content = append(res.Content, &mcp.TextContent{Text: "session: " + handle + ` (pass this as "session" on every later call in this task)`})
	}
	return res
}
