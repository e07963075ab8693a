package keys

import (
	"fmt"
	"net/netip"
	"strings"
)

// Network parses a network as an operator writes one in a list entry: an
// IPv4 or IPv6 prefix of any length ("198.51.100.0/24", "2001:db8::/32")
// or one address, which is the prefix of its full length. An IPv4-mapped
// IPv6 address or prefix is the IPv4 one it maps. A prefix with bits set
// past its length is refused, naming the prefix meant, so that an entry
// never covers more or less than its writer read; so are zones. The error
// wraps ErrInvalidIP.
func Network(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if len(s) > maxIPInput {
		return netip.Prefix{}, fmt.Errorf("%w: %q… is not a network", ErrInvalidIP, s[:maxEcho])
	}
	if !strings.Contains(s, "/") {
		a, err := IP(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%w: %q is neither a network like 198.51.100.0/24 nor an address", ErrInvalidIP, s)
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%w: %q is not a network like 198.51.100.0/24 or 2001:db8::/48", ErrInvalidIP, s)
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, fmt.Errorf("%w: %q has bits set past /%d: write %s", ErrInvalidIP, s, p.Bits(), m)
	}
	if a := p.Addr(); a.Is4In6() {
		if p.Bits() < 96 {
			return netip.Prefix{}, fmt.Errorf("%w: %q is shorter than the IPv4-mapped range ::ffff:0:0/96", ErrInvalidIP, s)
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p, nil
}
