package storetest

import (
	"time"
)

// batchCases test batches: all or nothing, and shadow and soft ops beside
// enforced ones.
var batchCases = []testCase{
	{"batch/all_or_nothing", testAllOrNothing},
	{"batch/counter_with_rate", testCounterWithRate},
	{"shadow/spends_when_enforced_denied", testShadowSpendsWhenDenied},
	{"shadow/denied_does_not_deny", testShadowDeniedDoesNotDeny},
	{"soft/never_denies", testSoftNeverDenies},
	{"soft/spent_only_with_the_batch", testSoftSpentWithTheBatch},
}

// testAllOrNothing: when one enforced op does not fit, no enforced op is
// spent; the one that fits still reports Allowed.
func testAllOrNothing(h *harness) {
	var (
		a  = h.key("account")
		b  = h.key("ip")
		t1 = t0.Add(time.Minute)
	)
	both := ops(Rate(a, 1, time.Minute, 5), Rate(b, 1, time.Minute, 2))
	h.run([]step{
		{at: t0, ops: ops(Rate(b, 2, time.Minute, 2)), want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 2 * time.Minute})},
		{at: t0, ops: both, want: rs(
			result{Allowed: true, Remaining: 5},
			result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: 2 * time.Minute},
		)},
		{at: t0, peek: true, ops: both, want: rs(
			result{Allowed: true, Remaining: 5},
			result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: 2 * time.Minute},
		)},
		{at: t1, ops: both, want: rs(
			result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Minute},
			result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 2 * time.Minute},
		)},
	})
}

// testCounterWithRate: a login-shaped batch, a rate and a consecutive-failure
// counter, is spent together and denied together.
func testCounterWithRate(h *harness) {
	var (
		r = h.key("account")
		c = h.key("consecutive")
	)
	batch := ops(Rate(r, 1, time.Minute, 5), Counter(c, 1, 2, time.Hour))
	h.run([]step{
		{at: t0, ops: batch, want: rs(
			result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Minute},
			result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: time.Hour, Count: 1},
		)},
		{at: t0, ops: batch, want: rs(
			result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute},
			result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: time.Hour, Count: 2},
		)},
		{at: t0, ops: batch, want: rs(
			result{Allowed: true, Remaining: 3, ResetAfter: 2 * time.Minute},
			result{Remaining: 0, ResetAfter: time.Hour, Count: 2},
		)},
		{at: t0, peek: true, ops: ops(Rate(r, 1, time.Minute, 5)), want: rs(result{Allowed: true, Remaining: 3, ResetAfter: 2 * time.Minute})},
	})
}

// testShadowSpendsWhenDenied: a shadow op that fits is spent even when the
// enforced ops are denied, and does not change their outcome.
func testShadowSpendsWhenDenied(h *harness) {
	var (
		e = h.key("enforced")
		f = h.key("enforced-fits")
		s = h.key("shadow")
	)
	batch := ops(Rate(e, 1, time.Minute, 1), Rate(f, 1, time.Minute, 5), Shadow(Rate(s, 1, time.Minute, 5)))
	h.run([]step{
		{at: t0, ops: ops(Rate(e, 1, time.Minute, 1)), want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: time.Minute})},
		{at: t0, ops: batch, want: rs(
			result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: time.Minute},
			result{Allowed: true, Remaining: 5},
			result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Minute},
		)},
		{at: t0, ops: batch, want: rs(
			result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: time.Minute},
			result{Allowed: true, Remaining: 5},
			result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute},
		)},
		{at: t0, peek: true, ops: ops(Rate(f, 1, time.Minute, 5), Rate(s, 1, time.Minute, 5)), want: rs(
			result{Allowed: true, Remaining: 5},
			result{Allowed: true, Remaining: 3, ResetAfter: 2 * time.Minute},
		)},
	})
}

// testShadowDeniedDoesNotDeny: a shadow op that does not fit is not spent and
// does not deny the enforced ops.
func testShadowDeniedDoesNotDeny(h *harness) {
	var (
		e  = h.key("enforced")
		s  = h.key("shadow")
		sc = h.key("shadow-consecutive")
	)
	batch := ops(Rate(e, 1, time.Minute, 5), Shadow(Rate(s, 1, time.Minute, 1)), Shadow(Counter(sc, 1, 1, time.Hour)))
	h.run([]step{
		{at: t0, ops: batch, want: rs(
			result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Minute},
			result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: time.Minute},
			result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: time.Hour, Count: 1},
		)},
		{at: t0, ops: batch, want: rs(
			result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute},
			result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: time.Minute},
			result{Remaining: 0, ResetAfter: time.Hour, Count: 1},
		)},
	})
}

// testSoftNeverDenies: a soft op that does not fit leaves the batch allowed
// and is not spent; one that fits is spent with the batch.
func testSoftNeverDenies(h *harness) {
	var (
		e = h.key("enforced")
		c = h.key("challenge")
	)
	batch := ops(Rate(e, 1, time.Minute, 5), Soft(Rate(c, 1, time.Minute, 1)))
	h.run([]step{
		{at: t0, ops: batch, want: rs(
			result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Minute},
			result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: time.Minute},
		)},
		{at: t0, ops: batch, want: rs(
			result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute},
			result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: time.Minute},
		)},
	})
}

// testSoftSpentWithTheBatch: a soft op that fits is not spent when a hard
// enforced op denies the batch.
func testSoftSpentWithTheBatch(h *harness) {
	var (
		e = h.key("enforced")
		c = h.key("challenge")
	)
	h.run([]step{
		{at: t0, ops: ops(Rate(e, 1, time.Minute, 1)), want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: time.Minute})},
		{at: t0, ops: ops(Rate(e, 1, time.Minute, 1), Soft(Rate(c, 1, time.Minute, 3))), want: rs(
			result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: time.Minute},
			result{Allowed: true, Remaining: 3},
		)},
	})
}
