package ownercli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/owner/ownercli"
	"gopkg.in/yaml.v3"
)

// fakeNotify plays proxyd's notification settings.
type fakeNotify struct {
	mu     sync.Mutex
	prefs  owner.NotifyPrefs
	writes int
	ch     ownercli.NotifyChannels
}

func (f *fakeNotify) NotifyPrefs(context.Context) (owner.NotifyPrefs, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.prefs, nil
}

func (f *fakeNotify) SetNotifyPrefs(_ context.Context, p owner.NotifyPrefs) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prefs = p
	f.writes++
	return nil
}

func (f *fakeNotify) NotifyChannels() ownercli.NotifyChannels { return f.ch }

// TestNotifyShowOnOff: `notify show --json` prints the switches and the
// channels as JSON a script parses (stable names); `notify on` and `off`
// change only the switches named, say what changed, and change nothing
// (no write) when nothing differs; an unknown switch, an unknown flag or
// a missing subcommand is a usage error that writes nothing.
func TestNotifyShowOnOff(t *testing.T) {
	ctx := context.Background()
	e, out, errb, _ := vaultEnv(t)
	f := &fakeNotify{prefs: owner.DefaultNotifyPrefs, ch: ownercli.NotifyChannels{
		Webhook: &ownercli.WebhookChannel{Origin: "https://hooks.example", Secret: "set"}}}
	e.Notify = f
	run := func(args ...string) (int, string, string) {
		t.Helper()
		out.Reset()
		errb.Reset()
		code := ownercli.Run(ctx, args, e)
		return code, out.String(), errb.String()
	}
	code, o, se := run("notify", "show", "--json")
	if code != 0 {
		t.Fatalf("notify show --json: %d %s", code, se)
	}
	var v struct {
		Switches map[string]bool `json:"switches"`
		Channels struct {
			Webhook map[string]any `json:"webhook"`
			Email   map[string]any `json:"email"`
		} `json:"channels"`
	}
	if err := json.Unmarshal([]byte(o), &v); err != nil {
		t.Fatalf("notify show --json is not JSON: %v\n%s", err, o)
	}
	if !v.Switches["webhook"] || !v.Switches["email"] || !v.Switches["browser"] || !v.Switches["challenges"] || len(v.Switches) != 4 {
		t.Errorf("switches: %v", v.Switches)
	}
	if v.Channels.Webhook["origin"] != "https://hooks.example" || v.Channels.Webhook["secret"] != "set" || v.Channels.Email != nil {
		t.Errorf("channels: %+v", v.Channels)
	}
	if code, o, _ := run("notify", "show"); code != 0 || !strings.Contains(o, "not configured (notify.smtp") || !strings.Contains(o, "https://hooks.example/…") {
		t.Errorf("notify show: %d %s", code, o)
	}

	if code, o, se := run("notify", "off", "email", "challenges"); code != 0 || !strings.Contains(o, "email on -> off; challenges on -> off") {
		t.Fatalf("notify off: %d %q %q", code, o, se)
	}
	if p := f.prefs; !p.Webhook || p.Email || !p.Browser || p.Challenges {
		t.Fatalf("after notify off email challenges: %+v", p)
	}
	if code, o, se := run("notify", "on", "email"); code != 0 || !strings.Contains(o, "email off -> on") || !strings.Contains(se, "no email relay is configured") {
		t.Errorf("notify on email (not configured): %d %q %q", code, o, se)
	}
	writes := f.writes
	if code, o, _ := run("notify", "on", "email"); code != 0 || !strings.Contains(o, "no changes") || f.writes != writes {
		t.Errorf("the same change twice: %d %q, %d writes", code, o, f.writes-writes)
	}

	for _, bad := range [][]string{
		{"notify", "off", "sms"}, {"notify", "on"}, {"notify", "show", "--no-such-flag"}, {"notify", "off", "--no-such-flag", "email"},
		{"notify"}, {"notify", "test"},
	} {
		if code, o, se := run(bad...); code != 2 || o != "" || se == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", bad, code, o, se)
		}
	}
	if f.writes != writes {
		t.Error("a refused command wrote the settings")
	}
	if code, o, _ := run("notify", "show", "-h"); code != 0 || !strings.Contains(o, "usage: proxyd owner notify show") {
		t.Errorf("notify show -h: %d %q", code, o)
	}
}

// TestApplyNotificationsRoundTrip: export prints the switches (and the
// channels only in a comment); a file's notifications block sets the
// switches it names and keeps the others, its dry run prints the diff and
// writes nothing, a second run changes nothing, and the export of the
// result applied again changes nothing.
func TestApplyNotificationsRoundTrip(t *testing.T) {
	ctx := context.Background()
	e, out, errb, _ := vaultEnv(t)
	f := &fakeNotify{prefs: owner.DefaultNotifyPrefs, ch: ownercli.NotifyChannels{
		Email: &ownercli.EmailChannel{Host: "mail.example", Port: 587, From: "a@example.org", To: []string{"o@example.org"}, Username: "ada", Password: "set"}}}
	e.Notify = f
	run := func(args ...string) (string, string) {
		t.Helper()
		out.Reset()
		errb.Reset()
		if code := ownercli.Run(ctx, args, e); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb)
		}
		return out.String(), errb.String()
	}
	exp, _ := run("export")
	var back struct {
		Notifications map[string]bool `yaml:"notifications"`
	}
	if err := yaml.Unmarshal([]byte(exp), &back); err != nil || len(back.Notifications) != 4 || !back.Notifications["challenges"] {
		t.Fatalf("export's notifications: %v %v\n%s", back.Notifications, err, exp)
	}
	if !strings.Contains(exp, "# email: from a@example.org to o@example.org via mail.example:587 as ada, password set") {
		t.Errorf("export does not name the channels in a comment:\n%s", exp)
	}

	file := filepath.Join(t.TempDir(), "owner.yaml")
	if err := os.WriteFile(file, []byte("notifications:\n  email: false\n  challenges: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dry, _ := run("apply", "-f", file, "--dry-run")
	if !strings.Contains(dry, "~ notifications: email on -> off; challenges on -> off") || f.writes != 0 {
		t.Fatalf("dry run: %q, %d writes", dry, f.writes)
	}
	run("apply", "-f", file)
	if p := f.prefs; !p.Webhook || p.Email || !p.Browser || p.Challenges {
		t.Fatalf("after apply: %+v", p)
	}
	if o, se := run("apply", "-f", file); o != "" || !strings.Contains(se, "no changes") {
		t.Errorf("a second apply: %q %q", o, se)
	}
	exp, _ = run("export")
	if err := os.WriteFile(file, []byte(exp), 0o600); err != nil {
		t.Fatal(err)
	}
	if o, se := run("apply", "-f", file); o != "" || !strings.Contains(se, "no changes") {
		t.Errorf("applying the export: %q %q", o, se)
	}
	// A switch the file does not know is refused before anything is read.
	if err := os.WriteFile(file, []byte("notifications:\n  sms: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := ownercli.Run(ctx, []string{"apply", "-f", file}, e); code != 2 || !strings.Contains(errb.String(), "sms") {
		t.Errorf("an unknown switch: exit %d %q", code, errb)
	}
}
