// Package storetest is the conformance suite every guardian store passes:
// the embedded store and the Redis store run the same tests, so a check is
// decided the same way whichever store holds its keys.
//
// Each test makes a fresh store whose clock is a testclock.Clock the test moves between
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
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/testclock"
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

// testCase is one conformance test: its subtest name, "group/case", and
// the test itself.
type testCase struct {
	name string
	run  func(*harness)
}

// groups are the suite's cases, a list per file, in the order they run. A
// new group of cases is a file declaring its []testCase and a line here.
var groups = [][]testCase{
	rateCases,
	counterCases,
	batchCases,
	settleCases,
	peekCases,
	markOnceCases,
	errorCases,
	concurrentCases,
	holdCases,
	guessCases,
	familiarCases,
	distinctCases,
	attributeCases,
	listCases,
	kindCases,
}

// Run runs every conformance test against stores made by newStore, as
// subtests of t.
func Run(t *testing.T, newStore Factory) {
	for _, group := range groups {
		for _, tc := range group {
			t.Run(tc.name, func(t *testing.T) {
				tc.run(newHarness(t, newStore, t0))
			})
		}
	}
}

// newHarness is t's harness: a store newStore makes on a clock that starts
// at start, and keys of t's own.
func newHarness(t *testing.T, newStore Factory, start time.Time) *harness {
	clock := testclock.New(start)
	return &harness{
		t:      t,
		s:      newStore(t, clock.Now),
		clock:  clock,
		prefix: "guardian:storetest:" + runID + ":" + sanitize(t.Name()) + ":",
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
	clock  *testclock.Clock
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
	if l, ok := op.Limit.(store.Counter); ok && !want.Spent && want.ResetAfter > 0 &&
		got.ResetAfter >= want.ResetAfter-realSlack && got.ResetAfter <= l.Hold {
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

// settle applies settlements, failing the test on an error.
func (h *harness) settle(settlements ...store.Settlement) {
	h.t.Helper()
	if err := h.s.Settle(context.Background(), settlements); err != nil {
		h.t.Fatalf("Settle: %v", err)
	}
}

// markOnce calls MarkOnce, failing the test on an error.
func (h *harness) markOnce(key string, ttl time.Duration, settlements ...store.Settlement) bool {
	h.t.Helper()
	ok, err := h.s.MarkOnce(context.Background(), key, ttl, settlements...)
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
