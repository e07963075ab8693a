// Package otp is what guardian enforces specifically for one-time codes: the
// otp_send flow (asked before a code is sent) and the otp_verify flow (asked
// before a code is checked). The engine asks it two things.
//
// Whom a check counts by. A recipient is where a code goes: a phone number
// in any common format or an e-mail address, normalised by keys.Recipient
// (phones to E.164 with separators and parentheses dropped, e-mail trimmed
// and lower-cased), so that a new format is never a new bucket, and hashed
// by the engine's resolver with every other key.
// Anything else is an error wrapping keys.ErrInvalidRecipient, which the
// HTTP API answers 400 invalid_recipient. Limits per recipient stop SMS
// bombing of one number; limits per IP prefix on otp_send (a key: ip rule,
// not among the built-in rules) stop one source from burning the SMS budget
// across many numbers.
//
// An otp_send check must name its recipient (NeedsRecipient). An otp_verify
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

import "github.com/guardian-sec/guardian/internal/rules"

// NeedsRecipient reports whether a check of flow must name a recipient:
// only otp_send, which cannot be limited per recipient otherwise.
func NeedsRecipient(flow rules.Flow) bool { return flow == rules.OTPSend }

// Settles reports whether a success report of a check of flow gives back
// the check's reservations, resets its consecutive-failure counts and
// trusts its device. Every flow does but otp_send: a sent code proves
// nothing about who asked for it.
func Settles(flow rules.Flow) bool { return flow != rules.OTPSend }
