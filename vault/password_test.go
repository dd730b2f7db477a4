package vault_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/vault"
)

// Seed 004, create_login: "The generated password is 12 to 64 characters
// long, 24 by default. It always holds at least one lowercase letter, one
// uppercase letter and one digit, plus one symbol unless noSymbols is set."
func TestSignupPasswordPolicy(t *testing.T) {
	cases := []struct {
		name    string
		rules   vault.PasswordRules
		length  int
		symbols string
		code    agentvault.Code
	}{
		{name: "default length is 24", length: 24, symbols: vault.SafeSymbols},
		{name: "minLength above the default raises it", rules: vault.PasswordRules{MinLength: 40}, length: 40, symbols: vault.SafeSymbols},
		{name: "minLength 64 is the longest", rules: vault.PasswordRules{MinLength: 64}, length: 64, symbols: vault.SafeSymbols},
		{name: "minLength above 64 is invalid_policy", rules: vault.PasswordRules{MinLength: 65}, code: agentvault.CodeInvalidPolicy},
		{name: "maxLength below the default lowers it", rules: vault.PasswordRules{MaxLength: 16}, length: 16, symbols: vault.SafeSymbols},
		{name: "maxLength 12 is the shortest", rules: vault.PasswordRules{MaxLength: 12}, length: 12, symbols: vault.SafeSymbols},
		{name: "maxLength below 12 is password_too_short", rules: vault.PasswordRules{MaxLength: 11}, code: agentvault.CodePasswordTooShort},
		{name: "minLength greater than maxLength is invalid_policy", rules: vault.PasswordRules{MinLength: 30, MaxLength: 20}, code: agentvault.CodeInvalidPolicy},
		{name: "small minLength keeps the default", rules: vault.PasswordRules{MinLength: 8}, length: 24, symbols: vault.SafeSymbols},
		{name: "noSymbols drops punctuation", rules: vault.PasswordRules{NoSymbols: true}, length: 24, symbols: ""},
		{name: "allowedSymbols filters the safe set", rules: vault.PasswordRules{AllowedSymbols: "!%&_^"}, length: 24, symbols: "!_"},
		{name: "allowedSymbols outside the safe set is invalid_policy", rules: vault.PasswordRules{AllowedSymbols: "%&^"}, code: agentvault.CodeInvalidPolicy},
		{name: "noTripleRepeat is kept", rules: vault.PasswordRules{NoTripleRepeat: true, MaxLength: 64, MinLength: 64}, length: 64, symbols: vault.SafeSymbols},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := c.rules.Policy()
			if c.code != "" {
				if agentvault.ErrorCode(err) != c.code {
					t.Fatalf("err = %v, want %s", err, c.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Length != c.length || p.Symbols != c.symbols || p.NoTripleRepeat != c.rules.NoTripleRepeat {
				t.Fatalf("policy = %+v", p)
			}
			for range 50 {
				s, err := vault.GeneratePassword(p)
				if err != nil {
					t.Fatal(err)
				}
				b := s.InsecureRawBytes()
				if len(b) != c.length {
					t.Fatalf("length %d, want %d", len(b), c.length)
				}
				if !bytes.ContainsAny(b, "abcdefghijklmnopqrstuvwxyz") || !bytes.ContainsAny(b, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") || !bytes.ContainsAny(b, "0123456789") {
					t.Fatal("a character class is missing")
				}
				for _, ch := range b {
					isSym := !('a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9')
					if isSym && !strings.ContainsRune(c.symbols, rune(ch)) {
						t.Fatal("a symbol outside the policy's alphabet")
					}
				}
				if c.symbols != "" && !bytes.ContainsAny(b, c.symbols) {
					t.Fatal("no symbol")
				}
				if c.rules.NoTripleRepeat && vault.TripleRepeat(b) {
					t.Fatal("three equal characters in a row")
				}
			}
		})
	}
}

func TestSignupPasswordRefusesForeignPolicy(t *testing.T) {
	if _, err := vault.GeneratePassword(vault.PasswordPolicy{Length: 24, Lowercase: true, Uppercase: true, Digits: true, Symbols: "%"}); agentvault.ErrorCode(err) != agentvault.CodeInvalidPolicy {
		t.Fatalf("err = %v", err)
	}
	if _, err := vault.GeneratePassword(vault.PasswordPolicy{Length: 8, Lowercase: true, Uppercase: true, Digits: true}); agentvault.ErrorCode(err) != agentvault.CodeInvalidPolicy {
		t.Fatalf("err = %v", err)
	}
}

// UpdateLogin: a generated password replaced, a username set, a TOTP seed
// stored; the metadata says what changed, never the value.
func TestAccountUpdateLogin(t *testing.T) {
	ctx := context.Background()
	e, _ := mustEnv(t)
	v := e.v
	p, _ := vault.PasswordRules{}.Policy()
	pw, _ := vault.GeneratePassword(p)
	it, err := v.AddLogin(ctx, "o", "owner", vault.LoginInput{Site: "shop.example.com", Email: "a@example.com", Password: pw, Generated: &p, CreatedBy: "avk_1"})
	if err != nil {
		t.Fatal(err)
	}
	if it.Login.Generated == nil || it.Login.CreatedBy != "avk_1" || it.Login.Site != "example.com" {
		t.Fatalf("meta = %+v", it.Login)
	}
	p2, _ := vault.PasswordRules{MaxLength: 16, NoSymbols: true}.Policy()
	pw2, _ := vault.GeneratePassword(p2)
	name := "agent_42"
	got, err := v.UpdateLogin(ctx, "o", it.ID, vault.LoginUpdate{Username: &name, Password: pw2, Generated: &p2, TOTP: vault.NewSecret([]byte("JBSWY3DPEHPK3PXP")), Actor: "avk_1"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Login.Username != name || got.Login.PasswordLen != 16 || !got.Login.HasTOTP || got.Login.Generated.Length != 16 || !got.Has(vault.FieldUsername) || !got.Has(vault.FieldTOTP) {
		t.Fatalf("after update: %+v %v", got.Login, got.Fields)
	}
	rel, err := v.Release(ctx, vault.ReleaseArgs{Org: "o", ItemID: it.ID, Field: vault.FieldPassword, Destination: "example.com", Session: "s", Actor: "t", Purpose: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if !rel.Equal(pw2) {
		t.Fatal("the released password is not the rotated one")
	}
	// The owner replacing it makes the login owner-managed.
	got, err = v.UpdateLogin(ctx, "o", it.ID, vault.LoginUpdate{Password: vault.NewSecret([]byte("owner typed this")), Actor: "owner"})
	if err != nil || !got.Login.OwnerManaged {
		t.Fatalf("owner replace: %v %+v", err, got.Login)
	}
}
