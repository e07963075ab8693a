package tokens

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/secret"
)

// TestRotation: during a key rotation, what was signed under the previous
// key still verifies; new tokens are signed under the current key only, and
// without the previous key configured the old ones are refused.
func TestRotation(t *testing.T) {
	oldKey, err := secret.New([]byte("guardian-old-signing-key-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	newKey, err := secret.New([]byte("guardian-new-signing-key-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

	t.Run("service tokens", func(t *testing.T) {
		old, err := NewService(oldKey).Issue(ScopeAdmin, "ops", time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewService(newKey, oldKey).Verify(old, now); err != nil {
			t.Fatalf("old token during the grace period: %v", err)
		}
		if _, err := NewService(newKey).Verify(old, now); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("old token after the grace period: %v, want ErrInvalidToken", err)
		}
		fresh, err := NewService(newKey, oldKey).Issue(ScopeCheck, "ops", time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewService(oldKey).Verify(fresh, now); err == nil {
			t.Fatal("a token issued during the rotation verifies under the previous key alone")
		}
	})

	t.Run("attempt ids", func(t *testing.T) {
		ip := netip.MustParseAddr("2001:db8::7")
		id, err := NewAttempts(oldKey).Seal(Attempt{Issued: now, Flow: "login", IP: ip})
		if err != nil {
			t.Fatal(err)
		}
		at, err := NewAttempts(newKey, oldKey).Open(id, now)
		if err != nil {
			t.Fatalf("old attempt id during the grace period: %v", err)
		}
		if at.IP != ip {
			t.Fatalf("old attempt id during the grace period: address %v, want %v", at.IP, ip)
		}
		if _, err := NewAttempts(newKey).Open(id, now); !errors.Is(err, ErrInvalidAttempt) {
			t.Fatalf("old attempt id after the grace period: %v, want ErrInvalidAttempt", err)
		}
	})

	t.Run("device tokens", func(t *testing.T) {
		tok, id, err := NewDevices(oldKey, 0).Issue("acct", now)
		if err != nil {
			t.Fatal(err)
		}
		got, err := NewDevices(newKey, 0, oldKey).Verify(tok, "acct", now)
		if err != nil || got != id {
			t.Fatalf("old device token during the grace period: %q, %v", got, err)
		}
		if _, err := NewDevices(newKey, 0).Verify(tok, "acct", now); !errors.Is(err, ErrInvalidDevice) {
			t.Fatalf("old device token after the grace period: %v, want ErrInvalidDevice", err)
		}
	})
}

// TestDeviceCache: a device token verified once is answered from the cache,
// which still checks the account and the expiry on every call.
func TestDeviceCache(t *testing.T) {
	k, err := secret.New([]byte("guardian-device-cache-key-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	d := NewDevices(k, time.Hour)
	tok, id, err := d.Issue("acct", now)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		account string
		at      time.Time
		wantID  string
		wantErr error
	}{
		{"first, verified", "acct", now, id, nil},
		{"again, from the cache", "acct", now.Add(time.Minute), id, nil},
		{"another account, from the cache", "other", now, "", ErrInvalidDevice},
		{"expired, from the cache", "acct", now.Add(time.Hour), "", ErrInvalidDevice},
	}
	for _, tt := range tests {
		got, err := d.Verify(tok, tt.account, tt.at)
		if got != tt.wantID || !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: Verify = %q, %v; want %q, %v", tt.name, got, err, tt.wantID, tt.wantErr)
		}
	}
	if hits := d.cache.hits.Load(); hits != 3 {
		t.Errorf("cache hits = %d, want 3", hits)
	}
}
