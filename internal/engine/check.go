package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/tokens"
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
	// Cost is the units the check spends on rate rules, 1 to MaxCost;
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
// challenged), and nothing anywhere otherwise.
func (e *Engine) Check(ctx context.Context, req CheckRequest) (Decision, error) {
	start := time.Now()
	ids, err := req.Normalise(e.norm)
	if err != nil {
		return Decision{}, err
	}
	cost := req.Cost
	if cost == 0 {
		cost = 1
	}
	now := e.now()
	if req.SecretFingerprint != "" {
		ids.Guess = e.guesser.Guess(req.SecretFingerprint)
	}
	set := e.rules.Load()
	subj := e.resolve(ids, &req, set.Familiar, now)
	if ids.Guess != 0 && subj.account != "" {
		subj.guess = e.guesser.AccountGuess(subj.account, ids.Guess)
	}

	p := getPlan()
	defer p.release()
	var d Decision
	global := false
	for _, r := range set.For(req.Flow) {
		if r.Type == rules.FailureRate {
			e.globalRule(r, subj.exempt(&req), &d)
			global = true
			continue
		}
		if err := subj.add(p, e.hasher, r, cost); err != nil {
			return Decision{}, err
		}
	}
	addGuess(p, req.Flow, &subj)
	e.holdUnconfirmed(p.ops)
	res := p.results()
	if len(p.ops) > 0 {
		if err := e.store.Do(ctx, p.ops, res); err != nil {
			return Decision{}, fmt.Errorf("engine: store: %w", err)
		}
	}
	e.decide(p, res, &d)
	if g := guessOf(p, res); g != nil {
		d.RepeatGuess = g.Repeat
	}
	d.Trust = subj.trust(p, res)
	if d.Action.Severity() < rules.Slow.Severity() {
		at := tokens.Attempt{
			Issued:  now,
			Flow:    string(req.Flow),
			Account: subj.account,
			Device:  subj.device,
			// The check counts in its flow's global failure rate now, as
			// a reserved failure: a success report takes it back, and a
			// check never reported (a challenge abandoned) stays counted.
			Counted: global,
		}
		for i, r := range p.rules {
			if res[i].Degraded && res[i].Spent {
				at.Fallback = true
			}
			if r != nil && res[i].Spent && res[i].Remaining == 0 && r.Mode == rules.Enforce && r.Type == rules.ConsecutiveFailures && r.Action == rules.Block {
				at.HardStop = true
			}
		}
		p.refunds = reservations(p.refunds[:0], req.Flow, p, res)
		p.refunds = guessRefund(p.refunds, p)
		p.refunds = subj.learn(p.refunds, req.Flow, set)
		at.Refunds = p.refunds
		id, err := e.attempts.Seal(at)
		if err != nil {
			return Decision{}, fmt.Errorf("engine: attempt id: %w", err)
		}
		d.AttemptID = id
		if global {
			e.aggregate.Add(at.Flow, 1)
		}
	}
	if d.Action == "" {
		d.Action = rules.Allow
	}
	e.metrics.Decisions.WithLabelValues(string(req.Flow), string(d.Action)).Inc()
	e.metrics.CheckDuration.WithLabelValues(string(req.Flow)).Observe(time.Since(start).Seconds())
	return d, nil
}

// plan is the batch of store ops one check evaluates, with the rule and
// subject behind each op (the ops may end with one more, on the account's
// memory of guesses, which no rule is behind: addGuess), and room for the store's results and the check's
// reservations. Plans are reused through a pool, so a check allocates none:
// nothing a check returns points into its plan, and a store keeps neither
// ops nor results once its call has returned.
type plan struct {
	ops      []store.Op
	rules    []*rules.Rule
	subjects []string
	res      []store.Result
	refunds  []store.Settlement
}

// planCap is how many ops a new plan has room for: the built-in login
// rules with a familiar network's buckets take 7.
const planCap = 12

var plans = sync.Pool{New: func() any {
	return &plan{
		ops:      make([]store.Op, 0, planCap),
		rules:    make([]*rules.Rule, 0, planCap),
		subjects: make([]string, 0, planCap),
		res:      make([]store.Result, 0, planCap),
		refunds:  make([]store.Settlement, 0, planCap),
	}
}}

// getPlan returns an empty plan from the pool.
func getPlan() *plan { return plans.Get().(*plan) }

// release empties p, dropping what it refers to, and returns it to the pool.
func (p *plan) release() {
	clear(p.ops)
	clear(p.rules)
	clear(p.subjects)
	clear(p.refunds)
	p.ops, p.rules, p.subjects, p.res, p.refunds = p.ops[:0], p.rules[:0], p.subjects[:0], p.res[:0], p.refunds[:0]
	plans.Put(p)
}

// add appends the op for rule r on subject.
func (p *plan) add(r *rules.Rule, subject string, cost int64) {
	p.ops = append(p.ops, opFor(r, subject, cost))
	p.rules = append(p.rules, r)
	p.subjects = append(p.subjects, subject)
}

// addAt appends the op for rule r on subject with store key key, counting
// as when says.
func (p *plan) addAt(r *rules.Rule, subject, key string, cost int64, when store.When) {
	op := opFor(r, subject, cost)
	op.Key, op.When = key, when
	p.ops = append(p.ops, op)
	p.rules = append(p.rules, r)
	p.subjects = append(p.subjects, subject)
}

// counts reports whether op i of p counted, given what the batch's
// Familiar op found: the Familiar op itself (which has no rule) and the
// conditional ops it skipped did not.
func (p *plan) counts(i int, familiar bool) bool {
	return p.rules[i] != nil && p.ops[i].When.Counts(familiar)
}

// results returns zeroed room for the results of p's ops.
func (p *plan) results() []store.Result {
	p.res = slices.Grow(p.res[:0], len(p.ops))[:len(p.ops)]
	clear(p.res)
	return p.res
}

// opFor returns the store op of rule r for subject, spending cost units on
// a rate rule. A consecutive_failures rule always counts one.
func opFor(r *rules.Rule, subject string, cost int64) store.Op {
	op := store.Op{
		Key:     keys.StoreKey(subject, r.Name),
		Rule:    r.Name,
		OnError: onError(r.OnStoreError),
	}
	switch {
	case r.Mode == rules.Shadow:
		op.Role = store.Shadow
	case r.Action == rules.Challenge:
		op.Role = store.Soft
	case tolls(r):
		op.Role = store.Toll
	}
	switch r.Type {
	case rules.Rate:
		op.Cost = cost
		op.Limit = store.Rate{Interval: r.Interval(), Burst: r.Burst}
	case rules.ConsecutiveFailures:
		op.Cost = 1
		op.Limit = store.Counter{Max: r.Limit, Hold: r.Hold}
	case rules.Distinct:
		op.Cost = 1
		op.Limit = store.Distinct{Step: r.Per / (store.DistinctSlots - 1), Max: r.Limit}
	}
	return op
}

func onError(o rules.OnStoreError) store.OnError {
	switch o {
	case rules.Closed:
		return store.OnErrorClosed
	case rules.Open:
		return store.OnErrorOpen
	}
	return store.OnErrorLocal
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
	if e.aggregate.Degraded() {
		// The fleet's rate is an estimate from this instance's own count.
		d.Degraded = true
	}
	if inForce {
		e.metrics.RuleTrips.WithLabelValues(r.Name, string(rules.Enforce), string(r.Action)).Inc()
		raise(d, r.Action, r.Name, 0)
	}
}

// decide folds the store's results into d.
func (e *Engine) decide(p *plan, res []store.Result, d *Decision) {
	familiar := store.FamiliarFound(p.ops, res)
	enforced := 0
	for i, r := range p.rules {
		if p.counts(i, familiar) && r.Mode == rules.Enforce && r.Type != rules.Distinct {
			enforced++
		}
	}
	if enforced > 0 {
		d.Limits = make([]Limit, 0, enforced)
	}
	var quota Quota
	for i, r := range p.rules {
		rs := &res[i]
		if rs.Degraded {
			d.Degraded = true
		}
		if !p.counts(i, familiar) {
			continue
		}
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
			if !rs.Allowed {
				tripped = action
				d.Shadow = append(d.Shadow, ShadowTrip{Rule: r.Name, Action: action, RetryAfter: retry})
				e.metrics.RuleTrips.WithLabelValues(r.Name, string(rules.Shadow), string(action)).Inc()
			}
			e.shadow.Record(r.Name, tripped, p.subjects[i])
			continue
		}
		if r.Type != rules.Distinct {
			// A distinct rule is neither a rate nor a count of failures.
			d.Limits = append(d.Limits, Limit{Rule: r.Name, Remaining: rs.Remaining, Reset: rs.ResetAfter})
		}
		if r.Type == rules.Rate {
			q := Quota{Rule: r.Name, Burst: r.Burst, Window: time.Duration(r.Burst) * r.Interval(), Remaining: rs.Remaining, Reset: rs.ResetAfter}
			if quota.Rule == "" || q.Remaining < quota.Remaining || (q.Remaining == quota.Remaining && q.Reset > quota.Reset) {
				quota = q
			}
		}
		if !rs.Allowed {
			e.metrics.RuleTrips.WithLabelValues(r.Name, string(rules.Enforce), string(action)).Inc()
			raise(d, action, r.Name, retry)
		}
	}
	if quota.Rule != "" {
		d.Quota = &quota
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
