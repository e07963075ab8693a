package keys

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/guardian-sec/guardian/internal/secret"
)

// fuzzHasher keys the subjects the fuzz tests compare.
var fuzzHasher = NewHasher(secret.Generate())

// ignorables are default-ignorable code points a variant may carry.
var ignorables = []string{"\u200b", "\u200c", "\u200d", "\u00ad", "\u2060", "\ufeff", "\ufe0f", "\u200e", "\u202e", "\U000e0100"}

// insertAt returns s with ins inserted at the rune boundary nearest before
// byte pos (modulo len(s)+1).
func insertAt(s string, pos uint, ins string) string {
	i := int(pos % uint(len(s)+1))
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + ins + s[i:]
}

// sameSubject fails unless a and b, normalised alike, give one subject.
func sameSubject(t *testing.T, kind, a, b string) {
	t.Helper()
	if fuzzHasher.Subject(kind, a) != fuzzHasher.Subject(kind, b) {
		t.Fatalf("%q and %q give different subjects", a, b)
	}
}

func FuzzAccount(f *testing.F) {
	for _, s := range []string{
		"alice", "ALICE@Example.com", "  ａｌｉｃｅ ", "\ufb01", "Straße", "ΣΑΣ", "İ", "\u0345",
		"\u203e", "ǅ", "\ufdfa", "a\x00b", "\xff", "", strings.Repeat("ß", 200),
		"ali\u200bce", "Ame\u0301lie", "\u0600x", "\u1fb3", "e\u200b\u0301",
	} {
		f.Add(s, uint(1), uint8(0))
	}
	accents := mustNormalizer(f, Options{FoldAccents: true})
	f.Fuzz(func(t *testing.T, in string, pos uint, pick uint8) {
		for _, n := range []*Normalizer{nil, accents} {
			got, err := n.Account(in)
			if err != nil {
				if !errors.Is(err, ErrInvalidAccount) {
					t.Fatalf("Account(%q) error %v does not wrap ErrInvalidAccount", in, err)
				}
				if got != "" {
					t.Fatalf("Account(%q) = %q with error %v", in, got, err)
				}
				continue
			}
			if got == "" || len(got) > MaxAccountLen {
				t.Fatalf("Account(%q) = %q: length %d out of bounds", in, got, len(got))
			}
			if strings.TrimSpace(got) != got || hasControl(got) || strings.ContainsFunc(got, defaultIgnorable) {
				t.Fatalf("Account(%q) = %q: untrimmed, control or ignorable character", in, got)
			}
			again, err := n.Account(got)
			if err != nil || again != got {
				t.Fatalf("Account(Account(%q)) = %q, %v; want %q", in, again, err, got)
			}
			// Variants that must be the same account: an invisible
			// character inserted, and the canonically equivalent forms.
			for _, v := range []string{insertAt(in, pos, ignorables[int(pick)%len(ignorables)]), norm.NFD.String(in), norm.NFC.String(in)} {
				if len(v) > maxAccountInput {
					continue
				}
				vk, err := n.Account(v)
				if err != nil || vk != got {
					t.Fatalf("Account(%q) = %q, %v; Account(%q) = %q, want the same", v, vk, err, in, got)
				}
				sameSubject(t, "account", got, vk)
			}
		}
	})
}

func FuzzRecipient(f *testing.F) {
	for _, s := range []string{
		"+1 (555) 010-0000", "1.555.010.0000", "+15550100000", "++15550100000", "1234567",
		"Alice@Example.com", "@x", "a@", "a@@b", "a b@c", "İ@x", "\xff@x", "(+33) 1 23 45 67 89",
		"+44 (0)20 7946 0958", "0044 20 7946 0958", "020 7946 0958", "011 44 20 7946 0958",
		"bob+1@ｅｘａｍｐｌｅ.com.", "a\uff20b@x", "a@[192.0.2.1]", "bob@exämple.com",
	} {
		f.Add(s, uint(3))
	}
	gb := mustNormalizer(f, Options{DefaultRegion: "GB"})
	us := mustNormalizer(f, Options{DefaultRegion: "US"})
	f.Fuzz(func(t *testing.T, in string, pos uint) {
		for _, n := range []*Normalizer{nil, gb, us} {
			got, err := n.Recipient(in)
			if err != nil {
				if !errors.Is(err, ErrInvalidRecipient) {
					t.Fatalf("Recipient(%q) error %v does not wrap ErrInvalidRecipient", in, err)
				}
				continue
			}
			if strings.Contains(got, "@") {
				if len(got) > MaxEmailLen || strings.Count(got, "@") != 1 || strings.ContainsFunc(got, unusable) {
					t.Fatalf("Recipient(%q) = %q: bad e-mail", in, got)
				}
			} else if d := strings.TrimPrefix(got, "+"); len(d) < minPhoneDigits || len(d) > maxPhoneDigits ||
				strings.Trim(d, "0123456789") != "" || (d == got && n.options().DefaultRegion != "") {
				t.Fatalf("Recipient(%q) = %q: not E.164 (nor, without a region, digits)", in, got)
			}
			again, err := n.Recipient(got)
			if err != nil || again != got {
				t.Fatalf("Recipient(Recipient(%q)) = %q, %v; want %q", in, again, err, got)
			}
			for _, v := range recipientVariants(in, got, pos) {
				vk, err := n.Recipient(v)
				if err != nil || vk != got {
					t.Fatalf("Recipient(%q) = %q, %v; Recipient(%q) = %q, want the same", v, vk, err, in, got)
				}
				sameSubject(t, "recipient", got, vk)
			}
		}
	})
}

// recipientVariants returns forms of in, which normalised to got, that
// must normalise alike: for a phone number, a separator inserted and the
// E.164 form behind 00; for an e-mail address, the domain's ASCII letters
// upper-cased and a trailing dot.
func recipientVariants(in, got string, pos uint) []string {
	if at := strings.LastIndexByte(in, '@'); at >= 0 {
		in = strings.TrimSpace(in)
		at = strings.LastIndexByte(in, '@')
		upper := strings.Map(func(r rune) rune {
			if 'a' <= r && r <= 'z' {
				return r - 'a' + 'A'
			}
			return r
		}, in[at+1:])
		return []string{in[:at+1] + upper + "."}
	}
	vs := []string{insertAt(in, pos, " ")}
	if strings.HasPrefix(got, "+") {
		vs = append(vs, "00"+got[1:], "+"+insertAt(got[1:], pos, "-"))
	}
	return vs
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
