// Package notify delivers owner.Events to the owner outside the dashboard: a
// signed webhook (JSON POST with an HMAC-SHA256 signature header) and, when
// configured, an email through an SMTP relay.
//
// A notification says that something waits for the owner (kind, reason,
// site, amount, expiry, a link to the dashboard). It must never carry a
// vault value, an API key, a password or the webhook secret, and it must
// never be the only way the owner learns of an approval: the dashboard's
// banner is.
package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/smtp"
	"strconv"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
)

// Payload is the webhook body.
type Payload struct {
	Event      string `json:"event"`
	ApprovalID string `json:"approvalId,omitempty"`
	// HandoffID is set on a handoff.requested event: kind
	// challenge_handoff, reason the challenge type.
	HandoffID string         `json:"handoffId,omitempty"`
	Kind      string         `json:"kind"`
	Reason    string         `json:"reason"`
	Site      string         `json:"site"`
	Amount    *policy.Amount `json:"amount,omitempty"`
	Status    string         `json:"status"`
	Created   time.Time      `json:"created"`
	Expires   time.Time      `json:"expires"`
	Dashboard string         `json:"dashboard,omitempty"`
}

// PayloadOf builds the public body of an event.
func PayloadOf(e owner.Event) Payload {
	if h := e.Handoff; h != nil {
		return Payload{Event: e.Type, HandoffID: h.ID, Kind: KindChallengeHandoff, Reason: h.ChallengeType, Site: h.Site,
			Status: "pending", Created: h.Created, Expires: h.Expires, Dashboard: e.DashboardURL}
	}
	a := e.Approval
	return Payload{Event: e.Type, ApprovalID: a.ID, Kind: string(a.Kind), Reason: a.Reason, Site: a.Site, Amount: a.Amount,
		Status: string(a.Status), Created: a.Created, Expires: a.Expires, Dashboard: e.DashboardURL}
}

// KindChallengeHandoff is a hand-off's kind in a Payload (the seed's
// pending reason challenge_handoff).
const KindChallengeHandoff = "challenge_handoff"

// SignatureHeader carries "sha256=<hex HMAC-SHA256 of the body>" under the
// webhook secret (the shape GitHub's X-Hub-Signature-256 uses).
const SignatureHeader = "X-Agentvault-Signature"

// Sign returns the header value for body.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a signature header in constant time (for receivers and
// tests).
func Verify(secret, body []byte, header string) bool {
	return hmac.Equal([]byte(Sign(secret, body)), []byte(header))
}

// Webhook posts events as JSON.
type Webhook struct {
	URL    string
	Secret []byte
	// Client defaults to one with Timeout and no proxy from the environment.
	Client  *http.Client
	Timeout time.Duration // zero: 10 s
}

// Notify implements owner.Notifier. Any answer but 2xx is an error; the
// error names the status, never the URL's query or the secret.
func (w *Webhook) Notify(ctx context.Context, e owner.Event) error {
	if w.URL == "" || len(w.Secret) == 0 {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "webhook needs a URL and a secret")
	}
	body, err := json.Marshal(PayloadOf(e))
	if err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "webhook body")
	}
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "webhook URL is not valid")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agentvault-webhook/1")
	req.Header.Set(SignatureHeader, Sign(w.Secret, body))
	client := w.Client
	if client == nil {
		client = &http.Client{Timeout: timeout, Transport: &http.Transport{Proxy: nil, ForceAttemptHTTP2: true}}
	}
	resp, err := client.Do(req)
	if err != nil {
		return agentvault.Wrap(agentvault.CodeUpstream, err, "webhook delivery failed")
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return agentvault.Errorf(agentvault.CodeUpstream, "webhook answered %d", resp.StatusCode)
	}
	return nil
}

// SMTP mails events through a relay with net/smtp (STARTTLS when the relay
// offers it; PLAIN auth only over TLS, which net/smtp enforces).
type SMTP struct {
	Host     string
	Port     int
	From     string
	To       []string
	Username string // optional
	Password string // optional
}

// Notify implements owner.Notifier.
func (m *SMTP) Notify(ctx context.Context, e owner.Event) error {
	if m.Host == "" || m.From == "" || len(m.To) == 0 {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "SMTP needs a host, a sender and recipients")
	}
	for _, a := range append([]string{m.From}, m.To...) {
		if strings.ContainsAny(a, "\r\n") {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "an email address holds a line break")
		}
	}
	port := m.Port
	if port == 0 {
		port = 25
	}
	var auth smtp.Auth
	if m.Username != "" {
		auth = smtp.PlainAuth("", m.Username, m.Password, m.Host)
	}
	msg := Message(m.From, m.To, e)
	addr := net.JoinHostPort(m.Host, strconv.Itoa(port))
	done := make(chan error, 1)
	go func() { done <- smtp.SendMail(addr, auth, m.From, m.To, msg) }()
	select {
	case err := <-done:
		if err != nil {
			return agentvault.Wrap(agentvault.CodeUpstream, err, "email delivery failed")
		}
		return nil
	case <-ctx.Done():
		return agentvault.Wrap(agentvault.CodeTimeout, ctx.Err(), "email delivery timed out")
	}
}

// Message renders the email (RFC 5322, plain text). Every value put into a
// header is stripped of line breaks.
func Message(from string, to []string, e owner.Event) []byte {
	p := PayloadOf(e)
	clean := func(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }
	subject := "agentvault: the owner's decision is needed"
	switch e.Type {
	case owner.EventApprovalDecided:
		subject = "agentvault: approval " + p.Status
	case owner.EventHandoffRequested:
		subject = "agentvault: a checkout needs you to clear a bank or verification step"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "From: %s\r\nTo: %s\r\nSubject: %s (%s, %s)\r\n", clean(from), clean(strings.Join(to, ", ")), subject, clean(p.Kind), clean(p.Site))
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n")
	if p.HandoffID != "" {
		fmt.Fprintf(&b, "An agent's checkout on %s stopped at a step only you should complete (%s).\r\n", clean(p.Site), clean(p.Reason))
		b.WriteString("Open the live view on the dashboard, complete the step, then press \"I'm done\".\r\n")
	} else {
		fmt.Fprintf(&b, "Request %s: %s on %s (reason: %s)\r\n", clean(p.ApprovalID), clean(p.Kind), clean(p.Site), clean(p.Reason))
	}
	if p.Amount != nil {
		fmt.Fprintf(&b, "Amount: %s\r\n", p.Amount.String())
	}
	fmt.Fprintf(&b, "Status: %s\r\nExpires: %s\r\n", p.Status, p.Expires.Format(time.RFC1123))
	if p.Dashboard != "" {
		fmt.Fprintf(&b, "\r\nDecide on the dashboard: %s\r\n", clean(p.Dashboard))
	}
	return []byte(b.String())
}

// Router sends an event to the channels the owner turned on (owner.NotifyPrefs):
// the webhook, the email, and for a hand-off only while the owner's
// challenge switch is on. A channel the deployment did not configure is nil.
type Router struct {
	// Prefs reads the owner's current switches; nil: owner.DefaultNotifyPrefs.
	Prefs   func() owner.NotifyPrefs
	Webhook owner.Notifier
	Email   owner.Notifier
}

// Notify implements owner.Notifier.
func (r *Router) Notify(ctx context.Context, e owner.Event) error {
	p := owner.DefaultNotifyPrefs
	if r.Prefs != nil {
		p = r.Prefs()
	}
	if e.Type == owner.EventHandoffRequested && !p.Challenges {
		return nil
	}
	var ns owner.Notifiers
	if p.Webhook && r.Webhook != nil {
		ns = append(ns, r.Webhook)
	}
	if p.Email && r.Email != nil {
		ns = append(ns, r.Email)
	}
	return ns.Notify(ctx, e)
}

var (
	_ owner.Notifier = (*Router)(nil)
	_ owner.Notifier = (*Webhook)(nil)
	_ owner.Notifier = (*SMTP)(nil)
)
