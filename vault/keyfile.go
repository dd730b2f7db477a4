package vault

import (
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	agentvault "github.com/agentvault/agentvault"
)

// Master key files hold the 32-byte key as 64 lowercase hex characters and a
// newline. A file of exactly 32 raw bytes is accepted too. The file must not
// be readable or writable by group or others.

// KeyIDFor derives a master key's public id: the first 12 hex characters of
// SHA-256 over an HKDF-derived id key, so the id reveals nothing about the
// key and a different key file shows up as a different id.
func KeyIDFor(key []byte) string {
	idKey, err := hkdf.Key(sha256.New, key, nil, "agentvault master key id v1", 32)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(idKey)
	return "k" + hex.EncodeToString(sum[:6])
}

// LoadOrCreateKeyFile reads the master key at path, or creates it (mode
// 0600, 32 random bytes, parent directory 0700) when it does not exist.
func LoadOrCreateKeyFile(path string) (key []byte, id string, created bool, err error) {
	key, err = ReadKeyFile(path)
	if err == nil {
		return key, KeyIDFor(key), false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, "", false, err
	}
	key, err = randomBytes(keySize)
	if err != nil {
		return nil, "", false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, "", false, agentvault.Wrap(agentvault.CodeInternal, err, "cannot create the key directory")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) { // another process won the race
		key, err = ReadKeyFile(path)
		if err != nil {
			return nil, "", false, err
		}
		return key, KeyIDFor(key), false, nil
	}
	if err != nil {
		return nil, "", false, agentvault.Wrap(agentvault.CodeInternal, err, "cannot create the key file")
	}
	if err := writeKeyTo(f, key); err != nil {
		_ = os.Remove(path)
		return nil, "", false, err
	}
	return key, KeyIDFor(key), true, nil
}

// ReadKeyFile reads an existing master key file, refusing one that group or
// others may access.
func ReadKeyFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot stat the key file")
	}
	if !st.Mode().IsRegular() {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "key file is not a regular file")
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput,
			"key file is accessible by group or others (mode %04o); run chmod 600 on it", st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "cannot read the key file")
	}
	defer wipe(b)
	return ParseKey(b)
}

// ParseKey decodes a key given as 64 hex characters (surrounding white space
// ignored) or as 32 raw bytes.
func ParseKey(b []byte) ([]byte, error) {
	if len(b) == keySize {
		return bytes.Clone(b), nil
	}
	t := bytes.TrimSpace(b)
	if len(t) != 2*keySize {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "master key must be %d hex characters or %d raw bytes", 2*keySize, keySize)
	}
	key := make([]byte, keySize)
	if _, err := hex.Decode(key, t); err != nil {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "master key is not valid hex")
	}
	return key, nil
}

// KeyFromEnv reads a hex master key from the environment variable name.
func KeyFromEnv(name string) (key []byte, id string, err error) {
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return nil, "", agentvault.Errorf(agentvault.CodeInvalidInput, "environment variable %s holds no master key", name)
	}
	key, err = ParseKey([]byte(v))
	if err != nil {
		return nil, "", err
	}
	return key, KeyIDFor(key), nil
}

// WriteKeyFile writes key to path atomically: a 0600 temporary file in the
// same directory, synced, then renamed over path.
func WriteKeyFile(path string, key []byte) error {
	if len(key) != keySize {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "master key must be %d bytes", keySize)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".master-key-*")
	if err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "cannot create a temporary key file")
	}
	tmp := f.Name()
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		os.Remove(tmp)
		return agentvault.Wrap(agentvault.CodeInternal, err, "cannot chmod the key file")
	}
	if err := writeKeyTo(f, key); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return agentvault.Wrap(agentvault.CodeInternal, err, "cannot replace the key file")
	}
	return syncDir(filepath.Dir(path))
}

func writeKeyTo(f *os.File, key []byte) error {
	buf := make([]byte, 2*keySize+1)
	hex.Encode(buf, key)
	buf[2*keySize] = '\n'
	_, err := f.Write(buf)
	wipe(buf)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "cannot write the key file")
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return nil // best effort: not every platform can open a directory
	}
	defer d.Close()
	_ = d.Sync()
	return nil
}
