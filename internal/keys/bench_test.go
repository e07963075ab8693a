package keys

import (
	"net/netip"
	"testing"
)

func BenchmarkAccount(b *testing.B) {
	for _, bc := range []struct{ name, in string }{
		{"ascii-normalised", "alice@example.com"},
		{"ascii-upper", "  Alice@Example.com "},
		{"unicode", "ＡＬＩＣＥ@Straße.example"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Account(bc.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRecipient(b *testing.B) {
	for _, bc := range []struct{ name, in string }{
		{"e164", "+15550100000"},
		{"formatted-phone", "+1 (555) 010-0000"},
		{"email", "alice@example.com"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Recipient(bc.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkIPPrefix(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		a, err := IP("2001:db8:aa:bb::1")
		if err != nil {
			b.Fatal(err)
		}
		_ = Prefix(a, 32, 64)
	}
}

func BenchmarkSubject(b *testing.B) {
	h := NewHasher(testKey(b, 1))
	b.Run("account", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = h.Subject("account", "alice@example.com")
		}
	})
	b.Run("account+ip", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = h.Subject("account+ip", "alice@example.com", "203.0.113.7/32")
		}
	})
	b.Run("prefix", func(b *testing.B) {
		p := netip.MustParsePrefix("2001:db8:aa:bb::/64")
		b.ReportAllocs()
		for b.Loop() {
			_ = h.KeySubject(Key{Kind: "ip", Net: p})
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = h.Subject("account", "alice@example.com")
			}
		})
	})
}

func BenchmarkStoreKey(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = StoreKey("AbCdEfGhIjKlMnOpQrStUv", "login-account")
	}
}
