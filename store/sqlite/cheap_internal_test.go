package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault/vault"
)

// rssAnon is this process's resident anonymous memory in KiB.
func rssAnon(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "RssAnon:" {
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no RssAnon in /proc/self/status")
	return 0
}

// linkGoModLibc fails unless go.mod selects the libc version whose
// allocator ReleaseMemory was checked against, and makes that the linked
// version for the test: a test binary carries no module list, and the
// version go.mod selects is the one linked.
func linkGoModLibc(t *testing.T) {
	t.Helper()
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	v := ""
	for _, l := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "modernc.org/libc" {
			v = f[1]
		}
	}
	if v != verifiedLibc {
		t.Fatalf("go.mod selects modernc.org/libc %q, ReleaseMemory was checked against %s: check libc_musl.go's allocator and allocatorMu, then update verifiedLibc", v, verifiedLibc)
	}
	if linkedLibc() == "" {
		was := linkedLibc
		linkedLibc = func() string { return v }
		t.Cleanup(func() { linkedLibc = was })
	}
}

// TestReleaseMemory: the linked libc is the version whose layout was
// checked, and after a burst that left tens of idle connections the
// release closes them and gives the C heap they used back (the allocator
// SQLite is served from keeps it otherwise) while the store goes on
// working.
func TestReleaseMemory(t *testing.T) {
	linkGoModLibc(t)
	s, err := Open(filepath.Join(t.TempDir(), "vault.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE load (id INTEGER PRIMARY KEY, v TEXT)`); err != nil {
		t.Fatal(err)
	}
	// A burst that holds 48 connections at once, each with its own page
	// cache and schema.
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, 48)
	for range 48 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := s.db.Conn(ctx)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			<-start
			for i := range 2 {
				var n int
				if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM load WHERE v >= ? OR id = ?`, strings.Repeat("v", 64), i).Scan(&n); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range 2000 {
		if _, err := s.db.ExecContext(ctx, `INSERT INTO load (v) VALUES (?)`, strings.Repeat(strconv.Itoa(i), 40)); err != nil {
			t.Fatal(err)
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	debug.FreeOSMemory()
	if idle := s.db.Stats().Idle; idle < 40 {
		t.Fatalf("%d idle connections after the burst, want the burst's", idle)
	}

	before := rssAnon(t)
	if !s.ReleaseMemory() {
		t.Fatal("ReleaseMemory did not trim")
	}
	if idle := s.db.Stats().Idle; idle != 0 {
		t.Fatalf("%d idle connections left open", idle)
	}
	debug.FreeOSMemory()
	after := rssAnon(t)
	t.Logf("RssAnon %d KiB before the trim, %d KiB after", before, after)
	if before-after < 2048 {
		t.Fatalf("the trim gave back %d KiB (RssAnon %d -> %d): the closed connections' caches stayed", before-after, before, after)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM load`).Scan(&n); err != nil || n != 2000 {
		t.Fatalf("after the trim: %d rows, %v", n, err)
	}
}

// TestReleaseMemoryClosesTheWriterConnection: after a burst of audit
// records the durable writer's connection holds the pages its commits
// touched; the release closes it (on the writer's goroutine) and its C heap
// goes back, and the next record opens a connection again and commits.
func TestReleaseMemoryClosesTheWriterConnection(t *testing.T) {
	linkGoModLibc(t)
	s, err := Open(filepath.Join(t.TempDir(), "vault.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	rec := func(w, i int) vault.AuditRecord {
		return vault.AuditRecord{Time: time.Now(), Action: "release", Org: "o", ItemID: "itm_" + strconv.Itoa(i%50), Kind: vault.KindCard,
			Field: vault.FieldNumber, Destination: "shop.example", Session: "s_" + strconv.Itoa(w), Actor: "avk_1", Purpose: "fill", ValueHMAC: make([]byte, 32)}
	}
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 400 {
				if _, err := s.AppendAudit(ctx, rec(w, i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if s.h.wconn == nil {
		t.Fatal("the writer has no connection of its own after the burst")
	}
	// What the pool's idle connections and the C heap's freed regions
	// give back goes first, so what follows is the writer's connection.
	s.db.SetMaxIdleConns(0)
	s.db.SetMaxIdleConns(maxIdleConns)
	ReleaseMemory()
	debug.FreeOSMemory()
	before := rssAnon(t)
	if !s.ReleaseMemory() {
		t.Fatal("ReleaseMemory did not trim")
	}
	debug.FreeOSMemory()
	after := rssAnon(t)
	t.Logf("RssAnon %d KiB before, %d KiB after the writer's connection closed", before, after)
	if s.h.wconn != nil {
		t.Fatal("the writer's connection is still open")
	}
	if before-after < 2048 {
		t.Fatalf("closing the writer's connection gave back %d KiB (RssAnon %d -> %d)", before-after, before, after)
	}
	seq, err := s.AppendAudit(ctx, rec(0, 0))
	if err != nil || seq != 32*400+1 {
		t.Fatalf("the record after the release: seq %d, %v", seq, err)
	}
	if s.h.wconn == nil {
		t.Fatal("the writer did not open a connection again")
	}
}
