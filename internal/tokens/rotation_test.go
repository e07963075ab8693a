package tokens

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// TestKeysRotateInPlace rotates the keys of one Service, Attempts and
// Devices the way a rewritten key file does: a verifying key added, then
// made the signing key, then the old key removed. Each step takes effect at
// the next use, cached verifications included; an attempt id opens with the
// address its key hid.
func TestKeysRotateInPlace(t *testing.T) {
	oldKey, newKey := testKey(t, 1), testKey(t, 2)
	keys := NewKeys(oldKey)
	svc, att, dev := keys.Service(), keys.Attempts(), keys.Devices(0)
	ip := netip.MustParseAddr("192.0.2.7")
	issue := func() (tok, id, device string) {
		t.Helper()
		tok, err := svc.Issue(ScopeCheck, "auth", time.Hour, t0)
		if err != nil {
			t.Fatal(err)
		}
		if id, err = att.Seal(Attempt{Issued: t0, Flow: "login", IP: ip}); err != nil {
			t.Fatal(err)
		}
		if device, _, err = dev.Issue("acct", t0); err != nil {
			t.Fatal(err)
		}
		return tok, id, device
	}
	verifies := func(tok, id, device string) (service, attempt, trusted bool) {
		t.Helper()
		_, err1 := svc.Verify(tok, t0)
		at, err2 := att.Open(id, t0)
		_, err3 := dev.Verify(device, "acct", t0)
		return err1 == nil, err2 == nil && at.IP == ip, err3 == nil
	}
	kidOf := func(tok string) string {
		t.Helper()
		var h map[string]any
		raw, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
		if err != nil || json.Unmarshal(raw, &h) != nil {
			t.Fatalf("header of %q", tok)
		}
		s, _ := h["kid"].(string)
		return s
	}

	oldTok, oldID, oldDev := issue()
	if a, b, c := verifies(oldTok, oldID, oldDev); !a || !b || !c {
		t.Fatalf("before the rotation: %v %v %v", a, b, c)
	}
	if kidOf(oldTok) != oldKey.ID() || kidOf(oldDev) != oldKey.ID() {
		t.Fatal("the tokens do not name the old key")
	}

	keys.Set(oldKey, newKey) // step 1: the new key verifies too
	if sign, all := keys.IDs(); sign != oldKey.ID() || !slices.Equal(all, []string{oldKey.ID(), newKey.ID()}) {
		t.Fatalf("IDs = %s, %v", sign, all)
	}
	if tok, _, _ := issue(); kidOf(tok) != oldKey.ID() {
		t.Fatal("step 1: the new key signs already")
	}

	keys.Set(newKey, oldKey) // step 2: the new key signs
	newTok, newID, newDev := issue()
	if kidOf(newTok) != newKey.ID() || kidOf(newDev) != newKey.ID() {
		t.Fatal("step 2: the new key does not sign")
	}
	if a, b, c := verifies(oldTok, oldID, oldDev); !a || !b || !c {
		t.Fatalf("step 2, the old key's: %v %v %v, want all verified", a, b, c)
	}
	if a, b, c := verifies(newTok, newID, newDev); !a || !b || !c {
		t.Fatalf("step 2, the new key's: %v %v %v, want all verified", a, b, c)
	}

	keys.Set(newKey) // step 3: the old key is gone, cached or not
	if a, b, c := verifies(oldTok, oldID, oldDev); a || b || c {
		t.Fatalf("step 3, the old key's: %v %v %v, want all refused", a, b, c)
	}
	if _, err := svc.Verify(oldTok, t0); err == nil || err.Error() != "tokens: invalid token: signed with a key not in force" {
		t.Fatalf("step 3, old service token: %v", err)
	}
	if a, b, c := verifies(newTok, newID, newDev); !a || !b || !c {
		t.Fatalf("step 3, the new key's: %v %v %v, want all verified", a, b, c)
	}
}

// TestTokensWithoutKID: a token minted before tokens carried kid verifies
// under any key in force, and no other.
func TestTokensWithoutKID(t *testing.T) {
	oldKey, newKey := testKey(t, 1), testKey(t, 2)
	legacy := craft(t, hs256, serviceClaimsAt(t0), sha256.New, oldKey.Derive(servicePurpose))
	if _, err := NewService(newKey, oldKey).Verify(legacy, t0); err != nil {
		t.Errorf("a token without kid under a verifying key: %v", err)
	}
	if _, err := NewService(newKey).Verify(legacy, t0); err == nil || err.Error() != "tokens: invalid token: bad signature" {
		t.Errorf("a token without kid under no key in force: %v, want bad signature", err)
	}
}

// revokedSet is a Revocations of fixed jtis.
type revokedSet map[string]bool

func (r revokedSet) Revoked(jti string) bool { return r[jti] }

// TestRevokedTokens: a revoked token is refused from the next Verify on,
// though its verification is cached; others are not.
func TestRevokedTokens(t *testing.T) {
	revoked := revokedSet{}
	svc := NewService(testKey(t, 1)).WithRevocations(revoked)
	tok, err := svc.Issue(ScopeAdmin, "ops", time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	other, err := svc.Issue(ScopeAdmin, "ops", time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := svc.Verify(tok, t0)
	if err != nil || cl.ID == "" || !cl.IssuedAt.Equal(t0) {
		t.Fatalf("Verify = %+v, %v; want a jti and the issue time", cl, err)
	}
	revoked[cl.ID] = true
	if _, err := svc.Verify(tok, t0.Add(time.Second)); err == nil || err.Error() != "tokens: invalid token: revoked" {
		t.Errorf("a revoked token, cached: %v, want revoked", err)
	}
	if _, err := svc.Verify(other, t0); err != nil {
		t.Errorf("another token: %v", err)
	}
	if hits := svc.cache.hits.Load(); hits != 1 {
		t.Errorf("cache hits %d, want 1: the revocation must be seen on a cached token", hits)
	}
}

func TestIssueRefusesLongerThanMaxTTL(t *testing.T) {
	svc := NewService(testKey(t, 1))
	if _, err := svc.Issue(ScopeCheck, "x", MaxTTL, t0); err != nil {
		t.Errorf("Issue(MaxTTL) = %v", err)
	}
	if _, err := svc.Issue(ScopeCheck, "x", MaxTTL+time.Second, t0); err == nil {
		t.Error("Issue(MaxTTL + 1s) succeeded")
	}
}

// TestKeysSetWhileInUse swaps which of two keys signs while callers seal,
// open, issue and verify: everything sealed or signed by either key
// verifies throughout, and nothing races.
func TestKeysSetWhileInUse(t *testing.T) {
	a, b := testKey(t, 1), testKey(t, 2)
	keys := NewKeys(a, b)
	svc, att, dev := keys.Service(), keys.Attempts(), keys.Devices(0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failures atomic.Int64
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				tok, err := svc.Issue(ScopeCheck, "auth", time.Hour, t0)
				if err == nil {
					_, err = svc.Verify(tok, t0)
				}
				var id string
				if err == nil {
					id, err = att.Seal(Attempt{Issued: t0, Flow: "login"})
				}
				if err == nil {
					_, err = att.Open(id, t0)
				}
				var device string
				if err == nil {
					device, _, err = dev.Issue("acct", t0)
				}
				if err == nil {
					_, err = dev.Verify(device, "acct", t0)
				}
				if err != nil {
					failures.Add(1)
				}
			}
		})
	}
	for i := range 200 {
		if i%2 == 0 {
			keys.Set(b, a)
		} else {
			keys.Set(a, b)
		}
		time.Sleep(100 * time.Microsecond)
	}
	close(stop)
	wg.Wait()
	if n := failures.Load(); n != 0 {
		t.Fatalf("%d rounds failed while the signing key switched", n)
	}
}
