// Package loginlimits is what guardian enforces specifically for login and
// password reset, on top of the generic engine (rules → one plan of store
// ops → a decision). It adds to a check's plan (package plan) and answers
// the engine on the rest:
//
//   - Whose bucket a check counts on. The account's subject on key: account
//     rules, unless the check carries a valid device token for that account
//     (the OWASP device-cookie design): then a bucket of its own,
//     account+device, and no failure_rate challenge (Trust). A token for
//     another account, expired or forged, is ignored: the check is
//     untrusted, never an error. An untrusted check counts in its passed
//     challenge's or its familiar network's bucket (Buckets.Add). key:
//     account+ip rules count the account together with the client's
//     address (IPv4) or /64 (IPv6): one source's guesses at one account.
//   - What a report settles (Settle, Learn). A check reserves on count:
//     failures rate rules and on consecutive_failures counters; a success
//     report gives back its own reservation and lifts the consecutive
//     failures made from its own address (Attribute; a trusted device's
//     count, its own, is reset), and nothing else: the failures an attacker
//     spent on the account stay spent, so the real user logging in never
//     hands the attacker a fresh burst or a fresh 100, from elsewhere or
//     from another address of the owner's network. A failure report
//     confirms the counts. A success also teaches the account its network.
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
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// kindDevice is the kind of subject a trusted device's bucket hashes to
// (keys.Hasher.Subject).
const kindDevice = "device"

// Policy resolves the login side of checks and reports: trusted devices and
// the tokens that make them. A Policy is safe for concurrent use; build one
// with New.
type Policy struct {
	hasher  *keys.Hasher
	devices *tokens.Devices
}

// New returns a Policy hashing device buckets with h and issuing and
// verifying device tokens with d.
func New(h *keys.Hasher, d *tokens.Devices) *Policy {
	return &Policy{hasher: h, devices: d}
}

// Trust verifies deviceToken for the account whose subject is account, at
// instant now. For a valid token it returns the token's device id and the
// bucket key: account rules count the check by instead of the account's
// own: the subject of the account and device together. An invalid, expired
// or other account's token is not an error: the check is untrusted, and
// Trust returns "", "". So does an empty token or account.
func (p *Policy) Trust(account, deviceToken string, now time.Time) (device, bucket string) {
	if account == "" || deviceToken == "" {
		return "", ""
	}
	dev, err := p.devices.Verify(deviceToken, account, now)
	if err != nil {
		return "", ""
	}
	return dev, p.hasher.Subject(kindDevice, account, dev)
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
