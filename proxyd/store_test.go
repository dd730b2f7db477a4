package proxyd_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/store/postgres"
	"github.com/agentvault/agentvault/store/postgres/pgtest"
	"github.com/agentvault/agentvault/vault"

	"github.com/agentvault/agentvault/internal/leakcheck"
)

// TestP17_StoreConfigStrict: the store section is validated before
// anything listens, and a DSN (which may hold a password) is never
// repeated in the refusal.
func TestP17_StoreConfigStrict(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"unknown driver":       "store:\n  driver: mysql\n",
		"empty driver":         "store:\n  driver: \"\"\n",
		"postgres without dsn": "store:\n  driver: postgres\n",
		"sqlite with a dsn":    "store:\n  dsn: postgres://av@db/av\n",
		"unknown store key":    "store:\n  driver: postgres\n  dns: postgres://av@db/av\n",
		"dsn does not parse":   "store:\n  driver: postgres\n  dsn: \"postgres://av:hunter2pw@[::1/av\"\n",
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, "c.yaml")
			if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := proxyd.LoadConfig(p)
			if err == nil {
				t.Fatal("config accepted")
			}
			if strings.Contains(agentvault.ErrorMessage(err), "hunter2pw") {
				t.Fatalf("the refusal repeats the DSN's password: %s", agentvault.ErrorMessage(err))
			}
		})
	}
	p := filepath.Join(dir, "ok.yaml")
	if err := os.WriteFile(p, []byte("store:\n  driver: postgres\n  dsn: postgres://av@db.internal:5432/av?sslmode=verify-full\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := proxyd.LoadConfig(p); err != nil || c.Store.Driver != "postgres" {
		t.Fatalf("valid postgres store refused: %v", err)
	}
	if d := proxyd.DefaultConfig().Store; d.Driver != "sqlite" || d.DSN != "" {
		t.Fatalf("default store is %+v, want sqlite in the data dir", d)
	}
}

// TestProxydReplicasShareOnePostgres: two proxyd processes (Mains) with
// their own data directories (the same master.key and api-key copied, as a
// deployment does) on one Postgres: the second opens the first's MITM CA
// and deployment secret (vault blobs), sees its cards, and a release
// through the second replica is in the shared audit log (P12).
func TestProxydReplicasShareOnePostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	const number = "4242424242424242"
	var mu sync.Mutex
	var got []byte
	up, roots := tlsUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = b
		mu.Unlock()
		_, _ = w.Write([]byte("ok"))
	})
	onPG := func(dataDir string) func(*proxyd.Config) {
		return func(c *proxyd.Config) {
			c.Store = proxyd.StoreConfig{Driver: "postgres", DSN: dsn}
			c.Policy.AuthorizedDestinations = []string{"127.0.0.1"}
			if dataDir != "" {
				c.DataDir = dataDir
			}
		}
	}
	m1, _ := startMain(t, roots, onPG(""))
	ctx := context.Background()
	if _, err := m1.Vault.AddCard(ctx, proxyd.DefaultOrg, "owner", vault.CardInput{
		Number: vault.NewSecret([]byte(number)), CVV: vault.NewSecret([]byte("737")), ExpiryMonth: 12, ExpiryYear: 2031, AnySite: true,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(m1.DataDir(), "vault.db")); err == nil {
		t.Fatal("a Postgres replica wrote a SQLite vault.db")
	}
	dir2 := t.TempDir()
	for _, f := range []string{"master.key", proxyd.APIKeyFile} {
		b, err := os.ReadFile(filepath.Join(m1.DataDir(), f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir2, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m2, logs2 := startMain(t, roots, onPG(dir2))
	if string(m2.CA.CertPEM()) != string(m1.CA.CertPEM()) {
		t.Fatal("the replicas have different MITM CAs")
	}
	c := control.NewClient("http://"+m2.ControlAddr.String(), m2.ControlToken, nil)
	s, err := c.CreateSession(ctx, m2.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := c.Catalog(ctx, m2.APIKey, "")
	i := strings.Index(string(cat), "av_card_1_number_")
	if err != nil || i < 0 {
		t.Fatalf("replica 2 does not see replica 1's card: %v", err)
	}
	token := string(cat)[i : i+len("av_card_1_number_")+5]
	a, err := c.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: token, PageURL: up.URL + "/checkout"})
	if err != nil || !a.StandIn {
		t.Fatalf("authorize: %v", err)
	}
	resp, err := proxyClient(m2, s).Post(up.URL+"/pay", "application/x-www-form-urlencoded", strings.NewReader("cc="+a.Value))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	mu.Lock()
	if string(got) != "cc="+number {
		mu.Unlock()
		t.Fatal("upstream did not receive the real number through replica 2")
	}
	mu.Unlock()
	leakcheck.New(leakcheck.Value("card number", number)).Logs(t, "replica 2's log", []byte(logs2.String()))
	outside, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer outside.Close()
	recs, err := outside.QueryAudit(ctx, vault.AuditFilter{Action: vault.AuditRelease, Session: s.ID})
	if err != nil || len(recs) == 0 {
		t.Fatalf("the release through replica 2 is not in the shared audit log (%d records, %v)", len(recs), err)
	}
}
