package storetest

import (
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

// refundCases test refunds of rate and counter keys.
var refundCases = []testCase{
	{"refund/rate", testRefundRate},
	{"refund/rate_never_beyond_full", testRefundNeverBeyondFull},
	{"refund/counter", testRefundCounter},
	{"refund/absent", testRefundAbsent},
}

// testRefundRate: a refund gives back exactly its amount.
func testRefundRate(h *harness) {
	var (
		k  = h.key("account")
		t1 = t0.Add(time.Minute)
	)
	one := ops(Rate(k, 1, time.Minute, 5))
	h.run([]step{
		{at: t0, ops: ops(Rate(k, 3, time.Minute, 5)), want: rs(result{Allowed: true, Spent: true, Remaining: 2, ResetAfter: 3 * time.Minute})},
	})
	h.refund(store.Refund{Key: k, Kind: store.Rate, Amount: time.Minute})
	h.run([]step{
		{at: t0, peek: true, ops: one, want: rs(result{Allowed: true, Remaining: 3, ResetAfter: 2 * time.Minute})},
	})
	h.clock.Set(t1)
	h.refund(store.Refund{Key: k, Kind: store.Rate, Amount: 30 * time.Second})
	h.run([]step{
		{at: t1, peek: true, ops: one, want: rs(result{Allowed: true, Remaining: 4, ResetAfter: 30 * time.Second})},
		{at: t1, ops: ops(Rate(k, 5, time.Minute, 5)), want: rs(result{Remaining: 4, RetryAfter: 30 * time.Second, ResetAfter: 30 * time.Second})},
		{at: t1, ops: ops(Rate(k, 4, time.Minute, 5)), want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 4*time.Minute + 30*time.Second})},
	})
}

// testRefundNeverBeyondFull: a refund larger than what was spent leaves the
// key full, with no extra credit.
func testRefundNeverBeyondFull(h *harness) {
	k := h.key("account")
	h.run([]step{
		{at: t0, ops: ops(Rate(k, 2, time.Minute, 5)), want: rs(result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute})},
	})
	h.refund(store.Refund{Key: k, Kind: store.Rate, Amount: 10 * time.Minute})
	h.run([]step{
		{at: t0, peek: true, ops: ops(Rate(k, 1, time.Minute, 5)), want: rs(result{Allowed: true, Remaining: 5})},
		{at: t0, ops: ops(Rate(k, 5, time.Minute, 5)), want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 5 * time.Minute})},
		{at: t0, ops: ops(Rate(k, 1, time.Minute, 5)), want: rs(result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: 5 * time.Minute})},
	})
}

// testRefundCounter: a refund resets a counter.
func testRefundCounter(h *harness) {
	k := h.key("consecutive")
	one := ops(Counter(k, 1, 3, time.Hour))
	h.run([]step{
		{at: t0, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 2, ResetAfter: time.Hour, Count: 1})},
		{at: t0, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: time.Hour, Count: 2})},
	})
	h.refund(store.Refund{Key: k, Kind: store.Counter})
	h.run([]step{
		{at: t0, peek: true, ops: one, want: rs(result{Allowed: true, Remaining: 3})},
		{at: t0, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 2, ResetAfter: time.Hour, Count: 1})},
	})
}

// testRefundAbsent: refunding keys that do not exist creates nothing and
// gives no credit.
func testRefundAbsent(h *harness) {
	var (
		r = h.key("account")
		c = h.key("consecutive")
	)
	h.refund(
		store.Refund{Key: r, Kind: store.Rate, Amount: 10 * time.Minute},
		store.Refund{Key: c, Kind: store.Counter},
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
