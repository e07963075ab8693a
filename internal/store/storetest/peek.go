package storetest

import (
	"context"
	"time"
)

// peekCases test Peek and Delete.
var peekCases = []testCase{
	{"peek/spends_nothing", testPeekSpendsNothing},
	{"delete", testDelete},
}

// testPeekSpendsNothing: Peek evaluates like Do and changes nothing.
func testPeekSpendsNothing(h *harness) {
	var (
		r = h.key("account")
		c = h.key("consecutive")
	)
	batch := ops(Rate(r, 2, time.Minute, 5), Counter(c, 1, 3, time.Hour))
	h.run([]step{
		{at: t0, peek: true, ops: batch, want: rs(result{Allowed: true, Remaining: 5}, result{Allowed: true, Remaining: 3})},
		{at: t0, peek: true, ops: batch, want: rs(result{Allowed: true, Remaining: 5}, result{Allowed: true, Remaining: 3})},
		{at: t0, ops: batch, want: rs(
			result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute},
			result{Allowed: true, Spent: true, Remaining: 2, ResetAfter: time.Hour, Count: 1},
		)},
		{at: t0, peek: true, ops: ops(Rate(r, 4, time.Minute, 5), Counter(c, 3, 3, time.Hour)), want: rs(
			result{Remaining: 3, RetryAfter: time.Minute, ResetAfter: 2 * time.Minute},
			result{Remaining: 2, ResetAfter: time.Hour, Count: 1},
		)},
		{at: t0, ops: batch, want: rs(
			result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: 4 * time.Minute},
			result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: time.Hour, Count: 2},
		)},
	})
}

// testDelete: a deleted key is absent; deleting absent keys is no error.
func testDelete(h *harness) {
	var (
		r = h.key("account")
		c = h.key("consecutive")
		m = h.key("attempt")
	)
	batch := ops(Rate(r, 5, time.Minute, 5), Counter(c, 3, 3, time.Hour))
	h.run([]step{
		{at: t0, ops: batch, want: rs(
			result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 5 * time.Minute},
			result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: time.Hour, Count: 3},
		)},
	})
	if !h.markOnce(m, time.Hour) {
		h.t.Fatal("MarkOnce of a new key = false, want true")
	}
	if err := h.s.Delete(context.Background(), r, c, m, h.key("absent")); err != nil {
		h.t.Fatalf("Delete: %v", err)
	}
	if err := h.s.Delete(context.Background()); err != nil {
		h.t.Fatalf("Delete of no keys: %v", err)
	}
	h.run([]step{
		{at: t0, ops: batch, want: rs(
			result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 5 * time.Minute},
			result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: time.Hour, Count: 3},
		)},
	})
	if !h.markOnce(m, time.Hour) {
		h.t.Error("MarkOnce after Delete = false, want true")
	}
}
