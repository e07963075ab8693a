package loginlimits

import (
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
)

// Status is where an account stands on its enforced account rules, as an
// untrusted check of it would find them. An account guardian never saw has
// the zero Status, exactly like one that exists and never failed: the
// status does not reveal which accounts exist.
type Status struct {
	// ConsecutiveFailures is the highest count of the account's
	// consecutive_failures rules.
	ConsecutiveFailures int64
	// Blocked reports that a rule whose action is block would block an
	// untrusted check now: for the hard stop, until a reset.
	Blocked bool
	// NextAllowed is how long until the account's slowing rules would let an
	// untrusted check through; zero when they would now. A block lifts only
	// with a reset, whatever NextAllowed says.
	NextAllowed time.Duration
}

// StatusRules returns the rules an account's status reads, in file order:
// the enforced rate and consecutive_failures rules keyed by account, of
// every flow. Shadow rules decide nothing and are left out.
func StatusRules(set *rules.Set) []*rules.Rule {
	var out []*rules.Rule
	for i := range set.Rules {
		r := &set.Rules[i]
		if r.Key == rules.KeyAccount && r.Type != rules.FailureRate && r.Mode == rules.Enforce {
			out = append(out, r)
		}
	}
	return out
}

// ReadStatus folds what the store found for StatusRules into a Status. res
// holds, index for index with rs, each rule evaluated without spending
// (store.Store.Peek) at cost 1 on the account's subject. A rule whose action
// is challenge lets the check go ahead and changes neither Blocked nor
// NextAllowed.
func ReadStatus(rs []*rules.Rule, res []store.Result) Status {
	var st Status
	for i, r := range rs {
		rr := &res[i]
		if r.Type == rules.ConsecutiveFailures {
			st.ConsecutiveFailures = max(st.ConsecutiveFailures, rr.Count)
		}
		if rr.Allowed {
			continue
		}
		switch r.Action {
		case rules.Block:
			st.Blocked = true
		case rules.Slow:
			wait := rr.RetryAfter
			if r.Type == rules.ConsecutiveFailures {
				// A slowing count lifts when it is forgotten.
				wait = rr.ResetAfter
			}
			st.NextAllowed = max(st.NextAllowed, wait)
		}
	}
	return st
}

// ResetKeys returns the store keys a reset of the account with subject
// deletes: those of every rate and consecutive_failures rule keyed by
// account, enforced or shadow, its challenged buckets, the buckets of the
// networks on its familiar list (members, as store.Store.Familiar reads
// them), and the list itself. That lifts the hard stop, from everywhere and
// from each listed network, and gives the account a full burst. A network
// pushed off the list before the reset keeps its buckets until they
// expire: their keys are not derived from the account alone. The keys of
// its trusted devices and of its account+ip pairs are left to expire too.
func ResetKeys(set *rules.Set, subject string, members []string) []string {
	var out []string
	for i := range set.Rules {
		r := &set.Rules[i]
		if r.Key != rules.KeyAccount || r.Type == rules.FailureRate {
			continue
		}
		out = append(out, keys.StoreKey(subject, r.Name))
		if r.Type == rules.Rate {
			out = append(out, ChallengedKey(subject, r.Name))
		}
		if Counts(r) {
			for _, m := range members {
				out = append(out, NetworkKey(subject, r.Name, m))
			}
		}
	}
	return append(out, FamiliarKey(subject))
}
