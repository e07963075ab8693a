// Package keys turns the identifiers of a check (accounts, recipients, client
// addresses) into guardian's keys: first normalised, so that case, Unicode
// compatibility forms or phone formatting cannot be used to get a fresh
// bucket, then hashed with a secret (Hasher), so that no account, address or
// phone number reaches the store or the logs in clear.
//
// Normalisation does not know which accounts exist: an unknown account is
// normalised and counted exactly like a known one.
package keys

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Errors returned by the normalisers. Each error they return wraps one of
// these and carries a reason fit to show a client. Account and recipient
// errors never contain the value itself.
var (
	ErrInvalidAccount   = errors.New("keys: invalid account")
	ErrInvalidRecipient = errors.New("keys: invalid recipient")
	ErrInvalidIP        = errors.New("keys: invalid ip")
)

// MaxAccountLen is the longest normalised account, in bytes.
const MaxAccountLen = 256

// maxAccountInput is the longest account input looked at: anything longer is
// rejected before any Unicode work, so a huge identifier is cheap to refuse.
// It leaves room for inputs that shrink under normalisation.
const maxAccountInput = 4 * MaxAccountLen

// MaxEmailLen is the longest e-mail recipient, in bytes (the longest
// address SMTP can carry).
const MaxEmailLen = 254

// maxRecipientInput bounds a recipient before any work, separators included.
const maxRecipientInput = 4 * MaxEmailLen

// Phone numbers are E.164: a country code and subscriber number of 8 to 15
// digits in all.
const (
	minPhoneDigits = 8
	maxPhoneDigits = 15
)

// maxIPInput bounds an address before parsing. The longest IP address text
// without a zone is 45 bytes.
const maxIPInput = 64

// maxEcho is how much of a bad IP is quoted back in an error.
const maxEcho = 64

var (
	errAccountEmpty   = fmt.Errorf("%w: empty", ErrInvalidAccount)
	errAccountLong    = fmt.Errorf("%w: longer than %d bytes", ErrInvalidAccount, MaxAccountLen)
	errAccountUTF8    = fmt.Errorf("%w: not valid UTF-8", ErrInvalidAccount)
	errAccountControl = fmt.Errorf("%w: contains a control character", ErrInvalidAccount)

	errRecipient      = fmt.Errorf("%w: not a phone number (8 to 15 digits) or an e-mail address", ErrInvalidRecipient)
	errEmailLong      = fmt.Errorf("%w: e-mail address longer than %d bytes", ErrInvalidRecipient, MaxEmailLen)
	errEmailMalformed = fmt.Errorf("%w: e-mail address must be local@domain, without spaces or control characters", ErrInvalidRecipient)
)

// Account returns the normalised form of an account identifier: surrounding
// Unicode space trimmed, NFKC, case-folded (full Unicode case folding, so
// "ALICE", "Alice" and fullwidth "ａｌｉｃｅ" are one account). It rejects an
// account that is empty after trimming, longer than MaxAccountLen bytes once
// normalised, not valid UTF-8 or holding a control character. Account is
// idempotent: Account of a result returns it unchanged.
func Account(s string) (string, error) {
	if len(s) > maxAccountInput {
		return "", errAccountLong
	}
	if out, ok := asciiAccount(s); ok {
		return checkAccount(out)
	}
	if !utf8.ValidString(s) {
		return "", errAccountUTF8
	}
	return checkAccount(foldAccount(s))
}

// asciiAccount is Account's fast path: for ASCII, NFKC changes nothing and
// case folding is lower-casing A to Z. It reports false when s holds
// anything else. Control characters are left for checkAccount to refuse.
func asciiAccount(s string) (string, bool) {
	upper := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return "", false
		}
		upper = upper || ('A' <= c && c <= 'Z')
	}
	s = strings.TrimSpace(s)
	if !upper {
		return s, true
	}
	return strings.ToLower(s), true
}

// foldAccount is the full normalisation of a valid UTF-8 account. Folding
// can leave a string that is no longer NFKC, and NFKC can turn a character
// into a space, so the steps are repeated until nothing changes; in practice
// that is at most two rounds, and the bound keeps the work finite.
func foldAccount(s string) string {
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	s = strings.TrimSpace(s)
	for range 4 {
		next := sc.round(s)
		if string(next) == s {
			break
		}
		s = string(next)
	}
	return s
}

// scratch is working space for normalising an account, reused through
// scratchPool so that a round of normalisation allocates nothing.
type scratch struct {
	nfkc, fold, out []byte
}

var scratchPool = sync.Pool{New: func() any {
	return &scratch{
		nfkc: make([]byte, 0, 2*maxAccountInput),
		fold: make([]byte, 0, 2*maxAccountInput),
		out:  make([]byte, 0, 2*maxAccountInput),
	}
}}

// round is one round of normalisation: NFKC, case folding, NFKC, and
// trimming. The result is only valid until the next call.
func (sc *scratch) round(s string) []byte {
	sc.nfkc = norm.NFKC.AppendString(sc.nfkc[:0], s)
	folded := sc.caseFold(sc.nfkc)
	sc.out = norm.NFKC.Append(sc.out[:0], folded...)
	return bytes.TrimSpace(sc.out)
}

// caseFold returns b case-folded, and b itself when that changes nothing.
// A cases.Caser is not safe for concurrent use, so each call builds its
// own; the folding Caser is stateless and building it costs nothing.
func (sc *scratch) caseFold(b []byte) []byte {
	fold := cases.Fold()
	if n, err := fold.Span(b, true); err == nil && n == len(b) {
		return b
	}
	n, _, err := fold.Transform(sc.fold[:cap(sc.fold)], b, true)
	if err != nil {
		// The scratch space is too small: only for inputs that grew a lot
		// under NFKC, and that are about to be refused as too long.
		return fold.Bytes(b)
	}
	sc.fold = sc.fold[:n]
	return sc.fold
}

// checkAccount applies Account's rules to a normalised account.
func checkAccount(s string) (string, error) {
	switch {
	case s == "":
		return "", errAccountEmpty
	case len(s) > MaxAccountLen:
		return "", errAccountLong
	case hasControl(s):
		return "", errAccountControl
	}
	return s, nil
}

// hasControl reports whether s holds a C0 or C1 control character.
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f {
			return true
		}
		if c >= utf8.RuneSelf {
			// Only the C1 controls U+0080 to U+009F are outside ASCII.
			for _, r := range s[i:] {
				if unicode.IsControl(r) {
					return true
				}
			}
			return false
		}
	}
	return false
}

// Recipient returns the normalised form of where a one-time code is sent.
// With an '@' it is an e-mail address: trimmed, lower-cased, exactly one
// '@' with a non-empty local part and domain, no space or control character,
// at most MaxEmailLen bytes. Otherwise it is a phone number: spaces, '-',
// '.', '(' and ')' are dropped, one leading '+' is allowed, and what remains
// must be 8 to 15 ASCII digits; the result is "+" and the digits (E.164,
// with no guessing of a country code). Errors never contain the value.
func Recipient(s string) (string, error) {
	if len(s) > maxRecipientInput {
		return "", errRecipient
	}
	if strings.IndexByte(s, '@') >= 0 {
		return email(s)
	}
	return phone(s)
}

// email normalises an e-mail recipient.
func email(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", errEmailMalformed
	}
	s = strings.ToLower(strings.TrimSpace(s))
	if len(s) > MaxEmailLen {
		return "", errEmailLong
	}
	at := strings.IndexByte(s, '@')
	if at <= 0 || at == len(s)-1 || strings.IndexByte(s[at+1:], '@') >= 0 {
		return "", errEmailMalformed
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return "", errEmailMalformed
		}
	}
	return s, nil
}

// phone normalises a phone recipient to E.164.
func phone(s string) (string, error) {
	var digits [1 + maxPhoneDigits]byte
	digits[0] = '+'
	n := 1
	plus := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case '0' <= c && c <= '9':
			if n == len(digits) {
				return "", errRecipient
			}
			digits[n] = c
			n++
		case c == ' ' || c == '-' || c == '.' || c == '(' || c == ')':
		case c == '+' && !plus && n == 1:
			plus = true
		default:
			return "", errRecipient
		}
	}
	if n-1 < minPhoneDigits {
		return "", errRecipient
	}
	if out := digits[:n]; string(out) == s {
		return s, nil // already E.164: no copy
	}
	return string(digits[:n]), nil
}

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
// IPv4 address (Embedded4: IPv4-mapped, 6to4, NAT64) counts as that IPv4
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
// 2002:AABB:CCDD::/48 is the IPv4 address A.B.C.D, and the NAT64 well-known
// prefix (RFC 6052), 64:ff9b::/96, whose last 32 bits are the IPv4 address.
var (
	sixToFour = netip.MustParsePrefix("2002::/16")
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
)

// Embedded4 returns the IPv4 address a carries, when a is an IPv4-mapped,
// 6to4 or NAT64 (well-known prefix) IPv6 address, and a itself otherwise.
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
	}
	return a
}
