package storetest

import (
	"time"
)

// rateCases test Rate ops: bursts, steady rates, costs and rounding.
var rateCases = []testCase{
	{"rate/burst_then_steady", testRateBurstThenSteady},
	{"rate/cost_above_one", testRateCostAboveOne},
	{"rate/cost_above_burst", testRateCostAboveBurst},
	{"rate/cost_zero", testRateCostZero},
	{"rate/interval_rounds_up_to_microseconds", testRateIntervalRounding},
	{"rate/full_again_after_reset", testRateFullAgain},
}

// testRateBurstThenSteady: burst 5 at 1 per minute admits five back to back,
// then one a minute.
func testRateBurstThenSteady(h *harness) {
	var (
		k  = h.key("account")
		t1 = t0.Add(30 * time.Second)
		t2 = t0.Add(time.Minute)
		t3 = t0.Add(3*time.Minute + 30*time.Second)
		t4 = t0.Add(20 * time.Minute)
	)
	one := ops(Rate(k, 1, time.Minute, 5))
	h.run([]step{
		{at: t0, peek: true, ops: one, want: rs(result{Allowed: true, Remaining: 5})},
		{at: t0, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: 1 * time.Minute})},
		{at: t0, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute})},
		{at: t0, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 2, ResetAfter: 3 * time.Minute})},
		{at: t0, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: 4 * time.Minute})},
		{at: t0, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 5 * time.Minute})},
		{at: t0, ops: one, want: rs(result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: 5 * time.Minute})},
		{at: t1, ops: one, want: rs(result{Remaining: 0, RetryAfter: 30 * time.Second, ResetAfter: 4*time.Minute + 30*time.Second})},
		{at: t2, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 5 * time.Minute})},
		{at: t2, ops: one, want: rs(result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: 5 * time.Minute})},
		{at: t3, peek: true, ops: one, want: rs(result{Allowed: true, Remaining: 2, ResetAfter: 2*time.Minute + 30*time.Second})},
		{at: t3, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: 3*time.Minute + 30*time.Second})},
		{at: t4, peek: true, ops: one, want: rs(result{Allowed: true, Remaining: 5})},
	})
}

// testRateCostAboveOne: a cost spends that many units, and fits only while
// all of them do.
func testRateCostAboveOne(h *harness) {
	var (
		k  = h.key("ip")
		t1 = t0.Add(2 * time.Minute)
	)
	two := ops(Rate(k, 2, time.Minute, 5))
	h.run([]step{
		{at: t0, ops: two, want: rs(result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute})},
		{at: t0, ops: two, want: rs(result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: 4 * time.Minute})},
		{at: t0, ops: two, want: rs(result{Remaining: 1, RetryAfter: time.Minute, ResetAfter: 4 * time.Minute})},
		{at: t0, ops: ops(Rate(k, 1, time.Minute, 5)), want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 5 * time.Minute})},
		{at: t1, ops: two, want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 5 * time.Minute})},
	})
}

// testRateCostAboveBurst: a cost above the burst never fits; RetryAfter is
// what the formula gives.
func testRateCostAboveBurst(h *harness) {
	var (
		k  = h.key("ip")
		t1 = t0.Add(time.Hour)
	)
	h.run([]step{
		{at: t0, ops: ops(Rate(k, 6, time.Minute, 5)), want: rs(result{Remaining: 5, RetryAfter: time.Minute})},
		{at: t0, ops: ops(Rate(k, 8, time.Minute, 5)), want: rs(result{Remaining: 5, RetryAfter: 3 * time.Minute})},
		{at: t0, ops: ops(Rate(k, 1, time.Minute, 5)), want: rs(result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Minute})},
		{at: t0, ops: ops(Rate(k, 6, time.Minute, 5)), want: rs(result{Remaining: 4, RetryAfter: 2 * time.Minute, ResetAfter: time.Minute})},
		{at: t1, ops: ops(Rate(k, 6, time.Minute, 5)), want: rs(result{Remaining: 5, RetryAfter: time.Minute})},
	})
}

// testRateCostZero: cost 0 evaluates and never spends.
func testRateCostZero(h *harness) {
	var (
		k  = h.key("account")
		t1 = t0.Add(time.Minute)
	)
	zero := ops(Rate(k, 0, time.Minute, 5))
	h.run([]step{
		{at: t0, ops: zero, want: rs(result{Allowed: true, Remaining: 5})},
		{at: t0, ops: ops(Rate(k, 5, time.Minute, 5)), want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 5 * time.Minute})},
		{at: t0, ops: zero, want: rs(result{Allowed: true, Remaining: 0, ResetAfter: 5 * time.Minute})},
		{at: t0, ops: zero, want: rs(result{Allowed: true, Remaining: 0, ResetAfter: 5 * time.Minute})},
		{at: t1, ops: zero, want: rs(result{Allowed: true, Remaining: 1, ResetAfter: 4 * time.Minute})},
		{at: t1, ops: ops(Rate(k, 1, time.Minute, 5)), want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 5 * time.Minute})},
	})
}

// testRateIntervalRounding: an interval that is not a whole number of
// microseconds counts as the next whole microsecond (3 per 10s is one per
// 3,333,334µs), so a limit is never looser than configured.
func testRateIntervalRounding(h *harness) {
	var (
		k        = h.key("otp")
		interval = 10 * time.Second / 3
		t1       = t0.Add(3333334 * time.Microsecond)
	)
	one := ops(Rate(k, 1, interval, 3))
	h.run([]step{
		{at: t0, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 2, ResetAfter: 3333334 * time.Microsecond})},
		{at: t0, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: 6666668 * time.Microsecond})},
		{at: t0, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 10000002 * time.Microsecond})},
		{at: t0, ops: one, want: rs(result{Remaining: 0, RetryAfter: 3333334 * time.Microsecond, ResetAfter: 10000002 * time.Microsecond})},
		{at: t1.Add(-time.Microsecond), ops: one, want: rs(result{Remaining: 0, RetryAfter: time.Microsecond, ResetAfter: 6666669 * time.Microsecond})},
		{at: t1, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 10000002 * time.Microsecond})},
	})
}

// testRateFullAgain: once ResetAfter has passed by the clock, the key is full.
func testRateFullAgain(h *harness) {
	var (
		k  = h.key("account")
		t1 = t0.Add(5 * time.Minute)
	)
	one := ops(Rate(k, 1, time.Minute, 5))
	h.run([]step{
		{at: t0, ops: ops(Rate(k, 5, time.Minute, 5)), want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 5 * time.Minute})},
		{at: t1.Add(-time.Microsecond), peek: true, ops: one, want: rs(result{Allowed: true, Remaining: 4, ResetAfter: time.Microsecond})},
		{at: t1, peek: true, ops: one, want: rs(result{Allowed: true, Remaining: 5})},
		{at: t1, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: 1 * time.Minute})},
		{at: t1, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute})},
		{at: t1, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 2, ResetAfter: 3 * time.Minute})},
		{at: t1, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: 4 * time.Minute})},
		{at: t1, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 5 * time.Minute})},
		{at: t1, ops: one, want: rs(result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: 5 * time.Minute})},
	})
}
