package proxyd_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/owner/notify"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/vault"

	"github.com/agentvault/agentvault/internal/leakcheck"
)

// mailSink is an SMTP receiver on loopback that takes any number of
// connections and hands back each message's data.
func mailSink(t *testing.T) (host string, port int, msgs chan string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	msgs = make(chan string, 16)
	serve := func(c net.Conn) {
		defer c.Close()
		r := bufio.NewReader(c)
		say := func(s string) { _, _ = c.Write([]byte(s + "\r\n")) }
		say("220 sink ESMTP")
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			cmd := strings.ToUpper(strings.TrimSpace(line))
			switch {
			case strings.HasPrefix(cmd, "DATA"):
				say("354 go on")
				var b strings.Builder
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if l == ".\r\n" {
						break
					}
					b.WriteString(l)
				}
				msgs <- b.String()
				say("250 queued")
			case strings.HasPrefix(cmd, "QUIT"):
				say("221 bye")
				return
			default:
				say("250 ok")
			}
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	h, p, _ := net.SplitHostPort(ln.Addr().String())
	port, _ = strconv.Atoi(p)
	return h, port, msgs
}

type hook struct {
	p   notify.Payload
	raw string
	ok  bool // the signature verified
}

// TestNotif_WebhookAndEmailForApprovalAndHandoff: with notify.webhook and
// notify.smtp configured, a real TLS webhook receiver gets a signed
// notification (under data_dir/webhook.secret) for a pending approval and
// for a challenge hand-off, and an SMTP sink gets both as mail. With the
// owner's hand-off switch off, a hand-off tells no channel while an
// approval still does; with the webhook switched off, only mail goes.
func TestNotif_WebhookAndEmailForApprovalAndHandoff(t *testing.T) {
	var secret []byte
	hooks := make(chan hook, 16)
	up, roots := tlsUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/hook" {
			return
		}
		body, _ := io.ReadAll(r.Body)
		var p notify.Payload
		_ = json.Unmarshal(body, &p)
		hooks <- hook{p: p, raw: string(body), ok: notify.Verify(secret, body, r.Header.Get(notify.SignatureHeader))}
	})
	mhost, mport, mails := mailSink(t)
	m, logs := startMain(t, roots, func(c *proxyd.Config) {
		c.Listen.Dashboard = "127.0.0.1:0"
		c.Notify.Webhook.URL = up.URL + "/hook"
		c.Notify.SMTP = proxyd.SMTPConfig{Host: mhost, Port: mport, From: "agentvault@example.org", To: []string{"owner@example.org"}}
	})
	b, err := os.ReadFile(filepath.Join(m.Config.DataDir, proxyd.WebhookSecretFile))
	if err != nil {
		t.Fatal(err)
	}
	secret = []byte(strings.TrimSpace(string(b)))
	ctx := context.Background()
	if _, err := m.Vault.AddIdentity(ctx, proxyd.DefaultOrg, "owner", vault.IdentityMeta{Name: "Ada", Email: "ada@example.org"}); err != nil {
		t.Fatal(err)
	}
	c := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	s, err := c.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	cat, _ := c.Catalog(ctx, m.APIKey, "")
	i := strings.Index(string(cat), "av_identity_")
	tok := string(cat)[i:]
	tok = tok[:strings.IndexByte(tok, '"')]
	pending := func(site string) {
		t.Helper()
		_, err := c.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: tok, PageURL: "https://" + site + "/form"})
		if agentvault.ErrorCode(err) != agentvault.CodeApprovalPending {
			t.Fatalf("authorize on %s: %v, want approval_pending", site, err)
		}
	}
	handoff := func(site string) {
		t.Helper()
		if _, err := c.StartHandoff(ctx, s.ID, control.HandoffRequest{ChallengeType: "three_ds", Site: site, TimeoutMs: 60000}); err != nil {
			t.Fatal(err)
		}
	}
	// Two events, in any order: both signed, on both channels.
	pending("tickets.example")
	handoff("bank.example")
	got := map[string]hook{}
	for range 2 {
		h := <-hooks
		if !h.ok {
			t.Fatalf("unsigned or badly signed webhook: %s", h.raw)
		}
		got[h.p.Event] = h
	}
	if a := got[owner.EventApprovalRequested].p; a.Kind != "new_destination" || a.Site != "tickets.example" || a.ApprovalID == "" {
		t.Errorf("approval webhook: %+v", a)
	}
	if h := got[owner.EventHandoffRequested].p; h.Kind != notify.KindChallengeHandoff || h.Reason != "three_ds" || h.Site != "bank.example" ||
		h.HandoffID == "" || !strings.Contains(h.Dashboard, "/handoffs/"+h.HandoffID) {
		t.Errorf("hand-off webhook: %+v", h)
	}
	mailed := (<-mails) + (<-mails)
	for _, want := range []string{"Subject: agentvault: the owner's decision is needed (new_destination, tickets.example)",
		"Subject: agentvault: a checkout needs you to clear a bank or verification step (challenge_handoff, bank.example)"} {
		if !strings.Contains(mailed, want) {
			t.Errorf("mail lacks %q:\n%s", want, mailed)
		}
	}

	// The seed's switch off: a hand-off goes nowhere, an approval still
	// goes out. The hand-off is started first, so a wrong notification
	// would be on its way before the approval's.
	if err := m.Notifications().SetNotifyPrefs(ctx, owner.NotifyPrefs{Webhook: true, Email: true}); err != nil {
		t.Fatal(err)
	}
	handoff("quiet-bank.example")
	pending("second.example")
	if h := <-hooks; h.p.Event != owner.EventApprovalRequested || h.p.Site != "second.example" {
		t.Errorf("with hand-offs switched off the webhook got %+v", h.p)
	}
	if msg := <-mails; !strings.Contains(msg, "second.example") {
		t.Errorf("with hand-offs switched off the mail was:\n%s", msg)
	}
	// Webhook off: the next approval is mailed only.
	if err := m.Notifications().SetNotifyPrefs(ctx, owner.NotifyPrefs{Email: true}); err != nil {
		t.Fatal(err)
	}
	pending("third.example")
	if msg := <-mails; !strings.Contains(msg, "third.example") {
		t.Errorf("mail: %s", msg)
	}
	pending("fourth.example") // mailed; the webhook must not have had third.
	<-mails
	select {
	case h := <-hooks:
		t.Errorf("webhook switched off, yet it got %+v", h.p)
	default:
	}
	// The switches survive a restart: they are on disk.
	b, err = os.ReadFile(filepath.Join(m.Config.DataDir, proxyd.NotifyPrefsFile))
	if err != nil || !strings.Contains(string(b), `"webhook":false`) {
		t.Errorf("notify.json: %s %v", b, err)
	}
	leakcheck.New(leakcheck.Value("webhook secret", string(secret))).Logs(t, "proxyd's log", []byte(logs.String()))
}

// TestP17_NotifyConfigValidated: the notification keys are loaded
// strictly and validated before anything listens.
func TestP17_NotifyConfigValidated(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	short := write("short.secret", "tooshort")
	long := write("long.secret", "whsec_0123456789abcdef0123456789")
	pw := write("smtp.pw", "relay-password")
	for name, body := range map[string]string{
		"unknown notify key":      "notify:\n  slack: {url: https://x.example}\n",
		"unknown webhook key":     "notify:\n  webhook: {url: https://hooks.example/x, secret: abc}\n",
		"webhook http remote":     "notify:\n  webhook: {url: http://hooks.example/x}\n",
		"webhook not a URL":       "notify:\n  webhook: {url: hooks.example/x}\n",
		"webhook other scheme":    "notify:\n  webhook: {url: ftp://hooks.example/x}\n",
		"webhook user info":       "notify:\n  webhook: {url: \"https://u:p@hooks.example/x\"}\n",
		"secret without url":      "notify:\n  webhook: {secret_file: " + long + "}\n",
		"secret file missing":     "notify:\n  webhook: {url: https://hooks.example/x, secret_file: /nonexistent/s}\n",
		"secret too short":        "notify:\n  webhook: {url: https://hooks.example/x, secret_file: " + short + "}\n",
		"smtp keys without host":  "notify:\n  smtp: {from: a@example.org, to: [b@example.org]}\n",
		"smtp no recipient":       "notify:\n  smtp: {host: mail.example, from: a@example.org}\n",
		"smtp bad from":           "notify:\n  smtp: {host: mail.example, from: \"Ada <a@example.org>\", to: [b@example.org]}\n",
		"smtp bad to":             "notify:\n  smtp: {host: mail.example, from: a@example.org, to: [\"b@example.org\\r\\nBcc: e@evil.example\"]}\n",
		"smtp port zero":          "notify:\n  smtp: {host: mail.example, port: 0, from: a@example.org, to: [b@example.org]}\n",
		"smtp host with port":     "notify:\n  smtp: {host: \"mail.example:25\", from: a@example.org, to: [b@example.org]}\n",
		"smtp user without pw":    "notify:\n  smtp: {host: mail.example, from: a@example.org, to: [b@example.org], username: ada}\n",
		"smtp password inline":    "notify:\n  smtp: {host: mail.example, from: a@example.org, to: [b@example.org], password: x}\n",
		"smtp password file gone": "notify:\n  smtp: {host: mail.example, from: a@example.org, to: [b@example.org], username: ada, password_file: /nonexistent/pw}\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := proxyd.LoadConfig(write("c.yaml", body)); err == nil {
				t.Fatal("config accepted")
			}
		})
	}
	for name, body := range map[string]string{
		"webhook https":         "notify:\n  webhook: {url: \"https://hooks.example/x?t=1\", secret_file: " + long + "}\n",
		"webhook http loopback": "notify:\n  webhook: {url: http://127.0.0.1:9000/hook}\n",
		"smtp with auth":        "notify:\n  smtp: {host: mail.example, port: 465, from: a@example.org, to: [b@example.org, c@example.org], username: ada, password_file: " + pw + "}\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := proxyd.LoadConfig(write("ok.yaml", body)); err != nil {
				t.Fatalf("valid config refused: %v", err)
			}
		})
	}
}

// TestNotif_OwnerCLIShowsSetsAndApplies: `proxyd owner notify` and `owner
// apply` change the switches of the proxyd running on the data directory
// (it reads them at its next event, no restart): show --json names the
// configured channels, each secret (the webhook's signing secret, the
// token in its URL's path, the relay's password) only as "set"; off and a
// file's notifications block change what the running proxyd reads; the
// dry run prints the diff and writes nothing; export gives the switches
// back with the channels in a comment. No secret is in any output or in
// proxyd's log (P11).
func TestNotif_OwnerCLIShowsSetsAndApplies(t *testing.T) {
	dir := t.TempDir()
	hookToken := "T0A1B2C3D/B9Z8Y7X6/" + leakcheck.Digits(12) + "qwertyuiopasdfgh"
	hookSecret := "whsec_" + leakcheck.Digits(20) + "zxcvbnm"
	relayPW := "relay-" + leakcheck.Digits(16) + "-pw"
	secretFile, pwFile := filepath.Join(dir, "hook.secret"), filepath.Join(dir, "relay.pw")
	for p, v := range map[string]string{secretFile: hookSecret, pwFile: relayPW} {
		if err := os.WriteFile(p, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	nc := proxyd.NotifyConfig{
		Webhook: proxyd.WebhookConfig{URL: "https://hooks.example.test/services/" + hookToken, SecretFile: secretFile},
		SMTP: proxyd.SMTPConfig{Host: "mail.example.test", Port: 587, From: "agentvault@example.org", To: []string{"owner@example.org"},
			Username: "ada", PasswordFile: pwFile},
	}
	m, logs := startMain(t, "", func(c *proxyd.Config) { c.Notify = nc })
	// The owner's shell reads the deployment's config from the data
	// directory, as `proxyd run` did.
	cfgYAML := "notify:\n  webhook:\n    url: " + nc.Webhook.URL + "\n    secret_file: " + secretFile +
		"\n  smtp:\n    host: mail.example.test\n    port: 587\n    from: agentvault@example.org\n    to: [owner@example.org]\n    username: ada\n    password_file: " + pwFile + "\n"
	if err := os.WriteFile(filepath.Join(m.DataDir(), "proxyd.yaml"), []byte(cfgYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	leaks := leakcheck.New(leakcheck.Value("webhook URL token", hookToken), leakcheck.Value("webhook secret", hookSecret), leakcheck.Value("relay password", relayPW))
	ctx := context.Background()
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut strings.Builder
		code := proxyd.RunCLI(ctx, append(args, "--data", m.DataDir()), &out, &errOut)
		leaks.Answer(t, "proxyd "+strings.Join(args, " "), []byte(out.String()))
		leaks.Text(t, "proxyd "+strings.Join(args, " ")+" (stderr)", []byte(errOut.String()))
		return code, out.String(), errOut.String()
	}

	code, out, errOut := cli("owner", "notify", "show", "--json")
	if code != 0 {
		t.Fatalf("owner notify show --json: %d %s", code, errOut)
	}
	var shown struct {
		Switches owner.NotifyPrefs `json:"switches"`
		Channels struct {
			Webhook struct{ Origin, Secret string } `json:"webhook"`
			Email   struct {
				Host, From, Username, Password string
				Port                           int
				To                             []string
			} `json:"email"`
		} `json:"channels"`
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if shown.Switches != owner.DefaultNotifyPrefs {
		t.Errorf("switches before any change: %+v", shown.Switches)
	}
	w, e := shown.Channels.Webhook, shown.Channels.Email
	if w.Origin != "https://hooks.example.test" || w.Secret != "set" || e.Host != "mail.example.test" || e.Port != 587 || e.Username != "ada" ||
		e.Password != "set" || len(e.To) != 1 || e.To[0] != "owner@example.org" {
		t.Errorf("channels: %+v", shown.Channels)
	}

	// Off from the shell: the running proxyd reads it at once.
	if code, out, errOut := cli("owner", "notify", "off", "email", "challenges"); code != 0 || !strings.Contains(out, "email on -> off") {
		t.Fatalf("owner notify off: %d %q %q", code, out, errOut)
	}
	if p := m.Notifications().NotifyPrefs(); p.Email || p.Challenges || !p.Webhook || !p.Browser {
		t.Fatalf("the running proxyd reads %+v after `owner notify off email challenges`", p)
	}

	code, exp, errOut := cli("owner", "export")
	if code != 0 || !strings.Contains(exp, "notifications:\n  webhook: true\n  email: false\n  browser: true\n  challenges: false\n") ||
		!strings.Contains(exp, "# webhook: POST to https://hooks.example.test/…, signing secret set") {
		t.Fatalf("owner export: %d %s\n%s", code, errOut, exp)
	}
	file := filepath.Join(t.TempDir(), "owner.yaml")
	if err := os.WriteFile(file, []byte("notifications:\n  email: true\n  webhook: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := cli("owner", "apply", "-f", file, "--dry-run"); code != 0 || !strings.Contains(out, "~ notifications: webhook on -> off; email off -> on") {
		t.Fatalf("apply --dry-run: %d %q %q", code, out, errOut)
	}
	if p := m.Notifications().NotifyPrefs(); p.Email || !p.Webhook {
		t.Fatalf("the dry run changed the switches: %+v", p)
	}
	if code, _, errOut := cli("owner", "apply", "-f", file); code != 0 {
		t.Fatalf("apply: %d %s", code, errOut)
	}
	if p := m.Notifications().NotifyPrefs(); !p.Email || p.Webhook || p.Challenges || !p.Browser {
		t.Fatalf("after apply the running proxyd reads %+v", p)
	}
	if code, out, errOut := cli("owner", "apply", "-f", file); code != 0 || out != "" || !strings.Contains(errOut, "no changes") {
		t.Errorf("a second apply: %d %q %q", code, out, errOut)
	}
	if code, out, errOut := cli("owner", "notify", "show", "--no-such-flag"); code != 2 || out != "" || !strings.Contains(errOut, "no-such-flag") {
		t.Errorf("an unknown flag: %d %q %q", code, out, errOut)
	}
	leaks.Logs(t, "proxyd's log", []byte(logs.String()))
}
