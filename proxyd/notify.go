package proxyd

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/url"
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
	"github.com/agentvault/agentvault/owner/ownercli"
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
	// seen is notify.json as last read (nil: not read): a change made
	// by `proxyd owner notify` or `owner apply` replaces the file, and the
	// next event reads it again.
	seen os.FileInfo
}

// Prefs is the owner's switches as notify.json holds them now. A file
// that no longer parses keeps the switches in use (the CLI and the
// dashboard write it whole, so only a hand edit can break it).
func (n *notifications) Prefs() owner.NotifyPrefs {
	n.mu.Lock()
	defer n.mu.Unlock()
	fi, err := os.Stat(n.path)
	if err != nil || n.seen != nil && os.SameFile(fi, n.seen) && fi.ModTime().Equal(n.seen.ModTime()) && fi.Size() == n.seen.Size() {
		return n.prefs
	}
	if p, err := readNotifyPrefs(n.path); err == nil {
		n.prefs, n.seen = p, fi
	}
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
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := writeNotifyPrefs(n.path, p); err != nil {
		return err
	}
	n.prefs = p
	if fi, err := os.Stat(n.path); err == nil {
		n.seen = fi
	}
	return nil
}

// readNotifyPrefs reads the owner's switches from path: the defaults when
// the owner never changed them (no file).
func readNotifyPrefs(path string) (owner.NotifyPrefs, error) {
	p := owner.DefaultNotifyPrefs
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return p, nil
	case err != nil:
		return p, agentvault.Wrap(agentvault.CodeInternal, err, "cannot read %s", NotifyPrefsFile)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, agentvault.Errorf(agentvault.CodeInvalidInput, "%s does not parse; fix or remove it", NotifyPrefsFile)
	}
	return p, nil
}

// writeNotifyPrefs replaces the file whole (a temporary file of its own,
// renamed): a running proxyd, the dashboard and the CLI never read half
// of it.
func writeNotifyPrefs(path string, p owner.NotifyPrefs) error {
	b, err := json.Marshal(p)
	if err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "notification settings")
	}
	f, err := os.CreateTemp(filepath.Dir(path), NotifyPrefsFile+".*")
	if err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "cannot write %s", NotifyPrefsFile)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return agentvault.Wrap(agentvault.CodeInternal, err, "cannot write %s", NotifyPrefsFile)
	}
	return nil
}

var _ dashboard.Notifications = (*notifications)(nil)

// openNotifications reads the switches and builds the channels the config
// names (roots: the upstream roots, which a webhook receiver's certificate
// may chain to in tests).
func (m *Main) openNotifications(roots []*x509.Certificate) (*notifications, error) {
	n := &notifications{path: filepath.Join(m.dataDir, NotifyPrefsFile)}
	var err error
	if n.prefs, err = readNotifyPrefs(n.path); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(n.path); err == nil {
		n.seen = fi
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

// cliNotifications is the owner CLI's notification settings: the data
// directory's notify.json (a running proxyd on it reads a change at its
// next event) and the channels the config set up.
type cliNotifications struct{ cfg Config }

func (n cliNotifications) path() string { return filepath.Join(n.cfg.DataDir, NotifyPrefsFile) }

func (n cliNotifications) NotifyPrefs(context.Context) (owner.NotifyPrefs, error) {
	return readNotifyPrefs(n.path())
}

func (n cliNotifications) SetNotifyPrefs(_ context.Context, p owner.NotifyPrefs) error {
	return writeNotifyPrefs(n.path(), p)
}

func (n cliNotifications) NotifyChannels() ownercli.NotifyChannels {
	return n.cfg.Notify.describe(n.cfg.DataDir)
}

var _ ownercli.Notifications = cliNotifications{}

// describe says which channels the config set up, for the owner's eyes:
// the webhook's origin only (services put a token in the path or query)
// and, of each secret, only whether it is there.
func (c NotifyConfig) describe(dataDir string) ownercli.NotifyChannels {
	var out ownercli.NotifyChannels
	present := func(path string) bool {
		fi, err := os.Stat(path)
		return err == nil && fi.Mode().IsRegular() && fi.Size() > 0
	}
	if w := c.Webhook; w.URL != "" {
		origin := "(not a URL)"
		if u, err := url.Parse(w.URL); err == nil && u.Host != "" {
			origin = u.Scheme + "://" + u.Host
		}
		secret := "set"
		switch {
		case w.SecretFile != "" && !present(expandHome(w.SecretFile)):
			secret = "missing (notify.webhook.secret_file cannot be read)"
		case w.SecretFile == "" && !present(filepath.Join(dataDir, WebhookSecretFile)):
			secret = "created at proxyd's next start"
		}
		out.Webhook = &ownercli.WebhookChannel{Origin: origin, Secret: secret}
	}
	if s := c.SMTP; s.Host != "" {
		e := &ownercli.EmailChannel{Host: s.Host, Port: s.Port, From: s.From, To: append([]string{}, s.To...), Username: s.Username, Password: "none"}
		if e.Port == 0 {
			e.Port = 25 // notify.SMTP's default
		}
		if s.PasswordFile != "" {
			e.Password = "set"
			if !present(expandHome(s.PasswordFile)) {
				e.Password = "missing (notify.smtp.password_file cannot be read)"
			}
		}
		out.Email = e
	}
	return out
}
