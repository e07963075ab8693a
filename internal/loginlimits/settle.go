package loginlimits

import (
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/plan"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
)

// Settle sets what a report does to the state the op of e, an entry of its
// rule, spends, built beside that op:
//
//   - a count: failures rate rule gives back, on a success, the check's own
//     cost, Cost × Interval of GCRA time, never more, so failures others
//     spent on the same key stay spent;
//   - a consecutive_failures rule resets its count on a success, which on
//     an untrusted check's buckets lifts only the failures of the check's
//     own source instead (Attribute); on a failure it confirms the count,
//     keeping it for a time that grows with the count
//     (store.ConfirmedHold), all of the rule's hold at its limit: the hard
//     stop;
//   - a distinct rule with count: failures names, on a success, the
//     check's account in the rule's succeeded key (SucceededKey), which
//     its op does not count (store.Op.Except): an account whose check
//     succeeded stops counting, so colleagues logging in from one office
//     challenge nobody, while accounts of failed or never reported checks
//     count. The account's member is the op's (set by the engine). On a
//     failure it confirms the network's state (store.ConfirmDistinct),
//     which then counts for the rule's whole window instead of the
//     unconfirmed hold.
//
// A count: attempts rate or distinct rule settles nothing. Shadow entries
// settle like enforced ones: a shadow rule previews its enforced twin,
// state included. The settlements act on whichever key the entry's op ends
// up on (the buckets a check's trust chooses, Buckets.Add).
func Settle(e *plan.Entry) {
	r := e.Rule
	switch {
	case r.Type == rules.ConsecutiveFailures:
		e.Success = store.Settlement{Action: store.Reset}
		e.Failure = store.Settlement{Action: store.Confirm, Span: r.Hold, Max: r.Limit}
	case r.Type == rules.Rate && r.Count == rules.Failures:
		e.Success = store.Settlement{Action: store.GiveBack, Span: time.Duration(e.Op.Cost) * r.Interval()}
	case r.Type == rules.Distinct && r.Count == rules.Failures:
		l, _ := e.Op.Limit.(store.Distinct)
		e.Op.Except = SucceededKey(e.Subject, r.Name)
		e.Success = store.Settlement{Key: e.Op.Except, Action: store.Add, Span: l.Step}
		e.Failure = store.Settlement{Action: store.ConfirmDistinct, Span: l.Step}
	}
}

// SucceededKey returns the store key of the accounts whose checks from the
// network whose subject is network succeeded, for the distinct rule named
// rule: in the network's Redis Cluster slot, beside the rule's own key.
func SucceededKey(network, rule string) string {
	return keys.StoreKey(network, rule+":succeeded")
}
