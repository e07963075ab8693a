// Package otp is what guardian enforces specifically for one-time codes: the
// otp_send flow (asked before a code is sent) and the otp_verify flow (asked
// before a code is checked). The engine asks it two things.
//
// Whom a check counts by. A recipient is where a code goes: a phone number
// in any common format or an e-mail address, normalised by
// keys.Normalizer.Recipient (phones to E.164 with libphonenumber's
// metadata, e-mail with its domain in IDNA form and without a sub-address),
// so that a new format is never a new bucket, and hashed.
// Anything else is an error wrapping keys.ErrInvalidRecipient, which the
// HTTP API answers 400 invalid_recipient. Limits per recipient stop SMS
// bombing of one number; limits per IP prefix on otp_send (a key: ip rule,
// not among the built-in rules) stop one source from burning the SMS budget
// across many numbers.
//
// An otp_send check must name its recipient (ErrNoRecipient). An otp_verify
// check should: verification failures are limited per recipient, and a
// verify check without one is limited by its IP rules only (the built-in
// rules have none for otp_verify).
//
// What a success settles. A success report of otp_send means a code went
// out, which proves nothing about who asked for it; it settles nothing: no
// reservation given back, no consecutive-failure count reset, no device
// token. In particular asking for a new code never resets the failures
// spent verifying earlier ones (NIST SP 800-63B rev. 4), even under rules
// that count both flows on one key. A success of otp_verify settles like
// any other: it gives back its own reservation only.
package otp

import (
	"errors"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/rules"
)

// ErrNoRecipient reports a check of a flow that needs a recipient
// (otp_send) without one.
var ErrNoRecipient = errors.New("otp: recipient required")

// kindRecipient is the kind of subject a recipient hashes to.
const kindRecipient = "recipient"

// Policy resolves the OTP side of checks. It is safe for concurrent use;
// build one with New.
type Policy struct {
	hasher *keys.Hasher
	norm   *keys.Normalizer
}

// New returns a Policy normalising recipients with n (nil: the defaults)
// and hashing them with h.
func New(h *keys.Hasher, n *keys.Normalizer) *Policy {
	return &Policy{hasher: h, norm: n}
}

// Recipient returns the subject key: recipient rules count a check of flow
// by: recipient normalised and hashed, or "" when the check names none. A
// flow that needs a recipient without one is ErrNoRecipient; a recipient
// that is not a phone number or an e-mail address is an error wrapping
// keys.ErrInvalidRecipient, whatever the flow.
func (p *Policy) Recipient(flow rules.Flow, recipient string) (string, error) {
	if recipient == "" {
		if NeedsRecipient(flow) {
			return "", ErrNoRecipient
		}
		return "", nil
	}
	norm, err := p.norm.Recipient(recipient)
	if err != nil {
		return "", err
	}
	return p.hasher.Subject(kindRecipient, norm), nil
}

// NeedsRecipient reports whether a check of flow must name a recipient:
// only otp_send, which cannot be limited per recipient otherwise.
func NeedsRecipient(flow rules.Flow) bool { return flow == rules.OTPSend }

// Settles reports whether a success report of a check of flow gives back
// the check's reservations, resets its consecutive-failure counts and
// trusts its device. Every flow does but otp_send: a sent code proves
// nothing about who asked for it.
func Settles(flow rules.Flow) bool { return flow != rules.OTPSend }
