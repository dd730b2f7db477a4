package mcpserver

import (
	"fmt"
	"time"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/mcpserver/hosted"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The wording of a pending answer (seed 004, get_pending_result): what a
// call that is still running is waiting on, told so the agent tells the
// user. Package hosted decides when a call answers pending; this file says
// what the answer reads.

// pendingFields is what a pending answer carries, in its status line and
// its structuredContent.
type pendingFields struct {
	Wait           string `json:"wait"`
	WaitingOnOwner bool   `json:"waiting_on_owner"`
	Reason         string `json:"reason,omitempty"`
	Site           string `json:"site,omitempty"`
	ExpiresAt      string `json:"expires_at,omitempty"`
	NewRequest     bool   `json:"new_request,omitempty"`
}

func (p *pendingFields) pairs() [][2]string {
	out := [][2]string{{"wait", p.Wait}, {"waiting_on_owner", fmt.Sprint(p.WaitingOnOwner)}}
	if p.Reason != "" {
		out = append(out, [2]string{"reason", p.Reason})
	}
	if p.NewRequest {
		out = append(out, [2]string{"new_request", "true"})
	}
	return out
}

// pendingAnswer is the answer of a call still running (hosted.Tools).
func pendingAnswer(p hosted.Pending) *mcp.CallToolResult {
	pf := &pendingFields{Wait: p.Wait}
	var text string
	switch {
	case p.Owner != nil && !p.OwnerDone:
		pf.WaitingOnOwner = true
		pf.Reason = ownerReason(p.Owner)
		pf.Site = p.Owner.Site
		if !p.Owner.ExpiresAt.IsZero() && p.Owner.Kind != "signup" {
			pf.ExpiresAt = p.Owner.ExpiresAt.UTC().Format(time.RFC3339)
		}
		pf.NewRequest = p.NewRequest
		text = ownerSentence(p.Tool, p.Owner)
		if pf.NewRequest {
			text = "NEW REQUEST: this is a separate request from the one named before; tell the user about it too. " + text
		}
	case p.Owner != nil:
		text = fmt.Sprintf("%s stopped waiting on the account owner and is still running; its answer will say what came of the request.", p.Tool)
	default:
		text = fmt.Sprintf("%s is still running. No request to the account owner has been reported for this call: do not tell the user a new approval is waiting.", p.Tool)
	}
	text += fmt.Sprintf(" Keep calling get_pending_result with wait=%s in this same turn to get its answer; do not repeat the call, that starts a second one.", pf.Wait)
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: status{State: "pending", Pending: pf}.line() + "\n" + text}},
		StructuredContent: pf,
	}
}

// ownerReason is the seed's reason for an owner wait.
func ownerReason(p *control.Pending) string {
	switch p.Kind {
	case "new_destination", "cvv_entry":
		return p.Kind
	case "signup":
		return "signup_approval"
	case "totp_replace":
		// The seed's reasons are a closed list; the owner approving an
		// agent's write to a login is signup_approval's kind of question.
		return "signup_approval"
	case "challenge", "challenge_handoff":
		return "challenge_handoff"
	case "purchase":
		switch p.Reason {
		case "", "purchase":
			return "over_threshold"
		case "cvv_again":
			// The second yes for a security code whose authorization was
			// spent is a purchase approval asked whatever the amount:
			// the seed's every_purchase (its list has no other name).
			return "every_purchase"
		}
		return sanitizeValue(p.Reason)
	}
	return sanitizeValue(p.Kind)
}

// ownerSentence says what the owner is asked, where, and until when: one
// sentence per kind of wait.
func ownerSentence(tool string, p *control.Pending) string {
	site := p.Site
	var what, email string
	switch p.Kind {
	case "new_destination":
		what = fmt.Sprintf("approve a new site (%s)", site)
		email = "Authorize new site: " + site
	case "purchase":
		amt := ""
		if p.Amount != nil {
			amt = " of " + p.Amount.Currency + " " + p.Amount.Amount
		}
		what = fmt.Sprintf("approve a purchase%s on %s (%s)", amt, site, ownerReason(p))
		email = "Approve a purchase on " + site
	case "cvv_entry":
		what = fmt.Sprintf("enter the card's security code for a purchase on %s", site)
		email = "Enter the security code for " + site
	case "signup":
		what = fmt.Sprintf("approve a signup on %s", site)
		email = "Approve a signup on " + site
	case "totp_replace":
		what = "approve " + replaceWhat(p.Login, site)
		email = "Authenticator replacement: " + site
	default:
		what = fmt.Sprintf("complete a challenge on %s", site)
		email = "Complete a step on " + site
	}
	// The email is named only when proxyd says one goes out: telling the
	// user to look for a message that never comes sends them the wrong way.
	where := "the banner on their Agent Vault dashboard (its Approvals page)"
	if p.Email {
		where = fmt.Sprintf("the email titled '%s' or the banner on their Agent Vault dashboard", email)
	}
	s := fmt.Sprintf("%s is waiting for the account owner to %s. Tell the user now: they can approve it from %s.", tool, what, where)
	if !p.ExpiresAt.IsZero() && p.Kind != "signup" {
		s += " It expires at " + p.ExpiresAt.UTC().Format(time.RFC3339) + "."
	}
	return s
}
