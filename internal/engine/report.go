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
// A failure keeps what the check reserved, its count in the global failure
// rate included. A success gives back what the check itself reserved on failure-counting
// rules, resets its consecutive-failure counts and trusts its device
// (package loginlimits), except on otp_send, where a success only means a
// code was sent (package otp).
func (e *Engine) Report(ctx context.Context, attemptID string, outcome Outcome) (ReportResult, error) {
	now := e.now()
	at, err := e.attempts.Open(attemptID, now)
	if err != nil {
		return ReportResult{}, err
	}
	// A success gives back what its check reserved in the same store call
	// that accepts the report, one round trip for both.
	var refunds []store.Settlement
	switch {
	case outcome == Success:
		refunds = at.Refunds
	case outcome == Failure:
		// A reported failure confirms what its check counted: kept for
		// longer than what only unreported checks left.
		refunds = loginlimits.Confirmations(&at)
	}
	// The mark outlives the id on every instance's clock, so that no
	// instance accepts the id again once the mark is gone.
	first, err := e.store.MarkOnce(ctx, keys.StoreKey(at.ID, "reported"), e.attempts.OnceTTL(), refunds...)
	if errors.Is(err, store.ErrFull) {
		// The bounded table that remembers reports found nothing it may
		// evict (the local fallback, holding hard stops alone); the store
		// applied the refunds all the same.
		// Recording the report beats refusing it: a success repeated
		// then gives back again, on keys that never go beyond full.
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
		// Counted as a failure by its check already.
		if at.HardStop && at.Account != "" && e.events != nil {
			e.events.HardStopStarted(at.Account)
		}
		return ReportResult{}, nil
	}
	if at.Counted {
		e.aggregate.GiveBack(at.Flow, at.Issued, 1)
	}
	if !settles(rules.Flow(at.Flow)) {
		return ReportResult{}, nil
	}
	tok, err := e.login.DeviceToken(&at, now)
	if err != nil {
		return ReportResult{}, fmt.Errorf("engine: device token: %w", err)
	}
	return ReportResult{DeviceToken: tok}, nil
}

// holdUnconfirmed caps each Counter and Guesses op's Hold at twice the
// attempt TTL: a count or a guess that only unreported checks made is kept
// that long past the last of them, and a failure report confirms it for
// longer (loginlimits.ConfirmedHold, guessHold).
func (e *Engine) holdUnconfirmed(ops []store.Op) {
	most := 2 * e.attempts.TTL()
	for i := range ops {
		switch l := ops[i].Limit.(type) {
		case store.Counter:
			if l.Hold > most {
				ops[i].Limit = store.Counter{Max: l.Max, Hold: most}
			}
		case store.Guesses:
			if l.Hold > most {
				ops[i].Limit = store.Guesses{Max: l.Max, Hold: most}
			}
		}
	}
}

// settles reports whether a success report of a check of flow settles it:
// gives back what the check reserved, resets its consecutive-failure counts
// and trusts its device. It is the one question the engine asks about a
// flow's success; the OTP flows' answer is package otp's (otp.Settles), and
// what a settling check reserves is package loginlimits' (Reservations).
func settles(flow rules.Flow) bool { return otp.Settles(flow) }

// reservations appends to dst what a success report of the check behind p
// and res gives back, nothing for a flow whose success settles nothing.
func reservations(dst []store.Settlement, flow rules.Flow, p *plan, res []store.Result) []store.Settlement {
	if !settles(flow) {
		return dst
	}
	return loginlimits.Reservations(dst, p.rules, p.ops, res)
}
