package vault

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	agentvault "github.com/agentvault/agentvault"
)

func TestLoadOrCreateKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "master.key")
	k1, id1, created, err := LoadOrCreateKeyFile(path)
	if err != nil || !created || len(k1) != keySize || id1 == "" {
		t.Fatalf("create: created=%v len=%d id=%q err=%v", created, len(k1), id1, err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v; want 0600", st.Mode().Perm(), err)
	}
	b, _ := os.ReadFile(path)
	if strings.TrimSpace(string(b)) != hex.EncodeToString(k1) {
		t.Fatal("key file is not the documented hex form")
	}
	k2, id2, created, err := LoadOrCreateKeyFile(path)
	if err != nil || created || !bytes.Equal(k1, k2) || id1 != id2 {
		t.Fatalf("reload: created=%v same=%v err=%v", created, bytes.Equal(k1, k2), err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	_, _, _, err = LoadOrCreateKeyFile(path)
	if agentvault.ErrorCode(err) != agentvault.CodeInvalidInput || strings.Contains(err.Error(), hex.EncodeToString(k1)) {
		t.Fatalf("group-readable key file: %v", err)
	}
}

func TestParseKeyAndEnv(t *testing.T) {
	raw := bytes.Repeat([]byte{7}, keySize)
	if k, err := ParseKey(raw); err != nil || !bytes.Equal(k, raw) {
		t.Fatal("raw key not accepted")
	}
	h := hex.EncodeToString(raw)
	if k, err := ParseKey([]byte("  " + h + "\n")); err != nil || !bytes.Equal(k, raw) {
		t.Fatal("hex key not accepted")
	}
	for _, bad := range []string{"", "abcd", h[:63] + "z", h + "00"} {
		if _, err := ParseKey([]byte(bad)); err == nil {
			t.Errorf("bad key of %d chars accepted", len(bad))
		}
	}
	t.Setenv("AV_TEST_MASTER_KEY", h)
	k, id, err := KeyFromEnv("AV_TEST_MASTER_KEY")
	if err != nil || !bytes.Equal(k, raw) || id != KeyIDFor(raw) {
		t.Fatalf("KeyFromEnv: %v", err)
	}
	if _, _, err := KeyFromEnv("AV_TEST_UNSET_VARIABLE"); err == nil {
		t.Fatal("unset variable accepted")
	}
}

func TestKeyIDFor(t *testing.T) {
	a, b := KeyIDFor(bytes.Repeat([]byte{1}, 32)), KeyIDFor(bytes.Repeat([]byte{2}, 32))
	if a == b || a != KeyIDFor(bytes.Repeat([]byte{1}, 32)) || len(a) != 13 {
		t.Fatalf("key ids %q %q", a, b)
	}
	if strings.Contains(a, hex.EncodeToString(bytes.Repeat([]byte{1}, 3))) {
		t.Fatal("key id shows key bytes")
	}
}

func TestWriteKeyFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "master.key")
	k := bytes.Repeat([]byte{9}, keySize)
	if err := WriteKeyFile(path, k); err != nil {
		t.Fatal(err)
	}
	got, err := ReadKeyFile(path)
	if err != nil || !bytes.Equal(got, k) {
		t.Fatalf("ReadKeyFile after WriteKeyFile: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %d entries", len(entries))
	}
}
