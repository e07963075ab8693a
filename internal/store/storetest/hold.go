package storetest

import (
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

// holdCases are the cases of how long a Counter is kept: a spend never
// shortens a key's life, and a Confirm lengthens it.
var holdCases = []testCase{
	{"counter/spend_keeps_the_later_deadline", testCounterLaterDeadline},
	{"counter/confirm_keeps_the_count_longer", testCounterConfirm},
	{"counter/confirm_grows_with_the_count", testCounterConfirmGrows},
	{"counter/confirm_absent", testCounterConfirmAbsent},
	{"mark_once/confirms", testMarkOnceConfirms},
}

// testCounterLaterDeadline: a spend with a short Hold on a key held longer
// keeps the longer deadline.
func testCounterLaterDeadline(h *harness) {
	k := h.key("consecutive")
	h.run([]step{
		{at: t0, ops: ops(Counter(k, 1, 5, time.Hour)), want: rs(result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Hour, Count: 1})},
		{at: t0.Add(time.Minute), ops: ops(Counter(k, 1, 5, 10*time.Minute)), want: rs(result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 59 * time.Minute, Count: 2})},
		{at: t0.Add(55 * time.Minute), ops: ops(Counter(k, 1, 5, 10*time.Minute)), want: rs(result{Allowed: true, Spent: true, Remaining: 2, ResetAfter: 10 * time.Minute, Count: 3})},
	})
}

// testCounterConfirm: a Confirm keeps the count, and keeps the key
// for its Amount from now when that is later than its deadline; a shorter
// one changes nothing.
func testCounterConfirm(h *harness) {
	k := h.key("consecutive")
	h.run([]step{
		{at: t0, ops: ops(Counter(k, 1, 5, 10*time.Minute)), want: rs(result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: 10 * time.Minute, Count: 1})},
	})
	h.clock.Set(t0.Add(time.Minute))
	h.settle(store.Settlement{Key: k, Action: store.Confirm, Span: 2 * time.Hour})
	h.settle(store.Settlement{Key: k, Action: store.Confirm, Span: time.Minute})
	h.run([]step{
		{at: t0.Add(2 * time.Minute), ops: ops(Counter(k, 1, 5, 10*time.Minute)), want: rs(result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2*time.Hour - time.Minute, Count: 2})},
	})
}

// testCounterConfirmGrows: a Confirm with a Max keeps a count for its Span
// × count ÷ Max, and for all of its Span once the count reaches Max.
func testCounterConfirmGrows(h *harness) {
	k, full := h.key("consecutive"), h.key("at-max")
	h.run([]step{
		{at: t0, ops: ops(Counter(k, 1, 5, time.Minute), Counter(full, 1, 5, time.Minute)), want: rs(
			result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Minute, Count: 1},
			result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Minute, Count: 1},
		)},
		{at: t0, ops: ops(Counter(k, 1, 5, time.Minute), Counter(full, 4, 5, time.Minute)), want: rs(
			result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: time.Minute, Count: 2},
			result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: time.Minute, Count: 5},
		)},
	})
	// Two of 4 confirmed for 4h: kept 2h. Five of 5 for 3h: all of it.
	h.settle(store.Settlement{Key: k, Action: store.Confirm, Span: 4 * time.Hour, Max: 4},
		store.Settlement{Key: full, Action: store.Confirm, Span: 3 * time.Hour, Max: 5})
	h.run([]step{
		{at: t0, peek: true, ops: ops(Counter(k, 0, 5, time.Minute), Counter(full, 0, 5, time.Minute)), want: rs(
			result{Allowed: true, Remaining: 3, ResetAfter: 2 * time.Hour, Count: 2},
			result{Allowed: true, Remaining: 0, ResetAfter: 3 * time.Hour, Count: 5},
		)},
	})
}

// testCounterConfirmAbsent: confirming a key that does not exist creates
// nothing.
func testCounterConfirmAbsent(h *harness) {
	k := h.key("consecutive")
	h.settle(store.Settlement{Key: k, Action: store.Confirm, Span: time.Hour})
	h.run([]step{
		{at: t0, peek: true, ops: ops(Counter(k, 0, 5, time.Hour)), want: rs(result{Allowed: true, Remaining: 5})},
	})
}

// testMarkOnceConfirms: the call that sets a mark applies a confirming
// settlement with it; a second call does not.
func testMarkOnceConfirms(h *harness) {
	m, k := h.key("attempt"), h.key("consecutive")
	h.run([]step{
		{at: t0, ops: ops(Counter(k, 1, 5, 10*time.Minute)), want: rs(result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: 10 * time.Minute, Count: 1})},
	})
	confirm := store.Settlement{Key: k, Action: store.Confirm, Span: time.Hour}
	if !h.markOnce(m, time.Hour, confirm) {
		h.t.Fatal("first MarkOnce = false, want true")
	}
	if h.markOnce(m, time.Hour, store.Settlement{Key: k, Action: store.Reset}) {
		h.t.Fatal("second MarkOnce = true, want false")
	}
	h.run([]step{
		{at: t0, ops: ops(Counter(k, 1, 5, 10*time.Minute)), want: rs(result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: time.Hour, Count: 2})},
	})
}
