package lists

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

// benchIndex returns an index of n entries: deny entries on /24s, /32s and
// IPv6 /48s, and allow entries on /16s, none expiring before now.
func benchIndex(n int) *index {
	exp := t0.Add(time.Hour)
	entries := make([]*Entry, 0, n)
	for i := range n {
		var e Entry
		switch i % 4 {
		case 0:
			e = Entry{List: Deny, Network: netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", i>>8&255, i&255)), ExpiresAt: exp}
		case 1:
			e = Entry{List: Deny, Network: netip.MustParsePrefix(fmt.Sprintf("172.16.%d.%d/32", i>>8&255, i&255)), ExpiresAt: exp}
		case 2:
			e = Entry{List: Deny, Network: netip.MustParsePrefix(fmt.Sprintf("2001:db8:%x::/48", i)), ExpiresAt: exp}
		default:
			e = Entry{List: Allow, Network: netip.MustParsePrefix(fmt.Sprintf("100.%d.%d.0/24", i>>8&255, i&255)), Exempt: []string{"login-ip"}}
		}
		entries = append(entries, &e)
	}
	return newIndex(entries)
}

// BenchmarkMatch matches one check's address against 10,000 entries: one
// that no entry names, one an allow entry exempts, one a deny entry blocks,
// and an IPv6 one.
func BenchmarkMatch(b *testing.B) {
	ix := benchIndex(10_000)
	none := func() string { return "" }
	for _, ip := range []string{"192.0.2.1", "100.0.7.2", "10.0.4.9", "2001:db8:6::1"} {
		a := netip.MustParseAddr(ip)
		b.Run(ip, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ix.match(a, none, t0)
			}
		})
	}
}

// BenchmarkMatchEmpty is the cost of the lists to a check when none are
// in force.
func BenchmarkMatchEmpty(b *testing.B) {
	a := netip.MustParseAddr("192.0.2.1")
	none := func() string { return "" }
	b.ReportAllocs()
	for b.Loop() {
		emptyIndex.match(a, none, t0)
	}
}
