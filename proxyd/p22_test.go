package proxyd_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/internal/vaultcli"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/store/sqlite"
	"github.com/agentvault/agentvault/vault"
	_ "modernc.org/sqlite" // the outside reader's driver
)

// vaultDBFDs counts this process's open file descriptors on the data
// directory's vault.db (not its -wal or -shm files).
func vaultDBFDs(t *testing.T, dataDir string) int {
	t.Helper()
	want, err := filepath.EvalSymlinks(filepath.Join(dataDir, vaultcli.DBFileName))
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd on this system")
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == want {
			n++
		}
	}
	return n
}

// TestP22_OneHandlePerProcess: proxyd opens vault.db once, for the vault
// and the owner store together. POSIX advisory locks belong to the
// process, and closing any descriptor on the file drops all of them
// (sqlite.org/howtocorrupt.html, 2.2): a second handle is how a process
// loses the lock that keeps another process from deleting its WAL.
func TestP22_OneHandlePerProcess(t *testing.T) {
	m := proxyd.NewMain()
	m.Config.DataDir = t.TempDir()
	m.Config.Listen = proxyd.ListenConfig{Proxy: "127.0.0.1:0", Control: "127.0.0.1:0", Admin: "127.0.0.1:0"}
	m.Stderr = io.Discard
	ctx := context.Background()
	if err := m.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// Both halves have been used: the vault (CA, deployment secret) and
	// the owner store (the config's sites go through it).
	if err := m.Owner.AuthorizeSite(ctx, "shop.example", "test"); err != nil {
		t.Fatal(err)
	}
	if n := vaultDBFDs(t, m.DataDir()); n != 1 {
		t.Fatalf("proxyd holds %d descriptors on vault.db after Open, want exactly 1", n)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if n := vaultDBFDs(t, m.DataDir()); n != 0 {
		t.Fatalf("%d descriptors on vault.db left after Close", n)
	}
}

const p22ChildEnv = "AGENTVAULT_P22_CHILD_DATADIR"

// p22Child is the process that gets killed: it opens the data directory
// the way proxyd does (Main.Open) and writes in a loop, printing each
// record's id only after the call that wrote it returned, the moment a
// value would go upstream or an answer reach the agent.
func p22Child(dir string) {
	m := proxyd.NewMain()
	m.Config.DataDir = dir
	m.Config.Listen = proxyd.ListenConfig{Proxy: "127.0.0.1:0", Control: "127.0.0.1:0", Admin: "127.0.0.1:0"}
	m.Stderr = io.Discard
	ctx := context.Background()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "p22 child:", err)
		os.Exit(3)
	}
	if err := m.Open(ctx); err != nil {
		fail(err)
	}
	card, err := m.Vault.AddCard(ctx, proxyd.DefaultOrg, "owner", vault.CardInput{
		Number: vault.NewSecret([]byte("4242424242424242")), CVV: vault.NewSecret([]byte("737")),
		ExpiryMonth: 12, ExpiryYear: 2031, AnySite: true})
	if err != nil {
		fail(err)
	}
	fmt.Println("ready")
	for i := 0; ; i++ {
		sec, err := m.Vault.Release(ctx, vault.ReleaseArgs{Org: proxyd.DefaultOrg, ItemID: card.ID, Field: vault.FieldNumber,
			Destination: "shop.example", Session: fmt.Sprintf("s_p22_%d", i), Actor: "p22", Purpose: "substitute"})
		if err != nil {
			fail(err)
		}
		sec.Wipe()
		fmt.Printf("release s_p22_%d\n", i)
		rid := fmt.Sprintf("res_p22_%d", i)
		if err := m.Owner.Reserve(ctx, rid, card.ID, policy.Amount{Minor: 100, Currency: "EUR"}); err != nil {
			fail(err)
		}
		fmt.Printf("reserve %s\n", rid)
		a, err := m.Owner.RequestApproval(ctx, owner.ApprovalRequest{Kind: owner.KindNewDestination, Site: fmt.Sprintf("site%d.example", i)})
		if err != nil {
			fail(err)
		}
		if _, err := m.Owner.Decide(ctx, a.ID, true, "owner"); err != nil {
			fail(err)
		}
		fmt.Printf("approve %s\n", a.ID)
	}
}

// outsideRead is what a backup tool or `sqlite3 vault.db` does: open the
// file in another process, read, close. Its close checkpoints and unlinks
// the WAL and -shm whenever it can take the exclusive lock on the file,
// i.e. whenever the writer's process holds no lock on it. SQLite 3.40 (the
// Debian sqlite3 CLI) does exactly that; newer releases, such as the one
// in modernc.org/sqlite, also look at the -shm DMS lock first and keep the
// files, so both readers run: the CLI is the one that shows the loss.
func outsideRead(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM audit`).Scan(&n); err != nil {
		t.Fatalf("outside reader: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("outside reader close: %v", err)
	}
	if cli, err := exec.LookPath("sqlite3"); err == nil {
		out, err := exec.Command(cli, "-cmd", ".timeout 10000", path, "SELECT count(*) FROM audit").CombinedOutput()
		if err != nil {
			t.Fatalf("sqlite3 CLI: %v: %s", err, out)
		}
	}
}

// TestP22_OutsideReaderThenKill9LosesNothing: a proxyd-like child writes
// audited releases, ledger reservations and decided approvals; an outside
// process reads the file meanwhile; the child is killed with SIGKILL at a
// random point. Every id the child printed must be in the store.
func TestP22_OutsideReaderThenKill9LosesNothing(t *testing.T) {
	if dir := os.Getenv(p22ChildEnv); dir != "" {
		p22Child(dir)
		return
	}
	if testing.Short() {
		t.Skip("starts and kills a child process")
	}
	if _, err := exec.LookPath("sqlite3"); err != nil {
		t.Log("no sqlite3 CLI on PATH: only the modernc reader runs, which does not unlink a live WAL")
	}
	for round := 0; round < 3; round++ {
		t.Run(fmt.Sprint("round", round), func(t *testing.T) { p22Round(t) })
	}
}

func p22Round(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestP22_OutsideReaderThenKill9LosesNothing$", "-test.count=1")
	cmd.Env = append(os.Environ(), p22ChildEnv+"="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var got []string
	next := func() string {
		l, ok := <-lines
		if !ok {
			_ = cmd.Wait()
			t.Fatalf("child ended early: %s", stderr.String())
		}
		if l != "ready" {
			got = append(got, l)
		}
		return l
	}
	if l := next(); l != "ready" {
		t.Fatalf("child said %q first", l)
	}
	path := filepath.Join(dir, vaultcli.DBFileName)
	// Several outside reads while the child writes, each followed by a
	// random number of acknowledged writes, then SIGKILL.
	for r := 0; r < 3; r++ {
		for k := 3 + rand.IntN(30); k > 0; k-- {
			next()
		}
		outsideRead(t, path)
	}
	for k := 1 + rand.IntN(60); k > 0; k-- {
		next()
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for l := range lines { // lines printed before the kill
		got = append(got, l)
	}
	_ = cmd.Wait()

	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	v, err := vaultcli.OpenStore(ctx, dir, st)
	if err != nil {
		t.Fatal(err)
	}
	var lost []string
	for _, l := range got {
		kind, id, _ := strings.Cut(l, " ")
		switch kind {
		case "release":
			recs, err := v.Audit(ctx, vault.AuditFilter{Session: id, Action: vault.AuditRelease})
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 1 {
				lost = append(lost, l)
			}
		case "reserve":
			if _, err := st.GetReservation(ctx, id); err != nil {
				lost = append(lost, l)
			}
		case "approve":
			if a, err := st.GetApproval(ctx, id); err != nil || a.Status != owner.StatusApproved {
				lost = append(lost, l)
			}
		default:
			t.Fatalf("child printed %q", l)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d acknowledged writes lost after SIGKILL (first: %s)", len(lost), len(got), lost[0])
	}
	t.Logf("%d acknowledged writes, all present", len(got))
}
