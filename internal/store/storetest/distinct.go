package storetest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

// distinctCases test Distinct ops: distinct members over a sliding window.
var distinctCases = []testCase{
	{"distinct/counts_members_once", testDistinctCounts},
	{"distinct/window_slides_by_steps", testDistinctSlides},
	{"distinct/cost_zero_only_counts", testDistinctCountOnly},
	{"distinct/denied_batch_adds_nothing", testDistinctDeniedBatch},
	{"distinct/estimate_within_5_percent", testDistinctEstimate},
	{"distinct/bad_batches", testDistinctBadBatches},
	{"distinct/except_not_counted", testDistinctExcept},
	{"distinct/add_slides_like_a_spend", testDistinctAddSlides},
	{"distinct/add_by_mark_once", testDistinctAddMarkOnce},
	{"distinct/bad_adds", testDistinctBadAdds},
	{"distinct/unconfirmed_ends_after_hold", testDistinctHold},
	{"distinct/confirm_keeps_the_window", testDistinctConfirm},
	{"distinct/hold_never_past_the_window", testDistinctHoldCapped},
	{"distinct/retry_after_first_end", testDistinctRetryAfter},
}

// testDistinctHoldCapped: a sub-window of a spend with a Hold longer than
// the window ends when it leaves the window.
func testDistinctHoldCapped(h *harness) {
	k := h.key("net")
	op := Distinct(k, "a", 1, time.Minute, 5)
	op.Limit = store.Distinct{Step: time.Minute, Max: 5, Hold: 20 * time.Minute}
	h.run([]step{
		{at: t0, ops: ops(op), want: rs(result{Allowed: true, Spent: true, Remaining: 5, ResetAfter: 5 * time.Minute})},
		{at: t0.Add(5 * time.Minute), peek: true, ops: ops(op), want: rs(result{Allowed: true, Remaining: 5})},
	})
}

// testDistinctRetryAfter: a denied op's RetryAfter is when the first live
// sub-window ends, which an unconfirmed later one may do before a
// confirmed earlier one; its ResetAfter when the last does.
func testDistinctRetryAfter(h *harness) {
	k := h.key("net")
	spend := func(m string) []store.Op {
		op := Distinct(k, m, 1, time.Hour, 1)
		op.Limit = store.Distinct{Step: time.Hour, Max: 1, Hold: 20 * time.Minute}
		return ops(op)
	}
	h.run([]step{
		{at: t0, ops: spend("a"), want: rs(result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: 20 * time.Minute})},
	})
	h.clock.Set(t0.Add(time.Minute))
	h.settle(confirmDistinct(k, time.Hour))
	h.run([]step{
		{at: t0.Add(time.Hour), ops: spend("b"), want: rs(result{Allowed: true, Spent: true, Count: 1, ResetAfter: 4 * time.Hour})},
		{at: t0.Add(time.Hour + time.Minute), ops: spend("c"), want: rs(result{Count: 2, RetryAfter: 19 * time.Minute, ResetAfter: 3*time.Hour + 59*time.Minute})},
	})
}

// heldDistinct is a Distinct op on key adding member (cost 1) or only
// counting (cost 0), with sub-windows of an hour, a limit of 100 and an
// unconfirmed hold of 20 minutes.
func heldDistinct(key, member string, cost int64) store.Op {
	op := Distinct(key, member, cost, time.Hour, 100)
	op.Limit = store.Distinct{Step: time.Hour, Max: 100, Hold: 20 * time.Minute}
	return op
}

// testDistinctHold: a spend with a Hold keeps its sub-window for the Hold,
// not for the window; a later spend makes it end Hold after itself only
// once that is more than an eighth of the Hold later, a peek never; a
// spend after the sub-window ended starts it afresh.
func testDistinctHold(h *harness) {
	k := h.key("net")
	spend := func(m string) []store.Op { return ops(heldDistinct(k, m, 1)) }
	look := ops(heldDistinct(k, "z", 0))
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	h.run([]step{
		{at: t0, ops: spend("a"), want: rs(result{Allowed: true, Spent: true, Remaining: 100, ResetAfter: 20 * time.Minute})},
		// two minutes on, within an eighth of the hold (2.5 minutes): the
		// end stays
		{at: at(2 * time.Minute), ops: spend("b"), want: rs(result{Allowed: true, Spent: true, Remaining: 99, Count: 1, ResetAfter: 18 * time.Minute})},
		{at: at(3 * time.Minute), ops: spend("c"), want: rs(result{Allowed: true, Spent: true, Remaining: 98, Count: 2, ResetAfter: 20 * time.Minute})},
		{at: at(22 * time.Minute), peek: true, ops: look, want: rs(result{Allowed: true, Remaining: 97, Count: 3, ResetAfter: time.Minute})},
		{at: at(23 * time.Minute), peek: true, ops: look, want: rs(result{Allowed: true, Remaining: 100})},
		{at: at(30 * time.Minute), ops: spend("d"), want: rs(result{Allowed: true, Spent: true, Remaining: 100, ResetAfter: 20 * time.Minute})},
		{at: at(31 * time.Minute), peek: true, ops: look, want: rs(result{Allowed: true, Remaining: 99, Count: 1, ResetAfter: 19 * time.Minute})},
	})
}

// confirmDistinct is a ConfirmDistinct of the Distinct key k of
// sub-windows of step.
func confirmDistinct(k string, step time.Duration) store.Settlement {
	return store.Settlement{Key: k, Action: store.ConfirmDistinct, Span: step}
}

// testDistinctConfirm: a ConfirmDistinct keeps a key's live sub-windows
// until they leave the window, and a later unconfirmed spend does not
// shorten them; one on an absent key creates nothing; one without a step
// is a bad batch.
func testDistinctConfirm(h *harness) {
	k, gone := h.key("net"), h.key("gone")
	look := ops(heldDistinct(k, "z", 0))
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	h.run([]step{
		{at: t0, ops: ops(heldDistinct(k, "a", 1)), want: rs(result{Allowed: true, Spent: true, Remaining: 100, ResetAfter: 20 * time.Minute})},
	})
	h.clock.Set(at(10 * time.Minute))
	h.settle(confirmDistinct(k, time.Hour), confirmDistinct(gone, time.Hour))
	h.run([]step{
		{at: at(10 * time.Minute), peek: true, ops: look, want: rs(result{Allowed: true, Remaining: 99, Count: 1, ResetAfter: 4*time.Hour + 50*time.Minute})},
		{at: at(30 * time.Minute), ops: ops(heldDistinct(k, "b", 1)), want: rs(result{Allowed: true, Spent: true, Remaining: 99, Count: 1, ResetAfter: 4*time.Hour + 30*time.Minute})},
		{at: at(4 * time.Hour), peek: true, ops: look, want: rs(result{Allowed: true, Remaining: 98, Count: 2, ResetAfter: time.Hour})},
		{at: at(5 * time.Hour), peek: true, ops: look, want: rs(result{Allowed: true, Remaining: 100})},
		{at: at(5 * time.Hour), peek: true, ops: ops(heldDistinct(gone, "z", 0)), want: rs(result{Allowed: true, Remaining: 100})},
	})
	if err := h.s.Settle(context.Background(), []store.Settlement{confirmDistinct(k, 0)}); !errors.Is(err, store.ErrBadBatch) {
		h.t.Errorf("ConfirmDistinct without a step: Settle = %v, want ErrBadBatch", err)
	}
}

// add is an Add of member to the Distinct key k of sub-windows of step.
func add(k, member string, step time.Duration) store.Settlement {
	return store.Settlement{Key: k, Action: store.Add, Member: member, Span: step}
}

// testDistinctExcept: an op with an Except key counts only the members of
// its own window that the Except key's window does not hold.
func testDistinctExcept(h *harness) {
	k, succeeded := h.key("net"), h.key("net")+":succeeded"
	count := func(m string, cost int64) []store.Op {
		op := Distinct(k, m, cost, time.Minute, 1)
		op.Except = succeeded
		return ops(op)
	}
	full := 5 * time.Minute
	h.settle(add(succeeded, "a", time.Minute))
	h.run([]step{
		{at: t0, ops: count("a", 1), want: rs(result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: full})},
		{at: t0, ops: count("b", 1), want: rs(result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: full})},
		{at: t0, ops: count("c", 1), want: rs(result{Allowed: true, Spent: true, Remaining: 0, Count: 1, ResetAfter: full})},
		{at: t0, peek: true, ops: count("d", 1), want: rs(result{Remaining: 0, Count: 2, RetryAfter: full, ResetAfter: full})},
	})
	h.settle(add(succeeded, "b", time.Minute), add(succeeded, "x", time.Minute))
	h.run([]step{
		{at: t0, peek: true, ops: count("d", 1), want: rs(result{Allowed: true, Remaining: 0, Count: 1, ResetAfter: full})},
	})
}

// testDistinctAddSlides: a member an Add put in leaves the window as a
// spent one does, five steps after its sub-window began.
func testDistinctAddSlides(h *harness) {
	k := h.key("net")
	h.settle(add(k, "a", time.Minute))
	h.clock.Set(t0.Add(90 * time.Second))
	h.settle(add(k, "b", time.Minute), add(k, "a", time.Minute))
	look := ops(Distinct(k, "c", 0, time.Minute, 100))
	h.run([]step{
		{at: t0.Add(90 * time.Second), peek: true, ops: look, want: rs(result{Allowed: true, Remaining: 98, Count: 2, ResetAfter: 4*time.Minute + 30*time.Second})},
		{at: t0.Add(5 * time.Minute), peek: true, ops: look, want: rs(result{Allowed: true, Remaining: 98, Count: 2, ResetAfter: time.Minute})},
		{at: t0.Add(6 * time.Minute), peek: true, ops: look, want: rs(result{Allowed: true, Remaining: 100})},
	})
}

// testDistinctAddMarkOnce: a report's Add applies with its mark.
func testDistinctAddMarkOnce(h *harness) {
	k, mark := h.key("net"), h.key("attempt")+":reported"
	if !h.markOnce(mark, time.Minute, add(k, "a", time.Minute)) {
		h.t.Fatal("first MarkOnce did not mark")
	}
	h.run([]step{
		{at: t0, peek: true, ops: ops(Distinct(k, "b", 0, time.Minute, 5)), want: rs(result{Allowed: true, Remaining: 4, Count: 1, ResetAfter: 5 * time.Minute})},
	})
}

// testDistinctBadAdds: an Add needs a member and a step; an op's Except
// is not its own key.
func testDistinctBadAdds(h *harness) {
	k := h.key("net")
	for name, st := range map[string]store.Settlement{
		"no member":  add(k, "", time.Minute),
		"bad member": add(k, "a b", time.Minute),
		"no step":    add(k, "a", 0),
		"negative":   add(k, "a", -time.Minute),
	} {
		if err := h.s.Settle(context.Background(), []store.Settlement{st}); !errors.Is(err, store.ErrBadBatch) {
			h.t.Errorf("%s: Settle = %v, want ErrBadBatch", name, err)
		}
	}
	op := Distinct(k, "a", 1, time.Minute, 5)
	op.Except = k
	if err := h.s.Do(context.Background(), ops(op), make([]store.Result, 1)); !errors.Is(err, store.ErrBadBatch) {
		h.t.Errorf("Except of its own key: Do = %v, want ErrBadBatch", err)
	}
}

// testDistinctCounts: each new member counts once; past the limit the op
// does not fit, and a hard one denies and adds nothing.
func testDistinctCounts(h *harness) {
	k := h.key("net")
	add := func(m string) []store.Op { return ops(Distinct(k, m, 1, time.Minute, 2)) }
	full := 5 * time.Minute
	h.run([]step{
		{at: t0, ops: add("a"), want: rs(result{Allowed: true, Spent: true, Remaining: 2, ResetAfter: full})},
		{at: t0, ops: add("a"), want: rs(result{Allowed: true, Spent: true, Remaining: 1, Count: 1, ResetAfter: full})},
		{at: t0, ops: add("b"), want: rs(result{Allowed: true, Spent: true, Remaining: 1, Count: 1, ResetAfter: full})},
		{at: t0, ops: add("c"), want: rs(result{Allowed: true, Spent: true, Remaining: 0, Count: 2, ResetAfter: full})},
		{at: t0, ops: add("d"), want: rs(result{Remaining: 0, Count: 3, RetryAfter: full, ResetAfter: full})},
		{at: t0, peek: true, ops: add("e"), want: rs(result{Remaining: 0, Count: 3, RetryAfter: full, ResetAfter: full})},
	})
}

// testDistinctSlides: members leave the window one sub-window at a time,
// five steps after theirs began.
func testDistinctSlides(h *harness) {
	k := h.key("net")
	add := func(m string) []store.Op { return ops(Distinct(k, m, 1, time.Minute, 100)) }
	t1, t4, t5, t6 := t0.Add(time.Minute+30*time.Second), t0.Add(4*time.Minute), t0.Add(5*time.Minute), t0.Add(6*time.Minute+30*time.Second)
	h.run([]step{
		{at: t0, ops: add("a"), want: rs(result{Allowed: true, Spent: true, Remaining: 100, ResetAfter: 5 * time.Minute})},
		{at: t1, ops: add("b"), want: rs(result{Allowed: true, Spent: true, Remaining: 99, Count: 1, ResetAfter: 4*time.Minute + 30*time.Second})},
		{at: t4, peek: true, ops: add("c"), want: rs(result{Allowed: true, Remaining: 98, Count: 2, ResetAfter: 2 * time.Minute})},
		// a's minute has left the window; b's is still in it.
		{at: t5, peek: true, ops: add("c"), want: rs(result{Allowed: true, Remaining: 99, Count: 1, ResetAfter: time.Minute})},
		{at: t6, peek: true, ops: add("c"), want: rs(result{Allowed: true, Remaining: 100})},
	})
}

// testDistinctCountOnly: a cost of 0 counts and adds nothing.
func testDistinctCountOnly(h *harness) {
	k := h.key("net")
	h.run([]step{
		{at: t0, ops: ops(Distinct(k, "a", 1, time.Minute, 5)), want: rs(result{Allowed: true, Spent: true, Remaining: 5, ResetAfter: 5 * time.Minute})},
		{at: t0, ops: ops(Distinct(k, "b", 0, time.Minute, 5)), want: rs(result{Allowed: true, Remaining: 4, Count: 1, ResetAfter: 5 * time.Minute})},
		{at: t0, ops: ops(Distinct(k, "c", 0, time.Minute, 5)), want: rs(result{Allowed: true, Remaining: 4, Count: 1, ResetAfter: 5 * time.Minute})},
	})
}

// testDistinctDeniedBatch: a batch another op of the same subject denies
// adds no member; a soft Distinct op past its limit denies nothing. (On
// Redis Cluster a member added in one slot stays when another slot denies:
// see package redisstore.)
func testDistinctDeniedBatch(h *harness) {
	k := h.key("net")
	acct := k + ":acct"
	h.run([]step{
		{at: t0, ops: ops(Rate(acct, 1, time.Hour, 1)), want: rs(result{Allowed: true, Spent: true, ResetAfter: time.Hour})},
		{at: t0, ops: ops(Distinct(k, "a", 1, time.Minute, 5), Rate(acct, 1, time.Hour, 1)), want: rs(
			result{Allowed: true, Remaining: 5},
			result{RetryAfter: time.Hour, ResetAfter: time.Hour},
		)},
		{at: t0, ops: ops(Soft(Distinct(k, "a", 1, time.Minute, 0+1)), Rate(h.key("other"), 1, time.Hour, 1)), want: rs(
			result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: 5 * time.Minute},
			result{Allowed: true, Spent: true, ResetAfter: time.Hour},
		)},
		{at: t0, ops: ops(Soft(Distinct(k, "b", 1, time.Minute, 0+1)), Rate(h.key("third"), 1, time.Hour, 1)), want: rs(
			result{Allowed: true, Spent: true, Remaining: 0, Count: 1, ResetAfter: 5 * time.Minute},
			result{Allowed: true, Spent: true, ResetAfter: time.Hour},
		)},
		{at: t0, ops: ops(Soft(Distinct(k, "c", 1, time.Minute, 0+1)), Rate(h.key("fourth"), 1, time.Hour, 1)), want: rs(
			result{Remaining: 0, Count: 2, RetryAfter: 5 * time.Minute, ResetAfter: 5 * time.Minute},
			result{Allowed: true, Spent: true, ResetAfter: time.Hour},
		)},
	})
}

// testDistinctEstimate: past 100 members the count is within 5%, and a
// member seen again adds nothing.
func testDistinctEstimate(h *harness) {
	k := h.key("net")
	res := make([]store.Result, 1)
	var seen int64
	for _, n := range []int{100, 500, 2000} {
		for ; seen < int64(n); seen++ {
			if err := h.s.Do(context.Background(), ops(Distinct(k, fmt.Sprintf("m%d", seen), 1, time.Hour, 1_000_000)), res); err != nil {
				h.t.Fatal(err)
			}
		}
		got := h.peekOne(Distinct(k, "m0", 1, time.Hour, 1_000_000)).Count
		if d := float64(got-int64(n)) / float64(n); d > 0.05 || d < -0.05 {
			h.t.Errorf("%d members: estimate %d, off by %.1f%%", n, got, 100*d)
		}
	}
}

// testDistinctBadBatches: a Distinct op needs a valid member, a step and a
// limit, and a cost of 0 or 1.
func testDistinctBadBatches(h *harness) {
	k := h.key("net")
	for name, op := range map[string]store.Op{
		"no member": Distinct(k, "", 1, time.Minute, 1),
		"cost 2":    Distinct(k, "a", 2, time.Minute, 1),
		"no step":   Distinct(k, "a", 1, 0, 1),
		"no limit":  Distinct(k, "a", 1, time.Minute, 0),
		"a toll":    Toll(Distinct(k, "a", 1, time.Minute, 1)),
	} {
		if err := h.s.Do(context.Background(), ops(op), make([]store.Result, 1)); !errors.Is(err, store.ErrBadBatch) {
			h.t.Errorf("%s: Do = %v, want ErrBadBatch", name, err)
		}
	}
}
