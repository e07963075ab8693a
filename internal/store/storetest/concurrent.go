package storetest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

// concurrentCases test concurrent callers: every invariant asserted exactly.
var concurrentCases = []testCase{
	{"concurrent/one_op", testConcurrentOneOp},
	{"concurrent/two_op_batch", testConcurrentTwoOps},
	{"concurrent/counter", testConcurrentCounter},
	{"concurrent/mark_once", testConcurrentMarkOnce},
	{"concurrent/mark_once_settles", testConcurrentMarkOnceSettles},
	{"concurrent/settlements", testConcurrentSettlements},
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

// raceMarkOnce has every caller mark key at once, each with settlements, and
// checks that exactly one set it.
func (h *harness) raceMarkOnce(key string, settlements ...store.Settlement) {
	h.t.Helper()
	var mu sync.Mutex
	set := 0
	together(func(int) {
		ok, err := h.s.MarkOnce(context.Background(), key, time.Hour, settlements...)
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

// testConcurrentMarkOnceSettles: of callers racing to mark one key, each
// with a settlement, exactly one marks it and exactly one settlement is applied.
func testConcurrentMarkOnceSettles(h *harness) {
	m, r := h.key("attempt"), h.key("account")
	h.run([]step{
		{at: t0, ops: ops(Rate(r, 10, time.Hour, 10)), want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 10 * time.Hour})},
	})
	h.raceMarkOnce(m, store.Settlement{Key: r, Action: store.GiveBack, Span: time.Hour})
	h.run([]step{
		{at: t0, peek: true, ops: ops(Rate(r, 1, time.Hour, 10)), want: rs(result{Allowed: true, Remaining: 1, ResetAfter: 9 * time.Hour})},
	})
}

// testConcurrentSettlements: settlements racing each other never take a key beyond
// full.
func testConcurrentSettlements(h *harness) {
	k := h.key("account")
	h.run([]step{
		{at: t0, ops: ops(Rate(k, 10, time.Hour, 20)), want: rs(result{Allowed: true, Spent: true, Remaining: 10, ResetAfter: 10 * time.Hour})},
	})
	together(func(int) {
		if err := h.s.Settle(context.Background(), []store.Settlement{{Key: k, Action: store.GiveBack, Span: time.Hour}}); err != nil {
			h.t.Errorf("Settle: %v", err)
		}
	})
	h.run([]step{
		{at: t0, peek: true, ops: ops(Rate(k, 1, time.Hour, 20)), want: rs(result{Allowed: true, Remaining: 20})},
		{at: t0, ops: ops(Rate(k, 20, time.Hour, 20)), want: rs(result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 20 * time.Hour})},
		{at: t0, ops: ops(Rate(k, 1, time.Hour, 20)), want: rs(result{Remaining: 0, RetryAfter: time.Hour, ResetAfter: 20 * time.Hour})},
	})
}
