package tokens

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

func FuzzOpenAttempt(f *testing.F) {
	a := NewAttempts(testKey(f, 1))
	for _, at := range []Attempt{sampleAttempt(), {Issued: t0}, {Issued: t0, Flow: "otp_send", Cost: 2, Spent: 3}} {
		tok, err := a.Seal(at)
		if err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(tok))
	}
	f.Add([]byte(""))
	f.Add([]byte("AAAA"))
	f.Add([]byte("!!"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// As a token: almost always refused, never a panic.
		checkOpen(t, a, string(data), t0)
		// As a payload signed with the right key, opened at the instant it
		// names: this reaches the parser with arbitrary records.
		now := t0
		if len(data) >= headerLen {
			now = time.UnixMilli(int64(binary.BigEndian.Uint64(data[1+idLen : headerLen])))
		}
		checkOpen(t, a, sealPayload(a, data), now)
	})
}

// checkOpen opens token at now and, when it opens, checks that the Attempt
// seals again into an id that opens to the same Attempt.
func checkOpen(t *testing.T, a *Attempts, token string, now time.Time) {
	t.Helper()
	at, err := a.Open(token, now)
	if err != nil {
		if !errors.Is(err, ErrInvalidAttempt) {
			t.Fatalf("Open error %v does not wrap ErrInvalidAttempt", err)
		}
		return
	}
	again, err := a.Seal(at)
	if err != nil {
		t.Fatalf("Seal(Open(%q)) error = %v", token, err)
	}
	got, err := a.Open(again, now)
	if err != nil {
		t.Fatalf("Open(Seal(Open(%q))) error = %v", token, err)
	}
	if !equalAttempts(got, at) {
		t.Fatalf("Open(Seal(%+v)) = %+v", at, got)
	}
}

func FuzzVerify(f *testing.F) {
	k := testKey(f, 1)
	s := NewService(k)
	d := NewDevices(k, time.Hour)
	tok, err := s.Issue(ScopeCheck, "auth-api", time.Hour, t0)
	if err != nil {
		f.Fatal(err)
	}
	dev, _, err := d.Issue(alice, t0)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tok)
	f.Add(dev)
	f.Add(craft(f, map[string]any{"alg": "none"}, serviceClaimsAt(t0), nil, nil))
	f.Add(craft(f, hs256, map[string]any{"exp": 1e300, "scope": "admin", "iss": "guardian"}, sha256.New, s.key()))
	f.Add(craft(f, hs256, map[string]any{"exp": -1e300, "aud": 5}, sha256.New, s.key()))
	f.Add("a.b.c")
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		c, err := s.Verify(token, t0)
		if err == nil && (!c.Scope.Valid() || !t0.Before(c.ExpiresAt)) {
			t.Fatalf("Verify(%q) accepted claims %+v", token, c)
		}
		if err != nil && !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("Verify(%q) error %v does not wrap ErrInvalidToken", token, err)
		}
		id, err := d.Verify(token, alice, t0)
		if err == nil && !validID(id) {
			t.Fatalf("device Verify(%q) gave id %q", token, id)
		}
		if err != nil && !errors.Is(err, ErrInvalidDevice) {
			t.Fatalf("device Verify(%q) error %v does not wrap ErrInvalidDevice", token, err)
		}
	})
}
