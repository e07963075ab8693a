package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/loginlimits"
	"github.com/guardian-sec/guardian/internal/otp"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// Outcome is how a checked attempt went.
type Outcome string

// The outcomes of a report.
const (
	Success Outcome = "success"
	Failure Outcome = "failure"
)

// ReportResult is the answer to a report.
type ReportResult struct {
	// DeviceToken binds the reporting device to the account; set on a
	// success with an account, of any flow but otp_send.
	DeviceToken string
}

// Report records how the attempt behind attemptID went. Each attempt id is
// accepted once: a second report is ErrAlreadyReported and changes nothing.
// A failure keeps what the check reserved and feeds the global failure rate.
// A success gives back what the check itself reserved on failure-counting
// rules, resets its consecutive-failure counts and trusts its device
// (package loginlimits), except on otp_send, where a success only means a
// code was sent (package otp).
func (e *Engine) Report(ctx context.Context, attemptID string, outcome Outcome) (ReportResult, error) {
	now := e.now()
	at, err := e.attempts.Open(attemptID, now)
	if err != nil {
		return ReportResult{}, err
	}
	// A success that settles gives back what its check spent in the same
	// store call that accepts the report, one round trip for both.
	settles := outcome == Success && otp.Settles(rules.Flow(at.Flow))
	var refunds []store.Refund
	if settles {
		refunds = loginlimits.Refunds(&at)
	}
	first, err := e.store.MarkOnce(ctx, keys.StoreKey(at.ID, "reported"), tokens.AttemptTTL, refunds...)
	if errors.Is(err, store.ErrFull) {
		// The bounded table that remembers reports is full (the local
		// fallback during a long outage); the store gave back what it
		// could all the same. Recording the report beats refusing it: a
		// success repeated while the table stays full gives back again,
		// on keys that never go beyond full.
		first, err = true, nil
	}
	if err != nil {
		return ReportResult{}, fmt.Errorf("engine: store: %w", err)
	}
	if !first {
		return ReportResult{}, ErrAlreadyReported
	}
	e.metrics.Reports.WithLabelValues(string(outcome)).Inc()
	if outcome == Failure {
		e.aggregate.Add(at.Flow, 1)
		if at.HardStop && at.Account != "" && e.events != nil {
			e.events.HardStopStarted(at.Account)
		}
		return ReportResult{}, nil
	}
	if !settles {
		return ReportResult{}, nil
	}
	tok, err := e.login.DeviceToken(&at, now)
	if err != nil {
		return ReportResult{}, fmt.Errorf("engine: device token: %w", err)
	}
	return ReportResult{DeviceToken: tok}, nil
}
