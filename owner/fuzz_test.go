package owner_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/store/sqlite"
)

// FuzzAuthenticate feeds arbitrary key strings: nothing panics, and only the
// real key authenticates; everything else is invalid_api_key (never a hint
// that the id exists).
func FuzzAuthenticate(f *testing.F) {
	st, err := sqlite.Open(filepath.Join(f.TempDir(), "vault.db"))
	if err != nil {
		f.Fatal(err)
	}
	defer st.Close()
	s, err := owner.New(owner.Config{Store: st, Org: "o", Password: fastPW})
	if err != nil {
		f.Fatal(err)
	}
	_, key, err := s.CreateAPIKey(context.Background(), "agent", owner.Scope{AllCards: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(key)
	f.Add(key[:len(key)-1] + "0")
	f.Add(strings.ToUpper(key))
	f.Add("avk_")
	f.Add("")
	f.Add(key[:20] + "_" + strings.Repeat("g", 64))
	f.Fuzz(func(t *testing.T, in string) {
		_, err := s.Authenticate(context.Background(), in)
		if in == key {
			if err != nil {
				t.Fatalf("the real key failed: %v", err)
			}
			return
		}
		if agentvault.ErrorCode(err) != agentvault.CodeInvalidAPIKey {
			t.Fatalf("input of length %d: %v", len(in), err)
		}
	})
}

// FuzzCheckPassword: malformed or tampered hashes never match and never
// panic.
func FuzzCheckPassword(f *testing.F) {
	h, _ := owner.HashPassword("correct horse battery staple", fastPW)
	f.Add(h, "correct horse battery staple")
	f.Add("$argon2id$v=19$m=1024,t=1,p=1$AAAA$AAAA", "x")
	f.Add("$argon2id$v=19$m=4294967295,t=1,p=1$AAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAA", "x")
	f.Fuzz(func(t *testing.T, encoded, pw string) {
		ok := owner.CheckPassword(pw, encoded)
		if ok && (encoded != h || pw != "correct horse battery staple") && !strings.HasPrefix(encoded, "$argon2id$") {
			t.Fatal("a non-argon2id string matched")
		}
	})
}
