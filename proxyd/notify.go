package proxyd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/handoff"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/owner/dashboard"
	"github.com/agentvault/agentvault/owner/notify"
)

// Notifications (seed 004): the config sets up channels (notify.webhook,
// notify.smtp), the owner turns them on and off on the dashboard; their
// switches are kept in data_dir/notify.json. Pending approvals go out
// through owner.Service's Notifier, hand-offs through the hub's announce
// hook; both pass the same notify.Router, which reads the switches at each
// event.

const (
	// NotifyPrefsFile holds the owner's notification switches.
	NotifyPrefsFile = "notify.json"
	// WebhookSecretFile is the webhook's HMAC secret when
	// notify.webhook.secret_file names none.
	WebhookSecretFile = "webhook.secret"
)

// notifications is the process's notification state.
type notifications struct {
	path   string
	router *notify.Router

	mu    sync.Mutex
	prefs owner.NotifyPrefs
}

func (n *notifications) Prefs() owner.NotifyPrefs {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.prefs
}

// NotifyChannels reports which channels the config set up.
func (n *notifications) NotifyChannels() dashboard.NotifyChannels {
	return dashboard.NotifyChannels{Webhook: n.router.Webhook != nil, Email: n.router.Email != nil}
}

// emailsOwner reports whether an approval request reaches the owner by
// email: the config set up SMTP and the owner left email on.
func (n *notifications) emailsOwner() bool {
	return n != nil && n.router != nil && n.router.Email != nil && n.Prefs().Email
}

// NotifyPrefs implements dashboard.Notifications.
func (n *notifications) NotifyPrefs() owner.NotifyPrefs { return n.Prefs() }

// SetNotifyPrefs implements dashboard.Notifications: written to disk first,
// so a switch the owner turned off stays off after a restart.
func (n *notifications) SetNotifyPrefs(ctx context.Context, p owner.NotifyPrefs) error {
	b, err := json.Marshal(p)
	if err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "notification settings")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := writeFileAtomic(n.path, b, 0o600); err != nil {
		return err
	}
	n.prefs = p
	return nil
}

var _ dashboard.Notifications = (*notifications)(nil)

// openNotifications reads the switches and builds the channels the config
// names (roots: the upstream roots, which a webhook receiver's certificate
// may chain to in tests).
func (m *Main) openNotifications(roots []*x509.Certificate) (*notifications, error) {
	n := &notifications{path: filepath.Join(m.dataDir, NotifyPrefsFile), prefs: owner.DefaultNotifyPrefs}
	switch b, err := os.ReadFile(n.path); {
	case err == nil:
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&n.prefs); err != nil {
			return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "%s does not parse; fix or remove it", NotifyPrefsFile)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot read %s", NotifyPrefsFile)
	}
	n.router = &notify.Router{Prefs: n.Prefs}
	cfg := m.Config.Notify
	if w := cfg.Webhook; w.URL != "" {
		var secret string
		var err error
		if w.SecretFile != "" {
			var b []byte
			if b, err = os.ReadFile(expandHome(w.SecretFile)); err == nil {
				secret = strings.TrimSpace(string(b))
			}
		} else {
			secret, err = loadOrCreateSecretFile(filepath.Join(m.dataDir, WebhookSecretFile), "whsec_")
		}
		if err != nil {
			return nil, agentvault.Wrap(agentvault.CodeInvalidInput, err, "the webhook secret cannot be read")
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		for _, c := range roots {
			pool.AddCert(c)
		}
		// No proxy from the environment (P5), verified TLS.
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, ForceAttemptHTTP2: true,
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
		n.router.Webhook = &notify.Webhook{URL: w.URL, Secret: []byte(secret), Client: client}
	}
	if s := cfg.SMTP; s.Host != "" {
		mailer := &notify.SMTP{Host: s.Host, Port: s.Port, From: s.From, To: s.To, Username: s.Username}
		if s.PasswordFile != "" {
			b, err := os.ReadFile(expandHome(s.PasswordFile))
			if err != nil {
				return nil, agentvault.Wrap(agentvault.CodeInvalidInput, err, "smtp.password_file cannot be read")
			}
			mailer.Password = strings.TrimSpace(string(b))
		}
		n.router.Email = mailer
	}
	return n, nil
}

// announceHandoff tells the owner's channels that a hand-off waits, in the
// background (mcpd's start call must not wait on a slow webhook).
func (m *Main) announceHandoff(n *notifications, viewURL func(string) string) func(context.Context, handoff.View) {
	return func(_ context.Context, v handoff.View) {
		e := owner.Event{Type: owner.EventHandoffRequested, Handoff: &owner.Handoff{ID: v.ID, ChallengeType: v.ChallengeType,
			Site: v.Site, Created: v.Created, Expires: v.Expires}}
		if viewURL != nil {
			e.DashboardURL = viewURL(v.ID)
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if err := n.router.Notify(ctx, e); err != nil {
				m.Logger.Warn("hand-off notification failed", "code", string(agentvault.ErrorCode(err)), "err", agentvault.ErrorMessage(err))
			}
		}()
	}
}

// Notifications is the owner's notification switches (the dashboard's
// Notifications page uses the same); nil before Open.
func (m *Main) Notifications() dashboard.Notifications {
	if m.notify == nil {
		return nil
	}
	return m.notify
}
