package owner

import (
	"strings"
	"testing"
)

// TestP11_DummyHashCostsWhatARealOneDoes: the hash unknown emails are
// checked against has the same form and cost parameters as a real one
// (so CheckPassword runs argon2id on it in full), and no password
// matches it.
func TestP11_DummyHashCostsWhatARealOneDoes(t *testing.T) {
	p := PasswordParams{Memory: 1024, Time: 1, Threads: 1}
	real, err := HashPassword("correct horse battery", p)
	if err != nil {
		t.Fatal(err)
	}
	dummy, err := dummyHash(p)
	if err != nil {
		t.Fatal(err)
	}
	rp, dp := strings.Split(real, "$"), strings.Split(dummy, "$")
	if len(dp) != 6 || dp[1] != rp[1] || dp[2] != rp[2] || dp[3] != rp[3] || len(dp[4]) != len(rp[4]) || len(dp[5]) != len(rp[5]) {
		t.Fatalf("dummy hash %q is not shaped like %q", dummy, real)
	}
	for _, pw := range []string{"", "correct horse battery", "no account has this password"} {
		if CheckPassword(pw, dummy) {
			t.Fatalf("the dummy hash matched %q", pw)
		}
	}
	if !CheckPassword("correct horse battery", real) {
		t.Fatal("a real hash does not verify")
	}
}
