package keys

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestCheckTenant(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"acme", true},
		{"a", true},
		{"shop-eu-1", true},
		{"0", true},
		{strings.Repeat("a", MaxTenantLen), true},
		{"", false},
		{strings.Repeat("a", MaxTenantLen+1), false},
		{"Acme", false},
		{"-acme", false},
		{"acme-", false},
		{"ac me", false},
		{"ac_me", false},
		{"acme@eu", false},
		{"é", false},
	}
	for _, tt := range tests {
		err := CheckTenant(tt.name)
		if got := err == nil; got != tt.ok {
			t.Errorf("CheckTenant(%q) = %v, want ok %v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidTenant) {
			t.Errorf("CheckTenant(%q) = %v, want ErrInvalidTenant", tt.name, err)
		}
	}
	long := strings.Repeat("x", 5000)
	if err := CheckTenant(long); err == nil || len(err.Error()) > 200 {
		t.Errorf("CheckTenant of 5000 bytes = %v, want a short error", err)
	}
}

// TestTenantSubjects: a tenant's accounts, recipients, pairs, guesses and
// pseudonyms are its own, its addresses and globals everyone's, and the
// default tenant hashes exactly as a Hasher without tenants always did.
func TestTenantSubjects(t *testing.T) {
	root := NewHasher(testKey(t, 1))
	a, b := root.Tenant("a"), root.Tenant("b")
	net := netip.MustParsePrefix("203.0.113.0/24")
	scoped := []Key{
		AccountKey("alice@example.com"),
		{Kind: "recipient", ID: "+15550100000"},
		{Kind: "account+ip", ID: "alice@example.com", Net: netip.MustParsePrefix("203.0.113.7/32")},
		GuessKey(0xfeed),
	}
	for _, k := range scoped {
		ra, rb, r0 := a.KeySubject(k), b.KeySubject(k), root.KeySubject(k)
		if ra == rb || ra == r0 || rb == r0 {
			t.Errorf("%s %q: tenants a, b and the default share a subject: %q %q %q", k.Kind, k, ra, rb, r0)
		}
		if again := root.Tenant("a").KeySubject(k); again != ra {
			t.Errorf("%s: tenant a hashes %q then %q", k.Kind, ra, again)
		}
	}
	for _, k := range []Key{{Kind: KindIP, Net: net}, {Kind: KindGlobal}} {
		if ra, r0 := a.KeySubject(k), root.KeySubject(k); ra != r0 {
			t.Errorf("%s: tenant a's subject %q is not the shared %q", k.Kind, ra, r0)
		}
	}

	// The default tenant's subjects are those of the layout before
	// tenants: Subject of the kind and the parts, nothing added.
	if got, want := root.Tenant("").KeySubject(AccountKey("alice")), root.Subject("account", "alice"); got != want {
		t.Errorf("default tenant's account subject %q, want the pre-tenant %q", got, want)
	}

	if pa, p0 := a.Pseudonym(PseudonymAccount, "alice"), root.Pseudonym(PseudonymAccount, "alice"); pa == p0 {
		t.Errorf("tenant a's account pseudonym is the default tenant's: %q", pa)
	}
	if pa, p0 := a.Pseudonym(PseudonymNetwork, "203.0.113.0/24"), root.Pseudonym(PseudonymNetwork, "203.0.113.0/24"); pa != p0 {
		t.Errorf("tenant a's network pseudonym %q is not the shared %q", pa, p0)
	}
	if n := a.TenantName(); n != "a" {
		t.Errorf("TenantName = %q, want a", n)
	}
}

// TestDefaultTenantKeepsTheLayout: the subjects of the default tenant are
// those guardian wrote before tenants, so an upgrade finds every counted
// state where it was: HMAC-SHA256 under HKDF(key, "guardian", "guardian
// keys v1") of the length-prefixed kind and parts, cut to 16 bytes,
// worked out here apart from the code.
func TestDefaultTenantKeepsTheLayout(t *testing.T) {
	h := NewHasher(testKey(t, 1)).Tenant("")
	for _, c := range []struct {
		k    Key
		want string
	}{
		{AccountKey("alice@example.com"), "iidwyHgVORvBaBGc9OwPGA"},
		{Key{Kind: KindIP, Net: netip.MustParsePrefix("203.0.113.0/24")}, "KOqgfAUe_ayC90NNRLhEfQ"},
	} {
		if got := h.KeySubject(c.k); got != c.want {
			t.Errorf("default tenant's %s subject = %q, want %q as before tenants", c.k.Kind, got, c.want)
		}
	}
	// A tenant's ip subject is the shared one too.
	if got := NewHasher(testKey(t, 1)).Tenant("acme").KeySubject(Key{Kind: KindIP, Net: netip.MustParsePrefix("203.0.113.0/24")}); got != "KOqgfAUe_ayC90NNRLhEfQ" {
		t.Errorf("tenant acme's ip subject = %q, want the shared one", got)
	}
}

func TestTenantContext(t *testing.T) {
	ctx := context.Background()
	if got := TenantOf(ctx); got != "" {
		t.Errorf("TenantOf(background) = %q, want the default tenant", got)
	}
	if WithTenant(ctx, "") != ctx {
		t.Error("WithTenant of the default tenant made a new context")
	}
	tc := WithTenant(ctx, "acme")
	if got := TenantOf(tc); got != "acme" {
		t.Errorf("TenantOf = %q, want acme", got)
	}
	root := NewHasher(testKey(t, 1))
	if h := root.ForContext(tc); h.TenantName() != "acme" {
		t.Errorf("ForContext hashes for %q, want acme", h.TenantName())
	}
	if root.ForContext(ctx) != root {
		t.Error("ForContext of the default tenant is not the Hasher itself")
	}
}
