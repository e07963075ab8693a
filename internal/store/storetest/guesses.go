package storetest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

// guessCases test an account's memory of its last failed guesses (the
// Guesses kind) and the FreeOnRepeat ops a remembered guess does not spend.
// Each case's guess key, account key and address key have subjects of their
// own, so on a Redis Cluster they sit in different slots, as an account's
// memory and its account+ip pairs do.
var guessCases = []testCase{
	{"guesses/repeat_is_free", testGuessRepeatIsFree},
	{"guesses/distinct_slow", testGuessDistinctSlow},
	{"guesses/oldest_forgotten", testGuessOldestForgotten},
	{"guesses/forget", testGuessForget},
	{"guesses/confirm_keeps", testGuessConfirmKeeps},
	{"guesses/delete_forgets", testGuessDeleteForgets},
	{"guesses/hold", testGuessHold},
	{"guesses/peek", testGuessPeek},
	{"guesses/denied_not_remembered", testGuessDeniedNotRemembered},
	{"guesses/concurrent_first_tries", testGuessConcurrentFirstTries},
	{"guesses/validate", testGuessValidate},
	{"guesses/allowance_caps_free_repeats", testGuessAllowance},
	{"guesses/allowance_validate", testGuessAllowanceValidate},
}

// allowance is an allowance of free repeats on the guesses' subject: 2
// back to back, then one an hour.
func (h *harness) allowance() store.Op {
	op := Rate(h.key("guesses")+":repeats", 1, time.Hour, 2)
	op.Role, op.OnRepeat = store.Soft, true
	return op
}

// testGuessAllowance: with an allowance of 2 free repeats, a new guess
// spends none of it, the first two repeats are free and spend it, and the
// third is capped: it pays the account and its counter like any failure.
func testGuessAllowance(h *harness) {
	batch := append(h.guessBatch(0xfeed), h.allowance())
	do := func() []store.Result {
		h.t.Helper()
		res := make([]store.Result, len(batch))
		if err := h.s.Do(context.Background(), batch, res); err != nil {
			h.t.Fatalf("Do: %v", err)
		}
		return res
	}
	type want struct {
		repeat, capped, allowanceSpent bool
		account, count                 int64
	}
	for i, w := range []want{
		{account: 2, count: 1},
		{repeat: true, allowanceSpent: true, account: 2, count: 1},
		{repeat: true, allowanceSpent: true, account: 2, count: 1},
		{capped: true, account: 1, count: 2},
		{capped: true, account: 0, count: 3},
	} {
		res := do()
		got := want{res[3].Repeat, res[3].Capped, res[4].Spent, res[0].Remaining, res[1].Count}
		if got != w {
			h.t.Errorf("check %d: %+v, want %+v", i, got, w)
		}
	}
	// An hour later one more repeat is free.
	h.clock.Set(t0.Add(time.Hour))
	if res := do(); !res[3].Repeat || res[3].Capped || !res[4].Spent || res[1].Spent {
		h.t.Errorf("an hour later: guesses %+v, allowance %+v, counter %+v; want one free repeat", res[3], res[4], res[1])
	}
}

// testGuessAllowanceValidate: an allowance is one soft Rate op, always
// counted, beside a Guesses op.
func testGuessAllowanceValidate(h *harness) {
	g := Guesses(h.key("guesses"), 1, guessHold)
	hard := h.allowance()
	hard.Role = store.Enforce
	counter := Counter(h.key("guesses")+":c", 1, 5, time.Hour)
	counter.Role, counter.OnRepeat = store.Soft, true
	for name, b := range map[string][]store.Op{
		"without guesses": ops(h.allowance()),
		"enforced":        ops(g, hard),
		"a counter":       ops(g, counter),
		"two":             ops(g, h.allowance(), func() store.Op { op := h.allowance(); op.Key += "2"; return op }()),
		"free on repeat":  ops(g, func() store.Op { op := h.allowance(); op.FreeOnRepeat = true; return op }()),
	} {
		if err := h.s.Do(context.Background(), b, make([]store.Result, len(b))); !errors.Is(err, store.ErrBadBatch) {
			h.t.Errorf("%s: Do = %v, want ErrBadBatch", name, err)
		}
	}
}

// guessHold is how long the cases remember a guess.
const guessHold = 24 * time.Hour

// guessBatch is one check as the cases make it: an account rate of burst 3
// and a consecutive-failure counter that a repeat does not pay for, an
// address rate of burst 100 that it does, and the guess.
func (h *harness) guessBatch(g uint64) []store.Op {
	return ops(
		FreeOnRepeat(Rate(h.key("account"), 1, time.Minute, 3)),
		FreeOnRepeat(Counter(h.key("consecutive"), 1, 100, time.Hour)),
		Rate(h.key("ip"), 1, time.Minute, 100),
		Guesses(h.key("guesses"), g, guessHold),
	)
}

// testGuessRepeatIsFree: six tries of one guess spend the account and its
// counter once, and the address every time.
func testGuessRepeatIsFree(h *harness) {
	batch := h.guessBatch(0xfeed)
	h.run([]step{{at: t0, ops: batch, want: rs(
		result{Allowed: true, Spent: true, Remaining: 2, ResetAfter: time.Minute},
		result{Allowed: true, Spent: true, Remaining: 99, ResetAfter: time.Hour, Count: 1},
		result{Allowed: true, Spent: true, Remaining: 99, ResetAfter: time.Minute},
		result{Allowed: true, Spent: true},
	)}})
	for n := int64(2); n <= 6; n++ {
		h.run([]step{{at: t0, ops: batch, want: rs(
			result{Allowed: true, Remaining: 2, ResetAfter: time.Minute},
			result{Allowed: true, Remaining: 99, ResetAfter: time.Hour, Count: 1},
			result{Allowed: true, Spent: true, Remaining: 100 - n, ResetAfter: time.Duration(n) * time.Minute},
			result{Allowed: true, Spent: true, Repeat: true, Count: 1, ResetAfter: guessHold},
		)}})
	}
}

// testGuessDistinctSlow: four distinct guesses spend the account's burst
// of 3 and are denied at the fourth, which is not remembered; a repeat on
// the drained account is denied too: a slowed account stays slowed.
func testGuessDistinctSlow(h *harness) {
	for n := int64(1); n <= 3; n++ {
		found := result{Allowed: true, Spent: true, Count: n - 1, ResetAfter: guessHold}
		if n == 1 {
			found.ResetAfter = 0
		}
		h.run([]step{{at: t0, ops: h.guessBatch(uint64(n)), want: rs(
			result{Allowed: true, Spent: true, Remaining: 3 - n, ResetAfter: time.Duration(n) * time.Minute},
			result{Allowed: true, Spent: true, Remaining: 100 - n, ResetAfter: time.Hour, Count: n},
			result{Allowed: true, Spent: true, Remaining: 100 - n, ResetAfter: time.Duration(n) * time.Minute},
			found,
		)}})
	}
	h.run([]step{
		{at: t0, ops: h.guessBatch(4), want: rs(
			result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: 3 * time.Minute},
			result{Allowed: true, Remaining: 97, ResetAfter: time.Hour, Count: 3},
			result{Allowed: true, Remaining: 97, ResetAfter: 3 * time.Minute},
			result{Allowed: true, Count: 3, ResetAfter: guessHold},
		)},
	})
	// A repeat is denied too. Whether it refreshes its remembered guess is
	// left to the store: on a Redis Cluster the guess's slot cannot know
	// that another slot denied the check.
	batch := h.guessBatch(1)
	res := make([]store.Result, len(batch))
	if err := h.s.Do(context.Background(), batch, res); err != nil {
		h.t.Fatal(err)
	}
	want := rs(
		result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: 3 * time.Minute},
		result{Allowed: true, Remaining: 97, ResetAfter: time.Hour, Count: 3},
		result{Allowed: true, Remaining: 97, ResetAfter: 3 * time.Minute},
	)
	for i := range want {
		if !same(&batch[i], res[i], want[i]) {
			h.t.Errorf("repeat on a slowed account: op %d:\n got %+v\nwant %+v", i, res[i], want[i])
		}
	}
	if g := res[3]; !g.Repeat || g.Count != 3 {
		h.t.Errorf("repeat on a slowed account: guesses %+v, want a repeat of 3", g)
	}
}

// guessOnly is a batch of the guess alone, with a FreeOnRepeat rate that
// shows whether it was a repeat: spent means a new guess.
func (h *harness) guessOnly(g uint64) []store.Op {
	return ops(
		FreeOnRepeat(Rate(h.key("account"), 1, time.Second, 1000)),
		Guesses(h.key("guesses"), g, guessHold),
	)
}

// repeats reports whether each guess of gs, tried in turn at the clock's
// instant, was a repeat.
func (h *harness) repeats(gs ...uint64) []bool {
	h.t.Helper()
	out := make([]bool, len(gs))
	for i, g := range gs {
		b := h.guessOnly(g)
		res := make([]store.Result, len(b))
		if err := h.s.Do(context.Background(), b, res); err != nil {
			h.t.Fatalf("Do: %v", err)
		}
		if res[0].Spent == res[1].Repeat {
			h.t.Errorf("guess %x: account spent %v, repeat %v: want exactly one", g, res[0].Spent, res[1].Repeat)
		}
		out[i] = res[1].Repeat
	}
	return out
}

// wantRepeats checks repeats(gs...) against want.
func (h *harness) wantRepeats(label string, gs []uint64, want ...bool) {
	h.t.Helper()
	got := h.repeats(gs...)
	for i := range want {
		if got[i] != want[i] {
			h.t.Errorf("%s: guess %d (%x): repeat %v, want %v", label, i, gs[i], got[i], want[i])
		}
	}
}

// testGuessOldestForgotten: three guesses are remembered; a fourth pushes
// out the oldest, and a repeat becomes the most recent again.
func testGuessOldestForgotten(h *harness) {
	h.clock.Set(t0)
	h.wantRepeats("first", []uint64{1, 2, 3, 1, 4}, false, false, false, true, false)
	// 1 was tried again after 2 and 3, so 4 pushed out 2.
	h.wantRepeats("after", []uint64{1, 3, 4, 2}, true, true, true, false)
}

// testGuessForget: a Forget (a success report) forgets
// every remembered guess.
func testGuessForget(h *harness) {
	h.clock.Set(t0)
	h.wantRepeats("before", []uint64{7, 8, 7}, false, false, true)
	h.settle(store.Settlement{Key: h.key("guesses"), Action: store.Forget})
	h.wantRepeats("after", []uint64{7, 8}, false, false)
}

// testGuessConfirmKeeps: a guess recorded for a short hold (an unreported
// check) is kept for the Confirm's span (a failure report);
// the others still go at their hold; a later try never shortens it, and
// confirming a guess the key does not hold changes nothing.
func testGuessConfirmKeeps(h *harness) {
	const pending = 20 * time.Minute
	g := h.key("guesses")
	h.run([]step{
		{at: t0, ops: ops(Guesses(g, 1, pending)), want: rs(result{Allowed: true, Spent: true})},
		{at: t0, ops: ops(Guesses(g, 2, pending)), want: rs(result{Allowed: true, Spent: true, Count: 1, ResetAfter: pending})},
	})
	h.settle(store.Settlement{Key: g, Action: store.Confirm, Guess: 1, Span: guessHold},
		store.Settlement{Key: g, Action: store.Confirm, Guess: 9, Span: 2 * guessHold})
	later := t0.Add(30 * time.Minute)
	h.run([]step{
		{at: t0, peek: true, ops: ops(Guesses(g, 1, pending)), want: rs(result{Allowed: true, Repeat: true, Count: 2, ResetAfter: guessHold})},
		{at: later, peek: true, ops: ops(Guesses(g, 2, pending)), want: rs(result{Allowed: true, Count: 1, ResetAfter: guessHold - 30*time.Minute})},
		{at: later, peek: true, ops: ops(Guesses(g, 9, pending)), want: rs(result{Allowed: true, Count: 1, ResetAfter: guessHold - 30*time.Minute})},
		{at: later, ops: ops(Guesses(g, 1, pending)), want: rs(result{Allowed: true, Spent: true, Repeat: true, Count: 1, ResetAfter: guessHold - 30*time.Minute})},
		{at: t0.Add(2 * time.Hour), peek: true, ops: ops(Guesses(g, 1, pending)), want: rs(result{Allowed: true, Repeat: true, Count: 1, ResetAfter: guessHold - 2*time.Hour})},
	})
}

// testGuessDeleteForgets: deleting the key (an account reset) forgets.
func testGuessDeleteForgets(h *harness) {
	h.clock.Set(t0)
	h.wantRepeats("before", []uint64{7, 7}, false, true)
	if err := h.s.Delete(context.Background(), h.key("guesses")); err != nil {
		h.t.Fatalf("Delete: %v", err)
	}
	h.wantRepeats("after", []uint64{7}, false)
}

// testGuessHold: a guess is remembered for its hold from its last try, and
// not a microsecond longer.
func testGuessHold(h *harness) {
	h.clock.Set(t0)
	h.wantRepeats("t0", []uint64{5, 6}, false, false)
	h.clock.Set(t0.Add(time.Hour))
	h.wantRepeats("t0+1h", []uint64{6}, true)
	h.clock.Set(t0.Add(guessHold))
	// 5 is forgotten at t0+hold; 6 was tried again at t0+1h.
	h.wantRepeats("t0+hold", []uint64{6, 5}, true, false)
	// Each try of 6 keeps it for the hold from then: the last at t0+hold.
	h.clock.Set(t0.Add(2*guessHold - time.Microsecond))
	h.wantRepeats("just before 6 is forgotten", []uint64{6}, true)
	// That try keeps it until exactly a hold later.
	h.clock.Set(t0.Add(3*guessHold - time.Microsecond))
	h.wantRepeats("a hold after its last try", []uint64{6}, false)
}

// testGuessPeek: Peek finds a guess and the number remembered, and records
// nothing.
func testGuessPeek(h *harness) {
	g := h.key("guesses")
	h.run([]step{
		{at: t0, peek: true, ops: ops(Guesses(g, 1, guessHold)), want: rs(result{Allowed: true})},
		{at: t0, ops: ops(Guesses(g, 1, guessHold)), want: rs(result{Allowed: true, Spent: true})},
		{at: t0.Add(time.Hour), ops: ops(Guesses(g, 2, guessHold)), want: rs(result{Allowed: true, Spent: true, Count: 1, ResetAfter: guessHold - time.Hour})},
		{at: t0.Add(2 * time.Hour), peek: true, ops: ops(Guesses(g, 1, guessHold)), want: rs(result{Allowed: true, Repeat: true, Count: 2, ResetAfter: guessHold - time.Hour})},
		{at: t0.Add(2 * time.Hour), peek: true, ops: ops(Guesses(g, 3, guessHold)), want: rs(result{Allowed: true, Count: 2, ResetAfter: guessHold - time.Hour})},
	})
}

// testGuessDeniedNotRemembered: a check another op denies (its address
// slowed) records no guess, whichever slot that op is in, so that its
// guess, never verified, costs the account when it is tried for real.
func testGuessDeniedNotRemembered(h *harness) {
	batch := func(g uint64) []store.Op {
		return ops(
			FreeOnRepeat(Rate(h.key("account"), 1, time.Minute, 3)),
			Rate(h.key("ip"), 1, time.Minute, 1),
			Guesses(h.key("guesses"), g, guessHold),
		)
	}
	h.run([]step{
		{at: t0, ops: batch(1), want: rs(
			result{Allowed: true, Spent: true, Remaining: 2, ResetAfter: time.Minute},
			result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: time.Minute},
			result{Allowed: true, Spent: true},
		)},
		{at: t0, ops: batch(2), want: rs(
			result{Allowed: true, Remaining: 2, ResetAfter: time.Minute},
			result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: time.Minute},
			result{Allowed: true, Count: 1, ResetAfter: guessHold},
		)},
		{at: t0.Add(time.Minute), ops: batch(2), want: rs(
			result{Allowed: true, Spent: true, Remaining: 2, ResetAfter: time.Minute},
			result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: time.Minute},
			result{Allowed: true, Spent: true, Count: 1, ResetAfter: guessHold - time.Minute},
		)},
	})
}

// testGuessConcurrentFirstTries: callers trying one new guess at once spend
// the account and its counter exactly once; one of them records the guess
// and every other finds it; every one spends the address.
func testGuessConcurrentFirstTries(h *harness) {
	h.clock.Set(t0)
	batch := ops(
		FreeOnRepeat(Rate(h.key("account"), 1, time.Minute, 100)),
		FreeOnRepeat(Counter(h.key("consecutive"), 1, 100, time.Hour)),
		Rate(h.key("ip"), 1, time.Second, 1000),
		Guesses(h.key("guesses"), 0xabc, guessHold),
	)
	var mu sync.Mutex
	var accountSpent, counterSpent, ipSpent, repeats int
	together(func(int) {
		res := make([]store.Result, len(batch))
		if err := h.s.Do(context.Background(), batch, res); err != nil {
			h.t.Errorf("Do: %v", err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for i, n := range []*int{&accountSpent, &counterSpent, &ipSpent} {
			if res[i].Spent {
				*n++
			}
		}
		if res[3].Repeat {
			repeats++
		}
	})
	if accountSpent != 1 || counterSpent != 1 || ipSpent != callers || repeats != callers-1 {
		h.t.Errorf("account spent %d, counter %d, address %d, repeats %d; want 1, 1, %d, %d",
			accountSpent, counterSpent, ipSpent, repeats, callers, callers-1)
	}
	after := h.peekOne(batch[0])
	if after.Remaining != 99 {
		h.t.Errorf("account remaining %d, want 99", after.Remaining)
	}
	if m := h.peekOne(batch[3]); !m.Repeat || m.Count != 1 {
		h.t.Errorf("memory after: %+v, want the guess alone", m)
	}
}

// testGuessValidate: Guesses ops a store cannot evaluate are
// store.ErrBadBatch.
func testGuessValidate(h *harness) {
	g := h.key("guesses")
	good := Guesses(g, 1, guessHold)
	with := func(f func(*store.Op)) store.Op {
		op := good
		f(&op)
		return op
	}
	cases := map[string][]store.Op{
		"two":       ops(good, Guesses(h.key("other"), 2, guessHold)),
		"cost 2":    ops(with(func(o *store.Op) { o.Cost = 2 })),
		"guess 0":   ops(with(func(o *store.Op) { o.Guess = 0 })),
		"limit 0":   ops(with(func(o *store.Op) { o.Limit = store.Guesses{Max: 0, Hold: guessHold} })),
		"limit 9":   ops(with(func(o *store.Op) { o.Limit = store.Guesses{Max: store.MaxGuesses + 1, Hold: guessHold} })),
		"zero hold": ops(with(func(o *store.Op) { o.Limit = store.Guesses{Max: 3} })),
		"negative":  ops(with(func(o *store.Op) { o.Cost = -1 })),
		"no key":    ops(with(func(o *store.Op) { o.Key = "" })),
	}
	for name, c := range cases {
		err := h.s.Do(context.Background(), c, make([]store.Result, len(c)))
		if !errors.Is(err, store.ErrBadBatch) {
			h.t.Errorf("%s: err = %v, want store.ErrBadBatch", name, err)
		}
	}
	err := h.s.Settle(context.Background(), []store.Settlement{{Key: g, Action: store.Confirm, Span: -time.Hour}})
	if !errors.Is(err, store.ErrBadBatch) {
		h.t.Errorf("confirming for a negative span: err = %v, want store.ErrBadBatch", err)
	}
	if r := h.peekOne(good); r.Count != 0 {
		h.t.Errorf("a bad batch recorded a guess: %+v", r)
	}
}
