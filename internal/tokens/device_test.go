package tokens

import (
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"strings"
	"testing"
	"time"
)

const (
	alice = "AbCdEfGhIjKlMnOpQrStUv" // an account subject
	bob   = "ZyXwVuTsRqPoNmLkJiHgFe"
)

func TestDeviceRoundTrip(t *testing.T) {
	d := NewDevices(testKey(t, 1), 0)
	tok, id, err := d.Issue(alice, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !validID(id) {
		t.Errorf("device id %q is not 16 bytes of base64url", id)
	}
	tests := []struct {
		name string
		now  time.Time
	}{
		{"at once", t0},
		{"a month later", t0.Add(30 * 24 * time.Hour)},
		{"just before 90 days", t0.Add(DefaultDeviceTTL - time.Second)},
	}
	for _, tt := range tests {
		got, err := d.Verify(tok, alice, tt.now)
		if err != nil {
			t.Fatalf("%s: Verify error = %v", tt.name, err)
		}
		if got != id {
			t.Errorf("%s: Verify = %q, want %q", tt.name, got, id)
		}
	}
	_, id2, err := d.Issue(alice, t0)
	if err != nil {
		t.Fatal(err)
	}
	if id2 == id {
		t.Errorf("two devices got the same id %q", id)
	}
}

func TestDeviceVerifyRejects(t *testing.T) {
	k := testKey(t, 1)
	d := NewDevices(k, time.Hour)
	tok, _, err := d.Issue(alice, t0)
	if err != nil {
		t.Fatal(err)
	}
	forged, _, err := NewDevices(testKey(t, 2), time.Hour).Issue(alice, t0)
	if err != nil {
		t.Fatal(err)
	}
	service, err := NewService(k).Issue(ScopeAdmin, alice, time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	deviceHeader := map[string]any{"alg": "HS256", "typ": "guardian-device"}
	valid := map[string]any{
		"iss": "guardian", "sub": alice, "aud": []string{"guardian-device"}, "did": "AAECAwQFBgcICQoLDA0ODw",
		"iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix(),
	}
	parts := strings.Split(tok, ".")
	tests := []struct {
		name    string
		token   string
		account string
		now     time.Time
		want    string
	}{
		{"another account's token", tok, bob, t0, "issued to another account"},
		{"no account", tok, "", t0, "issued to another account"},
		{"expired", tok, alice, t0.Add(time.Hour), "expired"},
		{"forged with another key", forged, alice, t0, "signed with a key not in force"},
		{"service token", service, alice, t0, "bad signature"},
		{"payload swapped", parts[0] + "." + strings.Split(forged, ".")[1] + "." + parts[2], alice, t0, "bad signature"},
		{"alg none", craft(t, map[string]any{"alg": "none", "typ": "guardian-device"}, valid, nil, nil), alice, t0, "algorithm not allowed"},
		{"HS512 with the right key", craft(t, map[string]any{"alg": "HS512", "typ": "guardian-device"}, valid, sha512.New, d.key()), alice, t0, "algorithm not allowed"},
		{"no exp", craft(t, deviceHeader, with(valid, "exp", nil), sha256.New, d.key()), alice, t0, "no expiry"},
		{"service claims under the device key", craft(t, hs256, serviceClaimsAt(t0), sha256.New, d.key()), alice, t0, "not a device token"},
		{"no aud", craft(t, deviceHeader, with(valid, "aud", nil), sha256.New, d.key()), alice, t0, "not a device token"},
		{"other aud", craft(t, deviceHeader, with(valid, "aud", "guardian"), sha256.New, d.key()), alice, t0, "not a device token"},
		{"typ JWT", craft(t, hs256, valid, sha256.New, d.key()), alice, t0, "not a device token"},
		{"wrong issuer", craft(t, deviceHeader, with(valid, "iss", "x"), sha256.New, d.key()), alice, t0, "not a device token"},
		{"no device id", craft(t, deviceHeader, with(valid, "did", nil), sha256.New, d.key()), alice, t0, "malformed device id"},
		{"bad device id", craft(t, deviceHeader, with(valid, "did", "short"), sha256.New, d.key()), alice, t0, "malformed device id"},
		{"garbage", "garbage", alice, t0, "malformed"},
		{"too long", strings.Repeat("a", maxJWTLen+1), alice, t0, "too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.Verify(tt.token, tt.account, tt.now)
			if !errors.Is(err, ErrInvalidDevice) {
				t.Fatalf("Verify = %q, %v; want ErrInvalidDevice", got, err)
			}
			if want := "tokens: invalid device token: " + tt.want; err.Error() != want {
				t.Errorf("Verify error = %q, want %q", err, want)
			}
			if got != "" {
				t.Errorf("Verify returned %q with its error", got)
			}
		})
	}
	// The hand-made valid token is accepted, so the rejections above are
	// down to what each case changed.
	if _, err := d.Verify(craft(t, deviceHeader, valid, sha256.New, d.key()), alice, t0); err != nil {
		t.Errorf("hand-made valid token: %v", err)
	}
}

func TestDeviceTokenIsNotAServiceToken(t *testing.T) {
	k := testKey(t, 1)
	tok, _, err := NewDevices(k, time.Hour).Issue(alice, t0)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := NewService(k).Verify(tok, t0); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("device token as service token: %+v, %v; want ErrInvalidToken", c, err)
	}
}

func TestDeviceIssueRejectsNoAccount(t *testing.T) {
	if _, _, err := NewDevices(testKey(t, 1), 0).Issue("", t0); !errors.Is(err, ErrInvalidDevice) {
		t.Errorf("Issue(no account) error = %v, want ErrInvalidDevice", err)
	}
}

func TestDeviceDefaultTTL(t *testing.T) {
	d := NewDevices(testKey(t, 1), 0)
	tok, _, err := d.Issue(alice, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Verify(tok, alice, t0.Add(90*24*time.Hour)); !errors.Is(err, ErrInvalidDevice) {
		t.Errorf("after 90 days: %v, want ErrInvalidDevice", err)
	}
}

func TestSignDeviceIsSignJWT(t *testing.T) {
	d := NewDevices(testKey(t, 1), 0, testKey(t, 2))
	keys := d.keys.load()
	iat := time.Date(2026, 12, 2, 2, 30, 0, 987654321, time.UTC)
	for _, account := range []string{"alice@example.com", `"quoted" \ back`, "<b>&amp;</b>", "béa", "line\u2028sep", "nul\x00", "h-" + strings.Repeat("x", 600)} {
		want, err := keys.signJWT(deviceClaimsOf(account, "AAAAAAAAAAAAAAAAAAAAAA", iat, iat.Add(DefaultDeviceTTL)), deviceType)
		if err != nil {
			t.Fatal(err)
		}
		got, err := keys.signDevice(account, "AAAAAAAAAAAAAAAAAAAAAA", iat, iat.Add(DefaultDeviceTTL))
		if err != nil || got != want {
			t.Fatalf("%q: signDevice = %s, %v\nsignJWT       = %s", account, got, err, want)
		}
		if dev, err := d.Verify(got, account, iat.Add(time.Hour)); err != nil || dev != "AAAAAAAAAAAAAAAAAAAAAA" {
			t.Fatalf("%q: verify = %q, %v", account, dev, err)
		}
	}
}
