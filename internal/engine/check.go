package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/plan"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
)

// CheckRequest is one check as the auth service sent it. An empty string is
// an absent field.
type CheckRequest struct {
	Flow        rules.Flow
	Account     string
	IP          string
	Recipient   string
	DeviceToken string
	// SecretFingerprint is the auth service's keyed hash of the secret
	// the check guesses (CheckFingerprint); it is never stored or logged.
	SecretFingerprint string
	// Cost is the units the check spends on rate rules, 1 to rules.MaxCost;
	// 0 means 1.
	Cost int64
	// ChallengePassed is the auth service's word that the end user solved
	// a CAPTCHA or second factor for this attempt (trust.go).
	ChallengePassed bool
}

// Decision is the answer to a check.
type Decision struct {
	// Action is allow, challenge, slow or block.
	Action rules.Action
	// Rule is the enforced rule that decided; empty on allow.
	Rule string
	// RetryAfter is how long to wait on slow; zero otherwise.
	RetryAfter time.Duration
	// Degraded reports that the fallback decided at least one rule.
	Degraded bool
	// Trust is the bucket the check's key: account rules counted it in.
	Trust Trust
	// Limits are the enforced rate and consecutive-failure rules that applied.
	Limits []Limit
	// Shadow lists the shadow rules that would have slowed, blocked or
	// challenged the check.
	Shadow []ShadowTrip
	// AttemptID is set on allow and challenge, for the report.
	AttemptID string
	// Quota is the most constraining enforced rate rule, for the RateLimit
	// headers; nil when no rate rule applied.
	Quota *Quota
	// RepeatGuess reports that the account remembered the check's guess
	// as one of its last failed ones: the check spent nothing on the
	// account's own rules (guess.go).
	RepeatGuess bool
	// RepeatCapped reports that the guess was one of those, but the
	// account's free repeats for the day were spent: the check counted
	// like any failure (guess.go).
	RepeatCapped bool
}

// Limit is where one rule stands after a check.
type Limit struct {
	Rule      string
	Remaining int64
	Reset     time.Duration
}

// ShadowTrip is what a shadow rule would have decided.
type ShadowTrip struct {
	Rule       string
	Action     rules.Action
	RetryAfter time.Duration
}

// Quota describes a rate rule for the RateLimit and RateLimit-Policy headers.
type Quota struct {
	Rule string
	// Burst is the policy's quota; Window the time to refill all of it.
	Burst  int64
	Window time.Duration
	// Remaining and Reset are where the key stands after the check.
	Remaining int64
	Reset     time.Duration
}

// Check decides req: every applicable rule of its flow is evaluated in one
// store call; the check spends on every rule only if it is allowed (or
// challenged), and nothing anywhere otherwise. It normalises req with the
// engine's Normalizer (CheckRequest.Normalise) and decides it as Decide.
func (e *Engine) Check(ctx context.Context, req CheckRequest) (Decision, error) {
	ids, err := e.Normalise(&req)
	if err != nil {
		return Decision{}, err
	}
	return e.Decide(ctx, &req, &ids)
}

// Normalise validates req and returns its identifiers as the engine
// normalises them: what Decide takes, for a caller that needs them too.
func (e *Engine) Normalise(req *CheckRequest) (Identifiers, error) { return req.Normalise(e.norm) }

// Decide decides req, whose identifiers ids are req normalised by the
// engine (Normalise), as Check does: the check's plan (build) is evaluated
// in one store call, its results folded into the decision, and an allowed
// or challenged check sealed into an attempt id for its report. The check
// counts in the tenant ctx carries (keys.TenantOf): its account,
// recipient, account+ip and key: secret subjects are that tenant's, its
// address and global ones every tenant's. The deny and allow lists
// (Config.Lists) come first: a check a deny entry matches is blocked before
// any rule is evaluated, and one an allow entry matches skips the rules it
// exempts.
func (e *Engine) Decide(ctx context.Context, req *CheckRequest, ids *Identifiers) (Decision, error) {
	start, now := time.Now(), e.now()
	rs := e.ruleSet(now)
	m, denied := e.listed(ctx, ids, now)
	if denied {
		return e.denied(req.Flow, m.RetryAfter, start), nil
	}
	s := e.resolve(e.hasher.ForContext(ctx), req, ids, rs.set.Familiar, now)
	s.skip = m.Exempt
	p := plan.Get()
	defer p.Release()
	if err := e.build(p, rs, req.Flow, req.cost(), &s, false); err != nil {
		return Decision{}, err
	}
	if ops, res := p.Batch(); len(ops) > 0 {
		if err := e.store.Do(ctx, ops, res); err != nil {
			return Decision{}, fmt.Errorf("engine: store: %w", err)
		}
	}
	var d Decision
	e.decide(p, &s, &d)
	if d.Action.Severity() < rules.Slow.Severity() {
		id, err := e.attempt(p, rs, req, &s, now)
		if err != nil {
			return Decision{}, fmt.Errorf("engine: attempt id: %w", err)
		}
		d.AttemptID = id
	}
	if d.Action == "" {
		d.Action = rules.Allow
	}
	e.tally.Decided(d.Action, d.Rule)
	e.metrics.Decisions.WithLabelValues(string(req.Flow), string(d.Action)).Inc()
	if t := s.h.TenantName(); t != "" {
		if !e.tenants[t] {
			t = metrics.OtherTenants
		}
		e.metrics.TenantDecisions.WithLabelValues(t, string(d.Action)).Inc()
	}
	e.metrics.CheckDuration.WithLabelValues(string(req.Flow)).Observe(time.Since(start).Seconds())
	return d, nil
}

// cost is what the check spends on rate rules: its Cost, 1 when absent.
func (req *CheckRequest) cost() int64 {
	if req.Cost == 0 {
		return 1
	}
	return req.Cost
}

// globalRule applies a failure_rate rule, which the aggregate decides from
// its cached view without a store call. Trusted devices and passed
// challenges are exempt.
func (e *Engine) globalRule(r *rules.Rule, exempt bool, d *Decision) {
	if exempt {
		return
	}
	var buf [4]string
	flows := buf[:0]
	for _, f := range r.Flows {
		flows = append(flows, string(f))
	}
	inForce, _ := e.aggregate.InForce(r.Name, flows, r.Per, r.Limit, r.Hysteresis)
	g := e.metrics.FailureRateInForce.WithLabelValues(r.Name, string(r.Mode))
	if inForce {
		g.Set(1)
	} else {
		g.Set(0)
	}
	var tripped rules.Action
	if inForce {
		tripped = r.Action
	}
	if r.Mode == rules.Shadow {
		e.shadow.Record(r.Name, tripped, "global")
		if inForce {
			d.Shadow = append(d.Shadow, ShadowTrip{Rule: r.Name, Action: r.Action})
			e.metrics.RuleTrips.WithLabelValues(r.Name, string(rules.Shadow), string(r.Action)).Inc()
		}
		return
	}
	e.tally.Global(r.Name, inForce)
	if e.aggregate.Degraded() {
		// The fleet's rate is an estimate from this instance's own count.
		d.Degraded = true
	}
	if inForce {
		e.metrics.RuleTrips.WithLabelValues(r.Name, string(rules.Enforce), string(r.Action)).Inc()
		raise(d, r.Action, r.Name, 0)
	}
}

// decide folds what the store did with the check's plan p into d: the
// failure_rate rules first, decided by the global rate, then every rule's
// op that counted, in plan order, and the check's trust and repeated guess.
func (e *Engine) decide(p *plan.Plan, s *subjects, d *Decision) {
	familiar := p.Familiar()
	enforced := 0
	for i := range p.Entries() {
		en := &p.Entries()[i]
		switch {
		case en.Kind == plan.Global:
			e.globalRule(en.Rule, s.exempt(), d)
		case en.Kind == plan.Limit && en.Op.When.Counts(familiar) && en.Rule.Mode == rules.Enforce && en.Rule.Type != rules.Distinct:
			enforced++
		}
	}
	if enforced > 0 {
		d.Limits = make([]Limit, 0, enforced)
	}
	var quota Quota
	for i := range p.Entries() {
		en := &p.Entries()[i]
		rs := p.Result(en)
		if rs == nil {
			continue
		}
		if rs.Degraded {
			d.Degraded = true
		}
		if en.Kind == plan.Limit && en.Op.When.Counts(familiar) {
			e.decideRule(en, rs, &quota, d)
		}
	}
	if quota.Rule != "" {
		d.Quota = &quota
	}
	d.Trust = s.trust(p)
	d.RepeatGuess, d.RepeatCapped = repeatGuess(p)
}

// decideRule folds what the store found for en, the entry of a rule, into
// d, and its quota into q when it is the most constraining so far.
func (e *Engine) decideRule(en *plan.Entry, rs *store.Result, q *Quota, d *Decision) {
	r := en.Rule
	action := r.Action
	switch {
	case rs.Degraded && !rs.Allowed && r.OnStoreError == rules.Closed:
		action = rules.Slow
	case !rs.Allowed && r.Type == rules.ConsecutiveFailures && rs.RetryAfter > 0:
		// A count at its limit denies with no wait; one that denies
		// with a wait met a full store, not the hard stop: slow it,
		// never block an account for a table's size.
		action = rules.Slow
	}
	// An exempt check counts on the rule, which decides nothing for it.
	denied := !rs.Allowed && !en.Exempt
	retry := rs.RetryAfter
	if action == rules.Slow && retry == 0 && !rs.Allowed {
		// A slowing consecutive-failure count lifts when it is forgotten.
		retry = rs.ResetAfter
	}
	if action == rules.Block {
		retry = 0
	}
	if r.Mode == rules.Shadow {
		var tripped rules.Action
		var key string
		if denied {
			tripped, key = action, e.hasher.SubjectPseudonym(en.Subject)
			d.Shadow = append(d.Shadow, ShadowTrip{Rule: r.Name, Action: action, RetryAfter: retry})
			e.metrics.RuleTrips.WithLabelValues(r.Name, string(rules.Shadow), string(action)).Inc()
		}
		// Top keys are pseudonyms: a key: account rule's is the
		// account's, as audit lines and the console name it.
		e.shadow.Record(r.Name, tripped, key)
		return
	}
	if r.Type != rules.Distinct {
		// A distinct rule is neither a rate nor a count of failures.
		d.Limits = append(d.Limits, Limit{Rule: r.Name, Remaining: rs.Remaining, Reset: rs.ResetAfter})
	}
	if r.Type == rules.Rate && !en.Exempt {
		c := Quota{Rule: r.Name, Burst: r.Burst, Window: time.Duration(r.Burst) * r.Interval(), Remaining: rs.Remaining, Reset: rs.ResetAfter}
		if q.Rule == "" || c.Remaining < q.Remaining || (c.Remaining == q.Remaining && c.Reset > q.Reset) {
			*q = c
		}
	}
	if denied {
		e.metrics.RuleTrips.WithLabelValues(r.Name, string(rules.Enforce), string(action)).Inc()
		e.tally.Tripped(r.Name, action, en.Subject)
		raise(d, action, r.Name, retry)
	}
}

// raise makes action the decision if it is more severe than the current one,
// or as severe with a longer wait.
func raise(d *Decision, action rules.Action, rule string, retry time.Duration) {
	cur := d.Action.Severity()
	switch s := action.Severity(); {
	case s > cur:
	case s == cur && retry > d.RetryAfter:
	default:
		return
	}
	d.Action, d.Rule = action, rule
	d.RetryAfter = 0
	if action == rules.Slow {
		// A slow always names a wait; a rule that knows none (a failure
		// rate) asks for a second.
		d.RetryAfter = retry
		if retry <= 0 {
			d.RetryAfter = time.Second
		}
	}
}
