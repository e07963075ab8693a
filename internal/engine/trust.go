package engine

import (
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/plan"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// Trust names the bucket a check's key: account rules counted it in, as
// every check answer says: nobody can lock a user out who is on a device,
// a network or behind a challenge that an attacker elsewhere does not share.
type Trust string

// The trusts of a check answer.
const (
	// TrustDevice is a valid device token's own bucket (account+device).
	TrustDevice Trust = "device"
	// TrustNetwork is a familiar network's own bucket (account+network).
	TrustNetwork Trust = "network"
	// TrustChallenge is the account's challenged bucket: the end user
	// passed a challenge.
	TrustChallenge Trust = "challenge"
	// TrustNone is the account's shared bucket.
	TrustNone Trust = "none"
)

// resolve returns the subjects of the check req whose identifiers are ids,
// hashed with h (its tenant's Hasher), at instant now under the familiar
// networks fam: it hashes the guess of
// its secret_fingerprint (the only place a fingerprint is read) and the
// account,
// verifies the device token for it (one that does not verify is ignored,
// never an error), and works out the account's other buckets: its
// challenged bucket when the end user passed a challenge (unless a device
// is trusted, which keeps its own bucket), under familiar networks its
// network's, which a success learns even on a trusted device, and the
// source its consecutive failures are attributed to.
func (e *Engine) resolve(h *keys.Hasher, req *CheckRequest, ids *Identifiers, fam rules.FamiliarNetworks, now time.Time) subjects {
	s := subjects{ids: *ids, h: h, passed: req.ChallengePassed}
	if req.SecretFingerprint != "" {
		s.ids.Guess = e.guesser.Guess(req.SecretFingerprint)
	}
	if ids.Account == "" {
		return s
	}
	s.account = h.KeySubject(accountKey(ids.Account))
	s.bucket = s.account
	if dev, bucket := e.login.Trust(s.account, req.DeviceToken, now); dev != "" {
		s.bucket, s.trusted = bucket, true
	}
	s.challenged = req.ChallengePassed && !s.trusted
	if fam.On() && ids.IP.IsValid() {
		s.member = e.login.Member(s.account, keys.Prefix(ids.IP, fam.IPv4Prefix, fam.IPv6Prefix))
	}
	if ids.IP.IsValid() {
		s.source = e.login.Source(s.account, ids.IP)
	}
	if s.ids.Guess != 0 {
		s.guess = e.guesser.AccountGuess(s.account, s.ids.Guess)
	}
	return s
}

// restore returns the subjects of the check behind at, as its attempt id
// sealed them: enough to rebuild what its report settles, in its tenant.
func (e *Engine) restore(at *tokens.Attempt) subjects {
	s := subjects{
		ids:        Identifiers{IP: at.IP, Guess: at.Guess},
		h:          e.hasher.Tenant(at.Tenant),
		account:    at.Account,
		bucket:     at.Account,
		challenged: at.Challenged,
		member:     at.Member,
		pair:       at.Pair,
		recipient:  at.Recipient,
	}
	if at.Bucket != "" {
		s.bucket, s.trusted = at.Bucket, true
	}
	if at.Guess != 0 && at.Account != "" {
		s.guess = e.guesser.AccountGuess(at.Account, at.Guess)
	}
	if at.IP.IsValid() && at.Account != "" {
		s.source = e.login.Source(at.Account, at.IP)
	}
	return s
}

// exempt reports whether the check is exempt from failure_rate challenges:
// a trusted device, or a passed challenge. A familiar network is not.
func (s *subjects) exempt() bool { return s.trusted || s.passed }

// trust returns the bucket the account rules counted the check of s in,
// given what the store did with its plan p.
func (s *subjects) trust(p *plan.Plan) Trust {
	switch {
	case s.trusted:
		return TrustDevice
	case s.member != "" && p.Familiar():
		return TrustNetwork
	case s.challenged:
		return TrustChallenge
	}
	return TrustNone
}
