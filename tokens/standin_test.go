package tokens

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/vault/item"
)

// seeded is a deterministic io.Reader for tests.
type seeded struct{ r *rand.ChaCha8 }

func newSeeded(seed byte) *seeded {
	var s [32]byte
	s[0] = seed
	return &seeded{rand.NewChaCha8(s)}
}

func (s *seeded) Read(p []byte) (int, error) { return s.r.Read(p) }

func fingerprint(b []byte) string { return fmt.Sprintf("len=%d sha=%x", len(b), sha256.Sum256(b)) }

func charClass(c byte) int {
	switch {
	case c >= 'a' && c <= 'z':
		return classLower
	case c >= 'A' && c <= 'Z':
		return classUpper
	case c >= '0' && c <= '9':
		return classDigit
	}
	return classSymbol
}

// checkStandIn asserts the stand-in properties; messages print lengths and
// hashes only (P11).
func checkStandIn(t *testing.T, field item.Field, real, got []byte) {
	t.Helper()
	if bytes.Equal(real, got) {
		t.Fatalf("%s stand-in equals the real value (%s)", field, fingerprint(real))
	}
	switch field {
	case item.FieldNumber:
		if len(got) != len(real) || !bytes.Equal(got[:6], real[:6]) || !bytes.Equal(got[len(got)-4:], real[len(real)-4:]) || !LuhnValid(got) {
			t.Fatalf("card stand-in %s breaks the format of %s", fingerprint(got), fingerprint(real))
		}
	case item.FieldCVV:
		if len(got) != len(real) || !allDigits(got) {
			t.Fatalf("CVV stand-in has %d bytes, want %d digits", len(got), len(real))
		}
	case item.FieldTOTP:
		if len(got) != 6 || !allDigits(got) {
			t.Fatalf("TOTP stand-in is not 6 digits (%d bytes)", len(got))
		}
	case item.FieldPassword:
		if len(got) != len(real) {
			t.Fatalf("password stand-in has %d bytes, want %d", len(got), len(real))
		}
		for i := range got {
			if charClass(got[i]) != charClass(real[i]) {
				t.Fatalf("password stand-in class differs at position %d", i)
			}
			if charClass(got[i]) == classSymbol && !bytes.Contains(real, got[i:i+1]) {
				t.Fatalf("password stand-in uses a symbol the real one does not")
			}
		}
	}
}

func TestStandIn(t *testing.T) {
	cases := []struct {
		name  string
		field item.Field
		real  string
	}{
		{"visa 16", item.FieldNumber, "4242424242424242"},
		{"amex 15", item.FieldNumber, "378282246310005"},
		{"13 digits", item.FieldNumber, "4222222222222"},
		{"19 digits", item.FieldNumber, "6011000990139424123"},
		{"not luhn real", item.FieldNumber, "4242424242424241"},
		{"cvv 3", item.FieldCVV, "737"},
		{"cvv 4", item.FieldCVV, "7373"},
		{"totp seed", item.FieldTOTP, "JBSWY3DPEHPK3PXP"},
		{"password mixed", item.FieldPassword, "Tr0ub4dor&3!xyz"},
		{"password one char", item.FieldPassword, "a"},
		{"password digits", item.FieldPassword, "00"},
		{"password spaces", item.FieldPassword, "correct horse battery staple"},
		{"password two symbols", item.FieldPassword, "!?"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rnd := newSeeded(1)
			seen := map[string]bool{}
			for range 50 {
				got, err := StandIn(c.field, item.NewSecret([]byte(c.real)), rnd)
				if err != nil {
					t.Fatal(err)
				}
				checkStandIn(t, c.field, []byte(c.real), got)
				seen[string(got)] = true
			}
			if len(seen) < 2 {
				t.Fatalf("stand-ins are not random")
			}
		})
	}
}

func TestStandInRefusals(t *testing.T) {
	cases := []struct {
		name  string
		field item.Field
		real  string
		code  agentvault.Code
	}{
		{"short card", item.FieldNumber, "424242424242", agentvault.CodeInvalidInput},
		{"long card", item.FieldNumber, "42424242424242424242", agentvault.CodeInvalidInput},
		{"spaced card", item.FieldNumber, "4242 4242 4242 4242", agentvault.CodeInvalidInput},
		{"cvv 2", item.FieldCVV, "73", agentvault.CodeInvalidInput},
		{"cvv letters", item.FieldCVV, "7a3", agentvault.CodeInvalidInput},
		{"holder", item.FieldHolder, "Ada Lovelace", agentvault.CodeInvalidInput},
		{"email", item.FieldEmail, "a@b.c", agentvault.CodeInvalidInput},
		{"empty password", item.FieldPassword, "", agentvault.CodeInvalidInput},
		{"utf8 password", item.FieldPassword, "pässwörd", agentvault.CodeInvalidInput},
		{"no distinct password", item.FieldPassword, "!!!!", agentvault.CodeSubstitution},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := StandIn(c.field, item.NewSecret([]byte(c.real)), newSeeded(2))
			if agentvault.ErrorCode(err) != c.code {
				t.Fatalf("code %q want %q", agentvault.ErrorCode(err), c.code)
			}
			if c.real != "" && strings.Contains(err.Error(), c.real) {
				t.Fatalf("P11: error message carries the value")
			}
		})
	}
	if _, err := StandIn(item.FieldCVV, item.NewSecret([]byte("123")), strings.NewReader("")); agentvault.ErrorCode(err) != agentvault.CodeInternal {
		t.Fatalf("exhausted random source: %v", err)
	}
}

func TestLuhnValid(t *testing.T) {
	for s, want := range map[string]bool{"4242424242424242": true, "378282246310005": true, "4242424242424241": false, "": false, "42a2": false, "0": true} {
		if LuhnValid([]byte(s)) != want {
			t.Errorf("LuhnValid(%q) != %v", s, want)
		}
	}
}

func TestSessionUniqueAndStable(t *testing.T) {
	s, err := NewSession(newSeeded(3))
	if err != nil {
		t.Fatal(err)
	}
	// 13-digit cards have 100 Luhn-valid middles, one of them the real
	// number: at most 99 bindings get a stand-in, every one distinct, and
	// then the session refuses rather than repeat one.
	real := item.NewSecret([]byte("4222222222222"))
	seen := map[string]int{}
	var exhausted error
	for b := 0; b < 150 && exhausted == nil; b++ {
		v, err := s.Issue(b, item.FieldNumber, real)
		if err != nil {
			exhausted = err
			break
		}
		checkStandIn(t, item.FieldNumber, real.InsecureRawBytes(), v)
		if prev, dup := seen[string(v)]; dup {
			t.Fatalf("bindings %d and %d got one stand-in", prev, b)
		}
		seen[string(v)] = b
	}
	if agentvault.ErrorCode(exhausted) != agentvault.CodeSubstitution || len(seen) > 99 || len(seen) < 90 {
		t.Fatalf("after %d stand-ins: %v", len(seen), exhausted)
	}
	again, _ := s.Issue(7, item.FieldNumber, real)
	if got, ok := s.Lookup(again); !ok || got != 7 || seen[string(again)] != 7 {
		t.Fatalf("stand-in not stable or not mapped")
	}
	if err := s.Bind([]byte("av_card_1_number_u7x2k"), 100); err != nil {
		t.Fatal(err)
	}
	if err := s.Bind([]byte("av_card_1_number_u7x2k"), 101); agentvault.ErrorCode(err) != agentvault.CodeConflict {
		t.Fatalf("rebinding: %v", err)
	}
	ps := s.Patterns()
	if len(ps) != len(seen)+1 {
		t.Fatalf("%d patterns", len(ps))
	}
	for _, p := range ps {
		if p.WholeField != (len(p.Value) <= WholeFieldMaxLen) {
			t.Fatalf("WholeField wrong for a %d-byte value", len(p.Value))
		}
	}
}

func TestSessionAvoidsSeenRealValues(t *testing.T) {
	s, _ := NewSession(newSeeded(4))
	// CVVs: 1000 values. Give the session many reals, then check no
	// stand-in equals any of them.
	var reals []string
	for b := range 300 {
		r := fmt.Sprintf("%03d", (b*7)%1000)
		reals = append(reals, r)
		if _, err := s.Issue(b, item.FieldCVV, item.NewSecret([]byte(r))); err != nil {
			t.Fatal(err)
		}
	}
	for b := range 300 {
		v, _ := s.Issue(b, item.FieldCVV, item.Secret{})
		for _, r := range reals[:b+1] {
			if string(v) == r {
				t.Fatalf("binding %d got a stand-in equal to a real value seen before it", b)
			}
		}
	}
}

func TestSessionConcurrent(t *testing.T) {
	s, _ := NewSession(nil)
	var wg sync.WaitGroup
	out := make([][]byte, 64)
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := s.Issue(i, item.FieldCVV, item.NewSecret([]byte("123")))
			if err != nil {
				t.Error(err)
			}
			out[i] = v
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, v := range out {
		if seen[string(v)] {
			t.Fatal("duplicate stand-in under concurrency")
		}
		seen[string(v)] = true
	}
}

func FuzzStandIn(f *testing.F) {
	f.Add(byte(0), []byte("4242424242424242"), byte(1))
	f.Add(byte(1), []byte("737"), byte(2))
	f.Add(byte(2), []byte("JBSWY3DP"), byte(3))
	f.Add(byte(3), []byte("Tr0ub4dor&3"), byte(4))
	fields := []item.Field{item.FieldNumber, item.FieldCVV, item.FieldTOTP, item.FieldPassword, item.FieldHolder}
	f.Fuzz(func(t *testing.T, fi byte, real []byte, seed byte) {
		field := fields[int(fi)%len(fields)]
		got, err := StandIn(field, item.NewSecret(real), newSeeded(seed))
		if err != nil {
			c := agentvault.ErrorCode(err)
			if c != agentvault.CodeInvalidInput && c != agentvault.CodeSubstitution {
				t.Fatalf("unexpected code %q", c)
			}
			// Shorter values occur in any sentence by chance (" 4 ").
			if len(real) >= 6 && strings.Contains(err.Error(), string(real)) {
				t.Fatalf("P11: error carries the value")
			}
			return
		}
		checkStandIn(t, field, real, got)
	})
}

func TestStandInUnlikeRetriesAndGivesUp(t *testing.T) {
	real := item.NewSecret([]byte("4242424242424242"))
	var seen [][]byte
	v, err := StandInUnlike(item.FieldNumber, real, nil, func(c []byte) bool {
		seen = append(seen, c)
		return len(seen) < 4
	})
	if err != nil || len(seen) != 4 || string(v) != string(seen[3]) || !LuhnValid(v) {
		t.Fatalf("err %v after %d candidates", err, len(seen))
	}
	_, err = StandInUnlike(item.FieldCVV, item.NewSecret([]byte("737")), nil, func([]byte) bool { return true })
	if agentvault.ErrorCode(err) != agentvault.CodeSubstitution {
		t.Fatalf("all taken: %v", err)
	}
}
