package storetest

import (
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

// settleCases test settlements of rate and counter keys.
var settleCases = []testCase{
	{"settle/give_back", testGiveBack},
	{"settle/give_back_never_beyond_full", testGiveBackNeverBeyondFull},
	{"settle/give_back_rounds_as_the_spend", testGiveBackRounds},
	{"settle/reset", testReset},
	{"settle/absent", testSettleAbsent},
}

// testGiveBack: a GiveBack gives back exactly its span.
func testGiveBack(h *harness) {
	var (
		k  = h.key("account")
		t1 = t0.Add(time.Minute)
	)
	one := ops(Rate(k, 1, time.Minute, 5))
	h.run([]step{
		{at: t0, ops: ops(Rate(k, 3, time.Minute, 5)), want: rs(result{Allowed: true, Spent: true, Remaining: 2, ResetAfter: 3 * time.Minute})},
	})
	h.settle(store.Settlement{Key: k, Action: store.GiveBack, Span: time.Minute})
	h.run([]step{
		{at: t0, peek: true, ops: one, want: rs(result{Allowed: true, Remaining: 3, ResetAfter: 2 * time.Minute})},
	})
	h.clock.Set(t1)
	h.settle(store.Settlement{Key: k, Action: store.GiveBack, Span: 30 * time.Second})
	h.run([]step{
		{at: t1, peek: true, ops: one, want: rs(result{Allowed: true, Remaining: 4, ResetAfter: 30 * time.Second})},
		{at: t1, ops: ops(Rate(k, 5, time.Minute, 5)), want: rs(result{Remaining: 4, RetryAfter: 30 * time.Second, ResetAfter: 30 * time.Second})},
		{at: t1, ops: ops(Rate(k, 4, time.Minute, 5)), want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 4*time.Minute + 30*time.Second})},
	})
}

// testGiveBackNeverBeyondFull: a GiveBack larger than what was spent
// leaves the key full, with no extra credit.
func testGiveBackNeverBeyondFull(h *harness) {
	k := h.key("account")
	h.run([]step{
		{at: t0, ops: ops(Rate(k, 2, time.Minute, 5)), want: rs(result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute})},
	})
	h.settle(store.Settlement{Key: k, Action: store.GiveBack, Span: 10 * time.Minute})
	h.run([]step{
		{at: t0, peek: true, ops: ops(Rate(k, 1, time.Minute, 5)), want: rs(result{Allowed: true, Remaining: 5})},
		{at: t0, ops: ops(Rate(k, 5, time.Minute, 5)), want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 5 * time.Minute})},
		{at: t0, ops: ops(Rate(k, 1, time.Minute, 5)), want: rs(result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: 5 * time.Minute})},
	})
}

// testGiveBackRounds: a GiveBack of an interval that is no whole number of
// microseconds gives back what its spend took, rounded as the spend was.
func testGiveBackRounds(h *harness) {
	k := h.key("account")
	const interval = 21333333333 * time.Nanosecond // 24h / 4050
	h.run([]step{
		{at: t0, ops: ops(Rate(k, 1, interval, 3)), want: rs(result{Allowed: true, Spent: true, Remaining: 2, ResetAfter: 21333334 * time.Microsecond})},
		{at: t0, ops: ops(Rate(k, 1, interval, 3)), want: rs(result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: 42666668 * time.Microsecond})},
	})
	h.settle(store.Settlement{Key: k, Action: store.GiveBack, Span: interval})
	h.run([]step{
		{at: t0, peek: true, ops: ops(Rate(k, 1, interval, 3)), want: rs(result{Allowed: true, Remaining: 2, ResetAfter: 21333334 * time.Microsecond})},
	})
}

// testReset: a Reset resets a counter.
func testReset(h *harness) {
	k := h.key("consecutive")
	one := ops(Counter(k, 1, 3, time.Hour))
	h.run([]step{
		{at: t0, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 2, ResetAfter: time.Hour, Count: 1})},
		{at: t0, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: time.Hour, Count: 2})},
	})
	h.settle(store.Settlement{Key: k, Action: store.Reset})
	h.run([]step{
		{at: t0, peek: true, ops: one, want: rs(result{Allowed: true, Remaining: 3})},
		{at: t0, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 2, ResetAfter: time.Hour, Count: 1})},
	})
}

// testSettleAbsent: settling keys that do not exist creates nothing and
// gives no credit.
func testSettleAbsent(h *harness) {
	var (
		r = h.key("account")
		c = h.key("consecutive")
	)
	h.settle(
		store.Settlement{Key: r, Action: store.GiveBack, Span: 10 * time.Minute},
		store.Settlement{Key: c, Action: store.Reset},
	)
	h.run([]step{
		{at: t0, peek: true, ops: ops(Rate(r, 1, time.Minute, 5), Counter(c, 1, 3, time.Hour)), want: rs(
			result{Allowed: true, Remaining: 5},
			result{Allowed: true, Remaining: 3},
		)},
		{at: t0, ops: ops(Rate(r, 5, time.Minute, 5)), want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 5 * time.Minute})},
		{at: t0, ops: ops(Rate(r, 1, time.Minute, 5)), want: rs(result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: 5 * time.Minute})},
	})
}
