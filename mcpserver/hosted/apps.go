package hosted

import (
	"context"
	"slices"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Connected apps: mcpd reports each connection's open sessions to proxyd
// (control.AppSessionsPath), which lists them on the owner's dashboard with
// an End button. Ending one closes its proxy session there; proxyd names it
// in its answer to the next report, and mcpd ends the hosted session with
// reasonOwner. mcpd reports before every call that names a session, so the
// call after the owner's End is refused with the ended-session message,
// and after a session starts or ends so the page stays current.

// AppReporter keeps the dashboard's list of connected apps
// (control.Client implements it).
type AppReporter interface {
	ReportAppSessions(ctx context.Context, req control.AppSessionsRequest) (control.AppSessionsResponse, error)
}

var _ AppReporter = (*control.Client)(nil)

// appReportTimeout bounds a report: the dashboard's list is best effort,
// and a call waits on it only this long.
const appReportTimeout = 3 * time.Second

// handlePrefix is how much of a handle the dashboard shows.
func handlePrefix(h string) string {
	if len(h) > 8 {
		return h[:8]
	}
	return h
}

// syncApps reports c's open sessions and ends the ones the owner ended on
// the dashboard. Errors are logged and ignored: a call does not fail for
// the dashboard's list.
func (cl *Calls) syncApps(ctx context.Context, c *conn) {
	ar := cl.opts.Apps
	if ar == nil || cl.table() == nil {
		return
	}
	c.mu.Lock()
	key := c.apiKey
	byID := make(map[string]*hsession, len(c.live))
	req := control.AppSessionsRequest{Sessions: make([]control.AppSession, 0, len(c.live))}
	for _, hs := range c.live {
		byID[hs.ss.ProxyID()] = hs
	}
	c.mu.Unlock()
	if len(byID) == 0 {
		return
	}
	if key == "" {
		key = cl.opts.APIKey
	}
	req.APIKey = key
	for id, hs := range byID {
		if host, ok := hs.ss.PageHost(); ok {
			c.mu.Lock()
			hs.pageHost = host
			c.mu.Unlock()
		}
		c.mu.Lock()
		req.Sessions = append(req.Sessions, control.AppSession{ID: id, HandlePrefix: handlePrefix(hs.handle),
			Started: hs.started.UTC(), LastUsed: hs.lastUsed.UTC(), PageHost: hs.pageHost})
		c.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), appReportTimeout)
	defer cancel()
	resp, err := ar.ReportAppSessions(ctx, req)
	if err != nil {
		cl.log.Debug("connected apps report failed", "code", string(agentvault.ErrorCode(err)))
		return
	}
	cl.log.Debug("connected apps reported", "sessions", len(req.Sessions), "ended", len(resp.Ended))
	for _, id := range resp.Ended {
		if hs := byID[id]; hs != nil {
			cl.endSession(hs, reasonOwner)
		}
	}
}

// syncAppsLater reports c's sessions without holding up the caller.
func (cl *Calls) syncAppsLater(c *conn) {
	if cl.opts.Apps == nil || cl.table() == nil {
		return
	}
	go cl.syncApps(cl.opts.Stop, c)
}

// What a connection may use (seed 004, conventions): on the hosted server
// every tool that uses the account is refused until the account holder
// chooses on Connected apps what the connection (its API key) may use;
// only get_checkout_recipes works before. The choice comes with the key
// check (control.KeyInfo.AppChosen, AppUses), so a change reaches calls
// within keyCacheFor. close_session and get_pending_result stay open to a
// connection whose choice was narrowed after it started something: they
// end or fetch what already ran, and use nothing new.

// toolUse is the use a tool needs beyond a choice having been made: "" is
// any chosen use (the page tools, the run report, the catalog).
var toolUse = map[string]string{
	"fill_checkout":            control.AppUseCheckout,
	"submit_checkout_recipe":   control.AppUseCheckout,
	"get_recipe_submission":    control.AppUseCheckout,
	"create_login":             control.AppUseLogins,
	"get_signup_request":       control.AppUseLogins,
	"wait_for_signup_approval": control.AppUseLogins,
	"set_login_username":       control.AppUseLogins,
	"rotate_login_password":    control.AppUseLogins,
	"fill_login":               control.AppUseLogins,
}

// freeTools run whatever the choice.
var freeTools = map[string]bool{"get_checkout_recipes": true, "close_session": true, "get_pending_result": true}

// connUses is what the holder chose the call's connection may use; keyed
// is false on a server without API keys (one loopback connection, no
// holder's choice to apply), chosen false before a choice.
func connUses(req *mcp.CallToolRequest) (uses []string, chosen, keyed bool) {
	if req == nil || req.Extra == nil || req.Extra.TokenInfo == nil || req.Extra.TokenInfo.UserID == "" {
		return nil, false, false
	}
	uses, chosen = req.Extra.TokenInfo.Extra[tokenInfoUses].([]string)
	return uses, chosen, true
}

// refuseUnchosen is the refusal of a tool the connection may not use, or
// nil. It is made before the tool runs, so it is not kept for replay.
func (cl *Calls) refuseUnchosen(req *mcp.CallToolRequest, tool string) *mcp.CallToolResult {
	if freeTools[tool] {
		return nil
	}
	uses, chosen, keyed := connUses(req)
	if !keyed {
		return nil
	}
	if !chosen {
		return cl.refusal(agentvault.CodeForbidden, false,
			"%s is not allowed for this connection yet: the account holder has not chosen what it may use. Ask them to choose on the dashboard's Connected apps page; until then only get_checkout_recipes works.", tool)
	}
	need := toolUse[tool]
	if need == "" && len(uses) > 0 || need != "" && slices.Contains(uses, need) {
		return nil
	}
	what := "anything but get_checkout_recipes"
	if need != "" {
		what = need
	}
	return cl.refusal(agentvault.CodeForbidden, false,
		"%s is not allowed for this connection: the account holder has not let it use %s. Ask them to allow it on the dashboard's Connected apps page.", tool, what)
}
