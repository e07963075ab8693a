package storetest

import (
	"context"
	"errors"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

// markOnceCases test MarkOnce, with and without settlements.
var markOnceCases = []testCase{
	{"mark_once", testMarkOnce},
	{"mark_once/expires", testMarkOnceExpires},
	{"mark_once/settles", testMarkOnceSettles},
	{"mark_once/bad_settlement", testMarkOnceBadSettlement},
}

// testMarkOnce: the first call sets the key, later ones find it set.
func testMarkOnce(h *harness) {
	var (
		a = h.key("attempt-a")
		b = h.key("attempt-b")
	)
	steps := []struct {
		at   time.Time
		key  string
		want bool
	}{
		{t0, a, true},
		{t0, a, false},
		{t0, b, true},
		{t0.Add(30 * time.Minute), a, false},
		{t0.Add(30 * time.Minute), b, false},
	}
	for i, st := range steps {
		h.clock.Set(st.at)
		if got := h.markOnce(st.key, time.Hour); got != st.want {
			h.t.Errorf("step %d: MarkOnce(%s) = %v, want %v", i, st.key, got, st.want)
		}
	}
}

// testMarkOnceExpires: once its ttl has passed, a key can be set again.
func testMarkOnceExpires(h *harness) {
	const ttl = 200 * time.Millisecond
	k := h.key("attempt")
	if !h.markOnce(k, ttl) {
		h.t.Fatal("MarkOnce of a new key = false, want true")
	}
	h.clock.Advance(ttl)
	h.eventually("MarkOnce true again after its ttl", func() bool { return h.markOnce(k, time.Hour) })
	if h.markOnce(k, time.Hour) {
		h.t.Error("MarkOnce right after it was set again = true, want false")
	}
}

// testMarkOnceSettles: the call that sets a key applies its settlements; a call
// that finds the key set applies none.
func testMarkOnceSettles(h *harness) {
	var (
		m = h.key("attempt")
		r = h.key("account")
		c = h.key("consecutive")
	)
	spend := ops(Rate(r, 2, time.Minute, 5), Counter(c, 1, 100, time.Hour))
	settlements := []store.Settlement{
		{Key: r, Action: store.GiveBack, Span: 2 * time.Minute},
		{Key: c, Action: store.Reset},
	}
	h.run([]step{
		{at: t0, ops: spend, want: rs(
			result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute},
			result{Allowed: true, Spent: true, Remaining: 99, ResetAfter: time.Hour, Count: 1},
		)},
	})
	if !h.markOnce(m, time.Hour, settlements...) {
		h.t.Fatal("MarkOnce of a new key = false, want true")
	}
	h.run([]step{
		{at: t0, peek: true, ops: spend, want: rs(
			result{Allowed: true, Remaining: 5},
			result{Allowed: true, Remaining: 100},
		)},
		{at: t0, ops: spend, want: rs(
			result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute},
			result{Allowed: true, Spent: true, Remaining: 99, ResetAfter: time.Hour, Count: 1},
		)},
	})
	if h.markOnce(m, time.Hour, settlements...) {
		h.t.Fatal("MarkOnce of a set key = true, want false")
	}
	h.run([]step{
		{at: t0, peek: true, ops: spend, want: rs(
			result{Allowed: true, Remaining: 3, ResetAfter: 2 * time.Minute},
			result{Allowed: true, Remaining: 99, ResetAfter: time.Hour, Count: 1},
		)},
	})
}

// testMarkOnceBadSettlement: a bad settlement is store.ErrBadBatch, and neither
// sets the key nor gives anything back.
func testMarkOnceBadSettlement(h *harness) {
	var (
		m = h.key("attempt")
		r = h.key("account")
	)
	h.run([]step{
		{at: t0, ops: ops(Rate(r, 2, time.Minute, 5)), want: rs(result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute})},
	})
	for _, bad := range []store.Settlement{
		{Action: store.GiveBack, Span: time.Minute},
		{Key: r, Action: store.GiveBack, Span: -time.Minute},
		{Key: r, Span: time.Minute},
	} {
		good := store.Settlement{Key: r, Action: store.GiveBack, Span: time.Minute}
		if _, err := h.s.MarkOnce(context.Background(), m, time.Hour, good, bad); !errors.Is(err, store.ErrBadBatch) {
			h.t.Errorf("MarkOnce with settlement %+v: err = %v, want store.ErrBadBatch", bad, err)
		}
	}
	h.run([]step{
		{at: t0, peek: true, ops: ops(Rate(r, 1, time.Minute, 5)), want: rs(result{Allowed: true, Remaining: 3, ResetAfter: 2 * time.Minute})},
	})
	if !h.markOnce(m, time.Hour) {
		h.t.Error("MarkOnce after the refused calls = false, want true")
	}
}
