package tokens

import (
	"strings"
	"testing"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/vault/item"
)

func TestParse(t *testing.T) {
	ok := []struct {
		in   string
		want Token
	}{
		{"av_card_1_number_u7x2k", Token{item.KindCard, "1", item.FieldNumber, "u7x2k"}},
		{"av_card_12_cvv_00000", Token{item.KindCard, "12", item.FieldCVV, "00000"}},
		{"av_card_1_holder_zzzzz", Token{item.KindCard, "1", item.FieldHolder, "zzzzz"}},
		{"av_login_github_password_u7x2k", Token{item.KindLogin, "github", item.FieldPassword, "u7x2k"}},
		{"av_login_my-bank-2_totp_a1b2c", Token{item.KindLogin, "my-bank-2", item.FieldTOTP, "a1b2c"}},
		{"av_login_x_username_a1b2c", Token{item.KindLogin, "x", item.FieldUsername, "a1b2c"}},
		{"av_identity_1_email_u7x2k", Token{item.KindIdentity, "1", item.FieldEmail, "u7x2k"}},
		{"av_identity_1_phone_u7x2k", Token{item.KindIdentity, "1", item.FieldPhone, "u7x2k"}},
		{"av_address_1_postal_code_u7x2k", Token{item.KindAddress, "1", item.FieldPostalCode, "u7x2k"}},
		{"av_address_2_line1_u7x2k", Token{item.KindAddress, "2", item.FieldLine1, "u7x2k"}},
		{"av_login_" + strings.Repeat("a", 32) + "_email_u7x2k", Token{item.KindLogin, strings.Repeat("a", 32), item.FieldEmail, "u7x2k"}},
	}
	for _, c := range ok {
		t.Run(c.in, func(t *testing.T) {
			got, err := Parse(c.in)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got != c.want {
				t.Fatalf("got %+v want %+v", got, c.want)
			}
			if got.String() != c.in || !got.Valid() {
				t.Fatalf("String() = %q", got.String())
			}
		})
	}
	bad := []struct {
		in   string
		code agentvault.Code
	}{
		{"", agentvault.CodeInvalidInput},
		{"4242424242424242", agentvault.CodeInvalidInput},
		{"AV_card_1_number_u7x2k", agentvault.CodeInvalidInput},
		{"av_", agentvault.CodeUnknownToken},
		{"av_card", agentvault.CodeUnknownToken},
		{"av_bank_1_number_u7x2k", agentvault.CodeUnknownToken},
		{"av_card_1_password_u7x2k", agentvault.CodeUnknownToken},
		{"av_login_github_number_u7x2k", agentvault.CodeUnknownToken},
		{"av_identity_1_postal_code_u7x2k", agentvault.CodeUnknownToken},
		{"av_card_1_number_u7x2", agentvault.CodeUnknownToken},
		{"av_card_1_number_u7x2kk", agentvault.CodeUnknownToken},
		{"av_card_1_number_U7X2K", agentvault.CodeUnknownToken},
		{"av_card_1_number__u7x2k", agentvault.CodeUnknownToken},
		{"av_card_1_number", agentvault.CodeUnknownToken},
		{"av_card__number_u7x2k", agentvault.CodeUnknownToken},
		{"av_login_git_hub_password_u7x2k", agentvault.CodeUnknownToken},
		{"av_login_-github_password_u7x2k", agentvault.CodeUnknownToken},
		{"av_login_GitHub_password_u7x2k", agentvault.CodeUnknownToken},
		{"av_login_github.com_password_u7x2k", agentvault.CodeUnknownToken},
		{"av_login_" + strings.Repeat("a", 33) + "_email_u7x2k", agentvault.CodeUnknownToken},
		{"av_address_1_postal_u7x2k", agentvault.CodeUnknownToken},
		{"av_address_1_postal_code_u7x2k ", agentvault.CodeUnknownToken},
		{" av_card_1_number_u7x2k", agentvault.CodeInvalidInput},
	}
	for _, c := range bad {
		t.Run("bad/"+c.in, func(t *testing.T) {
			_, err := Parse(c.in)
			if agentvault.ErrorCode(err) != c.code {
				t.Fatalf("code %q want %q", agentvault.ErrorCode(err), c.code)
			}
			if len(c.in) > 3 && strings.Contains(err.Error(), c.in) {
				t.Fatalf("error repeats its input")
			}
		})
	}
}

// TestSuffixKnownAnswer pins the derivation: changing it silently would
// turn every token an agent holds into an unknown one.
func TestSuffixKnownAnswer(t *testing.T) {
	if got := Suffix([]byte("agentvault test deployment secret"), "avk_test_1"); got != "y4ajf" {
		t.Fatalf("Suffix changed: %q", got)
	}
	if got := Suffix(nil, ""); got != "lv8lp" {
		t.Fatalf("Suffix changed: %q", got)
	}
}

func TestSuffix(t *testing.T) {
	secret := []byte("deployment-secret-0123456789abcdef")
	a := Suffix(secret, "key_1")
	if a != Suffix(secret, "key_1") {
		t.Fatal("not deterministic")
	}
	if !validSuffix(a) {
		t.Fatalf("suffix %q outside [a-z0-9]{5}", a)
	}
	if a == Suffix(secret, "key_2") || a == Suffix([]byte("other deployment"), "key_1") {
		t.Fatal("suffix does not separate keys or deployments")
	}
	seen := map[string]bool{}
	for i := range 2000 {
		s := Suffix(secret, "k"+string(rune('a'+i%26))+strings.Repeat("x", i/26))
		if !validSuffix(s) {
			t.Fatalf("invalid suffix %q", s)
		}
		seen[s] = true
	}
	if len(seen) < 1990 {
		t.Fatalf("only %d distinct suffixes of 2000", len(seen))
	}
}

func TestLoginLabel(t *testing.T) {
	cases := map[string]string{
		"github.com":                     "github",
		"GitHub.com.":                    "github",
		"bbc.co.uk":                      "bbc",
		"https://www.amazon.de/ap":       "amazon",
		"my_bank.com":                    "my-bank",
		"xn--bcher-kva.example":          "xn--bcher-kva",
		"example.com:8443":               "example",
		"co.uk":                          "co",
		"shop.bbc.co.uk":                 "bbc", // the registrable domain's first label (was "shop")
		"bücher.example":                 "xn--bcher-kva",
		"https://a.com@evil.com/":        "login", // unreadable: the default label
		"localhost":                      "localhost",
		"":                               "login",
		"---.com":                        "login",
		strings.Repeat("a", 40) + ".com": strings.Repeat("a", 32),
	}
	for in, want := range cases {
		if got := LoginLabel(in); got != want {
			t.Errorf("LoginLabel(%q) = %q want %q", in, got, want)
		}
		if got := LoginLabel(in); !ValidLabel(got) {
			t.Errorf("LoginLabel(%q) = %q is not a valid label", in, got)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"av_card_1_number_u7x2k", "av_address_1_postal_code_u7x2k", "av_login_git-hub_totp_00000", "av_", "av_x_y_z_w", "hello"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := Parse(s)
		if err != nil {
			c := agentvault.ErrorCode(err)
			if c != agentvault.CodeInvalidInput && c != agentvault.CodeUnknownToken {
				t.Fatalf("unexpected code %q", c)
			}
			return
		}
		if tok.String() != s {
			t.Fatalf("roundtrip changed the token")
		}
		again, err := Parse(tok.String())
		if err != nil || again != tok || !tok.Valid() {
			t.Fatalf("reparse: %v", err)
		}
	})
}
