package decisionlog

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/secret"
)

func testKey(tb testing.TB, s string) secret.Key {
	tb.Helper()
	k, err := secret.New([]byte(s))
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// commonBits returns how many leading bits a and b share.
func commonBits(a, b []byte) int {
	for i := range a {
		if x := a[i] ^ b[i]; x != 0 {
			n := i * 8
			for m := byte(0x80); x&m == 0; m >>= 1 {
				n++
			}
			return n
		}
	}
	return len(a) * 8
}

func addrBytes(a netip.Addr) []byte { return a.AsSlice() }

// TestAddressPseudonymsPreservePrefixes checks the permutation's defining
// property on random pairs that share prefixes of every length: the
// pseudonyms of two addresses share exactly as many leading bits as the
// addresses.
func TestAddressPseudonymsPreservePrefixes(t *testing.T) {
	p := newPseudonyms(testKey(t, "decision-log-pseudonym-test-key-0123456789"), nil)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{4, 16} {
		for range 2000 {
			a := make([]byte, size)
			for i := range a {
				a[i] = byte(rng.Uint32())
			}
			// b shares a's first k bits, then differs at bit k.
			k := rng.IntN(size * 8)
			b := make([]byte, size)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			for i := range k {
				m := byte(0x80) >> (i % 8)
				b[i/8] = b[i/8]&^m | a[i/8]&m
			}
			b[k/8] ^= (a[k/8] ^ b[k/8] ^ 0x80>>(k%8)) & (0x80 >> (k % 8))
			addrA, _ := netip.AddrFromSlice(a)
			addrB, _ := netip.AddrFromSlice(b)
			if addrA.Is4In6() || addrB.Is4In6() {
				continue // not an address a check carries: keys.IP unmaps it
			}
			pa, pb := p.ip(addrA), p.ip(addrB)
			if pa.BitLen() != addrA.BitLen() {
				t.Fatalf("pseudonym %v of %v changes the family", pa, addrA)
			}
			if got := commonBits(addrBytes(pa), addrBytes(pb)); got != k {
				t.Fatalf("%v and %v share %d bits; their pseudonyms %v and %v share %d", addrA, addrB, k, pa, pb, got)
			}
		}
	}
}

func TestPseudonymsDependOnTheKeyOnly(t *testing.T) {
	k1 := testKey(t, "decision-log-pseudonym-test-key-0123456789")
	k2 := testKey(t, "decision-log-pseudonym-test-key-9876543210")
	a, b, c := newPseudonyms(k1, nil), newPseudonyms(k1, keys.NewHasher(k1)), newPseudonyms(k2, nil)
	addrs := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}
	for _, addr := range addrs {
		if a.ip(addr) != b.ip(addr) {
			t.Errorf("%v: two logs with one key disagree", addr)
		}
		if a.ip(addr) == c.ip(addr) || a.ip(addr) == addr {
			t.Errorf("%v: pseudonym %v does not depend on the key (other key: %v)", addr, a.ip(addr), c.ip(addr))
		}
	}
	if a.account("alice") != b.account("alice") || a.account("alice") == c.account("alice") {
		t.Error("account pseudonyms do not depend on the key alone")
	}
	if a.recipient("+15550100000") != b.recipient("+15550100000") || a.recipient("+15550100000") == c.recipient("+15550100000") {
		t.Error("recipient pseudonyms do not depend on the key alone")
	}
}

func TestAddressPseudonymsAreAPermutation(t *testing.T) {
	p := newPseudonyms(testKey(t, "decision-log-pseudonym-test-key-0123456789"), nil)
	// Every address of a /20 maps to a distinct address of one /20.
	seen := map[netip.Addr]bool{}
	base := netip.MustParseAddr("203.0.112.0").As4()
	var prefix netip.Prefix
	for i := range 1 << 12 {
		a := base
		a[2] |= byte(i >> 8)
		a[3] = byte(i)
		q := p.ip(netip.AddrFrom4(a))
		if seen[q] {
			t.Fatalf("%v maps to %v, as another address did", netip.AddrFrom4(a), q)
		}
		seen[q] = true
		if i == 0 {
			prefix, _ = q.Prefix(20)
		} else if !prefix.Contains(q) {
			t.Fatalf("%v maps to %v, outside %v where the rest of its /20 went", netip.AddrFrom4(a), q, prefix)
		}
	}
}
