package keys

import (
	"bytes"
	"encoding/base64"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/guardian-sec/guardian/internal/secret"
)

// testKey returns a fixed signing key filled with b.
func testKey(tb testing.TB, b byte) secret.Key {
	tb.Helper()
	k, err := secret.New(bytes.Repeat([]byte{b}, secret.MinLen))
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func TestSubjectShape(t *testing.T) {
	h := NewHasher(testKey(t, 1))
	got := h.Subject("account", "alice@example.com")
	if len(got) != SubjectLen {
		t.Fatalf("len(Subject) = %d, want %d", len(got), SubjectLen)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(got)
	if err != nil || len(raw) != 16 {
		t.Fatalf("Subject %q is not 16 bytes of base64url: %v", got, err)
	}
	if again := h.Subject("account", "alice@example.com"); again != got {
		t.Errorf("Subject is not deterministic: %q then %q", got, again)
	}
	if other := NewHasher(testKey(t, 1)).Subject("account", "alice@example.com"); other != got {
		t.Errorf("two Hashers on one key disagree: %q and %q", got, other)
	}
}

func TestSubjectSeparates(t *testing.T) {
	h := NewHasher(testKey(t, 1))
	tests := []struct {
		name       string
		kindA      string
		partsA     []string
		kindB      string
		partsB     []string
		hasherB    *Hasher
		wantDiffer bool
	}{
		{"same input", "account", []string{"alice"}, "account", []string{"alice"}, h, false},
		{"different values", "account", []string{"alice"}, "account", []string{"bob"}, h, true},
		{"kinds", "account", []string{"alice"}, "recipient", []string{"alice"}, h, true},
		{"part boundaries", "account+ip", []string{"a", "bc"}, "account+ip", []string{"ab", "c"}, h, true},
		{"kind and part boundary", "ab", []string{"c"}, "a", []string{"bc"}, h, true},
		{"empty part counts", "device", []string{"x", ""}, "device", []string{"x"}, h, true},
		{"signing keys", "account", []string{"alice"}, "account", []string{"alice"}, NewHasher(testKey(t, 2)), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := h.Subject(tt.kindA, tt.partsA...)
			b := tt.hasherB.Subject(tt.kindB, tt.partsB...)
			if got := a != b; got != tt.wantDiffer {
				t.Errorf("Subject(%q, %q) = %q, Subject(%q, %q) = %q; differ = %v, want %v",
					tt.kindA, tt.partsA, a, tt.kindB, tt.partsB, b, got, tt.wantDiffer)
			}
		})
	}
}

func TestSubjectHidesInput(t *testing.T) {
	h := NewHasher(testKey(t, 1))
	for _, in := range []string{"alice", "+15550100000", "203.0.113.7", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"} {
		got := h.Subject("account", in)
		for i := 0; i+4 <= len(in); i++ {
			if part := in[i : i+4]; strings.Contains(got, part) {
				t.Errorf("Subject(%q) = %q contains %q", in, got, part)
			}
		}
	}
}

func TestKeySubjectMatchesSubject(t *testing.T) {
	h := NewHasher(testKey(t, 1))
	for _, s := range []string{"203.0.113.0/24", "203.0.113.7/32", "2001:db8:1:2::/64", "::/0", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128"} {
		p := netip.MustParsePrefix(s)
		if got, want := h.KeySubject(Key{Kind: "ip", Net: p}), h.Subject("ip", p.String()); got != want {
			t.Errorf("KeySubject(ip %s) = %q, want Subject(\"ip\", %q) = %q", s, got, s, want)
		}
		if got, want := h.KeySubject(Key{Kind: "account+ip", ID: "alice", Net: p}), h.Subject("account+ip", "alice", p.String()); got != want {
			t.Errorf("KeySubject(account+ip alice %s) = %q, want %q", s, got, want)
		}
	}
	if got, want := h.KeySubject(Key{Kind: "account", ID: "alice"}), h.Subject("account", "alice"); got != want {
		t.Errorf("KeySubject(account alice) = %q, want %q", got, want)
	}
}

func TestKeyString(t *testing.T) {
	p := netip.MustParsePrefix("192.0.2.0/24")
	tests := []struct {
		k    Key
		want string
	}{
		{Key{Kind: "account", ID: "alice"}, "alice"},
		{Key{Kind: "ip", Net: p}, "192.0.2.0/24"},
		{Key{Kind: "account+ip", ID: "alice", Net: p}, "alice 192.0.2.0/24"},
		{Key{Kind: "global"}, "global"},
	}
	for _, tt := range tests {
		if got := tt.k.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.k, got, tt.want)
		}
	}
	if !(Key{}).IsZero() || (Key{Kind: "global"}).IsZero() {
		t.Error("IsZero: only the zero Key is zero")
	}
}

func TestSubjectConcurrent(t *testing.T) {
	h := NewHasher(testKey(t, 1))
	want := h.Subject("account", "alice")
	var wg sync.WaitGroup
	errs := make(chan string, 50)
	for range 50 {
		wg.Go(func() {
			for range 200 {
				if got := h.Subject("account", "alice"); got != want {
					errs <- got
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for got := range errs {
		t.Errorf("concurrent Subject = %q, want %q", got, want)
	}
}

func TestSubjectLongPart(t *testing.T) {
	h := NewHasher(testKey(t, 1))
	long := strings.Repeat("x", 10<<10)
	a := h.Subject("attempt", long)
	b := h.Subject("attempt", long+"y")
	if a == b || len(a) != SubjectLen {
		t.Errorf("long parts: %q and %q", a, b)
	}
	if again := h.Subject("attempt", long); again != a {
		t.Errorf("after a long part Subject changed: %q then %q", a, again)
	}
}

func TestStoreKey(t *testing.T) {
	got := StoreKey("AbCdEfGhIjKlMnOpQrStUv", "login-account")
	want := "guardian:v3:{AbCdEfGhIjKlMnOpQrStUv}:login-account"
	if got != want {
		t.Errorf("StoreKey = %q, want %q", got, want)
	}
	if !strings.HasPrefix(got, KeyPrefix) {
		t.Errorf("StoreKey %q does not start with KeyPrefix %q", got, KeyPrefix)
	}
}

func TestGuess(t *testing.T) {
	g := NewGuesser(testKey(t, 1))
	other := NewGuesser(testKey(t, 2))
	a, b := "fingerprint-of-winter2026", "fingerprint-of-summer2026"
	if first, again := g.Guess(a), g.Guess(a); first != again {
		t.Error("one fingerprint, two guesses")
	}
	if g.Guess(a) == g.Guess(b) {
		t.Error("two fingerprints, one guess")
	}
	if g.Guess(a) == other.Guess(a) {
		t.Error("one guess under two keys: the key does not reach the hash")
	}
	if g.Guess(a) == 0 {
		t.Error("guess 0")
	}
	if x, y := g.AccountGuess("alice", g.Guess(a)), g.AccountGuess("bob", g.Guess(a)); x == y || x == g.Guess(a) || x != g.AccountGuess("alice", g.Guess(a)) {
		t.Errorf("AccountGuess: alice %x, bob %x, shared %x: want one per account, stable, unlike the shared one", x, y, g.Guess(a))
	}
	k := GuessKey(g.Guess(a))
	if k.Kind != KindSecret || strings.Contains(k.ID, a[:9]) {
		t.Errorf("GuessKey = %+v", k)
	}
}
