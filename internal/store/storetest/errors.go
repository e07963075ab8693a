package storetest

import (
	"context"
	"errors"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

// errorCases test batches no store can evaluate, and canceled contexts.
var errorCases = []testCase{
	{"validate", testValidate},
	{"context_canceled", testContextCanceled},
}

// testValidate: a bad batch is store.ErrBadBatch, and touches neither the
// results nor the state; an empty batch is no error.
func testValidate(h *harness) {
	good := Rate(h.key("good"), 1, time.Minute, 5)
	k := h.key("bad")
	cases := []struct {
		name string
		ops  []store.Op
		res  int
	}{
		{"fewer results", ops(good, good), 1},
		{"more results", ops(good), 2},
		{"empty key", ops(Rate("", 1, time.Minute, 5)), 1},
		{"negative cost", ops(Rate(k, -1, time.Minute, 5)), 1},
		{"no limit", ops(store.Op{Key: k, Cost: 1}), 1},
		{"unknown role", ops(store.Op{Key: k, Cost: 1, Role: store.Shadow + 1, Limit: store.Rate{Interval: time.Minute, Burst: 5}}), 1},
		{"zero interval", ops(Rate(k, 1, 0, 5)), 1},
		{"negative interval", ops(Rate(k, 1, -time.Minute, 5)), 1},
		{"zero burst", ops(Rate(k, 1, time.Minute, 0)), 1},
		{"zero limit", ops(Counter(k, 1, 0, time.Hour)), 1},
		{"zero hold", ops(Counter(k, 1, 3, 0)), 1},
		{"good then bad", ops(good, Rate(k, 1, time.Minute, -1)), 2},
		{"bad then good", ops(Counter(k, 1, -3, time.Hour), good), 2},
	}
	untouched := store.Result{Remaining: -7, Count: -7, RetryAfter: -7}
	for _, c := range cases {
		for _, peek := range []bool{false, true} {
			res := make([]store.Result, c.res)
			for i := range res {
				res[i] = untouched
			}
			var err error
			if peek {
				err = h.s.Peek(context.Background(), c.ops, res)
			} else {
				err = h.s.Do(context.Background(), c.ops, res)
			}
			if !errors.Is(err, store.ErrBadBatch) {
				h.t.Errorf("%s (peek %v): err = %v, want store.ErrBadBatch", c.name, peek, err)
			}
			for i := range res {
				if res[i] != untouched {
					h.t.Errorf("%s (peek %v): res[%d] = %+v, want untouched", c.name, peek, i, res[i])
				}
			}
		}
	}
	h.run([]step{
		{at: t0, peek: true, ops: ops(good), want: rs(result{Allowed: true, Remaining: 5})},
		{at: t0, ops: nil, want: nil},
		{at: t0, peek: true, ops: nil, want: nil},
	})
}

// testContextCanceled: a canceled context is an error, and spends nothing.
func testContextCanceled(h *harness) {
	k := h.key("account")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := make([]store.Result, 1)
	if err := h.s.Do(ctx, ops(Rate(k, 1, time.Minute, 5)), res); !errors.Is(err, context.Canceled) {
		h.t.Errorf("Do with a canceled context: err = %v, want context.Canceled", err)
	}
	h.run([]step{
		{at: t0, peek: true, ops: ops(Rate(k, 1, time.Minute, 5)), want: rs(result{Allowed: true, Remaining: 5})},
	})
}
