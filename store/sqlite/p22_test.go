package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentvault/agentvault/store/sqlite"
	"github.com/agentvault/agentvault/vault"
)

// fdsOn counts this process's descriptors on path.
func fdsOn(t *testing.T, path string) int {
	t.Helper()
	want, err := filepath.EvalSymlinks(path)
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

// holdsSharedLock reports whether this process holds SQLite's SHARED lock
// (a POSIX read lock on the shared byte range) on the database file, which
// is what keeps another process from checkpointing and unlinking the WAL.
func holdsSharedLock(t *testing.T, path string) bool {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Skip("no /proc/locks on this system")
	}
	pid := fmt.Sprint(os.Getpid())
	ino := fmt.Sprintf(":%d", st.Ino)
	for _, l := range strings.Split(string(b), "\n") {
		// "1: POSIX  ADVISORY  READ 1234 fe:00:998 1073741826 1073742335"
		f := strings.Fields(l)
		if len(f) == 8 && f[1] == "POSIX" && f[4] == pid && strings.HasSuffix(f[5], ino) && f[6] == "1073741826" {
			return true
		}
	}
	return false
}

// TestP22_SecondOpenSharesTheHandle: a second Open of a file this process
// already has open (by another spelling of its path) shares the live
// handle: one descriptor, the process keeps its lock, and closing either
// Store leaves the other working until the last one closes the file.
func TestP22_SecondOpenSharesTheHandle(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "vault.db")
	a, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.AppendAudit(ctx, vault.AuditRecord{Action: "release"}); err != nil {
		t.Fatal(err)
	}
	if !holdsSharedLock(t, path) {
		t.Fatal("an open store holds no lock on its file")
	}
	b, err := sqlite.Open(filepath.Join(dir, ".", "vault.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AppendAudit(ctx, vault.AuditRecord{Action: "release"}); err != nil {
		t.Fatal(err)
	}
	if !holdsSharedLock(t, path) {
		t.Fatal("a second Open dropped the process's lock on the database file")
	}
	if n := fdsOn(t, path); n != 1 {
		t.Fatalf("two Opens hold %d descriptors on the file, want 1", n)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close of one Store: %v", err)
	}
	if !holdsSharedLock(t, path) {
		t.Fatal("closing the second Store dropped the first one's lock")
	}
	recs, err := a.QueryAudit(ctx, vault.AuditFilter{})
	if err != nil || len(recs) != 2 {
		t.Fatalf("first store after the second closed: %d records, %v", len(recs), err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if n := fdsOn(t, path); n != 0 {
		t.Fatalf("%d descriptors left after the last Close", n)
	}
	// A fresh Open after the last Close opens the file again.
	c, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if recs, err := c.QueryAudit(ctx, vault.AuditFilter{}); err != nil || len(recs) != 2 {
		t.Fatalf("reopened: %d records, %v", len(recs), err)
	}
}

// TestP22_NewFileIsPrivate: the database and its WAL are created 0600.
func TestP22_NewFileIsPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vault.db")
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.AppendAudit(context.Background(), vault.AuditRecord{Action: "release"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Fatalf("%s has mode %v, want 0600", filepath.Base(p), st.Mode().Perm())
		}
	}
}
