// Package keys turns the identifiers of a check (accounts, recipients, client
// addresses) into guardian's keys: first normalised, so that case, Unicode
// compatibility forms, invisible characters or phone formatting cannot be
// used to get a fresh bucket, then hashed with a secret (Hasher), so that no
// account, address or phone number reaches the store or the logs in clear.
//
// Normalisation does not know which accounts exist: an unknown account is
// normalised and counted exactly like a known one.
package keys

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/nyaruka/phonenumbers"
)

// Errors returned by the normalisers. Each error they return wraps one of
// these and carries a reason fit to show a client. Account and recipient
// errors never contain the value itself.
var (
	ErrInvalidAccount   = errors.New("keys: invalid account")
	ErrInvalidRecipient = errors.New("keys: invalid recipient")
	ErrInvalidIP        = errors.New("keys: invalid ip")
	// ErrInvalidRegion reports a default region that is not an ISO 3166-1
	// alpha-2 code with phone numbering metadata.
	ErrInvalidRegion = errors.New("keys: invalid default region")
)

// maxIPInput bounds an address before parsing. The longest IP address text
// without a zone is 45 bytes.
const maxIPInput = 64

// maxEcho is how much of a bad IP is quoted back in an error.
const maxEcho = 64

// Options are a deployment's choices of how identifiers compare. The zero
// value is guardian's default.
type Options struct {
	// FoldAccents also removes combining marks from accounts after
	// decomposition, so "amélie" and "amelie" are one account: for auth
	// services whose user lookup ignores accents. Off by default.
	FoldAccents bool
	// DefaultRegion is the ISO 3166-1 alpha-2 region ("GB") a phone
	// number without an international prefix is dialled in. Empty: such a
	// number is read as an international number written without its "+".
	DefaultRegion string
}

// Normalizer normalises accounts and recipients with a deployment's
// Options. A nil *Normalizer normalises with the zero Options, as Account
// and Recipient do. A Normalizer is immutable and safe for concurrent use.
type Normalizer struct {
	opts Options
}

// NewNormalizer returns a Normalizer with o. The default region is
// accepted in either case and must be a region libphonenumber has
// numbering metadata for; anything else is an error wrapping
// ErrInvalidRegion.
func NewNormalizer(o Options) (*Normalizer, error) {
	if o.DefaultRegion != "" {
		r := strings.ToUpper(o.DefaultRegion)
		if len(r) != 2 || !phonenumbers.GetSupportedRegions()[r] {
			return nil, fmt.Errorf("%w: %q is not an ISO 3166-1 alpha-2 region with phone numbering metadata", ErrInvalidRegion, o.DefaultRegion)
		}
		o.DefaultRegion = r
	}
	return &Normalizer{opts: o}, nil
}

// options returns n's Options, the zero Options for a nil n.
func (n *Normalizer) options() Options {
	if n == nil {
		return Options{}
	}
	return n.opts
}

// Account normalises an account with the zero Options; see
// Normalizer.Account.
func Account(s string) (string, error) { return (*Normalizer)(nil).Account(s) }

// Recipient normalises a recipient with the zero Options; see
// Normalizer.Recipient.
func Recipient(s string) (string, error) { return (*Normalizer)(nil).Recipient(s) }

// IP parses a client address. Surrounding spaces are trimmed, zones (as in
// "fe80::1%eth0") are refused, and an IPv4-mapped IPv6 address is returned
// as the IPv4 address it carries, so it is counted as IPv4. The error quotes
// at most the first 64 bytes of the input.
func IP(s string) (netip.Addr, error) {
	s = strings.TrimSpace(s)
	if len(s) > maxIPInput {
		return netip.Addr{}, fmt.Errorf("%w: %q… is not an IP address", ErrInvalidIP, s[:maxEcho])
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%w: %q is not an IP address", ErrInvalidIP, s)
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%w: %q is not an IP address (zones are not allowed)", ErrInvalidIP, s)
	}
	return a.Unmap(), nil
}

// Prefix returns the network of a that a rule counts by: a masked to v4Bits
// for an IPv4 address, to v6Bits otherwise. An IPv6 address that carries an
// IPv4 address (Embedded4: IPv4-mapped, 6to4, NAT64, Teredo) counts as that IPv4
// address, so that a client cannot leave its IPv4 limits by writing its
// address another way. Bit counts outside 0 to 32 (IPv4) or 0 to 128 (IPv6)
// are clamped into range. The zero Addr gives the zero Prefix.
func Prefix(a netip.Addr, v4Bits, v6Bits int) netip.Prefix {
	a = Embedded4(a)
	bits := v6Bits
	if a.Is4() {
		bits = v4Bits
	}
	bits = min(max(bits, 0), a.BitLen())
	p, err := a.Prefix(bits)
	if err != nil {
		return netip.Prefix{}
	}
	return p
}

// The IPv6 prefixes that carry an IPv4 address: 6to4 (RFC 3056), whose /48
// 2002:AABB:CCDD::/48 is the IPv4 address A.B.C.D, the NAT64 well-known
// prefix (RFC 6052), 64:ff9b::/96, whose last 32 bits are the IPv4 address,
// and Teredo (RFC 4380), 2001::/32, whose last 32 bits are the client's
// public IPv4 address, each bit inverted. Without Teredo, a client on an
// IPv4 network a deny entry names would leave the entry, and its IPv4
// limits, through any Teredo server.
var (
	sixToFour = netip.MustParsePrefix("2002::/16")
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	teredo    = netip.MustParsePrefix("2001::/32")
)

// Embedded4 returns the IPv4 address a carries, when a is an IPv4-mapped,
// 6to4, NAT64 (well-known prefix) or Teredo IPv6 address, and a itself
// otherwise.
func Embedded4(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if !a.Is6() {
		return a
	}
	b := a.As16()
	switch {
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	case teredo.Contains(a):
		return netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
	}
	return a
}
