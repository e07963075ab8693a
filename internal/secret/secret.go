// Package secret holds guardian's signing keys and derives from each one
// independent key per purpose, so that a service token can never be replayed
// as an attempt id, a device token or a key hash. It also reads key files,
// one key a line (ParseKeys), and names each key by an id derived from it
// (Key.ID), never by the key itself.
package secret

import (
	"bytes"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
)

// MinLen is the shortest signing key guardian accepts, in bytes.
const MinLen = 32

// ErrTooShort reports a signing key shorter than MinLen bytes.
var ErrTooShort = errors.New("secret: signing key must be at least 32 bytes")

// Key is the signing key. The zero value is not usable; build one with New
// or Generate. A Key is immutable and safe for concurrent use.
type Key struct {
	b []byte
}

// New returns a Key holding a copy of b, which must be at least MinLen bytes.
func New(b []byte) (Key, error) {
	if len(b) < MinLen {
		return Key{}, fmt.Errorf("%w (got %d)", ErrTooShort, len(b))
	}
	return Key{b: append([]byte(nil), b...)}, nil
}

// Generate returns a random ephemeral Key, for development mode.
func Generate() Key {
	b := make([]byte, MinLen)
	if _, err := rand.Read(b); err != nil {
		panic("secret: no randomness: " + err.Error())
	}
	return Key{b: b}
}

// IsZero reports whether k is the zero Key, which holds no secret.
func (k Key) IsZero() bool { return len(k.b) == 0 }

// Derive returns a 32-byte key for one purpose (HKDF-SHA256 with the purpose
// as info). Different purposes give unrelated keys.
func (k Key) Derive(purpose string) []byte {
	if len(k.b) == 0 {
		panic("secret: Derive on the zero Key")
	}
	out, err := hkdf.Key(sha256.New, k.b, []byte("guardian"), purpose, 32)
	if err != nil {
		panic("secret: hkdf: " + err.Error())
	}
	return out
}

// idPurpose is the Derive purpose of a key's id.
const idPurpose = "guardian key id v1"

// ID names k without revealing it: 12 characters of unpadded base64url of a
// key derived from k for this purpose alone, the same on every instance
// that holds k. Tokens carry it (the kid of a JWT) so that a verifier picks
// the key that signed them, and logs and metrics name keys by it.
func (k Key) ID() string {
	return base64.RawURLEncoding.EncodeToString(k.Derive(idPurpose)[:9])
}

// Equal reports whether k and o hold the same secret, in constant time.
func (k Key) Equal(o Key) bool {
	return len(k.b) == len(o.b) && subtle.ConstantTimeCompare(k.b, o.b) == 1
}

// ErrNoKey reports a key file or value that holds no key.
var ErrNoKey = errors.New("secret: no key")

// ParseKeys reads keys one a line, as a signing key file holds them: each
// line is one key (trailing "\r" dropped, nothing else trimmed), empty
// lines are skipped, and the keys come back in the file's order. Every key
// must be at least MinLen bytes and appear once; the error names the line
// (counted from 1) that is not. Text with no key at all is ErrNoKey.
func ParseKeys(text []byte) ([]Key, error) {
	var out []Key
	for n, line := range bytes.Split(text, []byte("\n")) {
		line = bytes.TrimRight(line, "\r")
		if len(line) == 0 {
			continue
		}
		k, err := New(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		for _, prev := range out {
			if prev.Equal(k) {
				return nil, fmt.Errorf("line %d: %w", n+1, ErrRepeated)
			}
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		return nil, ErrNoKey
	}
	return out, nil
}

// ErrRepeated reports a key that appears twice in one key file.
var ErrRepeated = errors.New("secret: key repeated")

// ReadKeys reads the file at path with ParseKeys. Errors name the file.
func ReadKeys(path string) ([]Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secret: %w", err)
	}
	keys, err := ParseKeys(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return keys, nil
}
