package engine

import (
	"context"
	"fmt"
	"net/netip"
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
	// Cost is the units the check spends on rate rules; 0 means 1.
	Cost int64
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
	if req.Cost == 0 {
		req.Cost = 1
	}
	if req.Cost < 1 || req.Cost > MaxCost {
		return Decision{}, fmt.Errorf("%w: cost: %d is outside 1-%d", ErrInvalidField, req.Cost, MaxCost)
	}
	if req.Flow == rules.OTPSend && req.Recipient == "" {
		return Decision{}, fmt.Errorf("%w: recipient: required for flow otp_send", ErrMissingField)
	}
	subj, err := e.resolve(req)
	if err != nil {
		return Decision{}, err
	}

	set := e.rules.Load()
	var p plan
	p.ops = p.opsBuf[:0]
	p.rules = p.rulesBuf[:0]
	p.subjects = p.subjectsBuf[:0]
	var d Decision
	for _, r := range set.For(req.Flow) {
		if r.Type == rules.FailureRate {
			e.globalRule(r, subj.trusted(), &d)
			continue
		}
		subject, ok := subj.subjectFor(e.hasher, r)
		if !ok {
			continue
		}
		p.add(r, subject, req.Cost)
	}

	res := p.resBuf[:len(p.ops)]
	if len(p.ops) > len(p.resBuf) {
		res = make([]store.Result, len(p.ops))
	}
	if len(p.ops) > 0 {
		if err := e.store.Do(ctx, p.ops, res); err != nil {
			return Decision{}, fmt.Errorf("engine: store: %w", err)
		}
	}
	e.decide(&p, res, &d)

	if d.Action.Severity() < rules.Slow.Severity() {
		at := tokens.Attempt{
			Issued:  e.now(),
			Flow:    string(req.Flow),
			Account: subj.accountID,
			Device:  subj.device,
			Refunds: refunds(&p, res),
		}
		for i := range res {
			if res[i].Degraded && res[i].Spent {
				at.Fallback = true
			}
		}
		id, err := e.attempts.Seal(at)
		if err != nil {
			return Decision{}, fmt.Errorf("engine: attempt id: %w", err)
		}
		d.AttemptID = id
	}
	if d.Action == "" {
		d.Action = rules.Allow
	}
	e.metrics.Decisions.WithLabelValues(string(req.Flow), string(d.Action)).Inc()
	e.metrics.CheckDuration.WithLabelValues(string(req.Flow)).Observe(time.Since(start).Seconds())
	return d, nil
}

// plan is the batch of store ops one check evaluates, with the rule and
// subject behind each op. The buffers keep a typical check off the heap.
type plan struct {
	ops      []store.Op
	rules    []*rules.Rule
	subjects []string

	opsBuf      [8]store.Op
	rulesBuf    [8]*rules.Rule
	subjectsBuf [8]string
	resBuf      [8]store.Result
}

// add appends the op for rule r on subject.
func (p *plan) add(r *rules.Rule, subject string, cost int64) {
	op := store.Op{
		Key:     keys.StoreKey(subject, r.Name),
		Shadow:  r.Mode == rules.Shadow,
		Soft:    r.Action == rules.Challenge,
		Rule:    r.Name,
		OnError: onError(r.OnStoreError),
	}
	switch r.Type {
	case rules.Rate:
		op.Kind = store.Rate
		op.Cost = cost
		op.Interval = r.Interval()
		op.Burst = r.Burst
	case rules.ConsecutiveFailures:
		op.Kind = store.Counter
		op.Cost = 1
		op.Limit = r.Limit
		op.Hold = r.Hold
	}
	p.ops = append(p.ops, op)
	p.rules = append(p.rules, r)
	p.subjects = append(p.subjects, subject)
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
// its cached view without a store call. Trusted devices are exempt.
func (e *Engine) globalRule(r *rules.Rule, trusted bool, d *Decision) {
	if trusted {
		return
	}
	inForce, _ := e.aggregate.InForce(r.Name, flowNames(r), r.Per, r.Limit, r.Hysteresis)
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
	if inForce {
		e.metrics.RuleTrips.WithLabelValues(r.Name, string(rules.Enforce), string(r.Action)).Inc()
		raise(d, r.Action, r.Name, 0)
	}
}

// flowNames returns the rule's flows as strings, for the aggregate.
func flowNames(r *rules.Rule) []string {
	out := make([]string, len(r.Flows))
	for i, f := range r.Flows {
		out[i] = string(f)
	}
	return out
}

// decide folds the store's results into d.
func (e *Engine) decide(p *plan, res []store.Result, d *Decision) {
	for i, r := range p.rules {
		rs := &res[i]
		if rs.Degraded {
			d.Degraded = true
		}
		action := r.Action
		if rs.Degraded && !rs.Allowed && r.OnStoreError == rules.Closed {
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
		d.Limits = append(d.Limits, Limit{Rule: r.Name, Remaining: rs.Remaining, Reset: rs.ResetAfter})
		if r.Type == rules.Rate {
			q := Quota{Rule: r.Name, Burst: r.Burst, Window: time.Duration(r.Burst) * r.Interval(), Remaining: rs.Remaining, Reset: rs.ResetAfter}
			if d.Quota == nil || q.Remaining < d.Quota.Remaining || (q.Remaining == d.Quota.Remaining && q.Reset > d.Quota.Reset) {
				d.Quota = &q
			}
		}
		if !rs.Allowed {
			e.metrics.RuleTrips.WithLabelValues(r.Name, string(rules.Enforce), string(action)).Inc()
			raise(d, action, r.Name, retry)
		}
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
		d.RetryAfter = retry
	}
}

// refunds lists what a success report gives back: the reservations of
// failure-counting rate rules and the consecutive-failure counts.
func refunds(p *plan, res []store.Result) []tokens.Refund {
	var out []tokens.Refund
	for i, r := range p.rules {
		if !res[i].Spent {
			continue
		}
		op := &p.ops[i]
		switch {
		case r.Type == rules.ConsecutiveFailures:
			out = append(out, tokens.Refund{Key: op.Key, Counter: true})
		case r.Type == rules.Rate && r.Count == rules.Failures:
			out = append(out, tokens.Refund{Key: op.Key, Amount: time.Duration(op.Cost) * op.Interval})
		}
	}
	return out
}

// subjects are a check's identifiers, normalised and hashed once.
type subjects struct {
	accountNorm string
	accountID   string // hash of the account, "" when absent
	device      string // device id of a valid device token, "" when untrusted
	deviceID    string // hash of account and device
	ip          netip.Addr
	recipientID string
}

func (s *subjects) trusted() bool { return s.device != "" }

// resolve normalises and hashes the check's identifiers. It fails on a field
// that is present but invalid; a device token that does not verify for the
// account is ignored, never an error.
func (e *Engine) resolve(req CheckRequest) (subjects, error) {
	var s subjects
	ip, err := keys.IP(req.IP)
	if err != nil {
		return s, err
	}
	s.ip = ip
	if req.Account != "" {
		norm, err := keys.Account(req.Account)
		if err != nil {
			return s, err
		}
		s.accountNorm = norm
		s.accountID = e.hasher.Subject("account", norm)
		if req.DeviceToken != "" {
			if dev, err := e.devices.Verify(req.DeviceToken, s.accountID, e.now()); err == nil {
				s.device = dev
				s.deviceID = e.hasher.Subject("device", s.accountID, dev)
			}
		}
	}
	if req.Recipient != "" {
		norm, err := keys.Recipient(req.Recipient)
		if err != nil {
			return s, err
		}
		s.recipientID = e.hasher.Subject("recipient", norm)
	}
	return s, nil
}

// subjectFor returns the hashed subject rule r counts this check by, and
// false when the check lacks the rule's key fields.
func (s *subjects) subjectFor(h *keys.Hasher, r *rules.Rule) (string, bool) {
	switch r.Key {
	case rules.KeyAccount:
		if s.accountID == "" {
			return "", false
		}
		if s.trusted() {
			return s.deviceID, true
		}
		return s.accountID, true
	case rules.KeyIP:
		return h.Subject("ip", keys.Prefix(s.ip, r.IPv4Prefix, r.IPv6Prefix).String()), true
	case rules.KeyAccountIP:
		if s.accountID == "" {
			return "", false
		}
		return h.Subject("account+ip", s.accountNorm, keys.Prefix(s.ip, 32, 64).String()), true
	case rules.KeyRecipient:
		if s.recipientID == "" {
			return "", false
		}
		return s.recipientID, true
	}
	return "", false
}
