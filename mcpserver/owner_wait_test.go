package mcpserver

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ownerScript plays proxyd's side of an owner approval: authorize of a
// token whose field is `field` answers pending until the owner approved;
// each Wait poll answers the next status in answers (the last one repeats).
type ownerScript struct {
	mu       sync.Mutex
	field    string
	pending  control.Pending
	answers  []string
	code     string
	approved bool
	asked    int
	polls    int
	// next, when set, is the request the owner is asked next, on tokens
	// of nextField, once the first is approved (a security code after a
	// purchase approval): it waits with answers "pending" until changed.
	next      *control.Pending
	nextField string
}

func (o *ownerScript) ask(token string) *control.Pending {
	if o == nil || !strings.Contains(token, "_"+o.field+"_") {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.approved {
		return nil
	}
	o.asked++
	p := o.pending
	p.Pending = true
	return &p
}

func (o *ownerScript) wait(ctx context.Context, id string) (control.WaitAnswer, error) {
	if o == nil {
		return control.WaitAnswer{}, agentvault.Errorf(agentvault.CodeNotFound, "no such approval")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if id != o.pending.WaitID {
		return control.WaitAnswer{}, agentvault.Errorf(agentvault.CodeNotFound, "no such approval")
	}
	st := o.answers[min(o.polls, len(o.answers)-1)]
	o.polls++
	a := control.WaitAnswer{Status: st, WaitID: id, Kind: o.pending.Kind, Reason: o.pending.Reason, Site: o.pending.Site,
		Amount: o.pending.Amount, ExpiresAt: o.pending.ExpiresAt}
	switch st {
	case "approved":
		if o.next != nil {
			o.pending, o.field, o.next = *o.next, o.nextField, nil
			o.answers, o.polls = []string{"pending"}, 0
			break
		}
		o.approved = true
	case "denied", "expired":
		a.Code, a.Message = o.code, "the owner said no"
	}
	return a, nil
}

// progressLog collects the progress notifications a client receives.
type progressLog struct {
	mu   sync.Mutex
	msgs []string
}

func (p *progressLog) handler(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.msgs = append(p.msgs, r.Params.Message)
}

func (p *progressLog) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.msgs...)
}

// TestFillWaitsForOwner: a fill whose authorize answers pending keeps the
// call open, tells the client what it waits on through progress
// notifications, and either continues the batch once the owner approves or
// returns the refusal the decision carries, with filled=N/M right and a line
// saying what was asked and how it ended. Real Chromium, stand-in control.
func TestFillWaitsForOwner(t *testing.T) {
	ctl := &standInControl{}
	prog := &progressLog{}
	logs := &progressLog{}
	h := newHarnessWith(t, ctl, &mcp.ClientOptions{ProgressNotificationHandler: prog.handler,
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			if msg, ok := r.Params.Data.(string); ok {
				logs.mu.Lock()
				logs.msgs = append(logs.msgs, msg)
				logs.mu.Unlock()
			}
		}})
	h.ok("open_page", map[string]any{"url": h.site.CheckoutURL()})
	h.ok("wait_for_selector", map[string]any{"selector": "#number", "frame": payFrame, "timeout": 30000})
	site := "127.0.0.1"
	batch := []map[string]any{
		{"selector": "#first", "value": "Jane"},
		{"selector": "#exp-month", "value": 12, "kind": "select"},
		{"selector": "#exp-year", "value": 2030, "kind": "select"},
		{"selector": "#number", "frame": payFrame, "value": num1},
	}
	fill := func(fields []map[string]any, progressToken any) (string, bool) {
		t.Helper()
		p := &mcp.CallToolParams{Name: "fill_checkout", Arguments: map[string]any{"fields": fields}}
		if progressToken != nil {
			p.SetProgressToken(progressToken)
			// Log notifications at info and above for this call (the
			// per-request level of the current protocol).
			p.Meta[mcp.MetaKeyLogLevel] = "info"
		}
		r, err := h.cs.CallTool(context.Background(), p)
		if err != nil {
			t.Fatalf("fill_checkout: protocol error %v", err)
		}
		txt := text(r)
		h.all = append(h.all, txt)
		return txt, r.IsError
	}

	t.Run("purchase denied", func(t *testing.T) {
		ctl.owner = &ownerScript{field: "number", answers: []string{"pending", "denied"}, code: "approval_denied",
			pending: control.Pending{WaitID: "apr_1", Kind: "purchase", Reason: "over_threshold", Site: site,
				Amount: &control.OrderTotal{Amount: "80.00", Currency: "EUR"}, ExpiresAt: time.Now().Add(time.Hour)}}
		txt, isErr := fill(batch, "fill-0")
		if !isErr || !strings.HasPrefix(txt, "status=error code=approval_denied filled=3/4\n") ||
			!strings.Contains(txt, "Waited for the owner to approve a purchase of EUR 80.00 on 127.0.0.1 (over_threshold): denied.") {
			t.Fatalf("denied purchase: %q", txt)
		}
		if ctl.owner.asked != 1 || ctl.owner.polls != 2 {
			t.Fatalf("asked %d, polled %d", ctl.owner.asked, ctl.owner.polls)
		}
	})

	t.Run("new site unanswered", func(t *testing.T) {
		// The request expired half a minute ago and proxyd still says
		// pending: mcpd stops on its own clock with the new-site refusal.
		ctl.owner = &ownerScript{field: "number", answers: []string{"pending"},
			pending: control.Pending{WaitID: "apr_2", Kind: "new_destination", Reason: "new_destination", Site: site,
				ExpiresAt: time.Now().Add(-expiryGrace)}}
		txt, isErr := fill(batch[3:], "fill-2")
		if !isErr || !strings.HasPrefix(txt, "status=error code=destination_unauthorized filled=0/1\n") ||
			!strings.Contains(txt, "approve new site 127.0.0.1") || !strings.Contains(txt, "no answer in time") {
			t.Fatalf("unanswered: %q", txt)
		}
	})

	t.Run("new site approved", func(t *testing.T) {
		ctl.owner = &ownerScript{field: "number", answers: []string{"pending", "pending", "approved"},
			pending: control.Pending{WaitID: "apr_3", Kind: "new_destination", Reason: "new_destination", Site: site,
				ExpiresAt: time.Now().Add(15 * time.Minute)}}
		before := len(ctl.auths)
		// The earlier subtests waited with progress tokens too (a host
		// without one gets status=pending): read only this call's.
		seen, seenLogs := len(prog.all()), len(logs.all())
		txt, isErr := fill(batch, "fill-1")
		if isErr || !strings.HasPrefix(txt, "status=ok filled=4/4\n") ||
			!strings.Contains(txt, "Waited for the owner to approve new site 127.0.0.1: approved.") {
			t.Fatalf("approved: %q", txt)
		}
		// Asked once, then authorized again after the yes.
		if n := len(ctl.auths) - before; n != 2 || ctl.owner.asked != 1 {
			t.Fatalf("%d authorizations, asked %d", n, ctl.owner.asked)
		}
		// A notification sent before the answer may reach its handler
		// after CallTool returned: wait for the last one to arrive.
		waitUntil(t, 10*time.Second, "the approved progress notification", func() bool {
			m := prog.all()[seen:]
			return len(m) > 0 && strings.Contains(m[len(m)-1], "approved") && len(logs.all())-seenLogs >= len(m)
		})
		msgs := prog.all()[seen:]
		if len(msgs) < 3 || !strings.HasPrefix(msgs[0], "Waiting for the account owner to approve new site 127.0.0.1") ||
			!strings.Contains(msgs[len(msgs)-1], "approved") {
			t.Fatalf("progress notifications: %q", msgs)
		}
		// The same messages go out as log notifications, for clients that
		// sent no progress token.
		if lm := logs.all()[seenLogs:]; len(lm) < len(msgs) || !strings.HasPrefix(lm[0], "Waiting for the account owner") {
			t.Fatalf("log notifications: %q", lm)
		}
	})

	t.Run("live security code not entered", func(t *testing.T) {
		// The number above ended the batch: the code comes first now.
		ctl.owner = &ownerScript{field: "cvv", answers: []string{"expired"}, code: "cvv_entry_required",
			pending: control.Pending{WaitID: "apr_4", Kind: "cvv_entry", Reason: "cvv_entry", Site: site, ExpiresAt: time.Now().Add(time.Minute)}}
		txt, isErr := fill([]map[string]any{{"selector": "#cvc", "frame": payFrame, "value": cvv1}}, "fill-4")
		if !isErr || !strings.HasPrefix(txt, "status=error code=cvv_entry_required filled=0/1\n") ||
			!strings.Contains(txt, "enter the card's security code for 127.0.0.1: expired without an answer") {
			t.Fatalf("cvv entry: %q", txt)
		}
	})

	t.Run("close_session ends a wait", func(t *testing.T) {
		ctl.owner = &ownerScript{field: "number", answers: []string{"pending"},
			pending: control.Pending{WaitID: "apr_5", Kind: "new_destination", Reason: "new_destination", Site: site, ExpiresAt: time.Now().Add(time.Hour)}}
		// The code the last batch still owes comes first.
		fields := append([]map[string]any{{"selector": "#cvc", "frame": payFrame, "value": cvv1}}, batch[3:]...)
		done := make(chan string, 1)
		go func() {
			p := &mcp.CallToolParams{Name: "fill_checkout", Arguments: map[string]any{"fields": fields}}
			p.SetProgressToken("fill-close")
			r, err := h.cs.CallTool(context.Background(), p)
			if err != nil {
				done <- "protocol error"
				return
			}
			done <- text(r)
		}()
		waitUntil(t, 30*time.Second, "the fill to ask the owner's wait", func() bool { return ownerPolled(ctl.owner) })
		h.ok("close_session", nil)
		txt := <-done
		if !strings.HasPrefix(txt, "status=error code=timeout filled=1/2\n") || !strings.Contains(txt, "Stopped waiting for the owner to approve new site") {
			t.Fatalf("fill after close_session: %q", txt)
		}
	})

	h.sweep(t)
}

func TestAskedWhat(t *testing.T) {
	eur := &control.OrderTotal{Amount: "12.50", Currency: "EUR"}
	for _, c := range []struct {
		kind, reason string
		login        string
		amount       *control.OrderTotal
		want         string
		code         agentvault.Code
	}{
		{"new_destination", "new_destination", "", nil, "approve new site shop.example", agentvault.CodeDestinationUnauthorized},
		{"purchase", "over_threshold", "", eur, "approve a purchase of EUR 12.50 on shop.example (over_threshold)", agentvault.CodeApprovalDenied},
		{"purchase", "purchase", "", nil, "approve a purchase on shop.example", agentvault.CodeApprovalDenied},
		{"cvv_entry", "cvv_entry", "", nil, "enter the card's security code for shop.example", agentvault.CodeCVVEntryRequired},
		{"totp_replace", "totp_replace", "shop", nil, "approve replacing the authenticator secret of login shop on shop.example", agentvault.CodeApprovalDenied},
	} {
		if got := askedWhat(c.kind, c.reason, "shop.example", c.login, c.amount); got != c.want {
			t.Errorf("%s: %q", c.kind, got)
		}
		if got := refusalFor(c.kind, false); got != c.code {
			t.Errorf("%s: code %s", c.kind, got)
		}
	}
	if refusalFor("purchase", true) != agentvault.CodeApprovalExpired {
		t.Error("an expired purchase is approval_expired")
	}
	// The seed's pending reasons are a closed list: a TOTP replacement is
	// the owner approving an agent's login write, signup_approval.
	if r := ownerReason(&control.Pending{Kind: "totp_replace", Reason: "totp_replace"}); r != "signup_approval" {
		t.Errorf("totp_replace's pending reason is %q", r)
	}
}

func ownerPolled(o *ownerScript) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.polls > 0
}
