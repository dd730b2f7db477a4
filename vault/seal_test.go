package vault

import (
	"bytes"
	"errors"
	"testing"
)

var (
	testKEK = bytes.Repeat([]byte{0x42}, keySize)
	testDEK = bytes.Repeat([]byte{0x17}, keySize)
)

func TestP13_SealOpenRoundTrip(t *testing.T) {
	for _, pt := range [][]byte{nil, {}, []byte("4242424242424242"), bytes.Repeat([]byte("x"), 4096)} {
		ct, err := seal(testKEK, "k1", pt, fieldAAD("org", "itm_1", FieldNumber))
		if err != nil {
			t.Fatal(err)
		}
		if ct[0] != cipherV1 || ct[1] != 2 || string(ct[2:4]) != "k1" {
			t.Fatalf("header not self-describing: % x", ct[:4])
		}
		if len(pt) > 0 && bytes.Contains(ct, pt) {
			t.Fatal("ciphertext holds the plaintext")
		}
		got, err := openWith(testKEK, "k1", ct, fieldAAD("org", "itm_1", FieldNumber))
		if err != nil || !bytes.Equal(got, pt) {
			t.Fatalf("round trip of %d bytes failed: %v", len(pt), err)
		}
	}
}

func TestP13_NoncesAreRandom(t *testing.T) {
	a, _ := seal(testDEK, "", []byte("same"), fieldAAD("o", "i", FieldCVV))
	b, _ := seal(testDEK, "", []byte("same"), fieldAAD("o", "i", FieldCVV))
	if bytes.Equal(a, b) {
		t.Fatal("two seals of one value are identical: nonce reused")
	}
}

// TestP13_AADBindsRecord: a ciphertext opens only for the org, item and field
// it was sealed for, and a wrapped key only for its item.
func TestP13_AADBindsRecord(t *testing.T) {
	ct, err := seal(testDEK, "", []byte("secret"), fieldAAD("org1", "itm_a", FieldPassword))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		aad  []byte
	}{
		{"other org", fieldAAD("org2", "itm_a", FieldPassword)},
		{"other item", fieldAAD("org1", "itm_b", FieldPassword)},
		{"other field", fieldAAD("org1", "itm_a", FieldTOTP)},
		{"shifted boundaries", fieldAAD("org1i", "tm_a", FieldPassword)},
		{"as wrapped key", dekAAD("org1", "itm_a")},
		{"as blob", blobAAD("itm_a")},
		{"as meta", fieldAAD("org1", "itm_a", metaField())},
	}
	for _, c := range cases {
		if _, err := openWith(testDEK, "", ct, c.aad); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: opened or wrong error (%v)", c.name, err)
		}
	}
	// The header is authenticated too: relabelling the key id fails.
	w, _ := seal(testKEK, "k1", testDEK, dekAAD("org1", "itm_a"))
	w2 := bytes.Clone(w)
	w2[3] = '2' // "k1" -> "k2"
	if _, err := openWith(testKEK, "k2", w2, dekAAD("org1", "itm_a")); err == nil {
		t.Fatal("a relabelled key id opened")
	}
	if _, err := open(func(string) ([]byte, bool) { return nil, false }, w, dekAAD("org1", "itm_a")); !errors.Is(err, ErrSealed) {
		t.Fatalf("unknown key id: %v, want ErrSealed", err)
	}
}

// TestP13_TruncatedOrFlippedFails: every truncation and every single-bit flip
// of a valid ciphertext is an error, never a panic and never a plaintext.
func TestP13_TruncatedOrFlippedFails(t *testing.T) {
	aad := fieldAAD("o", "i", FieldNumber)
	ct, _ := seal(testKEK, "k1", []byte("4111111111111111"), aad)
	lookup := func(id string) ([]byte, bool) { return testKEK, true }
	for n := 0; n < len(ct); n++ {
		if _, err := open(lookup, ct[:n], aad); err == nil {
			t.Fatalf("truncated to %d bytes opened", n)
		}
	}
	for i := 0; i < len(ct); i++ {
		for bit := 0; bit < 8; bit++ {
			c := bytes.Clone(ct)
			c[i] ^= 1 << bit
			if _, err := open(lookup, c, aad); err == nil {
				t.Fatalf("bit %d of byte %d flipped and it opened", bit, i)
			}
		}
	}
	if _, err := open(lookup, append(bytes.Clone(ct), 0), aad); err == nil {
		t.Fatal("extended ciphertext opened")
	}
}

// FuzzP13_Open feeds arbitrary bytes to the parser and the AEAD. It must
// never panic, and nothing but the exact seeded ciphertext may open.
func FuzzP13_Open(f *testing.F) {
	aad := fieldAAD("org", "itm", FieldCVV)
	// Fixed nonces: the fuzz workers rebuild these seeds and must get the
	// same bytes the coordinator stored.
	valid, _ := sealWithNonce(testKEK, "k1", []byte("123"), aad, bytes.Repeat([]byte{1}, nonceSize))
	validNoID, _ := sealWithNonce(testKEK, "", []byte("1234"), aad, bytes.Repeat([]byte{2}, nonceSize))
	f.Add(valid)
	f.Add(validNoID)
	f.Add([]byte{})
	f.Add([]byte{cipherV1})
	f.Add([]byte{cipherV1, 255})
	f.Add([]byte{cipherV1, 64})
	f.Add(append([]byte{2, 0}, make([]byte, 40)...))
	f.Add(valid[:len(valid)-1])
	lookup := func(string) ([]byte, bool) { return testKEK, true }
	f.Fuzz(func(t *testing.T, ct []byte) {
		env, perr := parseCiphertext(ct)
		if perr == nil {
			if len(env.header)+len(env.nonce)+len(env.sealed) != len(ct) || len(env.nonce) != nonceSize || len(env.sealed) < tagSize {
				t.Fatalf("parse split %d bytes inconsistently", len(ct))
			}
		}
		pt, err := open(lookup, ct, aad)
		if err != nil {
			return
		}
		if !bytes.Equal(ct, valid) && !bytes.Equal(ct, validNoID) {
			t.Fatalf("a forged ciphertext of %d bytes opened (%d bytes out)", len(ct), len(pt))
		}
	})
}

func BenchmarkSealOpen(b *testing.B) {
	aad := fieldAAD("org", "itm_1", FieldNumber)
	pt := []byte("4242424242424242")
	for b.Loop() {
		ct, _ := seal(testDEK, "", pt, aad)
		if _, err := openWith(testDEK, "", ct, aad); err != nil {
			b.Fatal(err)
		}
	}
}
