package loginlimits

import (
	"time"

	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
)

// Reservations appends to dst what a success report of one check gives
// back, and returns the extended slice: the refunds its attempt carries
// (tokens.Attempt.Refunds). rs, ops and res are the check's
// batch, index for index: the rule behind each op, the op, and what the
// store did with it. Only ops the check spent count:
//
//   - a count: failures rate rule gives back the check's own cost, Cost ×
//     Interval of GCRA time, never more, so failures others spent on the
//     same key stay spent;
//   - a consecutive_failures rule resets its counter: the success ends the
//     run of failures.
//
// A count: attempts rate rule gives nothing back. Shadow ops are treated
// like enforced ones: a shadow rule previews its enforced twin, state
// included.
func Reservations(dst []store.Refund, rs []*rules.Rule, ops []store.Op, res []store.Result) []store.Refund {
	for i, r := range rs {
		if !res[i].Spent {
			continue
		}
		op := &ops[i]
		switch {
		case r.Type == rules.ConsecutiveFailures:
			dst = append(dst, store.Refund{Key: op.Key, Kind: store.Counter})
		case r.Type == rules.Rate && r.Count == rules.Failures:
			dst = append(dst, store.Refund{Key: op.Key, Kind: store.Rate, Amount: time.Duration(op.Cost) * op.Interval})
		}
	}
	return dst
}
