package ownercli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/owner"
)

// Notifications is what `owner notify` and apply's notifications block
// need from proxyd: the owner's switches (the dashboard's Notifications
// page changes the same ones) and a description of the channels the
// deployment's config set up. The channels themselves (the webhook's URL,
// the SMTP relay) are proxyd's config, not the owner's settings.
type Notifications interface {
	NotifyPrefs(ctx context.Context) (owner.NotifyPrefs, error)
	SetNotifyPrefs(ctx context.Context, p owner.NotifyPrefs) error
	NotifyChannels() NotifyChannels
}

// NotifyChannels describes the configured channels without a secret: a
// webhook's path and query (where services put a token) and every
// password or signing secret are shown as whether they are set, never as
// what they are. A nil channel is not configured.
type NotifyChannels struct {
	Webhook *WebhookChannel `json:"webhook"`
	Email   *EmailChannel   `json:"email"`
}

// WebhookChannel is notify.webhook as the owner may see it.
type WebhookChannel struct {
	// Origin is the URL's scheme, host and port only.
	Origin string `json:"origin"`
	// Secret: "set", or what is wrong with it ("created at proxyd's next
	// start", "cannot be read").
	Secret string `json:"secret"`
}

// EmailChannel is notify.smtp as the owner may see it.
type EmailChannel struct {
	Host     string   `json:"host"`
	Port     int      `json:"port"`
	From     string   `json:"from"`
	To       []string `json:"to"`
	Username string   `json:"username,omitempty"`
	// Password: "set", "none", or "cannot be read".
	Password string `json:"password"`
}

type notifySwitch struct {
	name, what string
	get        func(*owner.NotifyPrefs) *bool
}

// switches are the owner's notification switches by the name the CLI,
// the file and the dashboard's form use, in the page's order.
var switches = []notifySwitch{
	{"webhook", "the signed webhook", func(p *owner.NotifyPrefs) *bool { return &p.Webhook }},
	{"email", "email", func(p *owner.NotifyPrefs) *bool { return &p.Email }},
	{"browser", "this browser's own notifications while the dashboard is open", func(p *owner.NotifyPrefs) *bool { return &p.Browser }},
	{"challenges", "a checkout needs me to clear a bank or verification step", func(p *owner.NotifyPrefs) *bool { return &p.Challenges }},
}

func switchNames() string {
	var n []string
	for _, s := range switches {
		n = append(n, s.name)
	}
	return strings.Join(n, ", ")
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// notifyJSON is `owner notify show --json`.
type notifyJSON struct {
	Switches owner.NotifyPrefs `json:"switches"`
	Channels NotifyChannels    `json:"channels"`
}

// notifications is the notification settings proxyd hands the CLI and the
// switches as they are now.
func (c *cli) notifications(ctx context.Context) (Notifications, owner.NotifyPrefs, error) {
	if c.env.Notify == nil {
		return nil, owner.NotifyPrefs{}, agentvault.Errorf(agentvault.CodeInternal, "notification settings are not reachable from this command here")
	}
	p, err := c.env.Notify.NotifyPrefs(ctx)
	return c.env.Notify, p, err
}

func (c *cli) notifyShow(args []string) int {
	fs := c.flags("notify show", "[--json]")
	asJSON := jsonFlag(fs)
	if _, code, ok := c.parse(fs, args, 0); !ok {
		return code
	}
	n, p, err := c.notifications(c.ctx)
	if err != nil {
		return c.fail(err)
	}
	ch := n.NotifyChannels()
	if asJSON() {
		if err := c.printJSON(notifyJSON{Switches: p, Channels: ch}); err != nil {
			return c.fail(err)
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SWITCH\tSTATE\tWHAT")
	fmt.Fprintf(tw, "approvals\ton\ta request needs my approval: always on the dashboard's banner\n")
	for _, s := range switches {
		what := s.what
		switch s.name {
		case "webhook":
			what += ": " + describeWebhook(ch.Webhook)
		case "email":
			what += ": " + describeEmail(ch.Email)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.name, onOff(*s.get(&p)), what)
	}
	if err := tw.Flush(); err != nil {
		return c.fail(err)
	}
	return exitOK
}

func describeWebhook(w *WebhookChannel) string {
	if w == nil {
		return "not configured (notify.webhook in proxyd's config)"
	}
	return "POST to " + w.Origin + "/…, signing secret " + w.Secret
}

func describeEmail(e *EmailChannel) string {
	if e == nil {
		return "not configured (notify.smtp in proxyd's config)"
	}
	s := fmt.Sprintf("from %s to %s via %s:%d", e.From, strings.Join(e.To, ", "), e.Host, e.Port)
	if e.Username != "" {
		s += " as " + e.Username + ", password " + e.Password
	}
	return s
}

// notifySet is `notify on` and `notify off`: the switches named change,
// the others stay.
func (c *cli) notifySet(on bool) func([]string) int {
	name := "notify " + onOff(on)
	return func(args []string) int {
		pos, code, ok := c.parse(c.flags(name, "<switch>... ("+switchNames()+")"), args, -1)
		if !ok {
			return code
		}
		if len(pos) == 0 {
			fmt.Fprintf(c.env.Stderr, "error: %s needs one or more of %s\n", name, switchNames())
			return exitUsage
		}
		var names []string
		for _, a := range pos {
			for _, w := range splitIDs(strings.ToLower(a)) {
				if !slices.ContainsFunc(switches, func(s notifySwitch) bool { return s.name == w }) {
					fmt.Fprintf(c.env.Stderr, "error: no switch %q: the switches are %s\n", w, switchNames())
					return exitUsage
				}
				names = append(names, w)
			}
		}
		n, cur, err := c.notifications(c.ctx)
		if err != nil {
			return c.fail(err)
		}
		next := cur
		for _, s := range switches {
			if slices.Contains(names, s.name) {
				*s.get(&next) = on
			}
		}
		diff := notifyDiff(cur, next)
		if diff == "" {
			fmt.Fprintln(c.env.Stdout, "no changes")
			return exitOK
		}
		if err := n.SetNotifyPrefs(c.ctx, next); err != nil {
			return c.fail(err)
		}
		fmt.Fprintln(c.env.Stdout, "notifications: "+diff)
		if on {
			ch := n.NotifyChannels()
			if slices.Contains(names, "webhook") && ch.Webhook == nil {
				fmt.Fprintln(c.env.Stderr, "note: no webhook is configured, so nothing is posted until notify.webhook is set in proxyd's config")
			}
			if slices.Contains(names, "email") && ch.Email == nil {
				fmt.Fprintln(c.env.Stderr, "note: no email relay is configured, so nothing is mailed until notify.smtp is set in proxyd's config")
			}
		}
		return exitOK
	}
}

// notifyDiff says which switches differ ("email on -> off; ..."); "" when
// none does.
func notifyDiff(from, to owner.NotifyPrefs) string {
	var d []string
	for _, s := range switches {
		if a, b := *s.get(&from), *s.get(&to); a != b {
			d = append(d, s.name+" "+onOff(a)+" -> "+onOff(b))
		}
	}
	return strings.Join(d, "; ")
}
