package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/otp"
	"github.com/guardian-sec/guardian/internal/plan"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// Outcome is how a checked attempt went: rules.Outcome, named here too for
// the engine's callers, who report outcomes to it.
type Outcome = rules.Outcome

// The outcomes of a report (rules.Success, rules.Failure).
const (
	Success = rules.Success
	Failure = rules.Failure
)

// ReportResult is the answer to a report.
type ReportResult struct {
	// DeviceToken binds the reporting device to the account; set on a
	// success with an account, of any flow but otp_send.
	DeviceToken string
}

// Report records how the attempt behind attemptID went. Each attempt id is
// accepted once: a second report is ErrAlreadyReported and changes nothing.
// The report settles what the check spent, as the check's plan says
// (build, package plan), in the store call that accepts it: a failure keeps
// what the check reserved and confirms its counts, its count in the global
// failure rate included; a success gives back what the check itself
// reserved on failure-counting rules, lifts the consecutive failures made
// from its own address (or resets its device's), learns its network and
// trusts its device (package loginlimits),
// except on otp_send, where a success only means a code was sent (package
// otp). A check decided by rules this instance does not know settles
// nothing (see settlements). Only a report in the check's own tenant (ctx,
// keys.TenantOf) is accepted: any other is ErrOtherTenant, and changes
// nothing.
func (e *Engine) Report(ctx context.Context, attemptID string, outcome Outcome) (ReportResult, error) {
	now := e.now()
	at, err := e.attempts.Open(attemptID, now)
	if err != nil {
		return ReportResult{}, err
	}
	if at.Tenant != keys.TenantOf(ctx) {
		return ReportResult{}, ErrOtherTenant
	}
	p := plan.Get()
	defer p.Release()
	settlements, known, err := e.settlements(p, &at, outcome == Success, now)
	if err != nil {
		return ReportResult{}, err
	}
	// The mark outlives the id on every instance's clock, so that no
	// instance accepts the id again once the mark is gone.
	first, err := e.store.MarkOnce(ctx, keys.StoreKey(at.ID, "reported"), e.attempts.OnceTTL(), settlements...)
	if errors.Is(err, store.ErrFull) {
		// The bounded table that remembers reports found nothing it may
		// evict (the local fallback, holding hard stops alone); the store
		// applied the settlements all the same.
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
	if !known {
		e.unsettled(at.Rules, now)
	}
	if outcome == Failure {
		// Counted as a failure by its check already.
		if at.HardStop && at.Account != "" && e.events != nil {
			e.events.HardStopStarted(at.Tenant, at.Account)
		}
		return ReportResult{}, nil
	}
	if at.Counted {
		e.aggregate.GiveBack(at.Flow, at.Issued, 1)
	}
	if !otp.Settles(rules.Flow(at.Flow)) {
		return ReportResult{}, nil
	}
	if at.Bucket != "" && deviceKept(ctx) {
		// The caller keeps the device token its check verified.
		return ReportResult{}, nil
	}
	tok, err := e.login.DeviceToken(&at, now)
	if err != nil {
		return ReportResult{}, fmt.Errorf("engine: device token: %w", err)
	}
	return ReportResult{DeviceToken: tok}, nil
}

type keepDeviceKey struct{}

// KeepDevice returns ctx for a report whose caller keeps the device token
// its check carried: a success of a check that token made trusted (Trust
// device) then issues no new one, and ReportResult.DeviceToken is empty.
// A success of any other check issues one as always. The gateway reports
// so while the cookie it has is far from its expiry: signing a token is
// a visible part of a proxied login's cost.
func KeepDevice(ctx context.Context) context.Context {
	return context.WithValue(ctx, keepDeviceKey{}, true)
}

func deviceKept(ctx context.Context) bool {
	kept, _ := ctx.Value(keepDeviceKey{}).(bool)
	return kept
}

// settlements rebuilds in p the plan of the check behind at, by the rules
// that decided it, and returns what a report of it settles: on a success
// if success is set, on a failure otherwise. It reports whether it knew
// those rules: an attempt whose rules this instance does not know (another
// instance reloaded first, this one restarted on other rules, or they were
// replaced longer ago than an attempt lives) settles nothing, so that its
// report, still accepted once, never gives back more than its check spent.
func (e *Engine) settlements(p *plan.Plan, at *tokens.Attempt, success bool, now time.Time) ([]store.Settlement, bool, error) {
	rs := e.ruleSet(now)
	if rs.hash != at.Rules {
		if rs = e.history.lookup(at.Rules); rs == nil {
			return nil, false, nil
		}
	}
	s := e.restore(at)
	if err := e.build(p, rs, rules.Flow(at.Flow), at.Cost, &s, true); err != nil {
		return nil, true, fmt.Errorf("engine: attempt: %w", err)
	}
	settlements := p.Settlements(success, at.Spent, at.Familiar)
	for i := range settlements {
		settlements[i].Local = at.Fallback
	}
	return settlements, true, nil
}

// unsettled records a report accepted without settling, its check decided
// by the rules of hash, which this instance does not know: it counts in
// guardian_reports_unsettled_total, and is logged the first time a hash
// is met.
func (e *Engine) unsettled(hash string, now time.Time) {
	e.metrics.UnsettledReports.Inc()
	if e.history.missed(hash) {
		e.log.Warn("report of a check decided by rules this instance does not know: accepted, nothing settled",
			"rules_hash", hash, "rules_hash_in_force", e.ruleSet(now).hash)
	}
}

// attempt records the check req, which the plan p allowed (or challenged)
// under rs at instant now, and returns its attempt id: it counts the check
// in its flow's global failure rate when a failure_rate rule applies, and
// seals the check's subjects and trust as s holds them, the mask of its
// plan's spent entries, and of its subjects those a spent entry is keyed
// by, never a store key (tokens.Attempt).
func (e *Engine) attempt(p *plan.Plan, rs *ruleSet, req *CheckRequest, s *subjects, now time.Time) (string, error) {
	at := tokens.Attempt{
		Issued:     now,
		Rules:      rs.hash,
		Flow:       string(req.Flow),
		Cost:       req.cost(),
		Spent:      p.Spent(),
		Account:    s.account,
		Member:     s.member,
		Guess:      s.ids.Guess,
		Challenged: s.challenged,
		Familiar:   p.Familiar(),
		Tenant:     s.h.TenantName(),
		// The check counts in its flow's global failure rate now, as a
		// reserved failure: a success report takes it back, and a check
		// never reported (a challenge abandoned) stays counted.
		Counted: p.Has(plan.Global),
	}
	if s.trusted {
		at.Bucket = s.bucket
	}
	for i := range p.Entries() {
		en := &p.Entries()[i]
		r := p.Result(en)
		if r == nil || !r.Spent {
			continue
		}
		at.Fallback = at.Fallback || r.Degraded
		at.HardStop = at.HardStop || hardStop(en, r)
		if en.Bit == plan.NoBit || en.Rule == nil {
			continue
		}
		switch en.Rule.Key {
		case rules.KeyAccountIP:
			at.Pair = s.pair
		case rules.KeyRecipient:
			at.Recipient = s.recipient
		case rules.KeyIP:
			at.IP = s.ids.IP
		}
		if en.Success.Action == store.Lift {
			// The report lifts what the check's source spent.
			at.IP = s.ids.IP
		}
	}
	if at.Counted {
		e.aggregate.Add(at.Flow, 1)
	}
	return e.attempts.Seal(at)
}

// hardStop reports whether the spend r of en took an account to its hard
// stop: an enforced, blocking consecutive-failure count at its limit.
func hardStop(en *plan.Entry, r *store.Result) bool {
	rule := en.Rule
	return en.Kind == plan.Limit && rule.Mode == rules.Enforce && rule.Type == rules.ConsecutiveFailures &&
		rule.Action == rules.Block && r.Remaining == 0
}
