package memstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/storetest"
	"github.com/guardian-sec/guardian/internal/testclock"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		return New(Config{Now: now})
	})
}

// TestConformanceOneShard runs the suite with every key in one shard, so
// that batches lock one shard for several ops.
func TestConformanceOneShard(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		return New(Config{Now: now, Shards: 1})
	})
}

// TestSharedNetwork: 10,000 accounts logging in successfully from one
// network leave it a count of 0, and made-up accounts are challenged from
// the 16th to the 36th (exactly the 22nd with an exact count): the band of
// storetest.SharedNetwork over the seeds "0" to "29", about Redis's
// (package redisstore), since the embedded HyperLogLog has as many
// registers. With 4,096 it was the 5th to the 61st: four accounts that
// really failed could put such a network behind a challenge.
func TestSharedNetwork(t *testing.T) {
	storetest.CheckSharedNetwork(t, func(t *testing.T, now func() time.Time) store.Store {
		return New(Config{Now: now})
	}, 16, 36)
}

// start is the instant the memstore tests start at.
var start = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// newTest returns a store configured by cfg, on a clock at start.
func newTest(cfg Config) (*Store, *testclock.Clock) {
	c := testclock.New(start)
	cfg.Now = c.Now
	return New(cfg), c
}

// The conformance suite's op builders.
var (
	rateOp    = storetest.Rate
	counterOp = storetest.Counter
)

// do runs Do and returns its results, failing the test on an error.
func do(tb testing.TB, s *Store, ops ...store.Op) []store.Result {
	tb.Helper()
	res := make([]store.Result, len(ops))
	if err := s.Do(context.Background(), ops, res); err != nil {
		tb.Fatalf("Do: %v", err)
	}
	return res
}

// peek runs Peek and returns its results, failing the test on an error.
func peek(tb testing.TB, s *Store, ops ...store.Op) []store.Result {
	tb.Helper()
	res := make([]store.Result, len(ops))
	if err := s.Peek(context.Background(), ops, res); err != nil {
		tb.Fatalf("Peek: %v", err)
	}
	return res
}

// checkLen fails the test unless s holds want entries.
func checkLen(tb testing.TB, s *Store, label string, want int) {
	tb.Helper()
	if got := s.Len(); got != want {
		tb.Errorf("%s: Len = %d, want %d", label, got, want)
	}
}

func TestSweepRemovesExpired(t *testing.T) {
	s, c := newTest(Config{})
	do(t, s, rateOp("a", 1, time.Minute, 5))
	do(t, s, rateOp("b", 2, time.Minute, 5))
	do(t, s, counterOp("c", 1, 3, 3*time.Minute))
	if _, err := s.MarkOnce(context.Background(), "m", 4*time.Minute); err != nil {
		t.Fatal(err)
	}
	checkLen(t, s, "start", 4)

	steps := []struct {
		at                      time.Time
		beforeSweep, afterSweep int
	}{
		{start.Add(time.Minute - time.Microsecond), 4, 4},
		{start.Add(time.Minute), 4, 3},
		{start.Add(2 * time.Minute), 3, 2},
		{start.Add(3 * time.Minute), 2, 1},
		{start.Add(4 * time.Minute), 1, 0},
	}
	for _, st := range steps {
		c.Set(st.at)
		label := fmt.Sprintf("at start+%v", st.at.Sub(start))
		checkLen(t, s, label+" before Sweep", st.beforeSweep)
		s.Sweep()
		checkLen(t, s, label+" after Sweep", st.afterSweep)
	}
}

func TestExpiredRemovedOnAccess(t *testing.T) {
	s, c := newTest(Config{})
	ctx := context.Background()
	a, b, d, r := rateOp("a", 1, time.Minute, 5), rateOp("b", 1, time.Minute, 5), rateOp("d", 1, time.Minute, 5), rateOp("r", 1, time.Minute, 5)
	do(t, s, a, b, d, r)
	ok, err := s.MarkOnce(ctx, "m", time.Minute)
	if err != nil || !ok {
		t.Fatalf("MarkOnce = %v, %v; want true", ok, err)
	}
	checkLen(t, s, "start", 5)
	c.Advance(time.Minute)

	peek(t, s, a)
	checkLen(t, s, "after Peek of an expired key", 4)
	if got := peek(t, s, a)[0]; got != (store.Result{Allowed: true, Remaining: 5}) {
		t.Errorf("expired key reads %+v, want full", got)
	}
	if err := s.Settle(ctx, []store.Settlement{{Key: r.Key, Action: store.GiveBack, Span: time.Second}}); err != nil {
		t.Fatal(err)
	}
	checkLen(t, s, "after Settle of an expired key", 3)
	if ok, err := s.MarkOnce(ctx, "m", time.Minute); err != nil || !ok {
		t.Errorf("MarkOnce of an expired key = %v, %v; want true", ok, err)
	}
	checkLen(t, s, "after MarkOnce of an expired key", 3)
	if err := s.Delete(ctx, d.Key); err != nil {
		t.Fatal(err)
	}
	checkLen(t, s, "after Delete of an expired key", 2)
	// Last, so that the few entries an insert sweeps on the way hold no
	// other expired key to make the count depend on the sample.
	if got := do(t, s, b)[0]; got != (store.Result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Minute}) {
		t.Errorf("Do on an expired key = %+v, want a fresh spend", got)
	}
	checkLen(t, s, "after Do on an expired key", 2)
}

func TestInsertSweepsAFewEntries(t *testing.T) {
	s, c := newTest(Config{Shards: 1})
	for i := range 100 {
		do(t, s, rateOp(fmt.Sprintf("old-%d", i), 1, time.Minute, 5))
	}
	c.Advance(time.Minute)
	for i := range 10 {
		do(t, s, rateOp(fmt.Sprintf("new-%d", i), 1, time.Minute, 5))
	}
	// Each of the 10 inserts looks at sweepSample entries; with 100
	// expired among 110 or fewer, most of what it sees has expired.
	if got := s.Len(); got >= 110-5 || got < 110-10*sweepSample {
		t.Errorf("Len = %d, want between %d and %d", got, 110-10*sweepSample, 110-5)
	}
}

// TestFullEvictsSoonestToExpire: a new key in a full store takes the place
// of the entry that expires soonest; one shard of MaxKeys entries makes the
// sample the whole store, so the choice is exact.
func TestFullEvictsSoonestToExpire(t *testing.T) {
	s, _ := newTest(Config{MaxKeys: evictSample, Shards: 1})
	key := func(i int) string { return fmt.Sprintf("account-%d", i) }
	// Key i holds i+1 units: it is full again after i+1 minutes.
	for i := range evictSample {
		do(t, s, rateOp(key(i), int64(i+1), time.Minute, 10))
	}
	for i := range 3 {
		if got := do(t, s, rateOp(fmt.Sprintf("new-%d", i), 5, time.Minute, 10))[0]; !got.Spent {
			t.Fatalf("new key %d in a full store: %+v, want spent", i, got)
		}
	}
	checkLen(t, s, "after three new keys", evictSample)
	for i := range evictSample {
		got := peek(t, s, rateOp(key(i), 0, time.Minute, 10))[0]
		// Keys 0, 1 and 2 (1, 2 and 3 minutes) went first; the new keys
		// hold 5 minutes, so key 3 (4 minutes) stays.
		if gone := got.Remaining == 10; gone != (i < 3) {
			t.Errorf("key %d (%d min): remaining %d; evicted %v, want %v", i, i+1, got.Remaining, gone, i < 3)
		}
	}
}

// TestFullPrefersExpired: an expired entry goes before a live one.
func TestFullPrefersExpired(t *testing.T) {
	s, c := newTest(Config{MaxKeys: 2, Shards: 1})
	do(t, s, rateOp("short", 1, time.Second, 5))
	do(t, s, rateOp("long", 1, time.Hour, 5))
	c.Advance(2 * time.Second)
	do(t, s, rateOp("new", 1, time.Hour, 5))
	checkLen(t, s, "full", 2)
	if got := peek(t, s, rateOp("long", 0, time.Hour, 5))[0]; got.Remaining != 4 {
		t.Errorf("long-lived key: %+v, want kept with 4 left", got)
	}
}

// TestFullKeepsHardStops: a flood of new keys never evicts a Counter at its
// limit, and is never refused while anything else can go.
func TestFullKeepsHardStops(t *testing.T) {
	s, _ := newTest(Config{MaxKeys: 40, Shards: 4})
	const stops = 30
	stop := func(i int) store.Op { return counterOp(fmt.Sprintf("stop-%d", i), 1, 1, time.Hour) }
	for i := range stops {
		do(t, s, stop(i))
	}
	for i := range 1000 {
		if got := do(t, s, rateOp(fmt.Sprintf("flood-%d", i), 1, time.Minute, 5), counterOp(fmt.Sprintf("flood-count-%d", i), 1, 100, time.Hour)); !got[0].Spent || !got[1].Spent {
			t.Fatalf("flood check %d: %+v, want spent", i, got)
		}
	}
	checkLen(t, s, "after the flood", 40)
	for i := range stops {
		if got := peek(t, s, stop(i))[0]; got.Allowed || got.Count != 1 {
			t.Errorf("hard stop %d after the flood: %+v, want still at its limit", i, got)
		}
	}
}

// TestFullOfHardStops: when everything left is a hard stop, an op on a new
// key is denied and nothing of its batch is spent, and a mark finds no room:
// MarkOnce is store.ErrFull and applies its settlements all the same.
func TestFullOfHardStops(t *testing.T) {
	ctx := context.Background()
	s, _ := newTest(Config{MaxKeys: 2})
	do(t, s, counterOp("stop-a", 1, 1, time.Hour))
	do(t, s, counterOp("stop-b", 1, 1, time.Hour))
	got := do(t, s,
		rateOp("existing-none", 1, time.Minute, 5),
		store.Op{Key: "shadow", Role: store.Shadow, Cost: 1, Limit: store.Rate{Interval: 2 * time.Minute, Burst: 5}},
		counterOp("new-count", 1, 3, time.Hour))
	want := []store.Result{
		{RetryAfter: time.Minute, ResetAfter: time.Minute},
		{RetryAfter: 2 * time.Minute, ResetAfter: 2 * time.Minute},
		{RetryAfter: time.Second, ResetAfter: time.Second},
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("op %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if got := do(t, s, rateOp("new", 0, time.Minute, 5))[0]; got != (store.Result{Allowed: true, Remaining: 5}) {
		t.Errorf("cost zero on a new key: %+v, want allowed, nothing spent", got)
	}
	settlement := store.Settlement{Key: "stop-b", Action: store.Reset}
	if ok, err := s.MarkOnce(ctx, "attempt", time.Hour, settlement); ok || !errors.Is(err, store.ErrFull) {
		t.Errorf("MarkOnce in a store full of hard stops = %v, %v; want false, store.ErrFull", ok, err)
	}
	if got := peek(t, s, counterOp("stop-b", 0, 1, time.Hour))[0]; got.Count != 0 {
		t.Errorf("stop-b after MarkOnce's settlement: %+v, want reset", got)
	}
	if got := peek(t, s, counterOp("stop-a", 0, 1, time.Hour))[0]; got.Count != 1 {
		t.Errorf("stop-a after MarkOnce in a full store: %+v, want kept", got)
	}
	checkLen(t, s, "after the settlement", 1)
}

// TestFullOfMarks: marks give way to new keys when nothing else is left,
// never a hard stop: a flood of reported attempts refuses nobody. (A mark
// outlives the attempt it marks, minutes; a hard stop is held for days.)
func TestFullOfMarks(t *testing.T) {
	ctx := context.Background()
	s, _ := newTest(Config{MaxKeys: 40, Shards: 4})
	do(t, s, counterOp("stop", 1, 1, 24*time.Hour))
	for i := range 200 {
		if _, err := s.MarkOnce(ctx, fmt.Sprintf("attempt-%d", i), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		got := do(t, s, rateOp(fmt.Sprintf("fresh-%d", i), 1, time.Minute, 5), counterOp(fmt.Sprintf("fresh-count-%d", i), 1, 100, time.Hour),
			rateOp(fmt.Sprintf("fresh-ip-%d", i), 1, time.Minute, 5))
		for j := range got {
			if !got[j].Allowed || !got[j].Spent {
				t.Fatalf("fresh check %d, op %d in a store full of marks: %+v, want spent", i, j, got[j])
			}
		}
	}
	if got := peek(t, s, counterOp("stop", 1, 1, 24*time.Hour))[0]; got.Allowed || got.Count != 1 {
		t.Errorf("hard stop after the flood: %+v, want still at its limit", got)
	}
	checkLen(t, s, "full", 40)
}

// TestMarkOnceSurvivesFlood: a mark is kept through a flood of new keys, so
// a second report is refused however full the store gets.
func TestMarkOnceSurvivesFlood(t *testing.T) {
	ctx := context.Background()
	s, _ := newTest(Config{MaxKeys: 16, Shards: 2})
	for i := range 16 {
		do(t, s, rateOp(fmt.Sprintf("account-%d", i), 1, time.Minute, 5))
	}
	settlement := store.Settlement{Key: "account-3", Action: store.GiveBack, Span: time.Minute}
	if ok, err := s.MarkOnce(ctx, "attempt", time.Hour, settlement); !ok || err != nil {
		t.Fatalf("MarkOnce in a full store = %v, %v; want true", ok, err)
	}
	for i := range 500 {
		do(t, s, rateOp(fmt.Sprintf("flood-%d", i), 1, time.Minute, 5))
	}
	if ok, err := s.MarkOnce(ctx, "attempt", time.Hour); ok || err != nil {
		t.Errorf("second MarkOnce after the flood = %v, %v; want false", ok, err)
	}
	checkLen(t, s, "full", 16)
}

func TestMaxKeysSweepsWhenFull(t *testing.T) {
	s, c := newTest(Config{MaxKeys: 20, Shards: 8})
	for i := range 20 {
		do(t, s, rateOp(fmt.Sprintf("old-%d", i), 1, time.Minute, 5))
	}
	c.Advance(time.Minute)
	// Every old key has expired: new keys find room without a Sweep, in
	// whichever shard they land.
	for i := range 20 {
		if got := do(t, s, rateOp(fmt.Sprintf("new-%d", i), 1, time.Minute, 5))[0]; !got.Spent {
			t.Fatalf("new key %d: %+v, want spent", i, got)
		}
	}
	if got := s.Len(); got > 20 {
		t.Errorf("after replacing every key: Len = %d, want at most 20", got)
	}
	for i := range 20 {
		if got := do(t, s, rateOp(fmt.Sprintf("more-%d", i), 1, time.Minute, 5))[0]; !got.Spent {
			t.Errorf("key %d more: %+v, want spent in place of an evicted one", i, got)
		}
	}
	checkLen(t, s, "after 20 more", 20)
}

// TestCounterConfirm: a Confirm keeps a count and lengthens its
// life; a spend never shortens it.
func TestCounterConfirm(t *testing.T) {
	ctx := context.Background()
	s, c := newTest(Config{})
	op := counterOp("count", 1, 100, 20*time.Minute)
	do(t, s, op)
	if err := s.Settle(ctx, []store.Settlement{{Key: "count", Action: store.Confirm, Span: 24 * time.Hour}}); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Hour)
	got := do(t, s, op)[0]
	if got.Count != 2 || got.ResetAfter != 23*time.Hour {
		t.Errorf("after confirm and an hour: %+v, want count 2, reset after 23h", got)
	}
}

func TestShardCount(t *testing.T) {
	tests := []struct {
		shards, want int
	}{
		{0, 64},
		{-3, 64},
		{1, 1},
		{2, 2},
		{3, 4},
		{64, 64},
		{65, 128},
		{1 << 20, 1 << 16},
	}
	for _, tt := range tests {
		if got := len(New(Config{Shards: tt.shards}).shards); got != tt.want {
			t.Errorf("Shards %d: %d shards, want %d", tt.shards, got, tt.want)
		}
	}
}

func TestDefaults(t *testing.T) {
	s := New(Config{})
	if s.max != 1_000_000 {
		t.Errorf("MaxKeys 0: bound %d, want 1,000,000", s.max)
	}
	before := time.Now()
	do(t, s, rateOp("a", 1, time.Hour, 5))
	s.withShard(s.shardOf("a"), func(sh *shard) {
		tat := sh.m["a"].v
		if low, high := before.Add(time.Hour).UnixMicro(), time.Now().Add(time.Hour).UnixMicro(); tat < low || tat > high {
			t.Errorf("nil Now: arrival time %d, want within [%d, %d]", tat, low, high)
		}
	})
}

// withShard runs f with shard i locked.
func (s *Store) withShard(i uint32, f func(*shard)) {
	sh := &s.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	f(sh)
}

func TestLen(t *testing.T) {
	ctx := context.Background()
	s, _ := newTest(Config{})
	steps := []struct {
		name string
		f    func() error
		want int
	}{
		{"empty", func() error { return nil }, 0},
		{"three new keys", func() error {
			return s.Do(ctx, []store.Op{rateOp("a", 1, time.Minute, 5), rateOp("b", 1, time.Minute, 5), counterOp("c", 1, 3, time.Hour)}, make([]store.Result, 3))
		}, 3},
		{"peek of new keys", func() error {
			return s.Peek(ctx, []store.Op{rateOp("x", 1, time.Minute, 5), counterOp("y", 1, 3, time.Hour)}, make([]store.Result, 2))
		}, 3},
		{"cost zero on a new key", func() error {
			return s.Do(ctx, []store.Op{rateOp("x", 0, time.Minute, 5)}, make([]store.Result, 1))
		}, 3},
		{"denied op on a new key", func() error {
			return s.Do(ctx, []store.Op{rateOp("x", 6, time.Minute, 5)}, make([]store.Result, 1))
		}, 3},
		{"denied batch with a new key", func() error {
			return s.Do(ctx, []store.Op{rateOp("x", 1, time.Minute, 5), rateOp("a", 5, time.Minute, 5)}, make([]store.Result, 2))
		}, 3},
		{"settlement of absent keys", func() error {
			return s.Settle(ctx, []store.Settlement{{Key: "x", Action: store.GiveBack, Span: time.Hour}, {Key: "y", Action: store.Reset}})
		}, 3},
		{"spend on an existing key", func() error {
			return s.Do(ctx, []store.Op{rateOp("a", 1, time.Minute, 5)}, make([]store.Result, 1))
		}, 3},
		{"delete of one and an absent key", func() error { return s.Delete(ctx, "b", "x") }, 2},
		{"settlement of a counter", func() error { return s.Settle(ctx, []store.Settlement{{Key: "c", Action: store.Reset}}) }, 1},
		{"settlement back to full", func() error {
			return s.Settle(ctx, []store.Settlement{{Key: "a", Action: store.GiveBack, Span: time.Hour}})
		}, 0},
		{"mark once", func() error { _, err := s.MarkOnce(ctx, "m", time.Hour); return err }, 1},
		{"mark once again", func() error { _, err := s.MarkOnce(ctx, "m", time.Hour); return err }, 1},
	}
	for _, st := range steps {
		if err := st.f(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		checkLen(t, s, st.name, st.want)
	}
}

// TestCounterResetByClock checks what the conformance suite leaves loose for
// a store that keeps Hold in real time: this one keeps it by its clock.
func TestCounterResetByClock(t *testing.T) {
	s, c := newTest(Config{})
	op := counterOp("c", 1, 3, time.Hour)
	do(t, s, op)
	steps := []struct {
		advance time.Duration
		want    store.Result
	}{
		{10 * time.Minute, store.Result{Allowed: true, Remaining: 2, ResetAfter: 50 * time.Minute, Count: 1}},
		{50*time.Minute - time.Microsecond, store.Result{Allowed: true, Remaining: 2, ResetAfter: time.Microsecond, Count: 1}},
		{time.Microsecond, store.Result{Allowed: true, Remaining: 3}},
	}
	for i, st := range steps {
		c.Advance(st.advance)
		if got := peek(t, s, op)[0]; got != st.want {
			t.Errorf("step %d: got %+v, want %+v", i, got, st.want)
		}
	}
}

func TestLargeBatch(t *testing.T) {
	s, _ := newTest(Config{Shards: 4})
	ops := make([]store.Op, 12)
	for i := range ops {
		ops[i] = rateOp(fmt.Sprintf("k-%d", i), 1, time.Minute, 2)
	}
	for round, wantSpent := range []bool{true, true, false} {
		for i, r := range do(t, s, ops...) {
			if r.Spent != wantSpent {
				t.Errorf("round %d, op %d: %+v, want spent %v", round, i, r, wantSpent)
			}
		}
	}
	// One key with room left is not spent while the others are full.
	ops[5] = rateOp("k-fresh", 1, time.Minute, 2)
	for i, r := range do(t, s, ops...) {
		if r.Spent || r.Allowed != (i == 5) {
			t.Errorf("op %d: %+v, want allowed only for op 5, spent never", i, r)
		}
	}
}

func TestBadArguments(t *testing.T) {
	ctx := context.Background()
	s, _ := newTest(Config{})
	do(t, s, rateOp("a", 3, time.Minute, 5))
	settlements := []struct {
		name string
		r    []store.Settlement
	}{
		{"empty key", []store.Settlement{{Action: store.GiveBack, Span: time.Minute}}},
		{"negative amount", []store.Settlement{{Key: "a", Action: store.GiveBack, Span: -time.Minute}}},
		{"no action", []store.Settlement{{Key: "a", Span: time.Minute}}},
		{"good then bad", []store.Settlement{{Key: "a", Action: store.GiveBack, Span: time.Minute}, {Key: "a", Action: 99}}},
	}
	for _, tt := range settlements {
		if err := s.Settle(ctx, tt.r); !errors.Is(err, store.ErrBadBatch) {
			t.Errorf("Settle, %s: err = %v, want store.ErrBadBatch", tt.name, err)
		}
	}
	if got, want := peek(t, s, rateOp("a", 1, time.Minute, 5))[0], (store.Result{Allowed: true, Remaining: 2, ResetAfter: 3 * time.Minute}); got != want {
		t.Errorf("after bad settlements: got %+v, want %+v (nothing given back)", got, want)
	}
	marks := []struct {
		name string
		key  string
		ttl  time.Duration
	}{
		{"empty key", "", time.Minute},
		{"zero ttl", "m", 0},
		{"negative ttl", "m", -time.Minute},
	}
	for _, tt := range marks {
		if ok, err := s.MarkOnce(ctx, tt.key, tt.ttl); ok || !errors.Is(err, store.ErrBadBatch) {
			t.Errorf("MarkOnce, %s: %v, %v; want false, store.ErrBadBatch", tt.name, ok, err)
		}
	}
	checkLen(t, s, "after bad arguments", 1)
}

func TestCanceledContext(t *testing.T) {
	s, _ := newTest(Config{})
	do(t, s, rateOp("a", 3, time.Minute, 5))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := []struct {
		name string
		f    func() error
	}{
		{"Do", func() error { return s.Do(ctx, []store.Op{rateOp("a", 1, time.Minute, 5)}, make([]store.Result, 1)) }},
		{"Peek", func() error { return s.Peek(ctx, []store.Op{rateOp("a", 1, time.Minute, 5)}, make([]store.Result, 1)) }},
		{"Settle", func() error {
			return s.Settle(ctx, []store.Settlement{{Key: "a", Action: store.GiveBack, Span: time.Minute}})
		}},
		{"Delete", func() error { return s.Delete(ctx, "a") }},
		{"MarkOnce", func() error { _, err := s.MarkOnce(ctx, "m", time.Minute); return err }},
	}
	for _, c := range calls {
		if err := c.f(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: err = %v, want context.Canceled", c.name, err)
		}
	}
	if got, want := peek(t, s, rateOp("a", 1, time.Minute, 5))[0], (store.Result{Allowed: true, Remaining: 2, ResetAfter: 3 * time.Minute}); got != want {
		t.Errorf("after canceled calls: got %+v, want %+v", got, want)
	}
	checkLen(t, s, "after canceled calls", 1)
}

// TestManyShardsConcurrent runs batches of up to 12 ops over 40 keys spread
// over 16 shards from 16 goroutines, and checks that every key was spent
// exactly as often as its results say, never beyond its budget, and that
// every batch's enforced ops were spent together.
func TestManyShardsConcurrent(t *testing.T) {
	const (
		nKeys   = 40
		budget  = 10
		workers = 16
		batches = 300
	)
	s, _ := newTest(Config{Shards: 16})
	key := func(i int) string { return fmt.Sprintf("key-%d", i) }
	op := func(i int, cost int64, shadow bool) store.Op {
		o := store.Op{Key: key(i), Cost: cost, Limit: store.Rate{Interval: time.Hour, Burst: budget}}
		if i%4 == 3 {
			o.Limit = store.Counter{Max: budget, Hold: time.Hour}
		}
		if shadow {
			o.Role = store.Shadow
		}
		return o
	}
	var spent [nKeys]atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			ops := make([]store.Op, 0, 12)
			idx := make([]int, 0, 12)
			res := make([]store.Result, 12)
			for range batches {
				ops, idx = ops[:0], idx[:0]
				for _, i := range rng.Perm(nKeys)[:1+rng.IntN(12)] {
					ops = append(ops, op(i, 1+rng.Int64N(2), rng.IntN(4) == 0))
					idx = append(idx, i)
				}
				if err := s.Do(context.Background(), ops, res[:len(ops)]); err != nil {
					t.Errorf("Do: %v", err)
					return
				}
				enforcedSpent := -1
				for j, r := range res[:len(ops)] {
					if r.Spent {
						spent[idx[j]].Add(ops[j].Cost)
					}
					if ops[j].Role == store.Shadow {
						if r.Spent != r.Allowed {
							t.Errorf("shadow op %+v: %+v, want spent exactly when allowed", ops[j], r)
						}
						continue
					}
					if sp := boolInt(r.Spent); enforcedSpent == -1 {
						enforcedSpent = sp
					} else if sp != enforcedSpent {
						t.Errorf("batch %v: enforced ops spent apart: %+v", idx, res[:len(ops)])
					}
				}
			}
		})
	}
	wg.Wait()
	for i := range nKeys {
		n := spent[i].Load()
		if n > budget {
			t.Errorf("%s: spent %d, budget %d", key(i), n, budget)
		}
		got := peek(t, s, op(i, 0, false))[0]
		if got.Remaining != budget-n {
			t.Errorf("%s: remaining %d after spending %d of %d", key(i), got.Remaining, n, budget)
		}
	}
}

// boolInt returns 1 for true, 0 for false.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestDoDoesNotAllocate checks the common case, a small batch on keys that
// exist, allocates nothing.
func TestDoDoesNotAllocate(t *testing.T) {
	s, _ := newTest(Config{})
	ops := loginBatch("alice", "203.0.113.0")
	res := make([]store.Result, len(ops))
	ctx := context.Background()
	if err := s.Do(ctx, ops, res); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := s.Do(ctx, ops, res); err != nil {
			t.Fatal(err)
		}
		if err := s.Peek(ctx, ops, res); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Do and Peek: %v allocations, want 0", allocs)
	}
}

// loginBatch returns the ops of a login check: the account's rate, the IP
// prefix's rate and the account's consecutive failures. The budgets are large
// enough that every check is spent, on keys that stay live.
func loginBatch(account, ip string) []store.Op {
	return []store.Op{
		{Key: "guardian:v1:{" + account + "}:login-account", Cost: 1, Limit: store.Rate{Interval: time.Second, Burst: 1 << 30}},
		{Key: "guardian:v1:{" + ip + "}:login-ip", Cost: 1, Limit: store.Rate{Interval: time.Second, Burst: 1 << 30}},
		{Key: "guardian:v1:{" + account + "}:hard-stop", Cost: 1, Limit: store.Counter{Max: 1 << 60, Hold: 90 * 24 * time.Hour}},
	}
}

// loginBatches returns n login batches on distinct accounts and addresses.
func loginBatches(n int) [][]store.Op {
	out := make([][]store.Op, n)
	for i := range out {
		out[i] = loginBatch(fmt.Sprintf("%064x", i), fmt.Sprintf("%064x", i*7))
	}
	return out
}

// warm spends every batch once, so that a benchmark measures checks on keys
// the store holds.
func warm(b *testing.B, s *Store, batches [][]store.Op) {
	b.Helper()
	for _, ops := range batches {
		do(b, s, ops...)
	}
}

func BenchmarkDo(b *testing.B) {
	s := New(Config{})
	batches := loginBatches(1024)
	warm(b, s, batches)
	res := make([]store.Result, 3)
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := s.Do(ctx, batches[i&1023], res); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkDoParallel(b *testing.B) {
	s := New(Config{})
	batches := loginBatches(1 << 16)
	warm(b, s, batches)
	ctx := context.Background()
	var seed atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		res := make([]store.Result, 3)
		i := seed.Add(1) * 7919
		for pb.Next() {
			if err := s.Do(ctx, batches[i&(1<<16-1)], res); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

// TestFullConcurrentFlood: concurrent floods of new keys and of marks stay
// within the bound, never evict a hard stop, are never refused, and leave
// the store's counts exact.
func TestFullConcurrentFlood(t *testing.T) {
	s, _ := newTest(Config{MaxKeys: 64, Shards: 8})
	const stops = 16
	stop := func(i int) store.Op { return counterOp(fmt.Sprintf("stop-%d", i), 1, 1, time.Hour) }
	for i := range stops {
		do(t, s, stop(i))
	}
	var refused, unset atomic.Int64
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 500 {
				if ok, err := s.MarkOnce(context.Background(), fmt.Sprintf("mark-%d-%d", g, i), time.Minute); err != nil || !ok {
					unset.Add(1)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := range 500 {
				res := make([]store.Result, 2)
				ops := []store.Op{rateOp(fmt.Sprintf("flood-%d-%d", g, i), 1, time.Minute, 5), rateOp(fmt.Sprintf("flood-%d-%d-ip", g, i), 1, time.Minute, 5)}
				if err := s.Do(context.Background(), ops, res); err != nil || !res[0].Spent || !res[1].Spent {
					refused.Add(1)
				}
				if n := s.Len(); n > 64 {
					t.Errorf("Len %d above MaxKeys 64", n)
				}
			}
		}()
	}
	wg.Wait()
	if n := refused.Load(); n != 0 {
		t.Errorf("%d flood checks refused, want none", n)
	}
	if n := unset.Load(); n != 0 {
		t.Errorf("%d new marks not set, want none", n)
	}
	for i := range stops {
		if got := peek(t, s, stop(i))[0]; got.Count != 1 {
			t.Errorf("hard stop %d after the flood: %+v, want kept", i, got)
		}
	}
	checkLen(t, s, "after the flood", 64)
	checkCounts(t, s)
}

// BenchmarkDistinct is a check of the built-in distinct rule's op (its
// network's accounts, less those that succeeded), on a network of a few
// accounts and on one that 10,000 successful accounts share (every
// sub-window dense): by an account the network saw before, and by a new
// one each check.
func BenchmarkDistinct(b *testing.B) {
	limit := store.Distinct{Step: 6 * time.Hour, Max: 1 << 20, Hold: 20 * time.Minute}
	for _, c := range []struct {
		accounts int
		fresh    bool
	}{{10, false}, {10_000, false}, {10, true}, {10_000, true}} {
		b.Run(fmt.Sprintf("accounts=%d/new=%v", c.accounts, c.fresh), func(b *testing.B) {
			accounts := c.accounts
			s := New(Config{})
			var adds []store.Settlement
			for i := range accounts {
				m := fmt.Sprintf("member-%011d", i)
				adds = append(adds,
					store.Settlement{Key: "net", Action: store.Add, Member: m, Span: limit.Step},
					store.Settlement{Key: "net:succeeded", Action: store.Add, Member: m, Span: limit.Step})
			}
			if err := s.Settle(context.Background(), adds); err != nil {
				b.Fatal(err)
			}
			ops := []store.Op{{Key: "net", Member: "member-00000000000", Cost: 1, Role: store.Soft, Limit: limit, Except: "net:succeeded"}}
			res := make([]store.Result, 1)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if c.fresh {
					ops[0].Member = fmt.Sprintf("new-%014d", i)
					i++
				}
				if err := s.Do(context.Background(), ops, res); err != nil {
					b.Fatal(err)
				}
			}
			if !c.fresh && res[0].Count != 0 {
				b.Fatalf("count %d, want 0: every account succeeded", res[0].Count)
			}
		})
	}
}

// TestDistinctWithoutExceptLocksNoOtherShard: a Distinct op without an
// Except key (count: attempts) reads no shard but its own while other
// checks write the shard an empty key falls in (the race detector, or the
// runtime's concurrent map check, would stop the test).
func TestDistinctWithoutExceptLocksNoOtherShard(t *testing.T) {
	s := New(Config{})
	limit := store.Distinct{Step: 6 * time.Hour, Max: 1 << 20}
	var own string
	for i := 0; own == ""; i++ {
		if k := fmt.Sprintf("net%d", i); s.shardOf(k) != s.shardOf("") {
			own = k
		}
	}
	do(t, s, store.Op{Key: own, Member: "m0", Cost: 1, Limit: limit})
	var writers []string
	for i := 0; len(writers) < 2000; i++ {
		if k := fmt.Sprintf("k%d", i); s.shardOf(k) == s.shardOf("") {
			writers = append(writers, k)
		}
	}
	run := func(op func(i int) store.Op) {
		res := make([]store.Result, 1)
		for i := range len(writers) {
			if err := s.Do(context.Background(), []store.Op{op(i)}, res); err != nil {
				t.Error(err)
				return
			}
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		run(func(i int) store.Op {
			return store.Op{Key: own, Member: fmt.Sprintf("m%d", i%50), Cost: 1, Limit: limit}
		})
	})
	wg.Go(func() {
		run(func(i int) store.Op {
			return store.Op{Key: writers[i], Cost: 1, Limit: store.Rate{Interval: time.Second, Burst: 5}}
		})
	})
	wg.Wait()
	if r := peek(t, s, store.Op{Key: own, Member: "m0", Limit: limit}); r[0].Count != 50 {
		t.Errorf("count = %d, want 50", r[0].Count)
	}
}
