package loginlimits

import (
	"time"

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
//   - a consecutive_failures rule resets its count on a success (the run of
//     failures ends), and on a failure confirms it, keeping it for a time
//     that grows with the count (store.ConfirmedHold), all of the rule's
//     hold at its limit: the hard stop.
//
// A count: attempts rate rule settles nothing. Shadow entries settle like
// enforced ones: a shadow rule previews its enforced twin, state included.
// The settlements act on whichever key the entry's op ends up on (the
// buckets a check's trust chooses, Buckets.Add).
func Settle(e *plan.Entry) {
	r := e.Rule
	switch {
	case r.Type == rules.ConsecutiveFailures:
		e.Success = store.Settlement{Action: store.Reset}
		e.Failure = store.Settlement{Action: store.Confirm, Span: r.Hold, Max: r.Limit}
	case r.Type == rules.Rate && r.Count == rules.Failures:
		e.Success = store.Settlement{Action: store.GiveBack, Span: time.Duration(e.Op.Cost) * r.Interval()}
	}
}
