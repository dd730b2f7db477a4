package vault_test

import (
	"bytes"
	"context"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/vault"
)

// TestP23_RFC6238Vectors checks the generator against RFC 6238, Appendix
// B (8 digits, 30 s step, the three HMAC hashes with their ASCII keys),
// the seed given as an otpauth URI as an authenticator's QR code holds it.
func TestP23_RFC6238Vectors(t *testing.T) {
	keys := map[string]string{
		"SHA1":   "12345678901234567890",
		"SHA256": "12345678901234567890123456789012",
		"SHA512": "1234567890123456789012345678901234567890123456789012345678901234",
	}
	vectors := []struct {
		unix int64
		alg  string
		code string
	}{
		{59, "SHA1", "94287082"}, {59, "SHA256", "46119246"}, {59, "SHA512", "90693936"},
		{1111111109, "SHA1", "07081804"}, {1111111109, "SHA256", "68084774"}, {1111111109, "SHA512", "25091201"},
		{1111111111, "SHA1", "14050471"}, {1111111111, "SHA256", "67062674"}, {1111111111, "SHA512", "99943326"},
		{1234567890, "SHA1", "89005924"}, {1234567890, "SHA256", "91819424"}, {1234567890, "SHA512", "93441116"},
		{2000000000, "SHA1", "69279037"}, {2000000000, "SHA256", "90698825"}, {2000000000, "SHA512", "38618901"},
		{20000000000, "SHA1", "65353130"}, {20000000000, "SHA256", "77737706"}, {20000000000, "SHA512", "47863826"},
	}
	for _, v := range vectors {
		t.Run(fmt.Sprintf("%s_%d", v.alg, v.unix), func(t *testing.T) {
			secret := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString([]byte(keys[v.alg]))
			uri := "otpauth://totp/RFC6238:test?secret=" + secret + "&algorithm=" + v.alg + "&digits=8&period=30"
			got, err := vault.TOTPCode(vault.NewSecret([]byte(uri)), time.Unix(v.unix, 0))
			if err != nil {
				t.Fatal(err)
			}
			if string(got.InsecureRawBytes()) != v.code {
				t.Fatalf("code %s, want %s", got.InsecureRawBytes(), v.code)
			}
			// The 6-digit default is the last six digits of the same value.
			if v.alg == "SHA1" {
				six, err := vault.TOTPCode(vault.NewSecret([]byte(secret)), time.Unix(v.unix, 0))
				if err != nil || string(six.InsecureRawBytes()) != v.code[2:] {
					t.Fatalf("6-digit code %s (%v), want %s", six.InsecureRawBytes(), err, v.code[2:])
				}
			}
		})
	}
}

// TestP23_SeedForms: what AddLogin accepts as a seed, and what it refuses
// without quoting it.
func TestP23_SeedForms(t *testing.T) {
	at := time.Unix(1111111111, 0)
	want, _ := vault.TOTPCode(vault.NewSecret([]byte("GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ")), at)
	for _, tc := range []struct{ name, seed string }{
		{"base32", "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"},
		{"lower case in groups", "gezd gnbv gy3t qojq gezd gnbv gy3t qojq"},
		{"dashes and padding", "GEZD-GNBV-GY3T-QOJQ-GEZD-GNBV-GY3T-QOJQ===="},
		{"otpauth defaults", "otpauth://totp/Example:alice@example.com?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&issuer=Example"},
		{"otpauth explicit defaults", "otpauth://totp/x?secret=gezdgnbvgy3tqojqgezdgnbvgy3tqojq&algorithm=sha1&digits=6&period=30"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := vault.TOTPCode(vault.NewSecret([]byte(tc.seed)), at)
			if err != nil || !got.Equal(want) {
				t.Fatalf("code %s (%v), want %s", got.InsecureRawBytes(), err, want.InsecureRawBytes())
			}
		})
	}
	for _, tc := range []struct{ name, seed string }{
		{"not base32", "hunter2-is-not-base32!"},
		{"too short", "JBSWY3DP"},
		{"hotp", "otpauth://hotp/x?secret=JBSWY3DPEHPK3PXPJBSWY3DP&counter=1"},
		{"no secret", "otpauth://totp/x?issuer=JBSWY3DPEHPK3PXP"},
		{"bad digits", "otpauth://totp/x?secret=JBSWY3DPEHPK3PXPJBSWY3DP&digits=12"},
		{"bad algorithm", "otpauth://totp/x?secret=JBSWY3DPEHPK3PXPJBSWY3DP&algorithm=MD5"},
		{"bad period", "otpauth://totp/x?secret=JBSWY3DPEHPK3PXPJBSWY3DP&period=0"},
		{"unparseable uri", "otpauth://totp/%zz?secret=JBSWY3DPEHPK3PXPJBSWY3DP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := vault.TOTPCode(vault.NewSecret([]byte(tc.seed)), at)
			if agentvault.ErrorCode(err) != agentvault.CodeInvalidInput {
				t.Fatalf("accepted or wrong code: %v", err)
			}
			if strings.Contains(err.Error(), "JBSWY3DP") || strings.Contains(err.Error(), "hunter2") {
				t.Fatal("the refusal quotes the seed")
			}
			probs := vault.CheckLogin(vault.LoginInput{Site: "example.org", Email: "a@example.org",
				Password: vault.NewSecret([]byte("pw")), TOTP: vault.NewSecret([]byte(tc.seed))})
			if len(probs) != 1 || probs[0].Input != vault.InputTOTP {
				t.Fatalf("CheckLogin: %+v", probs)
			}
		})
	}
}

// TestP23_ReleaseReturnsCodeNotSeed: releasing a login's TOTP field gives
// the code of the vault's clock, audited with the code's HMAC; no API
// hands out the seed, and an otpauth URI's settings are honoured.
func TestP23_ReleaseReturnsCodeNotSeed(t *testing.T) {
	e, _ := mustEnv(t)
	ctx := context.Background()
	const seed = "JBSWY3DPEHPK3PXP"
	it, err := e.v.AddLogin(ctx, "org1", "owner", vault.LoginInput{Site: "example.org", Email: "grace@example.org",
		Password: vault.NewSecret([]byte("Cobol-1959!")), TOTP: vault.NewSecret([]byte("jbsw y3dp ehpk 3pxp"))})
	if err != nil {
		t.Fatal(err)
	}
	if !it.Has(vault.FieldTOTP) || !it.Login.HasTOTP {
		t.Fatalf("login has no TOTP: %+v", it)
	}
	want, err := vault.TOTPCode(vault.NewSecret([]byte(seed)), testNow())
	if err != nil {
		t.Fatal(err)
	}
	got := release(t, e.v, it, vault.FieldTOTP)
	if !got.Equal(want) || got.Len() != 6 {
		t.Fatalf("released %d bytes, not the 6-digit code of the vault's clock", got.Len())
	}
	if bytes.Contains(got.InsecureRawBytes(), []byte(seed)) {
		t.Fatal("release returned the seed")
	}
	recs, err := e.v.Audit(ctx, vault.AuditFilter{ItemID: it.ID, Action: vault.AuditRelease})
	if err != nil || len(recs) != 1 {
		t.Fatalf("audit: %d records, %v", len(recs), err)
	}
	if r := recs[0]; r.Field != vault.FieldTOTP || !bytes.Equal(r.ValueHMAC, e.v.AuditHMAC(want)) ||
		bytes.Equal(r.ValueHMAC, e.v.AuditHMAC(vault.NewSecret([]byte(seed)))) {
		t.Fatal("the audit record does not hold the HMAC of the released code")
	}

	// Nothing else returns the seed: metadata, lists, lookups, JSON.
	got1, _ := e.v.Get(ctx, "org1", it.ID)
	got2, _ := e.v.GetByLabel(ctx, "org1", vault.KindLogin, it.Label)
	list, _ := e.v.List(ctx, "org1")
	for _, x := range []any{it, got1, got2, list} {
		b, _ := json.Marshal(x)
		if bytes.Contains(bytes.ToUpper(b), []byte(seed)) || bytes.Contains(b, []byte("y3dp")) {
			t.Fatalf("item metadata holds the seed: %s", b)
		}
	}

	// An otpauth URI's settings (SHA256, 8 digits, 60 s) are kept in the
	// metadata and honoured; the URI itself is not stored.
	uri := "otpauth://totp/Bank:grace?secret=" + seed + "&algorithm=SHA256&digits=8&period=60&issuer=Bank"
	it2, err := e.v.AddLogin(ctx, "org1", "owner", vault.LoginInput{Site: "bank.example", Username: "grace",
		Password: vault.NewSecret([]byte("pw")), TOTP: vault.NewSecret([]byte(uri))})
	if err != nil {
		t.Fatal(err)
	}
	if m := it2.Login; m.TOTPAlgorithm != "SHA256" || m.TOTPDigits != 8 || m.TOTPPeriod != 60 {
		t.Fatalf("settings not kept: %+v", m)
	}
	want2, _ := vault.TOTPCode(vault.NewSecret([]byte(uri)), testNow())
	if got := release(t, e.v, it2, vault.FieldTOTP); !got.Equal(want2) || got.Len() != 8 {
		t.Fatal("release ignores the otpauth URI's settings")
	}
	grepFiles(t, e.path, []string{"otpauth", "issuer=Bank"})
}
