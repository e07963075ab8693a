// Package loginlimits is what guardian enforces specifically for login and
// password reset, on top of the generic engine (rules → one batch of store
// ops → a decision). The engine asks it four things:
//
//   - Whose bucket a check counts on. The account's subject on key: account
//     rules, unless the check carries a valid device token for that account
//     (the OWASP device-cookie design): then a bucket of its own,
//     account+device, and no failure_rate challenge. A token for another
//     account, expired or forged, is ignored: the check is untrusted, never
//     an error. key: account+ip rules count the account together with the
//     client's address (IPv4) or /64 (IPv6): one source's guesses at one
//     account.
//   - What a success gives back. A check reserves on count: failures rate
//     rules and on consecutive_failures counters; a success report gives
//     back its own reservation and resets its own counters, and nothing
//     else: the failures an attacker spent on the account stay spent, so the
//     real user logging in never hands the attacker a fresh burst.
//   - Which device a success trusts: a success with an account earns a
//     device token (package tokens), bound to the account's subject and a
//     random device id, signed with a key derived for that purpose alone.
//   - How an account's hard stop is read and lifted. The NIST SP 800-63B
//     hard stop is a consecutive_failures rule with action block (built in:
//     login-hard-stop, 100). StatusRules and ReadStatus say where an
//     account stands; ResetKeys is what a verified reset clears. The count
//     is kept while idle for the rule's hold (90 days by default), and a
//     blocked check spends nothing, so only a reset, or a hold that runs
//     out, lifts a block.
//
// Failures through a trusted device count on the device's own subject: they
// slow, and at the hard stop block, that device alone, while the account's
// untrusted bucket and its other devices are untouched. A device's keys
// cannot be listed from the account, so an account reset leaves them to
// their hold; an auth service that sees a block on a check carrying a device
// token should drop that token, after which the device is untrusted and
// counts on the account's bucket like any other.
package loginlimits

import (
	"net/netip"
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// The kinds of subject this package hashes (keys.Hasher.Subject).
const (
	kindAccount   = "account"
	kindDevice    = "device"
	kindAccountIP = "account+ip"
)

// Pair prefixes: a key: account+ip rule counts an IPv4 client by its address
// and an IPv6 client by its /64, like key: ip rules by default.
const (
	pairIPv4Bits = 32
	pairIPv6Bits = 64
)

// Policy resolves the login side of checks and reports: accounts, trusted
// devices and the account+ip pair. A Policy is safe for concurrent use;
// build one with New.
type Policy struct {
	hasher  *keys.Hasher
	devices *tokens.Devices
	norm    *keys.Normalizer
}

// New returns a Policy normalising accounts with n (nil: the defaults),
// hashing subjects with h and issuing and verifying device tokens with d.
func New(h *keys.Hasher, d *tokens.Devices, n *keys.Normalizer) *Policy {
	return &Policy{hasher: h, devices: d, norm: n}
}

// Account is a check's account as login rules count it. The zero value is a
// check that names no account: no account rule applies to it.
type Account struct {
	// Subject is the hashed account, "" when the check names none. It is
	// what a device token is bound to.
	Subject string
	// Device is the id of a valid device token for the account, "" when the
	// check is untrusted.
	Device string

	norm   string // the normalised account, for account+ip
	bucket string // the subject of key: account rules
}

// Trusted reports whether the check carried a valid device token for its
// account.
func (a *Account) Trusted() bool { return a.Device != "" }

// Bucket is the subject key: account rules count the check by: the
// account+device subject of a trusted device, the account's subject
// otherwise, and "" without an account.
func (a *Account) Bucket() string { return a.bucket }

// Account resolves a check's account at instant now: account is normalised
// (keys.Normalizer.Account) and hashed, and deviceToken, when not empty, is verified
// for it. An invalid account is an error wrapping keys.ErrInvalidAccount; an
// invalid, expired or other account's device token is not an error, the
// check is untrusted. An empty account gives the zero Account, whatever the
// token.
func (p *Policy) Account(account, deviceToken string, now time.Time) (Account, error) {
	if account == "" {
		return Account{}, nil
	}
	norm, err := p.norm.Account(account)
	if err != nil {
		return Account{}, err
	}
	a := Account{norm: norm, Subject: p.hasher.Subject(kindAccount, norm)}
	a.bucket = a.Subject
	if deviceToken != "" {
		if dev, err := p.devices.Verify(deviceToken, a.Subject, now); err == nil {
			a.Device = dev
			a.bucket = p.hasher.Subject(kindDevice, a.Subject, dev)
		}
	}
	return a, nil
}

// AccountIP returns the subject key: account+ip rules count the check by:
// the account with the client's IPv4 address or IPv6 /64. It is the same
// for trusted and untrusted checks, and "" without an account.
func (p *Policy) AccountIP(a *Account, ip netip.Addr) string {
	if a.Subject == "" {
		return ""
	}
	return p.hasher.Subject(kindAccountIP, a.norm, keys.Prefix(ip, pairIPv4Bits, pairIPv6Bits).String())
}

// Subject returns the hashed subject of account, as Account does, for the
// calls that name an account without a check: status and reset.
func (p *Policy) Subject(account string) (string, error) {
	norm, err := p.norm.Account(account)
	if err != nil {
		return "", err
	}
	return p.hasher.Subject(kindAccount, norm), nil
}

// DeviceToken returns the device token a success report of at earns at
// instant now: a new device, trusted for the check's account. It returns ""
// when the check named no account.
func (p *Policy) DeviceToken(at *tokens.Attempt, now time.Time) (string, error) {
	if at.Account == "" {
		return "", nil
	}
	tok, _, err := p.devices.Issue(at.Account, now)
	if err != nil {
		return "", err
	}
	return tok, nil
}
