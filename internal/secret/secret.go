// Package secret holds guardian's signing key and derives from it one
// independent key per purpose, so that a service token can never be replayed
// as an attempt id, a device token or a key hash.
package secret

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
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
