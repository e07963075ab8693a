package storetest

import (
	"time"
)

// counterCases test Counter ops: the limit, costs and the hold.
var counterCases = []testCase{
	{"counter/limit", testCounterLimit},
	{"counter/cost", testCounterCost},
	{"counter/hold_expires", testCounterHoldExpires},
}

// testCounterLimit: limit 3 admits three spends, then denies until a reset.
func testCounterLimit(h *harness) {
	var (
		k  = h.key("consecutive")
		t1 = t0.Add(time.Minute)
	)
	one := ops(Counter(k, 1, 3, time.Hour))
	h.run([]step{
		{at: t0, peek: true, ops: one, want: rs(result{Allowed: true, Remaining: 3})},
		{at: t0, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 2, ResetAfter: time.Hour, Count: 1})},
		{at: t0, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: time.Hour, Count: 2})},
		{at: t0, ops: one, want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: time.Hour, Count: 3})},
		{at: t0, ops: one, want: rs(result{Remaining: 0, ResetAfter: time.Hour, Count: 3})},
		{at: t1, ops: one, want: rs(result{Remaining: 0, ResetAfter: 59 * time.Minute, Count: 3})},
		{at: t1, ops: ops(Counter(k, 0, 3, time.Hour)), want: rs(result{Allowed: true, Remaining: 0, ResetAfter: 59 * time.Minute, Count: 3})},
	})
}

// testCounterCost: a cost above one fits only if all of it does; cost 0
// evaluates without refreshing the hold.
func testCounterCost(h *harness) {
	k := h.key("consecutive")
	h.run([]step{
		{at: t0, ops: ops(Counter(k, 0, 3, time.Hour)), want: rs(result{Allowed: true, Remaining: 3})},
		{at: t0, ops: ops(Counter(k, 2, 3, time.Hour)), want: rs(result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: time.Hour, Count: 2})},
		{at: t0, ops: ops(Counter(k, 2, 3, time.Hour)), want: rs(result{Remaining: 1, ResetAfter: time.Hour, Count: 2})},
		{at: t0, ops: ops(Counter(k, 4, 3, time.Hour)), want: rs(result{Remaining: 1, ResetAfter: time.Hour, Count: 2})},
		{at: t0, ops: ops(Counter(k, 1, 3, time.Hour)), want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: time.Hour, Count: 3})},
		{at: t0, ops: ops(Counter(k, 0, 3, time.Hour)), want: rs(result{Allowed: true, Remaining: 0, ResetAfter: time.Hour, Count: 3})},
	})
}

// testCounterHoldExpires: an idle count is forgotten after its Hold.
func testCounterHoldExpires(h *harness) {
	const hold = 200 * time.Millisecond
	k := h.key("consecutive")
	h.run([]step{
		{at: t0, ops: ops(Counter(k, 1, 3, hold)), want: rs(result{Allowed: true, Spent: true, Remaining: 2, ResetAfter: hold, Count: 1})},
		{at: t0, ops: ops(Counter(k, 1, 3, hold)), want: rs(result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: hold, Count: 2})},
	})
	h.clock.Advance(hold)
	probe := Counter(k, 0, 3, hold)
	h.eventually("count forgotten after its hold", func() bool { return h.peekOne(probe).Count == 0 })
	h.run([]step{
		{at: t0.Add(hold), peek: true, ops: ops(probe), want: rs(result{Allowed: true, Remaining: 3})},
		{at: t0.Add(hold), ops: ops(Counter(k, 1, 3, hold)), want: rs(result{Allowed: true, Spent: true, Remaining: 2, ResetAfter: hold, Count: 1})},
	})
}
