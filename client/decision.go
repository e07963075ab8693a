package client

import "time"

// Flow is the kind of attempt a check is about.
type Flow string

// The flows guardian decides.
const (
	// FlowLogin is a password login.
	FlowLogin Flow = "login"
	// FlowPasswordReset is a request to reset a password.
	FlowPasswordReset Flow = "password_reset"
	// FlowOTPSend is sending a one-time code; it needs a Recipient.
	FlowOTPSend Flow = "otp_send"
	// FlowOTPVerify is checking a one-time code.
	FlowOTPVerify Flow = "otp_verify"
)

// CheckRequest is what an auth service asks guardian before it verifies a
// credential or sends a code. Empty fields are left out of the request.
type CheckRequest struct {
	// Flow is required.
	Flow Flow
	// Account is the claimed identity, sent even when no such account
	// exists, so that the answer never reveals which accounts do.
	Account string
	// IP is the client address the auth service saw. Required.
	IP string
	// Recipient is where a code is sent; required for FlowOTPSend.
	Recipient string
	// DeviceToken is the token an earlier successful Report returned for
	// this account on this device.
	DeviceToken string
	// SecretFingerprint is Fingerprint(key, secret) of the secret about
	// to be verified (the password typed). With it guardian charges one
	// wrong password repeated once, not at every try, and counts one
	// password sprayed across accounts; the secret itself never leaves
	// the auth service.
	SecretFingerprint string
	// Cost is how many units the check spends on attempt-counting rules;
	// zero leaves it to guardian, which counts 1.
	Cost int
	// ChallengePassed says the end user solved a CAPTCHA or second factor
	// for this attempt: guardian counts the check in the account's
	// challenged bucket, so a human always has a way in.
	ChallengePassed bool
	// PasswordSHA1 is PasswordSHA1(password) of the password about to be
	// verified: guardian's answer then says in Decision.Breached whether
	// its breached-password filter holds it, the decision unchanged. It is
	// sent only when set (guardian 0.1.0 refuses the field); the password
	// itself never leaves the auth service.
	PasswordSHA1 string
}

// Action is what guardian (or the Policy, when guardian did not answer)
// decided about an attempt.
type Action string

// The actions, from least to most severe.
const (
	// Allow: go ahead and verify.
	Allow Action = "allow"
	// Challenge: go ahead only after a CAPTCHA or a second factor.
	Challenge Action = "challenge"
	// Slow: do not verify now; try again after Decision.RetryAfter.
	Slow Action = "slow"
	// Block: hard stop until the account is reset through a verified
	// channel.
	Block Action = "block"
)

// valid reports whether a is one of the four actions.
func (a Action) valid() bool {
	switch a {
	case Allow, Challenge, Slow, Block:
		return true
	}
	return false
}

// Proceed reports whether a is Allow.
//
// Deprecated: use Decision.Proceed, which also knows whether a Challenge
// was already passed. In 0.1.0 Proceed was also true for Challenge, so code
// that verified whenever it was true skipped every challenge.
func (a Action) Proceed() bool { return a == Allow }

// answeredOK reports whether guardian answers a with 200 (the decisions
// that let an attempt go ahead, at once or after a challenge) rather than
// 429.
func (a Action) answeredOK() bool { return a == Allow || a == Challenge }

// Decision is the answer to a check. The zero value is not a decision;
// Check always returns one with Action set, unless it returns an error.
type Decision struct {
	// Action is what to do with the attempt.
	Action Action
	// Rule is the rule that decided; empty on Allow. Decisions the Local
	// policy made name RuleLocalAccount or RuleLocalIP.
	Rule string
	// RetryAfter is how long to wait on Slow; zero otherwise.
	RetryAfter time.Duration
	// AttemptID is what to pass to Report. guardian sets it on Allow and
	// Challenge; the Local policy sets one of its own; it is empty when
	// there is nothing to report.
	AttemptID string
	// Degraded reports that guardian decided at least one rule from its
	// own store fallback.
	Degraded bool
	// RepeatGuess reports that the check's SecretFingerprint was one of
	// the account's last failed ones: the check cost the account nothing.
	// The secret must be verified all the same.
	RepeatGuess bool
	// RepeatCapped reports that it was one of them, but the account's free
	// repeats for the day (20) were spent: the check counted like any
	// failure. Answer the end user alike either way.
	RepeatCapped bool
	// Trust is the bucket guardian's account rules counted the check in:
	// "device", "network", "challenge" or "none"; empty when guardian did
	// not answer.
	Trust string
	// Limits are where guardian's enforced rules stand after the check.
	// They are for the auth service's logs and metrics, never for the end
	// user.
	Limits []Limit
	// Shadow lists the shadow rules that would have slowed, blocked or
	// challenged the check.
	Shadow []ShadowResult
	// Unavailable reports that guardian did not answer and the client's
	// Policy decided; Reason says why guardian did not answer.
	Unavailable bool
	// Reason is why guardian did not answer; empty when Unavailable is
	// false.
	Reason Reason
	// RateLimitPolicy and RateLimit are the RateLimit-Policy and RateLimit
	// headers exactly as guardian sent them (IETF httpapi ratelimit-headers
	// draft); empty when guardian sent none.
	RateLimitPolicy, RateLimit string
	// ChallengePassed reports that the check carried
	// CheckRequest.ChallengePassed: the end user already solved the
	// challenge for this attempt, so a Challenge lets it go ahead.
	ChallengePassed bool
	// Breached is guardian's answer to CheckRequest.PasswordSHA1: whether
	// its breached-password filter holds the password. nil is "unknown",
	// never "not breached": the check carried no PasswordSHA1, guardian
	// has no filter that can answer, or the Policy decided.
	Breached *bool
}

// Proceed reports whether the auth service may go on to verify the
// credential (or send the code): true for Allow, and for a Challenge of a
// check that carried ChallengePassed (the challenge was passed, then the
// attempt checked again); false for Slow, Block and a Challenge not yet
// passed. Client.Attempt makes that re-check itself.
func (d Decision) Proceed() bool {
	return d.Action == Allow || (d.Action == Challenge && d.ChallengePassed)
}

// Limit is where one of guardian's enforced rules stands after a check.
type Limit struct {
	// Rule is the rule's name.
	Rule string
	// Remaining is the whole units left.
	Remaining int64
	// Reset is how long until the rule's key is back to full.
	Reset time.Duration
}

// ShadowResult is what a shadow rule would have decided on its own.
type ShadowResult struct {
	// Rule is the shadow rule's name.
	Rule string
	// Action is what it would have decided.
	Action Action
	// RetryAfter is the wait it would have given.
	RetryAfter time.Duration
}

// Outcome is how a checked attempt went, for Report.
type Outcome string

// The outcomes.
const (
	// Success: the credential was right.
	Success Outcome = "success"
	// Failure: the credential was wrong.
	Failure Outcome = "failure"
)

// ReportResult is guardian's answer to a report.
type ReportResult struct {
	// DeviceToken binds the reporting device to the account; guardian sets
	// it on a success with an account. Keep it on the device (an HttpOnly
	// cookie) and send it back as CheckRequest.DeviceToken, so the owner's
	// device keeps a budget of its own while someone fails against the
	// account. It is empty when the report was not sent to guardian.
	DeviceToken string
}

// AccountStatus is where an account stands in guardian (admin scope).
type AccountStatus struct {
	// ConsecutiveFailures is the account's count of failures, for checks
	// from networks it is not familiar with, that no success from their
	// own address lifted.
	ConsecutiveFailures int64
	// Blocked reports that the hard stop is in force for those checks:
	// only ResetAccount lifts it.
	Blocked bool
	// NextAllowed is how long until an untrusted check of the account could
	// be allowed; zero when one could be now.
	NextAllowed time.Duration
	// Limits are where the account's rules stand.
	Limits []Limit
	// RememberedGuesses is how many failed secret fingerprints guardian
	// remembers for the account (at most 3, for 24 hours each).
	RememberedGuesses int64
	// Networks are the account's familiar networks, each as a check from
	// there without a device token finds its own count.
	Networks []NetworkStatus
}

// NetworkStatus is where an account stands for checks from one of its
// familiar networks.
type NetworkStatus struct {
	// Network is the network's pseudonym ("h-" and 22 characters).
	Network string
	// ConsecutiveFailures is the network's own count.
	ConsecutiveFailures int64
	// Blocked reports that checks from the network without a device token
	// are at its hard stop.
	Blocked bool
}
