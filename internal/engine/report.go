package engine

import (
	"context"
	"fmt"

	"github.com/guardian-sec/guardian/internal/keys"
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
	// success with an account.
	DeviceToken string
}

// Report records how the attempt behind attemptID went. Each attempt id is
// accepted once: a second report is ErrAlreadyReported and changes nothing.
// A success gives back what the check reserved on failure-counting rules and
// resets its consecutive-failure counts; a failure keeps them and feeds the
// global failure rate.
func (e *Engine) Report(ctx context.Context, attemptID string, outcome Outcome) (ReportResult, error) {
	now := e.now()
	at, err := e.attempts.Open(attemptID, now)
	if err != nil {
		return ReportResult{}, err
	}
	first, err := e.store.MarkOnce(ctx, keys.StoreKey(at.ID, "reported"), tokens.AttemptTTL)
	if err != nil {
		return ReportResult{}, fmt.Errorf("engine: store: %w", err)
	}
	if !first {
		return ReportResult{}, ErrAlreadyReported
	}
	e.metrics.Reports.WithLabelValues(string(outcome)).Inc()
	if outcome == Failure {
		e.aggregate.Add(at.Flow, 1)
		return ReportResult{}, nil
	}

	if len(at.Refunds) > 0 {
		refunds := make([]store.Refund, len(at.Refunds))
		for i, r := range at.Refunds {
			refunds[i] = store.Refund{Key: r.Key, Kind: store.Rate, Amount: r.Amount, Local: at.Fallback}
			if r.Counter {
				refunds[i].Kind = store.Counter
			}
		}
		if err := e.store.Refund(ctx, refunds); err != nil {
			return ReportResult{}, fmt.Errorf("engine: store: %w", err)
		}
	}
	var out ReportResult
	if at.Account != "" {
		tok, _, err := e.devices.Issue(at.Account, now)
		if err != nil {
			return ReportResult{}, fmt.Errorf("engine: device token: %w", err)
		}
		out.DeviceToken = tok
	}
	return out, nil
}
