package client

import (
	"context"
	"errors"
	"fmt"
)

// ChallengeFunc puts a challenge to the end user (a CAPTCHA, a second
// factor) for the attempt d stopped, and reports whether it was passed. It
// is called only when guardian answers Challenge to a check that did not
// carry ChallengePassed. Within one request, it checks what the end user
// sent with the attempt (a CAPTCHA token, a one-time code); when they have
// sent nothing yet, it returns false, and the auth service answers with
// Responder.Refuse, which asks for the second factor.
type ChallengeFunc func(ctx context.Context, d Decision) (passed bool, err error)

// VerifyFunc verifies the credential of the attempt (or, for FlowOTPSend,
// sends the code) and reports whether it was right (sent). Client.Attempt
// calls it only for a decision that lets the attempt go ahead.
type VerifyFunc func(ctx context.Context) (ok bool, err error)

// AttemptResult is what Client.Attempt did.
type AttemptResult struct {
	// Decision is the decision that let the attempt go ahead, or the one
	// that stopped it: answer a stopped attempt with Responder.Refuse.
	Decision Decision
	// Verified reports that verify was called.
	Verified bool
	// OK is what verify returned: the credential was right.
	OK bool
	// DeviceToken is guardian's device token for a success with an
	// account: keep it on the device (an HttpOnly cookie) and send it
	// back as CheckRequest.DeviceToken.
	DeviceToken string
	// ReportErr is why the report did not reach guardian, or nil. guardian
	// then counts the attempt as a failure, the safe side; the end user is
	// not made to pay for it.
	ReportErr error
}

// Attempt is the whole flow of one attempt, in one call: check, then the
// challenge if guardian asks for one, then verify, then report.
//
//   - guardian answers Slow or Block (or the Policy does, while guardian
//     is down): Attempt verifies nothing and returns the decision.
//   - guardian answers Challenge: Attempt calls challenge. Not passed: it
//     returns the decision, unverified (the attempt stays unreported, which
//     guardian counts as a failure). Passed: it checks the attempt again
//     with ChallengePassed, which guardian counts in the account's
//     challenged bucket, and goes on with that decision.
//   - guardian answers Allow, or Challenge to a check that carried
//     ChallengePassed: Attempt calls verify, then reports its outcome (with
//     a context that outlives ctx's cancellation: the verification
//     happened) and returns the device token of a success.
//
// challenge and verify are required: code that has no answer to a challenge
// cannot use Attempt. A nil one is refused (ErrConfig) before anything is
// checked. Attempt returns an error, and nothing was verified, when Check
// returns one (a refused request); it returns challenge's or verify's own
// error, wrapped, when they fail.
//
// Against a guardian older than ChallengePassed (0.1.0, during a rolling
// upgrade), which refuses the field, a passed challenge lets the first
// check's attempt go ahead, as that release's contract says.
func (c *Client) Attempt(ctx context.Context, req CheckRequest, challenge ChallengeFunc, verify VerifyFunc) (AttemptResult, error) {
	if challenge == nil || verify == nil {
		return AttemptResult{}, fmt.Errorf("%w: Attempt needs a challenge and a verify function", ErrConfig)
	}
	d, err := c.Check(ctx, req)
	if err != nil {
		return AttemptResult{}, err
	}
	if d.Action == Challenge && !d.ChallengePassed {
		passed, err := challenge(ctx, d)
		if err != nil {
			return AttemptResult{Decision: d}, fmt.Errorf("client: challenge: %w", err)
		}
		if !passed {
			return AttemptResult{Decision: d}, nil
		}
		req.ChallengePassed = true
		again, err := c.Check(ctx, req)
		switch {
		case err == nil:
			d = again
		case refusedField(err):
			d.ChallengePassed = true
		default:
			return AttemptResult{Decision: d}, err
		}
	}
	res := AttemptResult{Decision: d}
	if !d.Proceed() {
		return res, nil
	}
	res.Verified = true
	if res.OK, err = verify(ctx); err != nil {
		return res, fmt.Errorf("client: verify: %w", err)
	}
	outcome := Failure
	if res.OK {
		outcome = Success
	}
	rep, err := c.Report(context.WithoutCancel(ctx), d.AttemptID, outcome)
	res.DeviceToken, res.ReportErr = rep.DeviceToken, err
	return res, nil
}

// refusedField reports whether err is guardian refusing a field it does not
// know: an older release, asked with a field of a newer one.
func refusedField(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == "unknown_field"
}
