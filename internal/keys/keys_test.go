package keys

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestAccount(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"lower ascii unchanged", "alice@example.com", "alice@example.com"},
		{"upper ascii folded", "ALICE@Example.com", "alice@example.com"},
		{"spaces trimmed", "  alice \t\n", "alice"},
		{"unicode spaces trimmed", "\u00a0\u3000alice\u2003", "alice"},
		{"fullwidth letters", "ａｌｉｃｅ", "alice"},
		{"fullwidth upper letters and signs", "ＡＬＩＣＥ＠ＥＸＡＭＰＬＥ．ＣＯＭ", "alice@example.com"},
		{"fi ligature", "\ufb01nance", "finance"},
		{"kelvin sign", "\u212aate", "kate"},
		{"german sharp s folds to ss", "Straße", "strasse"},
		{"capital sharp s folds to ss", "STRA\u1e9eE", "strasse"},
		{"greek final sigma", "ΣΑΣ", "σασ"},
		{"greek final sigma lower", "σας", "σασ"},
		{"turkish dotted capital I keeps its dot", "İstanbul", "i\u0307stanbul"},
		{"turkish dotless i is its own letter", "ıstanbul", "ıstanbul"},
		{"composed and decomposed e-acute agree", "Ame\u0301lie", "amélie"},
		{"precomposed e-acute", "AMÉLIE", "amélie"},
		{"inner space kept", "Alice Smith", "alice smith"},
		{"exactly MaxAccountLen", strings.Repeat("a", MaxAccountLen), strings.Repeat("a", MaxAccountLen)},
		{"long input that shrinks is fine", " " + strings.Repeat("A", MaxAccountLen) + strings.Repeat(" ", 300), strings.Repeat("a", MaxAccountLen)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Account(tt.in)
			if err != nil {
				t.Fatalf("Account(%q) error = %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("Account(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestAccountRejects(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"only spaces", " \t\u3000 "},
		{"MaxAccountLen+1", strings.Repeat("a", MaxAccountLen+1)},
		{"grows past MaxAccountLen when folded", strings.Repeat("ß", 129)},
		{"grows past MaxAccountLen under NFKC", strings.Repeat("\ufdfa", 20)},
		{"one megabyte", strings.Repeat("a", 1<<20)},
		{"NUL inside", "ali\x00ce"},
		{"tab inside", "ali\tce"},
		{"DEL inside", "ali\x7fce"},
		{"C1 control inside", "ali\u0085ce"},
		{"invalid UTF-8", "ali\xffce"},
		{"truncated UTF-8", "alic\xc3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Account(tt.in)
			if !errors.Is(err, ErrInvalidAccount) {
				t.Fatalf("Account(%.40q) = %q, %v; want ErrInvalidAccount", tt.in, got, err)
			}
			if got != "" {
				t.Errorf("Account(%.40q) returned %q with its error", tt.in, got)
			}
		})
	}
}

func TestAccountErrorsDoNotEchoInput(t *testing.T) {
	for _, in := range []string{"SECRETUSER\x00", strings.Repeat("SECRETUSER", 30), "SECRET\xff"} {
		_, err := Account(in)
		if err == nil {
			t.Fatalf("Account(%.40q) accepted", in)
		}
		if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "secret") {
			t.Errorf("error %q echoes the account", err)
		}
	}
}

func TestAccountHugeInputIsCheap(t *testing.T) {
	huge := strings.Repeat("ａ", 1<<20)
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := Account(huge); !errors.Is(err, ErrInvalidAccount) {
			t.Fatalf("err = %v, want ErrInvalidAccount", err)
		}
	})
	if allocs != 0 {
		t.Errorf("rejecting a 3 MB account allocated %v times, want 0", allocs)
	}
}

func TestAccountASCIIFastPathMatchesFullNormalisation(t *testing.T) {
	// Every printable ASCII character, in every position that matters.
	var b strings.Builder
	for c := byte(0x20); c < 0x7f; c++ {
		b.WriteByte(c)
	}
	all := b.String()
	for _, in := range []string{all, " " + all + " ", "ABC", "abc", " x ", "Z", "@", "\t\x00A"} {
		fast, ok := asciiAccount(in)
		if !ok {
			t.Fatalf("asciiAccount(%q) refused ASCII", in)
		}
		if slow := foldAccount(in, false); fast != slow {
			t.Errorf("asciiAccount(%q) = %q, full normalisation gives %q", in, fast, slow)
		}
	}
}

func TestAccountIsIdempotent(t *testing.T) {
	for _, in := range []string{"ALICE", "Straße", "ＡＬＩＣＥ", "\ufb01", "ΣΑΣ", "İ", "\u0345", "\u203e", "ǅ"} {
		once, err := Account(in)
		if err != nil {
			t.Fatalf("Account(%q) error = %v", in, err)
		}
		twice, err := Account(once)
		if err != nil || twice != once {
			t.Errorf("Account(Account(%q)) = %q, %v; want %q", in, twice, err, once)
		}
	}
}

func TestRecipient(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"e164 unchanged", "+15550100000", "+15550100000"},
		{"parentheses spaces dashes", "+1 (555) 010-0000", "+15550100000"},
		{"dots without plus", "1.555.010.0000", "+15550100000"},
		{"surrounding spaces", "  +44 20 7946 0000 ", "+442079460000"},
		{"plus after separators", "(+33) 1 23 45 67 89", "+33123456789"},
		{"fictional 555-01xx range", "+1 555 010 0199", "+15550100199"},
		{"italian leading zero kept", "+39 06 1234 5678", "+390612345678"},
		{"no prefix, not a possible number: its digits", "12345678", "12345678"},
		{"no prefix, fifteen digits: its digits", "123456789012345", "123456789012345"},
		{"e-mail lower-cased", "Alice@Example.COM", "alice@example.com"},
		{"e-mail trimmed", " \talice@example.com\n", "alice@example.com"},
		{"e-mail with unicode", "ÉLODIE@exemple.fr", "élodie@exemple.fr"},
		{"e-mail punycode domain unchanged", "bob@xn--exmple-cua.com", "bob@xn--exmple-cua.com"},
		{"e-mail unicode domain to punycode", "bob@exämple.com", "bob@xn--exmple-cua.com"},
		{"e-mail address literal kept", "bob@[192.0.2.1]", "bob@[192.0.2.1]"},
		{"e-mail plus only at the start is not a sub-address", "+bob@example.com", "+bob@example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Recipient(tt.in)
			if err != nil {
				t.Fatalf("Recipient(%q) error = %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("Recipient(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestRecipientRejects(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"spaces", "   "},
		{"seven digits", "+1234567"},
		{"local-only length for its country", "+1 555 0100"},
		{"no such country code", "+999 1234 5678"},
		{"too long for its country", "+44 20 7946 09580"},
		{"00 and no such country code", "00999 1234 5678"},
		{"zero as a country code", "+0 20 7946 0958"},
		{"twenty-one digits", "0000 0000 0000 0000 00001"},
		{"sixteen digits", "+1234567890123456"},
		{"letters", "+1555CALLNOW"},
		{"double plus", "++15550100000"},
		{"plus in the middle", "1555+0100000"},
		{"trailing plus", "15550100000+"},
		{"tab separator", "+1\t5550100000"},
		{"slash separator", "+1/5550100000"},
		{"non-ascii digits", "+١٥٥٥٠١٠٠٠٠٠"},
		{"fullwidth digits", "+１５５５０１００００"},
		{"e-mail without local part", "@example.com"},
		{"e-mail without domain", "alice@"},
		{"e-mail two at signs", "alice@@example.com"},
		{"e-mail at in domain", "alice@ex@ample.com"},
		{"e-mail with inner space", "alice smith@example.com"},
		{"e-mail with control", "alice\x00@example.com"},
		{"e-mail with unicode space", "alice\u00a0x@example.com"},
		{"e-mail invalid UTF-8", "alic\xff@example.com"},
		{"e-mail too long", strings.Repeat("a", 250) + "@b.co"},
		{"e-mail too long once its domain is encoded", "a@" + strings.Repeat("äx.", 70) + "de"},
		{"e-mail only invisible local part", "\u200b@example.com"},
		{"e-mail fullwidth at sign in local part", "a\uff20b@example.com"},
		{"e-mail local part hiding a space", "a\u00a8b@example.com"},
		{"e-mail domain of dots", "alice@..."},
		{"e-mail unicode domain IDNA refuses", "alice@exa\u2488mple.com"},
		{"huge", strings.Repeat("1", 1<<20)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Recipient(tt.in)
			if !errors.Is(err, ErrInvalidRecipient) {
				t.Fatalf("Recipient(%.40q) = %q, %v; want ErrInvalidRecipient", tt.in, got, err)
			}
			if got != "" {
				t.Errorf("Recipient(%.40q) returned %q with its error", tt.in, got)
			}
		})
	}
}

func TestRecipientErrorsDoNotEchoInput(t *testing.T) {
	for _, in := range []string{"+1555SECRET", "SECRET@", "SECRET @x.y", strings.Repeat("SECRET", 100) + "@x.y"} {
		_, err := Recipient(in)
		if err == nil {
			t.Fatalf("Recipient(%.40q) accepted", in)
		}
		if strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "secret") {
			t.Errorf("error %q echoes the recipient", err)
		}
	}
	_, err := Recipient("12")
	if got, want := err.Error(), "keys: invalid recipient: not a phone number (8 to 15 digits) or an e-mail address"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
}

func TestIP(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want netip.Addr
	}{
		{"ipv4", "203.0.113.7", netip.MustParseAddr("203.0.113.7")},
		{"ipv4 with spaces", " 203.0.113.7\n", netip.MustParseAddr("203.0.113.7")},
		{"ipv6", "2001:db8::1", netip.MustParseAddr("2001:db8::1")},
		{"ipv6 upper case", "2001:DB8::1", netip.MustParseAddr("2001:db8::1")},
		{"ipv4-mapped ipv6 is ipv4", "::ffff:203.0.113.7", netip.MustParseAddr("203.0.113.7")},
		{"ipv4-mapped ipv6 in hex", "::ffff:cb00:7107", netip.MustParseAddr("203.0.113.7")},
		{"loopback", "::1", netip.IPv6Loopback()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := IP(tt.in)
			if err != nil {
				t.Fatalf("IP(%q) error = %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("IP(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestIPRejects(t *testing.T) {
	tests := []struct {
		in      string
		wantMsg string
	}{
		{"300.1.1.1", `keys: invalid ip: "300.1.1.1" is not an IP address`},
		{"", `keys: invalid ip: "" is not an IP address`},
		{"fe80::1%eth0", `keys: invalid ip: "fe80::1%eth0" is not an IP address (zones are not allowed)`},
		{"203.0.113.7:80", `keys: invalid ip: "203.0.113.7:80" is not an IP address`},
		{"1.2.3", `keys: invalid ip: "1.2.3" is not an IP address`},
		{"01.2.3.4", `keys: invalid ip: "01.2.3.4" is not an IP address`},
		{"203.0.113.0/24", `keys: invalid ip: "203.0.113.0/24" is not an IP address`},
		{strings.Repeat("1", 100), `keys: invalid ip: "` + strings.Repeat("1", 64) + `"… is not an IP address`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := IP(tt.in)
			if !errors.Is(err, ErrInvalidIP) {
				t.Fatalf("IP(%q) = %v, %v; want ErrInvalidIP", tt.in, got, err)
			}
			if err.Error() != tt.wantMsg {
				t.Errorf("IP(%q) error = %q, want %q", tt.in, err, tt.wantMsg)
			}
		})
	}
}

func TestPrefix(t *testing.T) {
	tests := []struct {
		name   string
		addr   string
		v4, v6 int
		want   string
	}{
		{"ipv4 /32", "203.0.113.7", 32, 64, "203.0.113.7/32"},
		{"ipv4 /24", "203.0.113.7", 24, 64, "203.0.113.0/24"},
		{"ipv6 /64", "2001:db8:1:2:3:4:5:6", 32, 64, "2001:db8:1:2::/64"},
		{"ipv6 /48", "2001:db8:1:2:3:4:5:6", 32, 48, "2001:db8:1::/48"},
		{"mapped counts as ipv4", "::ffff:203.0.113.7", 24, 64, "203.0.113.0/24"},
		{"6to4 counts as its ipv4", "2002:c000:0201::1", 32, 64, "192.0.2.1/32"},
		{"6to4, any host and subnet", "2002:c000:0201:ffff:1:2:3:4", 24, 48, "192.0.2.0/24"},
		{"nat64 counts as its ipv4", "64:ff9b::192.0.2.33", 32, 64, "192.0.2.33/32"},
		{"nat64 outside the /96 is ipv6", "64:ff9b:1::c000:221", 32, 64, "64:ff9b:1::/64"},
		// RFC 4380's example: client 192.0.2.45 behind server 65.54.227.120.
		{"teredo counts as its client's ipv4", "2001:0:4136:e378:8000:63bf:3fff:fdd2", 32, 64, "192.0.2.45/32"},
		{"teredo of another server, same client", "2001:0:c633:6401:0:1:3fff:fdd2", 24, 48, "192.0.2.0/24"},
		{"2002 outside 6to4's /16 is ipv6", "2003:c000:0201::1", 32, 48, "2003:c000:201::/48"},
		{"ipv4 bits clamped high", "203.0.113.7", 99, 64, "203.0.113.7/32"},
		{"ipv6 bits clamped low", "2001:db8::1", 32, -5, "::/0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Prefix(netip.MustParseAddr(tt.addr), tt.v4, tt.v6)
			if got.String() != tt.want {
				t.Errorf("Prefix(%s, %d, %d) = %v, want %s", tt.addr, tt.v4, tt.v6, got, tt.want)
			}
		})
	}
	if got := Prefix(netip.Addr{}, 32, 64); got.IsValid() {
		t.Errorf("Prefix(zero Addr) = %v, want the zero Prefix", got)
	}
}

func TestPrefixGroupsOneIPv6Network(t *testing.T) {
	a := Prefix(netip.MustParseAddr("2001:db8:aa:bb::1"), 32, 64)
	b := Prefix(netip.MustParseAddr("2001:db8:aa:bb:ffff:ffff:ffff:ffff"), 32, 64)
	c := Prefix(netip.MustParseAddr("2001:db8:aa:bc::1"), 32, 64)
	if a != b {
		t.Errorf("two addresses in one /64 gave %v and %v", a, b)
	}
	if a == c {
		t.Errorf("addresses in different /64s both gave %v", a)
	}
}
