package vault

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"

	agentvault "github.com/agentvault/agentvault"
)

// Ciphertext format, version 1 (after hashicorp/vault's barrier and tink's
// AES-GCM keyset prefix):
//
//	version (1 byte, = 1)
//	key id length (1 byte, 0..64) | key id (that many bytes)
//	nonce (12 random bytes)
//	AES-256-GCM output (ciphertext || 16-byte tag)
//
// The key id names the key that sealed the bytes: the master key's id for a
// wrapped data key, empty for a value sealed with the item's own data key.
// The GCM additional data is the header (version, key id) followed by a
// length-prefixed context naming the record, so a ciphertext opens only in
// the place it was written for.
const (
	cipherV1     byte = 1
	keySize           = 32
	nonceSize         = 12
	tagSize           = 16
	maxKeyIDLen       = 64
	maxPlaintext      = 1 << 24 // a vault value is small; a blob (CA key) is too
)

// aadContext builds the record-binding part of the additional data. Each part
// is length-prefixed, so ("ab","c") and ("a","bc") differ.
func aadContext(parts ...string) []byte {
	n := len("agentvault/v1")
	for _, p := range parts {
		n += 4 + len(p)
	}
	b := make([]byte, 0, n)
	b = append(b, "agentvault/v1"...)
	for _, p := range parts {
		b = binary.BigEndian.AppendUint32(b, uint32(len(p)))
		b = append(b, p...)
	}
	return b
}

func fieldAAD(org, itemID string, f Field) []byte {
	return aadContext("field", org, itemID, string(f))
}
func dekAAD(org, itemID string) []byte { return aadContext("dek", org, itemID) }
func blobAAD(name string) []byte       { return aadContext("blob", name) }
func blobDEKAAD(name string) []byte    { return aadContext("blobdek", name) }
func keyCheckAAD(keyID string) []byte  { return aadContext("keycheck", keyID) }
func metaField() Field                 { return Field("meta") }
func newDataKey() ([]byte, error)      { return randomBytes(keySize) }
func randomBytes(n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "no randomness")
	}
	return b, nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	if len(key) != keySize {
		return nil, agentvault.Errorf(agentvault.CodeInternal, "key must be %d bytes", keySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "aes")
	}
	return cipher.NewGCM(block)
}

// seal encrypts plaintext under key, labelled keyID, bound to context, with
// a fresh random nonce.
func seal(key []byte, keyID string, plaintext, context []byte) ([]byte, error) {
	nonce := make([]byte, nonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "no randomness")
	}
	return sealWithNonce(key, keyID, plaintext, context, nonce)
}

// sealWithNonce is seal with the nonce given; only seal and deterministic
// test vectors call it.
func sealWithNonce(key []byte, keyID string, plaintext, context, nonce []byte) ([]byte, error) {
	if len(keyID) > maxKeyIDLen {
		return nil, agentvault.Errorf(agentvault.CodeInternal, "key id too long")
	}
	if len(plaintext) > maxPlaintext {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "value too large")
	}
	if len(nonce) != nonceSize {
		return nil, agentvault.Errorf(agentvault.CodeInternal, "nonce must be %d bytes", nonceSize)
	}
	aead, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	hdrLen := 2 + len(keyID)
	out := make([]byte, hdrLen+nonceSize, hdrLen+nonceSize+len(plaintext)+tagSize)
	out[0] = cipherV1
	out[1] = byte(len(keyID))
	copy(out[2:], keyID)
	copy(out[hdrLen:], nonce)
	aad := append(append(make([]byte, 0, hdrLen+len(context)), out[:hdrLen]...), context...)
	return aead.Seal(out, out[hdrLen:hdrLen+nonceSize], plaintext, aad), nil
}

// envelope is a parsed ciphertext; its slices alias the input.
type envelope struct {
	header []byte
	keyID  string
	nonce  []byte
	sealed []byte
}

// parseCiphertext checks every length before slicing. It never panics.
func parseCiphertext(ct []byte) (envelope, error) {
	if len(ct) < 2 || ct[0] != cipherV1 {
		return envelope{}, errCorrupt
	}
	idLen := int(ct[1])
	if idLen > maxKeyIDLen {
		return envelope{}, errCorrupt
	}
	hdrLen := 2 + idLen
	if len(ct) < hdrLen+nonceSize+tagSize {
		return envelope{}, errCorrupt
	}
	return envelope{
		header: ct[:hdrLen],
		keyID:  string(ct[2:hdrLen]),
		nonce:  ct[hdrLen : hdrLen+nonceSize],
		sealed: ct[hdrLen+nonceSize:],
	}, nil
}

// ciphertextKeyID returns the key id a ciphertext names.
func ciphertextKeyID(ct []byte) (string, error) {
	env, err := parseCiphertext(ct)
	return env.keyID, err
}

// open decrypts ct with the key lookup(keyID) and the given context. An
// unknown key id is ErrSealed; anything malformed or tampered is errCorrupt.
func open(lookup func(keyID string) ([]byte, bool), ct, context []byte) ([]byte, error) {
	env, err := parseCiphertext(ct)
	if err != nil {
		return nil, err
	}
	key, ok := lookup(env.keyID)
	if !ok {
		return nil, ErrSealed
	}
	aead, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	aad := append(append(make([]byte, 0, len(env.header)+len(context)), env.header...), context...)
	pt, err := aead.Open(nil, env.nonce, env.sealed, aad)
	if err != nil {
		return nil, errCorrupt
	}
	return pt, nil
}

// openWith opens ct that must name keyID and be sealed with key.
func openWith(key []byte, keyID string, ct, context []byte) ([]byte, error) {
	return open(func(id string) ([]byte, bool) {
		if id != keyID {
			return nil, false
		}
		return key, true
	}, ct, context)
}

func wipe(b []byte) {
	for i := range b {
		b[i] = 0
	}
}
