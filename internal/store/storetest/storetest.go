// Package storetest is the conformance suite every guardian store passes:
// the embedded store and the Redis store run the same tests, so a check is
// decided the same way whichever store holds its keys.
//
// Each test makes a fresh store whose clock is a Clock the test moves between
// fixed instants, and checks exact Results. Two things a store may do in real
// time rather than by that clock, as Redis expiry does, are allowed for: a
// key may expire later by the clock than its state says (only ever after it
// is back to full, so no result changes), and a Counter's Hold may run in real
// time. So a test that needs a Counter or a MarkOnce key to expire uses a
// short ttl, moves the clock past it and waits for it in real time, and a
// Counter found but not spent may report any ResetAfter from its exact value
// by the clock, less ten seconds, up to its Hold. Everything else is exact,
// down to the microsecond: an Interval that is not a whole number of
// microseconds counts as the next whole microsecond.
//
// Keys are unique per test and per process, so the suite also runs against a
// shared database; its tests run one after another, never in parallel. They
// look like guardian's own, a subject in a hash tag, and names that start
// alike have subjects that start alike, so that a store which keeps similar
// subjects together (the Redis store's hashes) holds several keys of one
// test together.
package storetest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

// Factory returns a fresh, empty store whose clock is now. A Redis factory
// flushes its database and passes now as the store's time override.
type Factory func(t *testing.T, now func() time.Time) store.Store

// realSlack is how much real time a test may take, as far as a Counter's
// ResetAfter running down in real time is concerned.
const realSlack = 10 * time.Second

// realWait bounds how long a test waits for a key to expire in real time.
const realWait = 5 * time.Second

// t0 is the instant every test starts at.
var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// runID keeps this process's keys apart from any other run's. Every key
// is under guardian:, so the suite runs as a Redis user whose ACL allows
// only guardian's keys.
var runID = strings.ToLower(rand.Text()[:8])

// Run runs every conformance test against stores made by newStore, as
// subtests of t.
func Run(t *testing.T, newStore Factory) {
	tests := []struct {
		name string
		run  func(*harness)
	}{
		{"rate/burst_then_steady", testRateBurstThenSteady},
		{"rate/cost_above_one", testRateCostAboveOne},
		{"rate/cost_above_burst", testRateCostAboveBurst},
		{"rate/cost_zero", testRateCostZero},
		{"rate/interval_rounds_up_to_microseconds", testRateIntervalRounding},
		{"rate/full_again_after_reset", testRateFullAgain},
		{"counter/limit", testCounterLimit},
		{"counter/cost", testCounterCost},
		{"counter/hold_expires", testCounterHoldExpires},
		{"batch/all_or_nothing", testAllOrNothing},
		{"batch/counter_with_rate", testCounterWithRate},
		{"shadow/spends_when_enforced_denied", testShadowSpendsWhenDenied},
		{"shadow/denied_does_not_deny", testShadowDeniedDoesNotDeny},
		{"soft/never_denies", testSoftNeverDenies},
		{"soft/spent_only_with_the_batch", testSoftSpentWithTheBatch},
		{"refund/rate", testRefundRate},
		{"refund/rate_never_beyond_full", testRefundNeverBeyondFull},
		{"refund/counter", testRefundCounter},
		{"refund/absent", testRefundAbsent},
		{"peek/spends_nothing", testPeekSpendsNothing},
		{"delete", testDelete},
		{"mark_once", testMarkOnce},
		{"mark_once/expires", testMarkOnceExpires},
		{"mark_once/refunds", testMarkOnceRefunds},
		{"mark_once/bad_refund", testMarkOnceBadRefund},
		{"validate", testValidate},
		{"context_canceled", testContextCanceled},
		{"concurrent/one_op", testConcurrentOneOp},
		{"concurrent/two_op_batch", testConcurrentTwoOps},
		{"concurrent/counter", testConcurrentCounter},
		{"concurrent/mark_once", testConcurrentMarkOnce},
		{"concurrent/mark_once_refunds", testConcurrentMarkOnceRefunds},
		{"concurrent/refunds", testConcurrentRefunds},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := NewClock(t0)
			h := &harness{
				t:      t,
				s:      newStore(t, clock.Now),
				clock:  clock,
				prefix: "guardian:storetest:" + runID + ":" + sanitize(t.Name()) + ":",
			}
			tt.run(h)
		})
	}
}

// sanitize keeps a test name to characters that read well in a key.
func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '/':
			return r
		}
		return '_'
	}, name)
}

// harness is one test's store, clock and key space.
type harness struct {
	t      *testing.T
	s      store.Store
	clock  *Clock
	prefix string
}

// key returns the store key the test calls name.
func (h *harness) key(name string) string {
	return h.prefix + "{t" + name + "}:r"
}

// result shortens store.Result in the tables.
type result = store.Result

// step is one call of a table: at instant at, Do (or Peek) ops and get want.
type step struct {
	at   time.Time
	peek bool
	ops  []store.Op
	want []store.Result
}

// run plays steps in order.
func (h *harness) run(steps []step) {
	h.t.Helper()
	for i, st := range steps {
		h.clock.Set(st.at)
		verb := "Do"
		if st.peek {
			verb = "Peek"
		}
		label := fmt.Sprintf("step %d (%s at t0+%v)", i, verb, st.at.Sub(t0))
		h.call(label, st.peek, st.ops, st.want)
	}
}

// call makes one Do (or Peek) at the clock's instant and checks its results.
func (h *harness) call(label string, peek bool, ops []store.Op, want []store.Result) {
	h.t.Helper()
	got := make([]store.Result, len(ops))
	var err error
	if peek {
		err = h.s.Peek(context.Background(), ops, got)
	} else {
		err = h.s.Do(context.Background(), ops, got)
	}
	if err != nil {
		h.t.Fatalf("%s: %v", label, err)
	}
	for i := range ops {
		if !same(&ops[i], got[i], want[i]) {
			h.t.Errorf("%s: op %d (%s):\n got %+v\nwant %+v", label, i, ops[i].Key, got[i], want[i])
		}
	}
}

// same reports whether got is want, allowing a Counter found and not spent
// to report its ResetAfter in real time (see the package comment).
func same(op *store.Op, got, want store.Result) bool {
	if op.Kind == store.Counter && !want.Spent && want.ResetAfter > 0 &&
		got.ResetAfter >= want.ResetAfter-realSlack && got.ResetAfter <= op.Hold {
		got.ResetAfter = want.ResetAfter
	}
	return got == want
}

// peekOne returns what Peek finds for op now.
func (h *harness) peekOne(op store.Op) store.Result {
	h.t.Helper()
	res := make([]store.Result, 1)
	if err := h.s.Peek(context.Background(), []store.Op{op}, res); err != nil {
		h.t.Fatalf("Peek %s: %v", op.Key, err)
	}
	return res[0]
}

// refund applies refunds, failing the test on an error.
func (h *harness) refund(refunds ...store.Refund) {
	h.t.Helper()
	if err := h.s.Refund(context.Background(), refunds); err != nil {
		h.t.Fatalf("Refund: %v", err)
	}
}

// markOnce calls MarkOnce, failing the test on an error.
func (h *harness) markOnce(key string, ttl time.Duration, refunds ...store.Refund) bool {
	h.t.Helper()
	ok, err := h.s.MarkOnce(context.Background(), key, ttl, refunds...)
	if err != nil {
		h.t.Fatalf("MarkOnce %s: %v", key, err)
	}
	return ok
}

// eventually polls cond in real time until it holds, failing the test after
// realWait.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(realWait)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: not after %v", what, realWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Rate returns a Rate op on key, for the tests of a store.
func Rate(key string, cost int64, interval time.Duration, burst int64) store.Op {
	return store.Op{Key: key, Kind: store.Rate, Cost: cost, Interval: interval, Burst: burst}
}

// Counter returns a Counter op on key, for the tests of a store.
func Counter(key string, cost, limit int64, hold time.Duration) store.Op {
	return store.Op{Key: key, Kind: store.Counter, Cost: cost, Limit: limit, Hold: hold}
}

// Shadow returns op in shadow mode.
func Shadow(op store.Op) store.Op {
	op.Shadow = true
	return op
}

// ops shortens a batch literal.
func ops(o ...store.Op) []store.Op { return o }

// rs shortens a results literal.
func rs(r ...store.Result) []store.Result { return r }

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

// testAllOrNothing: when one enforced op does not fit, no enforced op is
// spent; the one that fits still reports Allowed.
func testAllOrNothing(h *harness) {
	var (
		a  = h.key("account")
		b  = h.key("ip")
		t1 = t0.Add(time.Minute)
	)
	both := ops(Rate(a, 1, time.Minute, 5), Rate(b, 1, time.Minute, 2))
	h.run([]step{
		{at: t0, ops: ops(Rate(b, 2, time.Minute, 2)), want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 2 * time.Minute})},
		{at: t0, ops: both, want: rs(
			result{Allowed: true, Remaining: 5},
			result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: 2 * time.Minute},
		)},
		{at: t0, peek: true, ops: both, want: rs(
			result{Allowed: true, Remaining: 5},
			result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: 2 * time.Minute},
		)},
		{at: t1, ops: both, want: rs(
			result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Minute},
			result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 2 * time.Minute},
		)},
	})
}

// testCounterWithRate: a login-shaped batch, a rate and a consecutive-failure
// counter, is spent together and denied together.
func testCounterWithRate(h *harness) {
	var (
		r = h.key("account")
		c = h.key("consecutive")
	)
	batch := ops(Rate(r, 1, time.Minute, 5), Counter(c, 1, 2, time.Hour))
	h.run([]step{
		{at: t0, ops: batch, want: rs(
			result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Minute},
			result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: time.Hour, Count: 1},
		)},
		{at: t0, ops: batch, want: rs(
			result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute},
			result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: time.Hour, Count: 2},
		)},
		{at: t0, ops: batch, want: rs(
			result{Allowed: true, Remaining: 3, ResetAfter: 2 * time.Minute},
			result{Remaining: 0, ResetAfter: time.Hour, Count: 2},
		)},
		{at: t0, peek: true, ops: ops(Rate(r, 1, time.Minute, 5)), want: rs(result{Allowed: true, Remaining: 3, ResetAfter: 2 * time.Minute})},
	})
}

// testShadowSpendsWhenDenied: a shadow op that fits is spent even when the
// enforced ops are denied, and does not change their outcome.
func testShadowSpendsWhenDenied(h *harness) {
	var (
		e = h.key("enforced")
		f = h.key("enforced-fits")
		s = h.key("shadow")
	)
	batch := ops(Rate(e, 1, time.Minute, 1), Rate(f, 1, time.Minute, 5), Shadow(Rate(s, 1, time.Minute, 5)))
	h.run([]step{
		{at: t0, ops: ops(Rate(e, 1, time.Minute, 1)), want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: time.Minute})},
		{at: t0, ops: batch, want: rs(
			result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: time.Minute},
			result{Allowed: true, Remaining: 5},
			result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Minute},
		)},
		{at: t0, ops: batch, want: rs(
			result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: time.Minute},
			result{Allowed: true, Remaining: 5},
			result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute},
		)},
		{at: t0, peek: true, ops: ops(Rate(f, 1, time.Minute, 5), Rate(s, 1, time.Minute, 5)), want: rs(
			result{Allowed: true, Remaining: 5},
			result{Allowed: true, Remaining: 3, ResetAfter: 2 * time.Minute},
		)},
	})
}

// testShadowDeniedDoesNotDeny: a shadow op that does not fit is not spent and
// does not deny the enforced ops.
func testShadowDeniedDoesNotDeny(h *harness) {
	var (
		e  = h.key("enforced")
		s  = h.key("shadow")
		sc = h.key("shadow-consecutive")
	)
	batch := ops(Rate(e, 1, time.Minute, 5), Shadow(Rate(s, 1, time.Minute, 1)), Shadow(Counter(sc, 1, 1, time.Hour)))
	h.run([]step{
		{at: t0, ops: batch, want: rs(
			result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Minute},
			result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: time.Minute},
			result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: time.Hour, Count: 1},
		)},
		{at: t0, ops: batch, want: rs(
			result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute},
			result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: time.Minute},
			result{Remaining: 0, ResetAfter: time.Hour, Count: 1},
		)},
	})
}

// Soft returns op as a soft enforced op.
func Soft(op store.Op) store.Op {
	op.Soft = true
	return op
}

// testSoftNeverDenies: a soft op that does not fit leaves the batch allowed
// and is not spent; one that fits is spent with the batch.
func testSoftNeverDenies(h *harness) {
	var (
		e = h.key("enforced")
		c = h.key("challenge")
	)
	batch := ops(Rate(e, 1, time.Minute, 5), Soft(Rate(c, 1, time.Minute, 1)))
	h.run([]step{
		{at: t0, ops: batch, want: rs(
			result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Minute},
			result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: time.Minute},
		)},
		{at: t0, ops: batch, want: rs(
			result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute},
			result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: time.Minute},
		)},
	})
}

// testSoftSpentWithTheBatch: a soft op that fits is not spent when a hard
// enforced op denies the batch.
func testSoftSpentWithTheBatch(h *harness) {
	var (
		e = h.key("enforced")
		c = h.key("challenge")
	)
	h.run([]step{
		{at: t0, ops: ops(Rate(e, 1, time.Minute, 1)), want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: time.Minute})},
		{at: t0, ops: ops(Rate(e, 1, time.Minute, 1), Soft(Rate(c, 1, time.Minute, 3))), want: rs(
			result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: time.Minute},
			result{Allowed: true, Remaining: 3},
		)},
	})
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

// testMarkOnceRefunds: the call that sets a key applies its refunds; a call
// that finds the key set applies none.
func testMarkOnceRefunds(h *harness) {
	var (
		m = h.key("attempt")
		r = h.key("account")
		c = h.key("consecutive")
	)
	spend := ops(Rate(r, 2, time.Minute, 5), Counter(c, 1, 100, time.Hour))
	refunds := []store.Refund{
		{Key: r, Kind: store.Rate, Amount: 2 * time.Minute},
		{Key: c, Kind: store.Counter},
	}
	h.run([]step{
		{at: t0, ops: spend, want: rs(
			result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute},
			result{Allowed: true, Spent: true, Remaining: 99, ResetAfter: time.Hour, Count: 1},
		)},
	})
	if !h.markOnce(m, time.Hour, refunds...) {
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
	if h.markOnce(m, time.Hour, refunds...) {
		h.t.Fatal("MarkOnce of a set key = true, want false")
	}
	h.run([]step{
		{at: t0, peek: true, ops: spend, want: rs(
			result{Allowed: true, Remaining: 3, ResetAfter: 2 * time.Minute},
			result{Allowed: true, Remaining: 99, ResetAfter: time.Hour, Count: 1},
		)},
	})
}

// testMarkOnceBadRefund: a bad refund is store.ErrBadBatch, and neither
// sets the key nor gives anything back.
func testMarkOnceBadRefund(h *harness) {
	var (
		m = h.key("attempt")
		r = h.key("account")
	)
	h.run([]step{
		{at: t0, ops: ops(Rate(r, 2, time.Minute, 5)), want: rs(result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute})},
	})
	for _, bad := range []store.Refund{
		{Kind: store.Rate, Amount: time.Minute},
		{Key: r, Kind: store.Rate, Amount: -time.Minute},
		{Key: r, Amount: time.Minute},
	} {
		good := store.Refund{Key: r, Kind: store.Rate, Amount: time.Minute}
		if _, err := h.s.MarkOnce(context.Background(), m, time.Hour, good, bad); !errors.Is(err, store.ErrBadBatch) {
			h.t.Errorf("MarkOnce with refund %+v: err = %v, want store.ErrBadBatch", bad, err)
		}
	}
	h.run([]step{
		{at: t0, peek: true, ops: ops(Rate(r, 1, time.Minute, 5)), want: rs(result{Allowed: true, Remaining: 3, ResetAfter: 2 * time.Minute})},
	})
	if !h.markOnce(m, time.Hour) {
		h.t.Error("MarkOnce after the refused calls = false, want true")
	}
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
		{"no kind", ops(store.Op{Key: k, Cost: 1, Interval: time.Minute, Burst: 5, Limit: 3, Hold: time.Hour}), 1},
		{"unknown kind", ops(store.Op{Key: k, Kind: 99, Cost: 1, Interval: time.Minute, Burst: 5, Limit: 3, Hold: time.Hour}), 1},
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

// callers is how many goroutines the concurrency tests start at once.
const callers = 50

// together runs f(i) for i in [0, callers) on as many goroutines, released at
// the same moment, and waits for them.
func together(f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}

// raceOne has every caller Do op at once, and counts the results that were
// allowed and those that were spent.
func (h *harness) raceOne(op store.Op) (allowed, spent int) {
	var mu sync.Mutex
	together(func(int) {
		res := make([]store.Result, 1)
		if err := h.s.Do(context.Background(), []store.Op{op}, res); err != nil {
			h.t.Errorf("Do: %v", err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if res[0].Allowed {
			allowed++
		}
		if res[0].Spent {
			spent++
		}
	})
	return allowed, spent
}

// testConcurrentOneOp: 50 callers against a budget of 20 spend exactly 20.
func testConcurrentOneOp(h *harness) {
	op := Rate(h.key("account"), 1, time.Hour, 20)
	allowed, spent := h.raceOne(op)
	if allowed != 20 || spent != 20 {
		h.t.Errorf("allowed %d, spent %d of %d; want exactly 20", allowed, spent, callers)
	}
	if got, want := h.peekOne(op), (result{Remaining: 0, RetryAfter: time.Hour, ResetAfter: 20 * time.Hour}); got != want {
		h.t.Errorf("after: got %+v, want %+v", got, want)
	}
}

// testConcurrentTwoOps: 50 callers each spending a shared budget of 20 and a
// key of their own spend exactly 20 batches, each all or nothing.
func testConcurrentTwoOps(h *harness) {
	shared := Rate(h.key("ip"), 1, time.Hour, 20)
	own := func(i int) store.Op { return Rate(h.key(fmt.Sprintf("account-%d", i)), 1, time.Hour, 5) }
	var mu sync.Mutex
	won := make([]bool, callers)
	together(func(i int) {
		res := make([]store.Result, 2)
		if err := h.s.Do(context.Background(), []store.Op{shared, own(i)}, res); err != nil {
			h.t.Errorf("Do: %v", err)
			return
		}
		if res[0].Spent != res[1].Spent || res[0].Spent != res[0].Allowed {
			h.t.Errorf("caller %d: shared %+v, own %+v: want both spent or neither", i, res[0], res[1])
		}
		mu.Lock()
		defer mu.Unlock()
		won[i] = res[0].Spent
	})
	n := 0
	for i, w := range won {
		want := result{Allowed: true, Remaining: 5}
		if w {
			n++
			want = result{Allowed: true, Remaining: 4, ResetAfter: time.Hour}
		}
		if got := h.peekOne(own(i)); got != want {
			h.t.Errorf("caller %d (spent %v): own key %+v, want %+v", i, w, got, want)
		}
	}
	if n != 20 {
		h.t.Errorf("%d of %d batches spent, want exactly 20", n, callers)
	}
}

// testConcurrentCounter: 50 callers against a counter limit of 20 spend
// exactly 20.
func testConcurrentCounter(h *harness) {
	op := Counter(h.key("consecutive"), 1, 20, time.Hour)
	_, spent := h.raceOne(op)
	if spent != 20 {
		h.t.Errorf("spent %d of %d, want exactly 20", spent, callers)
	}
	if got, want := h.peekOne(op), (result{Remaining: 0, ResetAfter: time.Hour, Count: 20}); !same(&op, got, want) {
		h.t.Errorf("after: got %+v, want %+v", got, want)
	}
}

// testConcurrentMarkOnce: of 50 callers marking one key, exactly one sets it.
func testConcurrentMarkOnce(h *harness) {
	h.raceMarkOnce(h.key("attempt"))
}

// raceMarkOnce has every caller mark key at once, each with refunds, and
// checks that exactly one set it.
func (h *harness) raceMarkOnce(key string, refunds ...store.Refund) {
	h.t.Helper()
	var mu sync.Mutex
	set := 0
	together(func(int) {
		ok, err := h.s.MarkOnce(context.Background(), key, time.Hour, refunds...)
		if err != nil {
			h.t.Errorf("MarkOnce: %v", err)
			return
		}
		if ok {
			mu.Lock()
			set++
			mu.Unlock()
		}
	})
	if set != 1 {
		h.t.Errorf("%d of %d callers set the key, want exactly 1", set, callers)
	}
}

// testConcurrentMarkOnceRefunds: of callers racing to mark one key, each
// with a refund, exactly one marks it and exactly one refund is applied.
func testConcurrentMarkOnceRefunds(h *harness) {
	m, r := h.key("attempt"), h.key("account")
	h.run([]step{
		{at: t0, ops: ops(Rate(r, 10, time.Hour, 10)), want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 10 * time.Hour})},
	})
	h.raceMarkOnce(m, store.Refund{Key: r, Kind: store.Rate, Amount: time.Hour})
	h.run([]step{
		{at: t0, peek: true, ops: ops(Rate(r, 1, time.Hour, 10)), want: rs(result{Allowed: true, Remaining: 1, ResetAfter: 9 * time.Hour})},
	})
}

// testConcurrentRefunds: refunds racing each other never take a key beyond
// full.
func testConcurrentRefunds(h *harness) {
	k := h.key("account")
	h.run([]step{
		{at: t0, ops: ops(Rate(k, 10, time.Hour, 20)), want: rs(result{Allowed: true, Spent: true, Remaining: 10, ResetAfter: 10 * time.Hour})},
	})
	together(func(int) {
		if err := h.s.Refund(context.Background(), []store.Refund{{Key: k, Kind: store.Rate, Amount: time.Hour}}); err != nil {
			h.t.Errorf("Refund: %v", err)
		}
	})
	h.run([]step{
		{at: t0, peek: true, ops: ops(Rate(k, 1, time.Hour, 20)), want: rs(result{Allowed: true, Remaining: 20})},
		{at: t0, ops: ops(Rate(k, 20, time.Hour, 20)), want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 20 * time.Hour})},
		{at: t0, ops: ops(Rate(k, 1, time.Hour, 20)), want: rs(result{Remaining: 0, RetryAfter: time.Hour, ResetAfter: 20 * time.Hour})},
	})
}
