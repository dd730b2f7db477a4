package mcpserver

import (
	"context"
	"fmt"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/mcpserver/hosted"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Waiting on the owner. When proxyd answers an authorize with "pending" (a
// new site, a purchase over a threshold, a live security code), the fill
// keeps the tool call open: it tells the client what it is waiting on with
// progress notifications, long-polls the wait until the owner decides or the
// wait expires, and then authorizes again. The local stdio server blocks;
// the hosted server will answer status=pending instead (seed 004, "Call
// deadlines").

const (
	// defaultOwnerWaitMax is the longest one fill waits on the owner: the
	// tool reference's 15 minutes for a new site (policy's
	// DestinationApprovalWait on the proxy side).
	defaultOwnerWaitMax = 15 * time.Minute
	// defaultWaitPoll is one long poll. proxyd caps a poll at 25 s and the
	// control client gives up after 30 s, so this stays well under both.
	defaultWaitPoll = 20 * time.Second
	// expiryGrace lets proxyd's sweeper mark an expired wait before mcpd
	// stops on its own clock.
	expiryGrace = 30 * time.Second
	// maxOwnerRounds bounds the questions one authorize may raise in a row
	// (a new site, then a purchase, then a live code is three).
	maxOwnerRounds = 4
)

// callState is what a tool body needs from its MCP request: where progress
// notifications go, and the notes the answer reports (what the owner was
// asked and how it ended). It travels in the call's context.
type callState struct {
	req      *mcp.CallToolRequest
	tool     string
	progress float64
	notes    []string
	// flight is the running call when it may answer pending (package
	// hosted).
	flight *hosted.Flight
}

type callKey struct{}

func withCall(ctx context.Context, c *callState) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

func callOf(ctx context.Context) *callState {
	c, _ := ctx.Value(callKey{}).(*callState)
	return c
}

// note records a line the call's answer reports.
func (c *callState) note(s string) {
	if c != nil {
		c.notes = append(c.notes, s)
	}
}

// notify sends a progress notification when the client asked for progress
// (it sent a progress token), and a log notification at info level (sent
// only when the client set a log level). Best effort: a client that went
// away does not end the wait, the context does.
func (c *callState) notify(ctx context.Context, msg string) {
	if c == nil {
		return
	}
	req := c.progressReq()
	if req == nil || req.Session == nil {
		return
	}
	c.progress++
	if req.Params != nil {
		if tok := req.Params.GetProgressToken(); tok != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: c.progress, Message: msg})
		}
	}
	_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "agentvault", Data: msg})
}

// askedWhat says what the owner is asked, in a few words ("approve new
// site shop.example"). Only kinds, the site and the amount: never a value.
func askedWhat(kind, reason, site, login string, amount *control.OrderTotal) string {
	switch kind {
	case "totp_replace":
		return "approve " + replaceWhat(login, site)
	case "new_destination":
		return "approve new site " + site
	case "cvv_entry":
		return "enter the card's security code for " + site
	case "signup":
		return "approve a signup on " + site
	case "purchase":
		s := "approve a purchase"
		if amount != nil {
			s += " of " + amount.Currency + " " + amount.Amount
		}
		s += " on " + site
		if reason != "" && reason != "purchase" {
			s += " (" + reason + ")"
		}
		return s
	}
	return "decide on " + site + " (" + kind + ")"
}

// replaceWhat names a TOTP replacement: the login and its site.
func replaceWhat(login, site string) string {
	if login == "" {
		return "replacing a login's authenticator secret on " + site
	}
	return "replacing the authenticator secret of login " + sanitizeValue(login) + " on " + site
}

// refusalFor is the code a wait that ended without a yes gets when proxyd
// did not name one: the same mapping as the owner package's Outcome.
func refusalFor(kind string, expired bool) agentvault.Code {
	switch kind {
	case "new_destination":
		return agentvault.CodeDestinationUnauthorized
	case "cvv_entry":
		return agentvault.CodeCVVEntryRequired
	case "signup":
		return agentvault.CodeSignupNotEnabled
	}
	if expired {
		return agentvault.CodeApprovalExpired
	}
	return agentvault.CodeApprovalDenied
}

// waitOwner blocks until the owner decides the pending request p, it
// expires, the fill's own limit passes, or ctx ends. It returns nil when the
// owner approved (authorize again), or the refusal the fill gets. Either way
// the call's answer gets a note saying what was asked and how it ended.
func (s *Server) waitOwner(ctx context.Context, ss *Session, p *control.Pending) error {
	call := callOf(ctx)
	what := askedWhat(p.Kind, p.Reason, p.Site, p.Login, p.Amount)
	nothing := "Nothing was typed in this field."
	if p.Kind == "totp_replace" {
		nothing = "The login's stored authenticator secret is unchanged."
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The wait also ends when the server closes or the session is closed.
	stop := context.AfterFunc(s.stopCtx, cancel)
	defer stop()
	if ss != nil && ss.waits != nil {
		stopSess := context.AfterFunc(ss.waits, cancel)
		defer stopSess()
	}

	start := time.Now()
	deadline := start.Add(s.ownerWaitMax)
	if !p.ExpiresAt.IsZero() && p.ExpiresAt.Add(expiryGrace).Before(deadline) {
		deadline = p.ExpiresAt.Add(expiryGrace)
	}
	until := ""
	if !p.ExpiresAt.IsZero() {
		until = ", the request expires at " + p.ExpiresAt.UTC().Format("15:04:05 UTC")
	}
	s.log.Info("waiting for the owner", "wait", p.WaitID, "kind", p.Kind, "reason", p.Reason)
	call.ownerWaiting(p)
	defer call.ownerWaitEnded()
	call.notify(ctx, fmt.Sprintf("Waiting for the account owner to %s (dashboard banner or notification%s).", what, until))

	ended := func(how string, err error) error {
		call.note(fmt.Sprintf("Waited for the owner to %s: %s.", what, how))
		s.log.Info("owner wait ended", "wait", p.WaitID, "kind", p.Kind, "outcome", how, "s", int(time.Since(start).Seconds()))
		return err
	}
	for {
		left := time.Until(deadline)
		if left <= 0 {
			code := refusalFor(p.Kind, true)
			return ended("no answer in time", agentvault.Errorf(code,
				"Waited for the owner to %s; no answer came in time. %s Tell the user and let them retry.", what, nothing))
		}
		poll := min(s.waitPoll, left)
		ans, err := s.cfg.Control.Wait(ctx, p.WaitID, poll)
		if ctx.Err() != nil {
			return ended("stopped waiting", agentvault.Errorf(agentvault.CodeTimeout,
				"Stopped waiting for the owner to %s: the call was cancelled, or the session or the server is closing. %s", what, nothing))
		}
		if err != nil {
			return ended("the wait failed", agentvault.Errorf(agentvault.ErrorCode(err),
				"Waiting for the owner to %s failed: %s", what, agentvault.ErrorMessage(err)))
		}
		switch ans.Status {
		case "pending":
			call.notify(ctx, fmt.Sprintf("Still waiting for the account owner to %s (%ds so far%s).", what, int(time.Since(start).Seconds()), until))
			continue
		case "approved":
			call.notify(ctx, fmt.Sprintf("The account owner approved: %s.", what))
			return ended("approved", nil)
		}
		expired := ans.Status == "expired"
		code := agentvault.Code(ans.Code)
		if code == "" {
			code = refusalFor(p.Kind, expired)
		}
		how := "denied"
		if expired {
			how = "expired without an answer"
		} else if ans.Status != "denied" {
			how = "ended (" + sanitizeValue(ans.Status) + ")"
		}
		call.notify(ctx, fmt.Sprintf("The account owner's request to %s %s.", what, how))
		msg := fmt.Sprintf("Waited for the owner to %s: %s.", what, how)
		if ans.Message != "" {
			msg += " " + ans.Message + "."
		}
		return ended(how, agentvault.Errorf(code, "%s %s Tell the user; do not retry it on your own.", msg, nothing))
	}
}
