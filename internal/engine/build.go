package engine

import (
	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/lists"
	"github.com/guardian-sec/guardian/internal/loginlimits"
	"github.com/guardian-sec/guardian/internal/otp"
	"github.com/guardian-sec/guardian/internal/plan"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
)

// build fills p with the plan of a check of flow spending cost, whose
// subjects are s, under the rules rs: the one builder of a check's plan. A
// check builds it from its identifiers (resolve) and evaluates it; a report
// builds it again from what the attempt id sealed (restore), with settling
// set, and settles what the check spent (package plan).
//
// Every rule of the flow that applies to the check is an entry (a check
// lacking a rule's fields does not count on it): a failure_rate rule is
// decided by the global rate, every other rule by its op on the rule's
// subject. What a report does with an entry is built beside its op
// (loginlimits.Settle), but for a flow whose success settles nothing (an
// OTP send, otp.Settles). The account rules of an untrusted check count in
// the buckets its trust chooses (loginlimits.Buckets), a distinct rule
// counts its account (addDistinct), and the account's memory of guesses
// comes last (addGuesses). A report's plan holds only what can settle:
// the rules that give back, the memory of guesses, and the lessons of a
// success (loginlimits.Learn).
func (e *Engine) build(p *plan.Plan, rs *ruleSet, flow rules.Flow, cost int64, s *subjects, settling bool) error {
	settles := otp.Settles(flow)
	for _, c := range rs.flows[flow] {
		r := c.rule
		switch {
		case settling && c.bit == plan.NoBit:
			continue
		case !settling && s.skips(r):
			// An allow list entry exempts the check (lists.go): the
			// rule neither counts it nor decides it, and its report
			// finds nothing spent on it to settle.
			e.metrics.ListMatches.WithLabelValues(lists.Allow, r.Name).Inc()
			continue
		case r.Type == rules.FailureRate:
			p.Add(plan.Entry{Rule: r, Kind: plan.Global, Bit: plan.NoBit})
			continue
		}
		subject := s.of(r)
		if subject == "" {
			continue
		}
		if err := fits(r, cost); err != nil {
			return err
		}
		en := plan.Entry{Rule: r, Op: c.op, Subject: subject, Bit: c.bit}
		en.Op.Key = keys.StoreKey(subject, r.Name)
		if r.Type == rules.Rate {
			en.Op.Cost = cost
		}
		if settles {
			loginlimits.Settle(&en)
		}
		s.exemptFrom(&en)
		switch {
		case r.Type == rules.Distinct:
			s.addDistinct(p, en)
		case loginlimits.Counts(r) && !s.trusted:
			s.buckets().Add(p, en)
		default:
			p.Add(en)
		}
	}
	if !settles {
		return nil
	}
	e.addGuesses(p, s)
	if settling {
		loginlimits.Learn(p, rs.set, flow, s.account, s.member)
	}
	return nil
}

// exemptFrom makes en, the entry of a rule for the check of s, exempt from its
// rule where contract 8.1 says so: a check with a valid device token is
// never slowed or challenged by an address rule, and neither it nor a check
// whose end user passed a challenge by a distinct rule. The op still
// counts; as a soft op it denies nothing. A passed challenge does not
// bypass other address rules (7.1).
func (s *subjects) exemptFrom(en *plan.Entry) {
	r := en.Rule
	switch {
	case r.Type == rules.Distinct && (s.trusted || s.passed):
	case r.Key == rules.KeyIP && s.trusted:
	default:
		return
	}
	en.Exempt = true
	if en.Op.Role != store.Shadow {
		en.Op.Role = store.Soft
	}
}

// distinctMemberLen is how many characters of the account's subject a
// distinct rule counts it by: 96 bits, so that two of a network's accounts
// coincide with odds far below the estimate's own error.
const distinctMemberLen = 16

// addDistinct adds to p the entry en of a distinct rule on the network's
// subject: it counts the check's account among the network's, and adds it
// unless the rule counts failures and the check carries a valid device
// token (a device the account succeeded on). A check without an account
// adds nothing: the rule does not apply.
func (s *subjects) addDistinct(p *plan.Plan, en plan.Entry) {
	if s.account == "" {
		return
	}
	en.Op.Member = s.account[:distinctMemberLen]
	if en.Rule.Count == rules.Failures && s.trusted {
		en.Op.Cost = 0
	}
	if en.Success.Action == store.Add {
		// A success stops the account counting (loginlimits.Settle).
		en.Success.Member = en.Op.Member
	}
	p.Add(en)
}
