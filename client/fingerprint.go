package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
)

// Fingerprint returns the secret fingerprint of a guessed secret (a password,
// a one-time code) for a check's secret_fingerprint: HMAC-SHA256 of secret
// keyed with key, the full 32 bytes in unpadded base64url, 43 characters of
// [A-Za-z0-9_-], which is the form guardian accepts (16 to 128 such
// characters).
//
// key is the auth service's own secret, at least 32 random bytes, kept like a
// password pepper: never guardian's signing key, and the same on every
// instance of the auth service, so that one guess has one fingerprint
// wherever it is made. Without key a fingerprint of a common password could
// be looked up in a table; with it, guardian, its store and its logs learn
// only whether two guesses were equal. Changing key makes every fingerprint
// new, which only forgets the guesses guardian remembers.
//
// secret is the bytes the auth service verifies, exactly as the end user
// gave them. The full digest, not a prefix, keeps two different guesses from
// ever counting as one. The Python and TypeScript clients compute the same
// function (testdata/fingerprint.json holds the vectors all three pass).
func Fingerprint(key, secret []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(secret) // a hash.Hash never returns an error
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
