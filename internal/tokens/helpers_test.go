package tokens

import (
	"bytes"
	"crypto/hmac"
	"encoding/base64"
	"encoding/json"
	"hash"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/secret"
)

// t0 is the fixed instant the tests start from.
var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// testKey returns a fixed signing key filled with b.
func testKey(tb testing.TB, b byte) secret.Key {
	tb.Helper()
	k, err := secret.New(bytes.Repeat([]byte{b}, secret.MinLen))
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// b64 encodes b as a JWT segment.
func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// craft builds a JWT by hand: header and claims as given, signed with
// HMAC using newHash and key, or with an empty signature when newHash is nil.
func craft(tb testing.TB, header, claims map[string]any, newHash func() hash.Hash, key []byte) string {
	tb.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := json.Marshal(claims)
	if err != nil {
		tb.Fatal(err)
	}
	input := b64(h) + "." + b64(c)
	if newHash == nil {
		return input + "."
	}
	mac := hmac.New(newHash, key)
	mac.Write([]byte(input))
	return input + "." + b64(mac.Sum(nil))
}

// hs256 is the header of a guardian JWT.
var hs256 = map[string]any{"alg": "HS256", "typ": "JWT"}

// serviceClaimsAt returns valid service token claims issued at now.
func serviceClaimsAt(now time.Time) map[string]any {
	return map[string]any{
		"iss": "guardian", "sub": "auth-api", "scope": "check",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
}

// with returns a copy of m with k set to v, or removed when v is nil.
func with(m map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for mk, mv := range m {
		out[mk] = mv
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}
