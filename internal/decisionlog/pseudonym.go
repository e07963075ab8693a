package decisionlog

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/hex"
	"net/netip"
	"strconv"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/secret"
)

// Purposes of the keys derived from the signing key for the log alone.
const (
	addressPurpose = "guardian decision log addresses v1"
	padPurpose     = "guardian decision log address pads v1"
)

// pseudonyms turns a check's identifiers into the pseudonyms the log
// writes, keyed from the signing key: the same identifier always gives the
// same pseudonym under one key, so every instance of a fleet writes the same
// ones, and nobody without the key can tell what they stand for. A
// pseudonyms is safe for concurrent use.
type pseudonyms struct {
	hasher  *keys.Hasher
	guesser *keys.Guesser
	// block is AES-256 under a key of its own; pad4 and pad6 fill the
	// blocks of the address permutation.
	block      cipher.Block
	pad4, pad6 [aes.BlockSize]byte
}

// newPseudonyms returns the pseudonyms keyed from k, hashed with h (nil:
// a Hasher of k's own).
func newPseudonyms(k secret.Key, h *keys.Hasher) *pseudonyms {
	block, err := aes.NewCipher(k.Derive(addressPurpose))
	if err != nil {
		panic("decisionlog: " + err.Error()) // a 32-byte key is always valid
	}
	if h == nil {
		h = keys.NewHasher(k)
	}
	p := &pseudonyms{hasher: h, guesser: keys.NewGuesser(k), block: block}
	pads := k.Derive(padPurpose)
	copy(p.pad4[:], pads[:aes.BlockSize])
	copy(p.pad6[:], pads[aes.BlockSize:])
	return p
}

// forTenant returns the pseudonyms of the tenant name's identifiers: its
// accounts, recipients and secrets are its own (keys.Hasher.Tenant), its
// addresses every tenant's, its events the same whatever the tenant.
func (p *pseudonyms) forTenant(name string) *pseudonyms {
	if name == p.hasher.TenantName() {
		return p
	}
	t := *p
	t.hasher = p.hasher.Tenant(name)
	return &t
}

// account returns the pseudonym of a normalised account
// (keys.Hasher.Pseudonym), which a replay keeps as it is.
func (p *pseudonyms) account(norm string) string {
	return p.hasher.Pseudonym(keys.PseudonymAccount, norm)
}

// recipient returns the pseudonym of a normalised recipient, phone or
// e-mail alike (keys.Hasher.Pseudonym), which a replay accepts where a
// recipient is expected and keeps as it is.
func (p *pseudonyms) recipient(norm string) string {
	return p.hasher.Pseudonym(keys.PseudonymRecipient, norm)
}

// secret returns the pseudonym of a check's secret fingerprint: "h-" and 32
// lowercase hex digits of a keyed hash of the guess the engine counts the
// fingerprint by (keys.Guesser, itself a keyed hash of the fingerprint). So
// equal fingerprints have equal pseudonyms, whatever the account, and a
// replay counts key: secret rules and repeated guesses as production did;
// but testing a candidate password against a pseudonym takes the auth
// service's fingerprint key and the hash key both, as testing it against
// the store does (README, threat model).
func (p *pseudonyms) secret(fingerprint string) string {
	g := p.guesser.Guess(fingerprint)
	return "h-" + lowerHex(p.hasher.Subject("log-secret", strconv.FormatUint(g, 16)))
}

// event returns the event id of the check behind an attempt id: a report
// carries the same attempt id, so it names the same event.
func (p *pseudonyms) event(attemptID string) string {
	return p.hasher.Subject("log-event", attemptID)
}

// lowerHex re-encodes a subject (base64url) as lowercase hex, as a secret
// fingerprint must be.
func lowerHex(subject string) string {
	var raw [32]byte
	n, err := base64.RawURLEncoding.Decode(raw[:], []byte(subject))
	if err != nil {
		panic("decisionlog: a subject is not base64url: " + err.Error())
	}
	return hex.EncodeToString(raw[:n])
}

// ip returns the pseudonym of a client address: an address of the same
// family such that any two addresses share exactly as many leading bits as
// their pseudonyms do. So every grouping by prefix (an IPv4 /24 or /32, an
// IPv6 /48 or /64, whatever a rule's prefix) is the same on the pseudonyms
// as on the real addresses, and a replay with new prefixes groups as
// production would have.
//
// It is a keyed prefix-preserving permutation: bit i of the pseudonym is
// bit i of the address flipped by a pseudorandom bit of the address's
// first i bits (the first bit of the AES encryption of a block holding
// those bits, padded with a secret). Addresses sharing a prefix get the
// same flips along it and differ at the first bit where they differ.
// What it lets a reader of the log learn is that structure: which
// pseudonyms share a network, not which network.
func (p *pseudonyms) ip(a netip.Addr) netip.Addr {
	if a.Is4() {
		b := a.As4()
		p.permute(b[:], &p.pad4)
		return netip.AddrFrom4(b)
	}
	b := a.As16()
	p.permute(b[:], &p.pad6)
	return netip.AddrFrom16(b)
}

// permute applies the prefix-preserving permutation to addr in place.
func (p *pseudonyms) permute(addr []byte, pad *[aes.BlockSize]byte) {
	in := *pad
	var out [aes.BlockSize]byte
	var orig [16]byte
	copy(orig[:], addr)
	for i := range len(addr) * 8 {
		byteAt, bit := i/8, byte(0x80)>>(i%8)
		// in holds the first i bits of the address, then the pad.
		p.block.Encrypt(out[:], in[:])
		if out[0]&0x80 != 0 {
			addr[byteAt] ^= bit
		}
		in[byteAt] = in[byteAt]&^bit | orig[byteAt]&bit
	}
}
