package mcpserver

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/browser"
	"github.com/agentvault/agentvault/control"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// request_challenge_handoff (seed 004, docs/handoff.md). The agent must not
// solve a bank's 3-D Secure step, a one-time code or a CAPTCHA: the account
// owner does, on the live page. mcpd re-detects, registers the hand-off
// with proxyd (which tells the owner), streams the page's frames to proxyd
// for the owner's dashboard and replays the owner's clicks and keys, until
// the owner releases the page, gives up, or the wait ends. The agent gets
// only {outcome, challengeType, durationMs}: no frame and nothing typed ever
// goes into an MCP answer or a log line. Meanwhile the session's page tools
// answer challenge_required; close_session and get_run_report still work.

// HandoffControl is the hand-off part of proxyd's control API
// (control.Client implements it).
type HandoffControl interface {
	StartHandoff(ctx context.Context, sessionID string, req control.HandoffRequest) (control.HandoffStarted, error)
	HandoffFrame(ctx context.Context, id string, jpeg []byte, width, height int) error
	HandoffEvents(ctx context.Context, id string, after int64, wait time.Duration) (control.HandoffEvents, error)
	EndHandoff(ctx context.Context, id string, end control.HandoffEnd) error
}

var _ HandoffControl = (*control.Client)(nil)

const (
	// defaultHandoffWait is the owner's time: about 10 minutes (seed 004).
	defaultHandoffWait = 10 * time.Minute
	// handoffPoll is one long poll for the owner's input. It is short so a
	// page that closed under the owner (a 3-D Secure window closing itself)
	// is noticed and the view moves to the page the agent is left on.
	handoffPoll = 2 * time.Second
	// Screencast size and quality: enough to read a bank's code form.
	castMaxWidth, castMaxHeight, castQuality = 1280, 1280, 60
)

const descHandoff = "Hand the page to the account owner so they complete a challenge you must not (3-D Secure, a one-time code sent to them, a CAPTCHA or a block), then resume. " +
	"Re-detects first; then the owner gets the live page on their dashboard. Blocks until they finish, give up, or about 10 minutes pass; on the hosted server (or without progress notifications) it answers status=pending at once instead: fetch the outcome with get_pending_result in the same turn. " +
	"Answers JSON {outcome, challengeType, durationMs}, never what the owner typed: solved (carry on), completed (look at the page first), released_unsolved (detect_challenge, then hand off again), failed or abandoned (stop). " +
	"Meanwhile other page tools answer challenge_required; close_session and get_run_report still work. " +
	"Errors: handoff_not_applicable (an ambiguousOnly detection: the page is still yours), challenge_scan_incomplete (nobody was notified; detect again), unknown_target (\"Unknown pageId\": the page was gone, call close_popup; \"No challenge is present on this page\": carry on). " +
	"If your host cancels this call, the owner still has the page: re-orient with wait_for_selector or get_session_outcome once they are done."

func (s *Server) registerHandoffTools() {
	addTool(s, "request_challenge_handoff", descHandoff, false, s.requestChallengeHandoff)
}

type handoffAnswer struct {
	Outcome       string `json:"outcome"`
	ChallengeType string `json:"challengeType"`
	DurationMs    int64  `json:"durationMs"`
}

// handoffState is a session's parked hand-off.
type handoffState struct {
	parked bool
	// ownerDrove stays true for the rest of the session: observe_page's
	// errorText is withheld, since the page's messages may now quote what
	// the owner typed.
	ownerDrove bool
}

// handoffFlags is read without the session's lock: the hand-off holds
// that lock while it waits.
type handoffFlags struct {
	mu sync.Mutex
	st handoffState
	// wanted counts hand-offs waiting for the session's lock: a running
	// get_session_outcome check gives the page up to them (cancelled).
	wanted int
}

// handoffWanted reports whether a hand-off is waiting to take the page.
func (ss *Session) handoffWanted() bool {
	f := flagsOf(ss)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wanted > 0
}

// wantPage takes ss.mu for a hand-off, first saying so, so that an outcome
// check holding the lock stops and answers cancelled rather than keeping
// the owner from the page for up to 30 s.
func (ss *Session) wantPage() {
	f := flagsOf(ss)
	f.mu.Lock()
	f.wanted++
	f.mu.Unlock()
	ss.mu.Lock()
	f.mu.Lock()
	f.wanted--
	f.mu.Unlock()
}

func flagsOf(ss *Session) *handoffFlags { return &ss.ho }

func (ss *Session) handoff() handoffState {
	f := flagsOf(ss)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st
}

func (ss *Session) setParked(on bool) {
	f := flagsOf(ss)
	f.mu.Lock()
	f.st.parked = on
	if on {
		f.st.ownerDrove = true
	}
	f.mu.Unlock()
}

// challengeRequired refuses a page tool while the owner has the page.
func challengeRequired(tool string) error {
	return agentvault.Errorf(agentvault.CodeChallengeRequired,
		"%s is refused: the account owner has this page for a challenge hand-off. Wait for request_challenge_handoff to answer; close_session and get_run_report still work.", tool)
}

func (s *Server) handoffControl() (HandoffControl, error) {
	if s.cfg.Handoffs != nil {
		return s.cfg.Handoffs, nil
	}
	if hc, ok := s.cfg.Control.(HandoffControl); ok {
		return hc, nil
	}
	return nil, agentvault.Errorf(agentvault.CodeInternal, "this proxy cannot hand a page to the owner")
}

func (s *Server) handoffWait() time.Duration {
	if s.cfg.HandoffWait > 0 {
		return s.cfg.HandoffWait
	}
	return defaultHandoffWait
}

func (s *Server) requestChallengeHandoff(ctx context.Context, in noIn) (*mcp.CallToolResult, error) {
	ss, err := s.pageSession("request_challenge_handoff", in.Session)
	if err != nil {
		return nil, err
	}
	hc, err := s.handoffControl()
	if err != nil {
		return nil, err
	}
	ss.wantPage()
	unlock := true
	defer func() {
		if unlock {
			ss.mu.Unlock()
		}
	}()
	if ss.closed {
		return nil, agentvault.Errorf(agentvault.CodeSessionEnded, "This session has ended.")
	}
	lp, err := ss.page.LivePage()
	if err != nil {
		return nil, err
	}
	// Re-detect before anyone is summoned. A page that closed meanwhile
	// is gone, whatever the scan made of it (it failed, or read the page
	// below).
	c, err := ss.page.DetectChallenge()
	if gone := lp.Gone(); gone != nil {
		return nil, gone
	}
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeChallengeScanIncomplete, err, "The page could not be scanned; nobody was notified. Call detect_challenge again.")
	}
	a := challengeFrom(c, ss.loginPassword)
	switch {
	case !a.Detected && a.Inconclusive:
		return nil, agentvault.Errorf(agentvault.CodeChallengeScanIncomplete, "The page scan did not finish; nobody was notified. Call detect_challenge again.")
	case !a.Detected:
		return nil, agentvault.Errorf(agentvault.CodeUnknownTarget, "No challenge is present on this page: the proxy re-detected on the live page and found nothing. Carry on.")
	case a.AmbiguousOnly:
		return nil, agentvault.Errorf(agentvault.CodeHandoffNotApplicable, "Not handoff material: the only evidence is a field that might be a code input. Fill tokens.totp if this is your own login's authenticator step, otherwise report the step as unresolved. The page is still yours.")
	}
	wait := s.handoffWait()
	site := siteOf(ss.page.URL())
	started, err := hc.StartHandoff(ctx, ss.ctl.ID, control.HandoffRequest{ChallengeType: a.Type, Site: site, TimeoutMs: wait.Milliseconds()})
	if err != nil {
		return nil, err
	}
	ss.setParked(true)
	s.log.Info("challenge hand-off started", "type", a.Type)
	call := callOf(ctx)
	// The owner has the page now: a call that may answer pending (hosted,
	// or a client that does not wait with progress) does so at once,
	// naming the hand-off, and get_pending_result fetches its outcome.
	call.ownerWaiting(&control.Pending{Pending: true, WaitID: started.ID, Kind: "challenge_handoff", Site: site, ExpiresAt: time.Now().Add(wait)})
	done := make(chan handoffAnswer, 1)
	unlock = false // runHandoff owns the session until the owner is done
	go func() {
		done <- s.runHandoff(ss, hc, lp, started.ID, a.Type, wait)
	}()
	call.notify(ctx, "Waiting for the account owner to clear a "+a.Type+" step on the live page (up to "+wait.Round(time.Second).String()+"). Do not repeat this call.")
	tick := time.NewTicker(20 * time.Second)
	defer tick.Stop()
	for {
		select {
		case ans := <-done:
			return jsonAnswer(okStatus(), ans)
		case <-tick.C:
			call.notify(ctx, "Still waiting for the account owner to clear the "+a.Type+" step.")
		case <-ctx.Done():
			// The client gave up on the call; the owner still has the page.
			return nil, agentvault.Errorf(agentvault.CodeTimeout, "The call was cancelled, but the owner still has the page. Re-orient with wait_for_selector or get_session_outcome once they are done.")
		}
	}
}

// siteOf is the page's host for the owner's banner.
func siteOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// runHandoff streams the page and replays the owner's input until they
// decide, the wait ends or the session closes; then it re-detects and gives
// the outcome. It holds ss.mu (taken by the caller) and releases it.
func (s *Server) runHandoff(ss *Session, hc HandoffControl, lp *browser.LivePage, id, ctype string, wait time.Duration) handoffAnswer {
	start := time.Now()
	defer func() {
		ss.setParked(false)
		ss.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ss.waits, wait)
	defer cancel()

	// Frames: only the latest waits to be sent; one upload at a time.
	latest := make(chan browser.Frame, 1)
	onFrame := func(f browser.Frame) {
		select {
		case <-latest:
		default:
		}
		latest <- f
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case f := <-latest:
				fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
				_ = hc.HandoffFrame(fctx, id, f.JPEG, f.Width, f.Height)
				fcancel()
			case <-ctx.Done():
				return
			}
		}
	}()
	cast := func(p *browser.LivePage) {
		if err := p.StartScreencast(castMaxWidth, castMaxHeight, castQuality, onFrame); err != nil {
			s.log.Warn("hand-off screencast did not start", "code", string(agentvault.ErrorCode(err)))
		}
	}
	cast(lp)
	stopCast := func() { lp.StopScreencast() }

	decision := ""
	var after int64
	fails := 0
	for decision == "" {
		if lp.Closed() {
			// The window closed under the owner (a 3-D Secure popup closing
			// itself): show them the page the agent is left on.
			stopCast()
			if next, err := ss.page.CurrentLivePage(); err == nil && !next.Same(lp) {
				lp = next
				cast(lp)
			}
		}
		ev, err := hc.HandoffEvents(ctx, id, after, handoffPoll)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if fails++; fails > 10 {
				decision = "error"
				break
			}
			time.Sleep(500 * time.Millisecond)
			continue
		}
		fails = 0
		for _, in := range ev.Inputs {
			after = in.Seq
			if lp.Closed() {
				continue
			}
			// Errors are not logged with the input: it may be a code.
			switch in.Type {
			case "click":
				_ = lp.ClickAt(in.X, in.Y)
			case "text":
				_ = lp.Type(in.Text)
			case "key":
				_ = lp.Press(in.Key)
			}
		}
		if ev.Decision != "" && ev.Decision != control.HandoffOpen {
			decision = ev.Decision
		}
	}
	stopCast()
	cancel()
	wg.Wait()

	outcome := "abandoned"
	switch decision {
	case control.HandoffDone:
		outcome = s.recheck(ss)
	case control.HandoffFailed:
		outcome = "failed"
	case "error":
		outcome = "completed"
	}
	if errors.Is(ss.waits.Err(), context.Canceled) {
		outcome = "abandoned" // the session was closed under the hand-off
	}
	ans := handoffAnswer{Outcome: outcome, ChallengeType: ctype, DurationMs: time.Since(start).Milliseconds()}
	ectx, ecancel := context.WithTimeout(context.Background(), 5*time.Second)
	if err := hc.EndHandoff(ectx, id, control.HandoffEnd{Outcome: ans.Outcome, DurationMs: ans.DurationMs}); err != nil {
		s.log.Warn("hand-off end not recorded", "code", string(agentvault.ErrorCode(err)))
	}
	ecancel()
	s.log.Info("challenge hand-off ended", "type", ctype, "outcome", outcome, "ms", ans.DurationMs)
	return ans
}

// recheck re-detects once the owner released the page: solved when the
// wall is down, released_unsolved when a challenge is still showing,
// completed when the page could not be checked.
func (s *Server) recheck(ss *Session) string {
	var last string
	// A page may still be navigating after the owner's last click: give it
	// a few scans before calling it unsolved.
	for range 3 {
		c, err := ss.page.DetectChallenge()
		if err != nil {
			last = "completed"
		} else if a := challengeFrom(c, false); a.Detected {
			last = "released_unsolved"
		} else if c.Incomplete {
			last = "completed"
		} else {
			return "solved"
		}
		time.Sleep(700 * time.Millisecond)
	}
	return last
}

// popupChallenge answers for a challenge in a window this page opened that
// no tool took yet (a 3-D Secure window arriving after a server round trip
// comes with no notice): the agent must take it with wait_for_popup before
// handing it off. Otherwise the page's own answer stands.
func popupChallenge(ss *Session, own challengeAnswer) challengeAnswer {
	c, ok := ss.page.DetectChallengeInPopups()
	if !ok {
		return own
	}
	a := challengeFrom(c, false)
	if !a.Detected {
		return own
	}
	a.Reason += ", in a window this page opened: call wait_for_popup, then request_challenge_handoff"
	return a
}
