package failclosed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/guardian-sec/guardian/internal/logtest"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/testclock"
)

// flakyStore is a primary that works like the embedded store until told to
// fail, and then fails every call, or blocks until its deadline.
type flakyStore struct {
	*memstore.Store
	err   atomic.Pointer[error]
	block atomic.Bool
	calls atomic.Int64
}

var errDown = errors.New("connection refused")

func newFlaky() *flakyStore { return &flakyStore{Store: memstore.New(memstore.Config{})} }

func (f *flakyStore) setErr(err error) {
	if err == nil {
		f.err.Store(nil)
		return
	}
	f.err.Store(&err)
}

func (f *flakyStore) fault(ctx context.Context) error {
	f.calls.Add(1)
	if f.block.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (f *flakyStore) Do(ctx context.Context, ops []store.Op, res []store.Result) error {
	if err := f.fault(ctx); err != nil {
		return err
	}
	return f.Store.Do(ctx, ops, res)
}

func (f *flakyStore) MarkOnce(ctx context.Context, key string, ttl time.Duration, settlements ...store.Settlement) (bool, error) {
	if err := f.fault(ctx); err != nil {
		return false, err
	}
	return f.Store.MarkOnce(ctx, key, ttl, settlements...)
}

func (f *flakyStore) Delete(ctx context.Context, keys ...string) error {
	if err := f.fault(ctx); err != nil {
		return err
	}
	return f.Store.Delete(ctx, keys...)
}

func (f *flakyStore) ping(ctx context.Context) error { return f.fault(ctx) }

type fixture struct {
	primary *flakyStore
	store   *Store
	metrics *metrics.Metrics
	probes  atomic.Int64
	inProbe atomic.Int64
	maxIn   atomic.Int64
}

func newFixture(t *testing.T, fleet int) *fixture {
	t.Helper()
	f := &fixture{primary: newFlaky(), metrics: metrics.New(prometheus.NewRegistry())}
	f.store = New(Config{
		Primary: f.primary,
		Probe: func(ctx context.Context) error {
			n := f.inProbe.Add(1)
			defer f.inProbe.Add(-1)
			for {
				m := f.maxIn.Load()
				if n <= m || f.maxIn.CompareAndSwap(m, n) {
					break
				}
			}
			f.probes.Add(1)
			return f.primary.ping(ctx)
		},
		Timeout:       5 * time.Millisecond,
		ProbeInterval: 10 * time.Millisecond,
		FailAfter:     1,
		FleetSize:     fleet,
		Metrics:       f.metrics,
	})
	return f
}

func op(key string, burst int64, onErr store.OnError) store.Op {
	return store.Op{Key: key, Cost: 1, Limit: store.Rate{Interval: time.Hour, Burst: burst}, Rule: key, OnError: onErr}
}

func (f *fixture) do(t *testing.T, ops ...store.Op) []store.Result {
	t.Helper()
	res := make([]store.Result, len(ops))
	if err := f.store.Do(context.Background(), ops, res); err != nil {
		t.Fatalf("Do: %v", err)
	}
	return res
}

func TestHealthyPrimaryDecides(t *testing.T) {
	f := newFixture(t, 1)
	res := f.do(t, op("a", 2, store.OnErrorLocal))
	if !res[0].Allowed || !res[0].Spent || res[0].Degraded {
		t.Fatalf("result = %+v, want allowed, spent, not degraded", res[0])
	}
	if got := testutil.ToFloat64(f.metrics.FallbackActive); got != 0 {
		t.Fatalf("fallback_active = %v, want 0", got)
	}
}

func TestEachRuleFallsBackByItsOnStoreError(t *testing.T) {
	tests := []struct {
		name      string
		onErr     store.OnError
		want      store.Result
		wantLabel string
	}{
		{"closed slows a second", store.OnErrorClosed, store.Result{RetryAfter: time.Second, Degraded: true}, "closed"},
		{"open allows", store.OnErrorOpen, store.Result{Allowed: true, Degraded: true}, "open"},
		{"local decides on the fallback", store.OnErrorLocal, store.Result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Hour, Degraded: true}, "local"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 1)
			f.primary.setErr(errDown)
			got := f.do(t, op("k", 5, tt.onErr))[0]
			if got != tt.want {
				t.Fatalf("result = %+v, want %+v", got, tt.want)
			}
			if n := testutil.ToFloat64(f.metrics.FallbackDecisions.WithLabelValues("k", tt.wantLabel)); n != 1 {
				t.Fatalf("fallback decisions = %v, want 1", n)
			}
			if n := testutil.ToFloat64(f.metrics.StoreErrors.WithLabelValues("unreachable")); n != 1 {
				t.Fatalf("store errors = %v, want 1", n)
			}
			if f.store.Healthy() || testutil.ToFloat64(f.metrics.FallbackActive) != 1 {
				t.Fatal("fallback not active after a failed call")
			}
		})
	}
}

// TestFeatureOpsAreNoRule: the ops of a check's features (its memory of
// guesses, its familiar list) name no rule, and count as none in
// guardian_fallback_decisions_total.
func TestFeatureOpsAreNoRule(t *testing.T) {
	f := newFixture(t, 1)
	f.primary.setErr(errDown)
	guesses := store.Op{Key: "g", Cost: 1, Role: store.Soft, Guess: 7, Limit: store.Guesses{Max: 3, Hold: time.Hour}}
	f.do(t, op("k", 5, store.OnErrorLocal), guesses)
	if n := testutil.CollectAndCount(f.metrics.FallbackDecisions); n != 1 {
		t.Fatalf("%d series of guardian_fallback_decisions_total, want the rule's alone", n)
	}
	if n := testutil.ToFloat64(f.metrics.FallbackDecisions.WithLabelValues("k", "local")); n != 1 {
		t.Fatalf("fallback decisions of the rule = %v, want 1", n)
	}
}

// TestBadBatchIsNoStoreFailure: a batch the primary refuses as bad is an
// error of the caller's, which neither counts as a store error nor falls
// back.
func TestBadBatchIsNoStoreFailure(t *testing.T) {
	f := newFixture(t, 1)
	bad := store.Op{Key: "k", Cost: 1}
	err := f.store.Do(context.Background(), []store.Op{bad}, make([]store.Result, 1))
	if !errors.Is(err, store.ErrBadBatch) {
		t.Fatalf("Do of a bad batch = %v, want ErrBadBatch", err)
	}
	if !f.store.Healthy() || testutil.CollectAndCount(f.metrics.StoreErrors) != 0 {
		t.Fatal("a bad batch counted as a store failure")
	}
	f.primary.setErr(errDown)
	if err := f.store.Do(context.Background(), []store.Op{op("a", 1, store.OnErrorLocal)}, make([]store.Result, 1)); err != nil {
		t.Fatal(err)
	}
	if err := f.store.Do(context.Background(), []store.Op{bad}, make([]store.Result, 1)); !errors.Is(err, store.ErrBadBatch) {
		t.Fatalf("Do of a bad batch on the fallback = %v, want ErrBadBatch", err)
	}
}

func TestClosedRuleDeniesTheWholeBatch(t *testing.T) {
	f := newFixture(t, 1)
	f.primary.setErr(errDown)
	res := f.do(t, op("local", 5, store.OnErrorLocal), op("closed", 5, store.OnErrorClosed))
	if res[0].Spent {
		t.Fatalf("local op spent although a closed rule denied the check: %+v", res[0])
	}
	if !res[0].Allowed || res[0].Remaining != 5 {
		t.Fatalf("local op = %+v, want allowed with 5 remaining", res[0])
	}
}

func TestLocalFallbackDividesByFleetSizeExactlyUnderConcurrency(t *testing.T) {
	f := newFixture(t, 4)
	f.primary.setErr(errDown)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			res := make([]store.Result, 1)
			if err := f.store.Do(context.Background(), []store.Op{op("budget", 20, store.OnErrorLocal)}, res); err != nil {
				t.Error(err)
			}
			if res[0].Spent {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != 5 {
		t.Fatalf("allowed = %d, want 20 / 4 = 5", got)
	}
}

// TestFullFallbackEvicts: a full fallback table makes room for new keys,
// never evicting a hard stop for them.
func TestFullFallbackEvicts(t *testing.T) {
	f := &fixture{primary: newFlaky(), metrics: metrics.New(prometheus.NewRegistry())}
	f.store = New(Config{Primary: f.primary, Probe: f.primary.ping, MaxLocalKeys: 4, Metrics: f.metrics, ProbeInterval: time.Hour})
	f.primary.setErr(errDown)
	stop := store.Op{Key: "stop", Cost: 1, Limit: store.Counter{Max: 1, Hold: time.Hour}, Rule: "stop"}
	f.do(t, stop)
	for i := range 100 {
		if res := f.do(t, op(fmt.Sprintf("flood-%d", i), 5, store.OnErrorLocal)); !res[0].Spent {
			t.Fatalf("flood key %d on a full fallback = %+v, want spent", i, res[0])
		}
	}
	if res := f.do(t, stop); res[0].Allowed || res[0].Count != 1 {
		t.Fatalf("hard stop after the flood = %+v, want kept", res[0])
	}
}

func TestSlowPrimaryTimesOutAndRecovers(t *testing.T) {
	f := newFixture(t, 1)
	f.primary.block.Store(true)
	start := time.Now()
	res := f.do(t, op("k", 5, store.OnErrorLocal))
	if !res[0].Degraded {
		t.Fatalf("result = %+v, want degraded", res[0])
	}
	if n := testutil.ToFloat64(f.metrics.StoreErrors.WithLabelValues("timeout")); n != 1 {
		t.Fatalf("timeout errors = %v, want 1", n)
	}
	// While failing, calls go straight to the fallback: the primary sees
	// only probes.
	before := f.primary.calls.Load() - f.probes.Load()
	for range 20 {
		f.do(t, op("k", 5, store.OnErrorLocal))
	}
	if after := f.primary.calls.Load() - f.probes.Load(); after != before {
		t.Fatalf("primary saw %d calls while failing, want none but probes", after-before)
	}
	_ = start
	f.primary.block.Store(false)
	deadline := time.Now().Add(2 * time.Second)
	for !f.store.Healthy() {
		if time.Now().After(deadline) {
			t.Fatal("primary not back in use within 2s of answering")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := testutil.ToFloat64(f.metrics.FallbackActive); got != 0 {
		t.Fatalf("fallback_active = %v after recovery, want 0", got)
	}
	if res := f.do(t, op("k", 5, store.OnErrorLocal)); res[0].Degraded {
		t.Fatalf("after recovery = %+v, want decided by the primary", res[0])
	}
	if m := f.maxIn.Load(); m != 1 {
		t.Fatalf("at most %d probes in flight, want 1", m)
	}
}

func TestOneProbeAtATimeUnderManyFailures(t *testing.T) {
	f := newFixture(t, 1)
	f.primary.setErr(errDown)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			for range 20 {
				res := make([]store.Result, 1)
				_ = f.store.Do(context.Background(), []store.Op{op("k", 5, store.OnErrorOpen)}, res)
			}
		})
	}
	wg.Wait()
	time.Sleep(50 * time.Millisecond)
	if m := f.maxIn.Load(); m != 1 {
		t.Fatalf("%d probes ran at once, want 1", m)
	}
	f.primary.setErr(nil)
	deadline := time.Now().Add(2 * time.Second)
	for !f.store.Healthy() {
		if time.Now().After(deadline) {
			t.Fatal("not healthy after the primary recovered")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSettleGoesToTheStoreThatSpent(t *testing.T) {
	f := newFixture(t, 1)
	f.primary.setErr(errDown)
	k := op("k", 2, store.OnErrorLocal)
	f.do(t, k)
	f.do(t, k)
	if res := f.do(t, k); res[0].Allowed {
		t.Fatal("third spend allowed on a burst of 2")
	}
	if err := f.store.Settle(context.Background(), []store.Settlement{{Key: "k", Action: store.GiveBack, Span: time.Hour, Local: true}}); err != nil {
		t.Fatal(err)
	}
	if res := f.do(t, k); !res[0].Spent {
		t.Fatalf("after a local settlement = %+v, want spent", res[0])
	}
}

func TestMarkOnceSettlesWhereSpent(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 1)
	p := op("p", 1, store.OnErrorLocal)
	f.do(t, p)
	first, err := f.store.MarkOnce(ctx, "attempt-1", time.Minute, store.Settlement{Key: "p", Action: store.GiveBack, Span: time.Hour})
	if err != nil || !first {
		t.Fatalf("MarkOnce on the primary = %v, %v; want true", first, err)
	}
	if res := f.do(t, p); !res[0].Spent || res[0].Degraded {
		t.Fatalf("after the primary's settlement = %+v, want spent by the primary", res[0])
	}

	f.primary.setErr(errDown)
	k := op("k", 1, store.OnErrorLocal)
	f.do(t, k)
	settlement := store.Settlement{Key: "k", Action: store.GiveBack, Span: time.Hour, Local: true}
	for i, want := range []bool{true, false} {
		first, err := f.store.MarkOnce(ctx, "attempt-2", time.Minute, settlement)
		if err != nil || first != want {
			t.Fatalf("MarkOnce %d on the fallback = %v, %v; want %v", i, first, err, want)
		}
		if res := f.do(t, k); res[0].Spent != want {
			t.Fatalf("spend after MarkOnce %d = %+v, want spent %v (given back only by the first)", i, res[0], want)
		}
	}
}

func TestMarkOnceAndDeleteWhileFailing(t *testing.T) {
	f := newFixture(t, 1)
	f.primary.setErr(errDown)
	ctx := context.Background()
	first, err := f.store.MarkOnce(ctx, "attempt", time.Minute)
	if err != nil || !first {
		t.Fatalf("MarkOnce = %v, %v; want true on the fallback", first, err)
	}
	again, err := f.store.MarkOnce(ctx, "attempt", time.Minute)
	if err != nil || again {
		t.Fatalf("second MarkOnce = %v, %v; want false", again, err)
	}
	if err := f.store.Delete(ctx, "k"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Delete while failing = %v, want store.ErrUnavailable", err)
	}
}

// TestIsolatedFailuresDoNotStopThePrimary: with FailAfter 3, a failure
// between successes falls back for that call only; three in a row mark the
// primary failing.
func TestIsolatedFailuresDoNotStopThePrimary(t *testing.T) {
	p := newFlaky()
	m := metrics.New(prometheus.NewRegistry())
	s := New(Config{Primary: p, Probe: p.ping, Metrics: m, ProbeInterval: time.Hour})
	call := func() store.Result {
		t.Helper()
		res := make([]store.Result, 1)
		if err := s.Do(context.Background(), []store.Op{op("k", 100, store.OnErrorLocal)}, res); err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	for i := range 5 {
		p.setErr(errDown)
		if r := call(); !r.Degraded {
			t.Fatalf("round %d: a failed call = %+v, want decided by the fallback", i, r)
		}
		p.setErr(nil)
		if r := call(); r.Degraded {
			t.Fatalf("round %d: the call after an isolated failure = %+v, want the primary", i, r)
		}
		if got := testutil.ToFloat64(m.FallbackActive); got != 0 {
			t.Fatalf("round %d: fallback_active = %v after a success, want 0", i, got)
		}
	}
	p.setErr(errDown)
	for range 3 {
		call()
	}
	if s.usingPrimary() {
		t.Fatal("healthy after three failures in a row")
	}
	before := p.calls.Load()
	p.setErr(nil)
	if r := call(); !r.Degraded || p.calls.Load() != before {
		t.Fatalf("after three failures in a row = %+v, want the fallback without calling the primary", r)
	}
}

// TestOneStallCountsOnce: a stall that times out every call in flight at
// once counts as one failure; calls sent after it that fail too count on.
func TestOneStallCountsOnce(t *testing.T) {
	p := newFlaky()
	m := metrics.New(prometheus.NewRegistry())
	// A timeout long enough that all 50 callers have sent their call
	// before the first of them times out, however slow the machine.
	s := New(Config{Primary: p, Probe: p.ping, Metrics: m, ProbeInterval: time.Hour, Timeout: 200 * time.Millisecond})
	call := func() store.Result {
		res := make([]store.Result, 1)
		if err := s.Do(context.Background(), []store.Op{op("k", 1000, store.OnErrorLocal)}, res); err != nil {
			t.Error(err)
		}
		return res[0]
	}

	p.block.Store(true) // every call times out
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if r := call(); !r.Degraded {
				t.Errorf("a failed call = %+v, want decided by the fallback", r)
			}
		})
	}
	wg.Wait()
	if !s.usingPrimary() {
		t.Fatal("50 timeouts of one stall stopped the primary, want them counted once")
	}
	call() // sent after the stall was seen: the second failure
	if !s.usingPrimary() {
		t.Fatal("stopped after two failures, want three")
	}
	call()
	if s.usingPrimary() {
		t.Fatal("three failures in a row, each after the one before, left the primary in use")
	}
	if got := testutil.ToFloat64(m.FallbackActive); got != 1 {
		t.Errorf("fallback_active = %v, want 1", got)
	}
}

// TestErrorsStopThePrimaryAtOnce: an unreachable primary answers at once,
// with an error: FailAfter of them in a row stop it, however short the
// time they take (here none: the clock stands still).
func TestErrorsStopThePrimaryAtOnce(t *testing.T) {
	p := newFlaky()
	clock := testclock.New(time.Now())
	s := New(Config{Primary: p, Probe: p.ping, Metrics: metrics.New(prometheus.NewRegistry()), ProbeInterval: time.Hour, Now: clock.Now})
	p.setErr(errDown)
	for i := range 3 {
		if !s.usingPrimary() {
			t.Fatalf("stopped after %d errors, want 3", i)
		}
		res := make([]store.Result, 1)
		if err := s.Do(context.Background(), []store.Op{op("k", 10, store.OnErrorLocal)}, res); err != nil || !res[0].Degraded {
			t.Fatalf("call %d: %+v, %v; want decided by the fallback", i, res[0], err)
		}
	}
	if s.usingPrimary() {
		t.Fatal("three errors in a row at one instant left the primary in use, want it stopped")
	}
}

// oomError is a Redis error reply of a Redis out of memory.
type oomError struct{}

func (oomError) Error() string { return "OOM command not allowed when used memory > 'maxmemory'." }
func (oomError) RedisError()   {}

// cancelSensitive is a primary that fails a call whose context is done, as
// a Redis client does.
type cancelSensitive struct{ *memstore.Store }

func (c cancelSensitive) Do(ctx context.Context, ops []store.Op, res []store.Result) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.Store.Do(ctx, ops, res)
}

// TestCallerGoneIsNotAFailure: a call whose caller cancelled its context
// runs to its end on the primary, counts no error and turns nothing on.
func TestCallerGoneIsNotAFailure(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry())
	primary := cancelSensitive{memstore.New(memstore.Config{})}
	s := New(Config{Primary: primary, Probe: func(context.Context) error { return nil }, FailAfter: 1, Metrics: m})
	for i := range 300 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res := make([]store.Result, 1)
		if err := s.Do(ctx, []store.Op{op(fmt.Sprintf("k%d", i), 5, store.OnErrorLocal)}, res); err != nil {
			t.Fatalf("Do with a cancelled context: %v", err)
		}
		if res[0].Degraded || !res[0].Spent {
			t.Fatalf("Do with a cancelled context = %+v, want decided by the primary", res[0])
		}
	}
	if !s.Healthy() {
		t.Error("primary marked failing after callers went away")
	}
	if n := testutil.CollectAndCount(m.StoreErrors); n != 0 {
		t.Errorf("%d store error series, want none", n)
	}
}

// newRecallTest returns a Store on a primary that fails on demand, the two
// on one test clock and never probing, and a counter op of limit 2 held an
// hour.
func newRecallTest() (*testclock.Clock, *flakyStore, *Store, store.Op) {
	clock := testclock.New(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	m := metrics.New(prometheus.NewRegistry())
	primary := &flakyStore{Store: memstore.New(memstore.Config{Now: clock.Now})}
	s := New(Config{Primary: primary, Probe: primary.ping, FailAfter: 1, ProbeInterval: time.Hour, Metrics: m, Now: clock.Now})
	return clock, primary, s, store.Op{Key: "stop", Cost: 1, Limit: store.Counter{Max: 2, Hold: time.Hour}, Rule: "stop"}
}

// slowedOp is a rate op the primary slows on its second spend.
var slowedOp = store.Op{Key: "slowed", Cost: 1, Limit: store.Rate{Interval: time.Minute, Burst: 1}, Rule: "slowed"}

// doer returns a Do on s that fails the test on an error.
func doer(t *testing.T, s *Store) func(ops ...store.Op) []store.Result {
	return func(ops ...store.Op) []store.Result {
		t.Helper()
		res := make([]store.Result, len(ops))
		if err := s.Do(context.Background(), ops, res); err != nil {
			t.Fatal(err)
		}
		return res
	}
}

// TestFallbackRecallsDenials: keys the primary denied stay denied on the
// fallback, a hard stop as a hard stop and a slow until its time, while a
// key it never saw starts from its local limit.
func TestFallbackRecallsDenials(t *testing.T) {
	clock, primary, s, stop := newRecallTest()
	slowed, do := slowedOp, doer(t, s)
	do(stop)
	do(stop)
	if r := do(stop)[0]; r.Allowed || r.RetryAfter != 0 {
		t.Fatalf("primary's hard stop = %+v, want denied at the limit", r)
	}
	do(slowed)
	if r := do(slowed)[0]; r.Allowed || r.RetryAfter != time.Minute {
		t.Fatalf("primary's slow = %+v, want a minute to wait", r)
	}

	primary.setErr(errDown)
	clock.Advance(20 * time.Second)
	got := do(stop, slowed, op("fresh", 5, store.OnErrorLocal))
	if r := got[0]; r.Allowed || r.RetryAfter != 0 || r.Count != 2 || !r.Degraded {
		t.Errorf("hard stop on the fallback = %+v, want denied at its limit, no wait", r)
	}
	if r := got[1]; r.Allowed || r.RetryAfter != 40*time.Second {
		t.Errorf("slowed key on the fallback = %+v, want 40s left to wait", r)
	}
	if r := got[2]; !r.Allowed || r.Spent {
		t.Errorf("fresh key in a batch a remembered denial denies = %+v, want allowed, nothing spent", r)
	}
	if r := do(op("fresh", 5, store.OnErrorLocal))[0]; !r.Spent || r.Remaining != 4 {
		t.Errorf("fresh key alone on the fallback = %+v, want spent from its local limit", r)
	}
	clock.Advance(40 * time.Second)
	if r := do(slowed)[0]; !r.Spent {
		t.Errorf("slowed key on the fallback once its time came = %+v, want spent", r)
	}
}

// TestFallbackRecallsNoDenialOfAnotherKind: after a reload that changed a
// rule's type under its name, the fallback decides the new kind's op on
// its own local limit: a hard stop remembered for the key does not deny a
// rate op, nor a slow a counter op. And a late report of the old kind
// lifts neither: a give-back leaves the hard stop, a reset the slow.
func TestFallbackRecallsNoDenialOfAnotherKind(t *testing.T) {
	clock, primary, s, stop := newRecallTest()
	slowed, do := slowedOp, doer(t, s)
	for range 3 {
		do(stop)
	}
	do(slowed)
	if r := do(slowed)[0]; r.Allowed {
		t.Fatalf("primary's slow = %+v, want denied", r)
	}
	late := []store.Settlement{{Key: stop.Key, Action: store.GiveBack, Span: time.Minute}, {Key: slowed.Key, Action: store.Reset}}
	if err := s.Settle(context.Background(), late); err != nil {
		t.Fatal(err)
	}

	primary.setErr(errDown)
	clock.Advance(time.Second)
	asRate := store.Op{Key: stop.Key, Cost: 1, Limit: store.Rate{Interval: time.Minute, Burst: 5}, Rule: "stop"}
	asCounter := store.Op{Key: slowed.Key, Cost: 1, Limit: store.Counter{Max: 2, Hold: time.Hour}, Rule: "slowed"}
	got := do(asRate, asCounter)
	if r := got[0]; !r.Spent || !r.Degraded || r.Remaining != 4 {
		t.Errorf("a rate op on a key the primary hard-stopped = %+v, want spent from its local limit", r)
	}
	if r := got[1]; !r.Spent || !r.Degraded || r.Count != 1 {
		t.Errorf("a counter op on a key the primary slowed = %+v, want spent from its local limit", r)
	}
	if r := do(stop)[0]; r.Allowed || r.Count != 2 || !r.Degraded {
		t.Errorf("the hard stop's own op on the fallback = %+v, want still denied at its limit", r)
	}
	if r := do(slowed)[0]; r.Allowed || r.RetryAfter <= 0 || !r.Degraded {
		t.Errorf("the slow's own op on the fallback = %+v, want still slowed", r)
	}
}

// TestFallbackRecallsAStopJustStarted: the spend that takes a count to its
// limit starts a hard stop, though the primary allowed it; an outage right
// after it does not lift the stop.
func TestFallbackRecallsAStopJustStarted(t *testing.T) {
	clock, primary, s, stop := newRecallTest()
	for i := range 2 {
		res := make([]store.Result, 1)
		if err := s.Do(context.Background(), []store.Op{stop}, res); err != nil || !res[0].Spent {
			t.Fatalf("count %d on the primary = %+v, %v; want spent", i+1, res[0], err)
		}
	}
	primary.setErr(errDown)
	clock.Advance(time.Minute)
	res := make([]store.Result, 1)
	if err := s.Do(context.Background(), []store.Op{stop}, res); err != nil {
		t.Fatal(err)
	}
	if r := res[0]; r.Allowed || r.Count != 2 || r.ResetAfter != 59*time.Minute || !r.Degraded {
		t.Errorf("a count the primary took to its limit, on the fallback = %+v, want denied at its limit for 59m", r)
	}
}

// TestRejectedWriteKeepsFallback: while the primary refuses writes the probe
// fails, the fallback stays on and the refusals count as rejected; once a
// write succeeds the primary decides again.
func TestRejectedWriteKeepsFallback(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry())
	primary := newFlaky()
	s := New(Config{Primary: primary, Probe: primary.ping, FailAfter: 1, ProbeInterval: 5 * time.Millisecond, Metrics: m})
	primary.setErr(oomError{})
	res := make([]store.Result, 1)
	if err := s.Do(context.Background(), []store.Op{op("k", 5, store.OnErrorLocal)}, res); err != nil || !res[0].Degraded {
		t.Fatalf("Do on a primary out of memory = %+v, %v; want decided by the fallback", res[0], err)
	}
	time.Sleep(50 * time.Millisecond)
	if s.Healthy() {
		t.Fatal("primary healthy while it refuses writes")
	}
	if n := testutil.ToFloat64(m.StoreErrors.WithLabelValues(KindRejected)); n < 2 {
		t.Errorf("rejected = %v, want the call and the probes counted", n)
	}
	if v := testutil.ToFloat64(m.FallbackActive); v != 1 {
		t.Errorf("fallback active = %v, want 1", v)
	}
	primary.setErr(nil)
	deadline := time.Now().Add(2 * time.Second)
	for !s.Healthy() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if !s.Healthy() || testutil.ToFloat64(m.FallbackActive) != 0 {
		t.Error("primary not back within 2s of taking writes")
	}
}

// TestHealthyAgreesWithTheGauge: /readyz (Healthy) and
// guardian_fallback_active say the same from the first failed call, before
// the primary is taken out of use, and again once a call succeeds.
func TestHealthyAgreesWithTheGauge(t *testing.T) {
	p := newFlaky()
	m := metrics.New(prometheus.NewRegistry())
	s := New(Config{Primary: p, Probe: p.ping, Metrics: m, ProbeInterval: time.Hour})
	agree := func(when string, wantHealthy bool) {
		t.Helper()
		gauge := testutil.ToFloat64(m.FallbackActive)
		if s.Healthy() != wantHealthy || (gauge == 0) != wantHealthy {
			t.Fatalf("%s: Healthy() = %v, fallback_active = %v; want healthy %v and the gauge to agree", when, s.Healthy(), gauge, wantHealthy)
		}
	}
	call := func() {
		res := make([]store.Result, 1)
		if err := s.Do(context.Background(), []store.Op{op("k", 1000, store.OnErrorLocal)}, res); err != nil {
			t.Fatal(err)
		}
	}
	agree("at start", true)
	p.setErr(errDown)
	call()
	if !s.usingPrimary() {
		t.Fatal("one failure took the primary out of use, want three")
	}
	agree("after one failure", false)
	p.setErr(nil)
	call()
	agree("after a success", true)
}

// TestOverloadedIsAnsweredByTheFallbackAtOnce: a check the primary's queue
// refuses (store.ErrOverloaded) is decided by the local fallback, degraded,
// and counted, without counting as a store failure or turning the fallback
// on for anyone else; an episode is logged once when it starts and once
// when it ends, a second after the last refusal. A check whose caller went
// away before it was sent (store.ErrAbandoned) is no failure either, and is
// decided nowhere.
func TestOverloadedIsAnsweredByTheFallbackAtOnce(t *testing.T) {
	clock := testclock.New(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC))
	m := metrics.New(prometheus.NewRegistry())
	primary := &flakyStore{Store: memstore.New(memstore.Config{Now: clock.Now})}
	var logs logtest.Buffer
	s := New(Config{Primary: primary, Probe: primary.ping, FailAfter: 1, ProbeInterval: time.Hour, Metrics: m, Now: clock.Now,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	check := func() store.Result {
		t.Helper()
		res := make([]store.Result, 1)
		if err := s.Do(context.Background(), []store.Op{op("a", 100, store.OnErrorLocal)}, res); err != nil {
			t.Fatalf("Do: %v", err)
		}
		return res[0]
	}

	primary.setErr(fmt.Errorf("redisstore: do: %w", store.ErrOverloaded))
	for range 5 {
		if r := check(); !r.Degraded || !r.Allowed {
			t.Fatalf("refused check: %+v, want allowed by the fallback, degraded", r)
		}
		clock.Advance(100 * time.Millisecond)
	}
	if got := testutil.ToFloat64(m.StoreAdmissionRejected); got != 5 {
		t.Errorf("guardian_store_admission_rejected_total = %v, want 5", got)
	}
	if !s.Healthy() || testutil.CollectAndCount(m.StoreErrors) != 0 || testutil.ToFloat64(m.FallbackActive) != 0 {
		t.Error("a full queue counted as a store failure")
	}
	if got := testutil.ToFloat64(m.FallbackDecisions.WithLabelValues("a", "local")); got != 5 {
		t.Errorf("guardian_fallback_decisions_total = %v, want 5", got)
	}

	primary.setErr(nil)
	if r := check(); r.Degraded {
		t.Fatalf("check after the queue drained: %+v, want the primary's", r)
	}
	if n := strings.Count(logs.String(), "store queue"); n != 1 {
		t.Errorf("%d lines about the queue within a second of a refusal, want 1 (the start): %s", n, logs.String())
	}
	clock.Advance(time.Second)
	check()
	check()
	if n := strings.Count(logs.String(), "store queue drained"); n != 1 || !strings.Contains(logs.String(), "rejected=5") {
		t.Errorf("want one line ending the episode of 5 refusals: %s", logs.String())
	}

	primary.setErr(fmt.Errorf("redisstore: do: %w", store.ErrAbandoned))
	if err := s.Do(context.Background(), []store.Op{op("a", 100, store.OnErrorLocal)}, make([]store.Result, 1)); !errors.Is(err, store.ErrAbandoned) {
		t.Fatalf("abandoned check: err %v, want store.ErrAbandoned", err)
	}
	if !s.Healthy() || testutil.CollectAndCount(m.StoreErrors) != 0 || testutil.ToFloat64(m.FallbackDecisions.WithLabelValues("a", "local")) != 5 {
		t.Error("an abandoned check counted as a store failure or was decided by the fallback")
	}
}
