package botauth

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/agentvault/agentvault"
)

// Key is one Ed25519 signing key of the agent's identity. It prints as its
// public key id (never the private key) in logs, errors and JSON.
type Key struct {
	priv    ed25519.PrivateKey
	id      string
	created time.Time
	// retire is when the key leaves the directory: zero for the key in use;
	// set by Rotate to when the last signature it made has expired.
	retire time.Time
}

func newKey(seed []byte, created, retire time.Time) (*Key, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, agentvault.Errorf(agentvault.CodeInternal, "stored signing key is malformed")
	}
	priv := ed25519.NewKeyFromSeed(seed)
	return &Key{priv: priv, id: Thumbprint(priv.Public().(ed25519.PublicKey)), created: created.UTC(), retire: retire.UTC()}, nil
}

// ID is the key's JWK SHA-256 thumbprint, base64url: the keyid of every
// signature it makes and the kid of its directory entry.
func (k *Key) ID() string { return k.id }

// Public is the key's public half.
func (k *Key) Public() ed25519.PublicKey { return k.priv.Public().(ed25519.PublicKey) }

// Created is when the key was generated.
func (k *Key) Created() time.Time { return k.created }

// Retire is when the key leaves the directory; zero for the key in use.
func (k *Key) Retire() time.Time { return k.retire }

func (k *Key) sign(base []byte) []byte { return ed25519.Sign(k.priv, base) }

// String, Format, LogValue and MarshalJSON name the key by its public id:
// the private half never reaches a log, an error or a page by accident.
func (k *Key) String() string               { return "botauth key " + k.id }
func (k *Key) Format(f fmt.State, _ rune)   { _, _ = io.WriteString(f, k.String()) }
func (k *Key) LogValue() slog.Value         { return slog.StringValue(k.String()) }
func (k *Key) MarshalJSON() ([]byte, error) { return json.Marshal(k.String()) }
func (k *Key) GoString() string             { return k.String() }
func (k *Key) MarshalText() ([]byte, error) { return []byte(k.String()), nil }
func (k *Key) expired(now time.Time) bool   { return !k.retire.IsZero() && !now.Before(k.retire) }
func (k *Key) publicJWK() jwk               { return jwk{Kty: "OKP", Crv: "Ed25519", X: b64url(k.Public())} }

// Thumbprint is the JWK SHA-256 thumbprint (RFC 7638 section 3) of an
// Ed25519 public key, base64url without padding: the hash of the JWK's
// required members in lexicographic order with no white space, which for
// an OKP key is crv, kty and x (RFC 8037 appendix A.3).
func Thumbprint(pub ed25519.PublicKey) string {
	canon := `{"crv":"Ed25519","kty":"OKP","x":"` + b64url(pub) + `"}`
	sum := sha256.Sum256([]byte(canon))
	return b64url(sum[:])
}

func b64url(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// Keyring is the identity's keys, oldest first: the last one is in use,
// the others were rotated out and stay published until they retire. A
// Keyring is never changed in place: Rotate returns a new one, so a signer
// reading one while the owner rotates sees either.
type Keyring struct {
	keys []*Key
}

// storedKeyring is the sealed form (a vault blob).
type storedKeyring struct {
	V    int         `json:"v"`
	Keys []storedKey `json:"keys"`
}

type storedKey struct {
	Seed    []byte `json:"seed"`
	Created int64  `json:"created"`
	Retire  int64  `json:"retire,omitempty"`
}

// NewKeyring generates a keyring of one fresh key.
func NewKeyring(now time.Time, rand io.Reader) (*Keyring, error) {
	k, err := generate(now, rand)
	if err != nil {
		return nil, err
	}
	return &Keyring{keys: []*Key{k}}, nil
}

func generate(now time.Time, rand io.Reader) (*Key, error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := io.ReadFull(rand, seed); err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "random source failed")
	}
	defer clear(seed)
	return newKey(seed, now, time.Time{})
}

// ParseKeyring reads a keyring InsecureEncode wrote.
func ParseKeyring(b []byte) (*Keyring, error) {
	var s storedKeyring
	if err := json.Unmarshal(b, &s); err != nil || s.V != 1 || len(s.Keys) == 0 {
		return nil, agentvault.Errorf(agentvault.CodeInternal, "stored signing keys are malformed")
	}
	kr := &Keyring{}
	for i, sk := range s.Keys {
		var retire time.Time
		if sk.Retire != 0 {
			retire = time.Unix(sk.Retire, 0)
		}
		if (i == len(s.Keys)-1) != retire.IsZero() {
			return nil, agentvault.Errorf(agentvault.CodeInternal, "stored signing keys are malformed: exactly the last key is in use")
		}
		k, err := newKey(sk.Seed, time.Unix(sk.Created, 0), retire)
		clear(sk.Seed)
		if err != nil {
			return nil, err
		}
		kr.keys = append(kr.keys, k)
	}
	return kr, nil
}

// InsecureEncode is the keyring with its private keys, for sealing in the
// vault and nothing else: the bytes must never be logged, shown or sent.
func (kr *Keyring) InsecureEncode() []byte {
	s := storedKeyring{V: 1}
	for _, k := range kr.keys {
		sk := storedKey{Seed: k.priv.Seed(), Created: k.created.Unix()}
		if !k.retire.IsZero() {
			sk.Retire = k.retire.Unix()
		}
		s.Keys = append(s.Keys, sk)
	}
	b, _ := json.Marshal(s)
	for _, sk := range s.Keys {
		clear(sk.Seed)
	}
	return b
}

// Active is the key new signatures are made with.
func (kr *Keyring) Active() *Key { return kr.keys[len(kr.keys)-1] }

// Published lists the keys a directory shows at now, oldest first: the key
// in use and the rotated ones whose signatures may not have expired yet.
func (kr *Keyring) Published(now time.Time) []*Key {
	var out []*Key
	for _, k := range kr.keys {
		if !k.expired(now) {
			out = append(out, k)
		}
	}
	return out
}

// Rotate returns a keyring whose new key is in use from now; the key in
// use until now stays published for keepOld (RetireAfter of the longest
// window a signature may have), so every signature it made can still be
// verified; keys already retired are dropped, private halves and all.
func (kr *Keyring) Rotate(now time.Time, keepOld time.Duration, rand io.Reader) (*Keyring, error) {
	if keepOld <= 0 {
		return nil, agentvault.Errorf(agentvault.CodeInternal, "a rotated key must stay published while its signatures are valid")
	}
	k, err := generate(now, rand)
	if err != nil {
		return nil, err
	}
	out := &Keyring{}
	for i, old := range kr.keys {
		if i == len(kr.keys)-1 {
			c := *old
			c.retire = now.Add(keepOld).UTC()
			out.keys = append(out.keys, &c)
			continue
		}
		if !old.expired(now) {
			out.keys = append(out.keys, old)
		}
	}
	out.keys = append(out.keys, k)
	return out, nil
}

// Keys lists every key, oldest first (retired ones included until the next
// rotation drops them).
func (kr *Keyring) Keys() []*Key { return slices.Clone(kr.keys) }
