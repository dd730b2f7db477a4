package proxyd_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/store/postgres/pgtest"
)

// pgReplicaConfig writes a replica's config file: the shared Postgres
// store, loopback listeners on free ports, the test upstream's CA.
func pgReplicaConfig(t *testing.T, path, dataDir, dsn, roots string) proxyd.Config {
	t.Helper()
	body := fmt.Sprintf(`data_dir: %s
listen:
  proxy: 127.0.0.1:0
  control: 127.0.0.1:0
  admin: 127.0.0.1:0
  dashboard: ""
  credentials: ""
store:
  driver: postgres
  dsn: %q
tls:
  extra_roots: [%s]
unsafe_allow_private_ranges: true
unsafe_test_hosts:
  shop.test: 127.0.0.1
  pay.test: 127.0.0.1
`, dataDir, dsn, roots)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := proxyd.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func files(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestP21_OwnerCLIOnPostgresReachesEveryReplica: two replicas on one
// Postgres, started from their config files as docs/replicas.md sets them
// up (A's in its data directory, B's elsewhere naming its data_dir). The
// owner's commands, run as the built proxyd binary on either replica's
// host (A's by --data, B's by --config), change the shared store: a
// purchase through the other replica sees each change at its next
// request. --init is refused and no command leaves a SQLite file.
func TestP21_OwnerCLIOnPostgresReachesEveryReplica(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	rec := &recorder{}
	up, roots := tlsUpstream(t, rec.handle)
	upPort := up.URL[strings.LastIndexByte(up.URL, ':')+1:]
	page := func(host string) string { return "https://" + host + ":" + upPort + "/pay" }
	const number, cvv, pw = "4242424242424242", "737", "a long owner passphrase 42"

	dirA, dirB := t.TempDir(), t.TempDir()
	cfgA := filepath.Join(dirA, proxyd.ConfigFile)
	cfgB := filepath.Join(t.TempDir(), "replica-b.yaml")
	// The first replica creates the schema, master.key and api-key; they
	// are copied to the second before it starts.
	a, logsA, err := startReplica(t, pgReplicaConfig(t, cfgA, dirA, dsn, roots))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"master.key", proxyd.APIKeyFile} {
		b, err := os.ReadFile(filepath.Join(dirA, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dirB, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b, logsB, err := startReplica(t, pgReplicaConfig(t, cfgB, dirB, dsn, roots))
	if err != nil {
		t.Fatal(err)
	}
	ca := control.NewClient("http://"+a.ControlAddr.String(), a.ControlToken, nil)
	cb := control.NewClient("http://"+b.ControlAddr.String(), b.ControlToken, nil)

	home := t.TempDir()
	onA := []string{"--data", dirA}
	onB := []string{"--config", cfgB}
	cli := func(host []string, stdin string, args ...string) result {
		t.Helper()
		r := runBin(t, cleanEnv(home), stdin, "proxyd", append(args, host...)...)
		if strings.Contains(r.stdout+r.stderr, number) || strings.Contains(r.stdout+r.stderr, pw) {
			t.Fatalf("proxyd %v printed a secret", args)
		}
		return r
	}
	must := func(host []string, stdin string, args ...string) result {
		t.Helper()
		r := cli(host, stdin, args...)
		if r.code != 0 {
			t.Fatalf("proxyd %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		return r
	}
	// purchase authorizes the card on one replica and posts its stand-in
	// through the other's proxy; it returns the refusal code ("" when the
	// site got the request).
	purchase := func(t *testing.T, s control.CreateSessionResponse, token string, authz *control.Client, through *proxyd.Main, host string) string {
		t.Helper()
		got, err := authz.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: token, PageURL: page(host)})
		if err != nil {
			t.Fatalf("authorize for %s: %v", host, err)
		}
		return post(t, via(through, s), page(host), "cc="+got.Value)
	}
	reached := func(t *testing.T, want int) {
		t.Helper()
		n := 0
		for _, body := range rec.all() {
			if body == "cc="+number {
				n++
			}
		}
		if n != want {
			t.Fatalf("the site got the real number %d times, want %d", n, want)
		}
	}

	t.Run("set-password", func(t *testing.T) {
		must(onA, pw+"\n", "owner", "set-password", "--email", "owner@example.com")
		for name, m := range map[string]*proxyd.Main{"A": a, "B": b} {
			if _, err := m.Owner.CheckOwnerPassword(ctx, "owner@example.com", pw); err != nil {
				t.Errorf("replica %s does not take the password set from A's host: %v", name, err)
			}
		}
	})
	var cardLabel string
	t.Run("vault add-card", func(t *testing.T) {
		r := must(onB, number+"\n"+cvv+"\n", "vault", "add-card", "--exp", "12/31", "--sites", "shop.test,pay.test")
		m := regexp.MustCompile(`added card (\S+): `).FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("add-card printed %q", r.stdout)
		}
		cardLabel = m[1]
		for name, m := range map[string]*proxyd.Main{"A": a, "B": b} {
			items, err := m.Vault.List(ctx, proxyd.DefaultOrg)
			if err != nil || len(items) != 1 || items[0].Card == nil || items[0].Card.Last4 != "4242" {
				t.Fatalf("replica %s does not see the card added on B's host: %d items, %v", name, len(items), err)
			}
		}
	})
	var key, keyID string
	t.Run("create-key", func(t *testing.T) {
		r := must(onA, "", "owner", "create-key", "--name", "agent", "--all-cards")
		key = strings.TrimSpace(r.stdout)
		m := regexp.MustCompile(`Created (\S+) \(agent\)`).FindStringSubmatch(r.stderr)
		if !strings.HasPrefix(key, "avk_") || m == nil {
			t.Fatalf("create-key printed %q, %q", r.stdout, r.stderr)
		}
		keyID = m[1]
		for name, c := range map[string]*control.Client{"A": ca, "B": cb} {
			if _, err := c.CreateSession(ctx, key); err != nil {
				t.Fatalf("the key created on A's host does not open a session on %s: %v", name, err)
			}
		}
	})
	if t.Failed() {
		return
	}
	cat, err := cb.Catalog(ctx, key, "")
	if err != nil {
		t.Fatal(err)
	}
	token := tokenOf(t, cat, "av_card_1_number_")
	s, err := ca.CreateSession(ctx, key)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("pending and approve", func(t *testing.T) {
		_, err := ca.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: token, PageURL: page("shop.test")})
		p, ok := control.PendingOf(err)
		if !ok {
			t.Fatalf("a first fill on shop.test: %v, want a wait for the owner", err)
		}
		if r := must(onB, "", "owner", "pending"); !strings.Contains(r.stdout, p.WaitID) || !strings.Contains(r.stdout, "shop.test") {
			t.Fatalf("pending on B's host does not list A's approval %s:\n%s", p.WaitID, r.stdout)
		}
		must(onA, "", "owner", "approve", p.WaitID)
		w, err := ca.Wait(ctx, p.WaitID, 20*time.Second)
		if err != nil || w.Status != "approved" {
			t.Fatalf("A's wait after approve: %+v, %v", w, err)
		}
		// Authorized on B, bought through A.
		if code := purchase(t, s, token, cb, a, "shop.test"); code != "" {
			t.Fatalf("a purchase after the approval was refused: %s", code)
		}
		reached(t, 1)
	})
	t.Run("authorize-site", func(t *testing.T) {
		must(onB, "", "owner", "authorize-site", "pay.test")
		// No wait for the owner: the site is authorized for A too.
		if code := purchase(t, s, token, ca, b, "pay.test"); code != "" {
			t.Fatalf("a purchase on the site authorized on B's host was refused: %s", code)
		}
		reached(t, 2)
	})
	t.Run("pause-card and resume-card", func(t *testing.T) {
		got, err := cb.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: token, PageURL: page("shop.test")})
		if err != nil {
			t.Fatal(err)
		}
		if r := must(onA, "", "owner", "pause-card", cardLabel); !strings.Contains(r.stdout, "paused") {
			t.Fatalf("pause-card printed %q", r.stdout)
		}
		// The grant B gave before the pause, at its next request through B.
		if code := post(t, via(b, s), page("shop.test"), "cc="+got.Value); code != string(agentvault.CodeCardPaused) {
			t.Fatalf("a purchase through B after pause-card on A's host: %q, want %s", code, agentvault.CodeCardPaused)
		}
		reached(t, 2)
		must(onB, "", "owner", "resume-card", cardLabel)
		if code := purchase(t, s, token, ca, a, "shop.test"); code != "" {
			t.Fatalf("a purchase after resume-card: %s", code)
		}
		reached(t, 3)
	})
	t.Run("revoke", func(t *testing.T) {
		got, err := ca.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: token, PageURL: page("shop.test")})
		if err != nil {
			t.Fatal(err)
		}
		must(onB, "", "owner", "revoke", keyID)
		if code := post(t, via(a, s), page("shop.test"), "cc="+got.Value); code != string(agentvault.CodeKeyRevoked) {
			t.Fatalf("a purchase through A after revoke on B's host: %q, want %s", code, agentvault.CodeKeyRevoked)
		}
		reached(t, 3)
		for name, c := range map[string]*control.Client{"A": ca, "B": cb} {
			if _, err := c.CreateSession(ctx, key); agentvault.ErrorCode(err) != agentvault.CodeKeyRevoked {
				t.Errorf("a session with the revoked key on %s: %v", name, err)
			}
		}
	})
	t.Run("--init is refused", func(t *testing.T) {
		for _, host := range [][]string{onA, onB} {
			r := cli(host, "", "--init", "owner", "keys")
			if r.code == 0 || !strings.Contains(r.stderr, "Postgres") || !strings.Contains(r.stderr, "--init") {
				t.Errorf("--init on a Postgres deployment: exit %d, %q", r.code, r.stderr)
			}
		}
		// A data directory that holds only the config: nothing is written.
		fresh := t.TempDir()
		pgReplicaConfig(t, filepath.Join(fresh, proxyd.ConfigFile), fresh, dsn, roots)
		for _, args := range [][]string{{"--init", "vault", "add-identity", "--name", "Ada"}, {"vault", "list"}, {"--init", "owner", "create-key", "--name", "x"}} {
			r := cli([]string{"--data", fresh}, "", args...)
			if r.code == 0 {
				t.Errorf("%v on a data directory without master.key: exit 0", args)
			}
			if got := files(t, fresh); !slices.Equal(got, []string{proxyd.ConfigFile}) {
				t.Fatalf("%v wrote files: %v", args, got)
			}
		}
	})
	t.Run("doctor", func(t *testing.T) {
		r := cli(onB, "", "doctor")
		for _, want := range []string{"is reachable", "fsync on, synchronous_commit on", "migrations current", "vault in Postgres store", "dashboard password is set"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("doctor on B's config lacks %q:\n%s", want, r.stdout)
			}
		}
	})
	for _, d := range []string{dirA, dirB} {
		if slices.Contains(files(t, d), "vault.db") {
			t.Errorf("a SQLite vault.db appeared in %s", d)
		}
	}
	for i, l := range []*syncBuf{logsA, logsB} {
		if strings.Contains(l.String(), number) {
			t.Errorf("the card number is in replica %d's logs", i)
		}
	}
}

// TestOperator_PostgresConfigNeverMakesALocalVault: a data directory whose
// config names Postgres: --init is refused, a store that cannot be reached
// fails the command naming the store (never the DSN's password), doctor
// says the same, and no command writes a file there.
func TestOperator_PostgresConfigNeverMakesALocalVault(t *testing.T) {
	home := t.TempDir()
	data := t.TempDir()
	const secret = "s3cret-pw-not-for-logs"
	dsn := "postgres://agentvault:" + secret + "@127.0.0.1:1/avdb?sslmode=disable&connect_timeout=5"
	cfg := filepath.Join(data, proxyd.ConfigFile)
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("store:\n  driver: postgres\n  dsn: %q\n", dsn)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := cleanEnv(home)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--data", data, "--init", "vault", "add-identity", "--name", "Ada"}, []string{"Postgres", "agentvault@127.0.0.1:1/avdb", "--init"}},
		{[]string{"owner", "--init", "create-key", "--name", "x", "--data", data}, []string{"Postgres", "--init"}},
		{[]string{"--config", cfg, "--init", "ca", "export"}, []string{"Postgres", "--init"}},
		{[]string{"--data", data, "vault", "list"}, []string{"no master key", filepath.Join(data, "master.key")}},
		{[]string{"--data", data, "owner", "keys"}, []string{"agentvault@127.0.0.1:1/avdb", "cannot connect", "connection refused"}},
	} {
		r := runBin(t, env, "", "proxyd", c.args...)
		if r.code == 0 {
			t.Errorf("%v: exit 0", c.args)
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%v: stderr %q lacks %q", c.args, r.stderr, w)
			}
		}
		if strings.Contains(r.stdout+r.stderr, secret) {
			t.Errorf("%v: the DSN's password is in the output", c.args)
		}
		if got := files(t, data); !slices.Equal(got, []string{proxyd.ConfigFile}) {
			t.Fatalf("%v wrote files in the data directory: %v", c.args, got)
		}
	}
	if exists(filepath.Join(home, ".agentvault")) {
		t.Error("a command created ~/.agentvault")
	}
	r := runBin(t, env, "", "proxyd", "doctor", "--data", data)
	if r.code == 0 || !strings.Contains(r.stdout, "FAIL  Postgres store agentvault@127.0.0.1:1/avdb: cannot connect") || strings.Contains(r.stdout+r.stderr, secret) {
		t.Errorf("doctor on an unreachable store: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
