package keys

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func FuzzAccount(f *testing.F) {
	for _, s := range []string{
		"alice", "ALICE@Example.com", "  ａｌｉｃｅ ", "\ufb01", "Straße", "ΣΑΣ", "İ", "\u0345",
		"\u203e", "ǅ", "\ufdfa", "a\x00b", "\xff", "", strings.Repeat("ß", 200),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := Account(in)
		if err != nil {
			if !errors.Is(err, ErrInvalidAccount) {
				t.Fatalf("Account(%q) error %v does not wrap ErrInvalidAccount", in, err)
			}
			if got != "" {
				t.Fatalf("Account(%q) = %q with error %v", in, got, err)
			}
			return
		}
		if got == "" || len(got) > MaxAccountLen {
			t.Fatalf("Account(%q) = %q: length %d out of bounds", in, got, len(got))
		}
		if strings.TrimSpace(got) != got || hasControl(got) {
			t.Fatalf("Account(%q) = %q: untrimmed or control character", in, got)
		}
		again, err := Account(got)
		if err != nil || again != got {
			t.Fatalf("Account(Account(%q)) = %q, %v; want %q", in, again, err, got)
		}
	})
}

func FuzzRecipient(f *testing.F) {
	for _, s := range []string{
		"+1 (555) 010-0000", "1.555.010.0000", "+15550100000", "++15550100000", "1234567",
		"Alice@Example.com", "@x", "a@", "a@@b", "a b@c", "İ@x", "\xff@x", "(+33) 1 23 45 67 89",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := Recipient(in)
		if err != nil {
			if !errors.Is(err, ErrInvalidRecipient) {
				t.Fatalf("Recipient(%q) error %v does not wrap ErrInvalidRecipient", in, err)
			}
			return
		}
		if strings.Contains(got, "@") {
			if len(got) > MaxEmailLen || strings.Count(got, "@") != 1 {
				t.Fatalf("Recipient(%q) = %q: bad e-mail", in, got)
			}
		} else if len(got) < 1+minPhoneDigits || len(got) > 1+maxPhoneDigits || got[0] != '+' ||
			strings.Trim(got[1:], "0123456789") != "" {
			t.Fatalf("Recipient(%q) = %q: not E.164", in, got)
		}
		again, err := Recipient(got)
		if err != nil || again != got {
			t.Fatalf("Recipient(Recipient(%q)) = %q, %v; want %q", in, again, err, got)
		}
	})
}

func FuzzIP(f *testing.F) {
	for _, s := range []string{
		"203.0.113.7", "::ffff:203.0.113.7", "2001:db8::1", "fe80::1%eth0", "300.1.1.1", "", " ::1 ",
		strings.Repeat("1", 100),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := IP(in)
		if err != nil {
			if !errors.Is(err, ErrInvalidIP) {
				t.Fatalf("IP(%q) error %v does not wrap ErrInvalidIP", in, err)
			}
			// At most 64 bytes of input are quoted, each at most 4 bytes once escaped.
			if len(err.Error()) > 100+4*maxEcho {
				t.Fatalf("IP(%q) error is %d bytes long", in, len(err.Error()))
			}
			return
		}
		if !got.IsValid() || got.Zone() != "" || got.Is4In6() {
			t.Fatalf("IP(%q) = %v: invalid, zoned or mapped", in, got)
		}
		again, err := IP(got.String())
		if err != nil || again != got {
			t.Fatalf("IP(IP(%q)) = %v, %v; want %v", in, again, err, got)
		}
		p := Prefix(got, 24, 64)
		if !p.Contains(got) || p != p.Masked() {
			t.Fatalf("Prefix(%v) = %v: does not contain it or is not masked", got, p)
		}
		if want := netip.PrefixFrom(got, got.BitLen()); Prefix(got, 32, 128) != want {
			t.Fatalf("Prefix(%v, 32, 128) = %v, want %v", got, Prefix(got, 32, 128), want)
		}
	})
}
