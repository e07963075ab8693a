package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// secretPrefix starts a secret as the Standard Webhooks specification
// writes one: "whsec_" and the base64 of the key's bytes.
const secretPrefix = "whsec_"

// ErrSecret is the error of a secret that is not "whsec_" and base64.
var ErrSecret = errors.New("webhook: a secret is whsec_ and the base64 of at least 24 random bytes")

// minSecret is the shortest key a secret may hold, in bytes; the
// specification asks for 24 to 64.
const minSecret = 24

// ParseSecret reads a secret as the Standard Webhooks specification writes
// it ("whsec_" and base64, surrounding space ignored) and returns its key.
func ParseSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(strings.TrimSpace(s), secretPrefix)
	if !ok {
		return nil, ErrSecret
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSecret, err)
	}
	if len(key) < minSecret {
		return nil, fmt.Errorf("%w: it holds %d bytes", ErrSecret, len(key))
	}
	return key, nil
}

// Sign returns the webhook-signature header of a message as the Standard
// Webhooks specification signs it: "v1," and the base64 of HMAC-SHA256
// under key of "id.timestamp.body", timestamp in Unix seconds.
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, timestamp, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}
