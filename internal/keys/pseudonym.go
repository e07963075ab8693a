package keys

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Pseudonym kinds: what a pseudonym stands for. A pseudonym of one kind
// never equals one of another kind for the same value.
const (
	PseudonymAccount   = "account"
	PseudonymRecipient = "recipient"
	PseudonymNetwork   = "network"
)

// pseudonymLen is the length of a pseudonym: "h-" and SubjectLen
// characters.
const pseudonymLen = 2 + SubjectLen

// Pseudonym returns the one name guardian gives a normalised identifier
// wherever it must name one without revealing it (audit lines, the decision
// log, shadow top keys, lists, the console, webhooks): "h-" and SubjectLen
// characters of unpadded base64url, a keyed hash under the hash key. Every
// instance sharing the hash key gives one identifier the same pseudonym;
// nobody without the key can tell which identifier it names.
//
// It is SubjectPseudonym of the subject of the identifier's key: an
// account's (AccountKey), a recipient's (kind "recipient"), a network's (a
// prefix or an address, as key: ip rules count it). So what guardian knows
// by the subject alone (a hard stop, a rule's top key) gets the same name.
// A tenant's Hasher gives accounts and recipients pseudonyms of the
// tenant's own, since their subjects are; networks are every tenant's, as
// key: ip rules are (tenant.go).
func (h *Hasher) Pseudonym(kind, norm string) string {
	return h.SubjectPseudonym(h.KeySubject(pseudonymKey(kind, norm)))
}

// SubjectPseudonym returns the pseudonym of a hashed subject (KeySubject):
// "h-" and SubjectLen characters of base64url. A subject already names its
// tenant, so every tenant's Hasher gives it the same pseudonym.
func (h *Hasher) SubjectPseudonym(subject string) string {
	return "h-" + h.Tenant("").Subject("pseudonym", subject)
}

// pseudonymKey returns the key whose subject names an identifier of kind:
// a network is a key: ip rule's key of the prefix (an address is its
// longest prefix), anything else a key of its kind.
func pseudonymKey(kind, norm string) Key {
	if kind == PseudonymNetwork {
		if p, err := netip.ParsePrefix(norm); err == nil {
			return Key{Kind: "ip", Net: p.Masked()}
		}
		if a, err := netip.ParseAddr(norm); err == nil {
			return Key{Kind: "ip", Net: netip.PrefixFrom(a, a.BitLen())}
		}
	}
	return Key{Kind: kind, ID: norm}
}

// IsPseudonym reports whether s has the shape of a pseudonym: "h-" and
// SubjectLen base64url characters.
func IsPseudonym(s string) bool {
	if len(s) != pseudonymLen || s[:2] != "h-" {
		return false
	}
	for i := 2; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// ErrUnknownKind is the error of a pseudonym asked of a kind that is none
// of PseudonymAccount, PseudonymRecipient and PseudonymNetwork.
var ErrUnknownKind = errors.New("keys: unknown pseudonym kind")

// PseudonymOf returns the pseudonym of value, an identifier of kind as a
// caller writes it: an account or a recipient normalised with n (nil: the
// defaults) as a check's is, a network an IP address or a prefix in CIDR
// notation (masked). An invalid value is an error wrapping
// ErrInvalidAccount, ErrInvalidRecipient or ErrInvalidIP.
func (h *Hasher) PseudonymOf(n *Normalizer, kind, value string) (string, error) {
	var norm string
	var err error
	switch kind {
	case PseudonymAccount:
		norm, err = n.Account(value)
	case PseudonymRecipient:
		norm, err = n.Recipient(value)
	case PseudonymNetwork:
		norm, err = network(value)
	default:
		return "", fmt.Errorf("%w: %q", ErrUnknownKind, kind)
	}
	if err != nil {
		return "", err
	}
	return h.Pseudonym(kind, norm), nil
}

// network returns s, an address or a prefix, as a masked prefix's text.
func network(s string) (string, error) {
	addr, bits, cut := strings.Cut(strings.TrimSpace(s), "/")
	a, err := IP(addr)
	if err != nil {
		return "", err
	}
	if !cut {
		return netip.PrefixFrom(a, a.BitLen()).String(), nil
	}
	p, err := netip.ParsePrefix(a.String() + "/" + bits)
	if err != nil {
		return "", fmt.Errorf("%w: %q is not a network", ErrInvalidIP, s)
	}
	return p.Masked().String(), nil
}
