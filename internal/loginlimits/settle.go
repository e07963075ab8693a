package loginlimits

import (
	"time"

	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/tokens"
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
//     run of failures. Its Amount is what a failure report keeps the count
//     for instead (ConfirmedHold).
//
// A count: attempts rate rule gives nothing back. Shadow ops are treated
// like enforced ones: a shadow rule previews its enforced twin, state
// included.
func Reservations(dst []store.Settlement, rs []*rules.Rule, ops []store.Op, res []store.Result) []store.Settlement {
	for i, r := range rs {
		if !res[i].Spent {
			continue
		}
		op := &ops[i]
		switch {
		case r.Type == rules.ConsecutiveFailures:
			dst = append(dst, store.Settlement{Key: op.Key, Action: store.Reset, Span: ConfirmedHold(r.Hold, r.Limit, res[i].Count)})
		case r.Type == rules.Rate && r.Count == rules.Failures:
			dst = append(dst, store.Settlement{Key: op.Key, Action: store.GiveBack, Span: time.Duration(op.Cost) * r.Interval()})
		}
	}
	return dst
}

// ConfirmedHold is how long a reported count of failures is kept: hold ×
// count ÷ limit, so a count is held longer the higher it is, the full hold
// at the limit (the hard stop), and a key's failures are never forgotten
// faster than limit per hold. What only unreported checks counted is kept
// for twice the attempt TTL at most (package engine).
func ConfirmedHold(hold time.Duration, limit, count int64) time.Duration {
	if limit <= 0 || count >= limit {
		return hold
	}
	return time.Duration(float64(hold) * float64(count) / float64(limit))
}

// Confirmations returns the store refunds of a failure report of at: each
// consecutive-failure count its check spent, confirmed and so kept for its
// ConfirmedHold, and the guess it made, kept as a failed guess, on the store
// that took them. It returns nil when the check counted none.
func Confirmations(at *tokens.Attempt) []store.Settlement {
	var out []store.Settlement
	for _, r := range at.Refunds {
		if r.Action == store.Reset || r.Action == store.Forget {
			r.Action = store.Confirm
			out = append(out, r)
		}
	}
	return out
}
