package memstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

// checkCounts fails the test unless the store's and every shard's counts
// match what the shards hold. No call may be running.
func checkCounts(tb testing.TB, s *Store) {
	tb.Helper()
	var n, marks, stops int64
	for i := range s.shards {
		s.withShard(uint32(i), func(sh *shard) {
			var m, st int64
			for _, e := range sh.m {
				switch e.rank {
				case marked:
					m++
				case hardStop:
					st++
				}
			}
			if m != sh.marks || st != sh.stops {
				tb.Errorf("shard %d counts %d marks and %d hard stops, holds %d and %d", i, sh.marks, sh.stops, m, st)
			}
			n += int64(len(sh.m))
			marks += m
			stops += st
		})
	}
	if got := s.n.Load(); got != n {
		tb.Errorf("store counts %d entries, holds %d", got, n)
	}
	if got := s.marks.Load(); got != marks {
		tb.Errorf("store counts %d marks, holds %d", got, marks)
	}
	if got := s.stops.Load(); got != stops {
		tb.Errorf("store counts %d hard stops, holds %d", got, stops)
	}
}

// mark runs MarkOnce and returns whether it set key, failing the test on an
// error.
func mark(tb testing.TB, s *Store, key string, ttl time.Duration) bool {
	tb.Helper()
	ok, err := s.MarkOnce(context.Background(), key, ttl)
	if err != nil {
		tb.Fatalf("MarkOnce(%s): %v", key, err)
	}
	return ok
}

// TestFullOfMarksEvictsSoonest: a store that holds nothing but marks, as a
// flood of reported attempts leaves it, still takes a fresh user's key: it
// evicts the mark that expires soonest, and the other marks still refuse a
// second MarkOnce.
func TestFullOfMarksEvictsSoonest(t *testing.T) {
	// Each shard holds at most evictSample entries, so eviction sees them
	// all and its choice is exact.
	s, _ := newTest(Config{MaxKeys: evictSample, Shards: 2})
	key := func(i int) string { return fmt.Sprintf("attempt-%d", i) }
	// Mark i lives i+1 minutes: mark 0 expires soonest.
	for i := range evictSample {
		if !mark(t, s, key(i), time.Duration(i+1)*time.Minute) {
			t.Fatalf("mark %d not set in a store with room", i)
		}
	}
	fresh := rateOp("fresh", 1, time.Minute, 5)
	if got := do(t, s, fresh)[0]; !got.Allowed || !got.Spent {
		t.Fatalf("fresh user in a store full of marks: %+v, want allowed and spent", got)
	}
	checkLen(t, s, "after the fresh user", evictSample)
	for i := 1; i < evictSample; i++ {
		if mark(t, s, key(i), time.Hour) {
			t.Errorf("mark %d (%d min) was evicted in place of mark 0 (1 min)", i, i+1)
		}
	}
	// Mark 0 is gone, and a second MarkOnce of it sets it again: it evicts
	// the fresh user's key, an ordinary entry, before any mark.
	if !mark(t, s, key(0), time.Hour) {
		t.Error("mark 0, the soonest to expire, survived the fresh user")
	}
	if got := peek(t, s, fresh)[0]; got.Remaining != 5 {
		t.Errorf("fresh user's key after a mark came: %+v, want evicted before any mark", got)
	}
	for i := range 100 {
		if got := do(t, s, rateOp(fmt.Sprintf("more-%d", i), 1, time.Minute, 5))[0]; !got.Spent {
			t.Fatalf("fresh user %d in a store of marks: %+v, want spent", i, got)
		}
	}
	checkLen(t, s, "after 100 more", evictSample)
	checkCounts(t, s)
}

// TestFullOfMarksAndHardStops: a store of hard stops and marks takes fresh
// users' keys and new marks by evicting marks, and keeps every hard stop.
func TestFullOfMarksAndHardStops(t *testing.T) {
	s, _ := newTest(Config{MaxKeys: 16, Shards: 2})
	const stops = 8
	stop := func(i int) store.Op { return counterOp(fmt.Sprintf("stop-%d", i), 1, 1, time.Minute) }
	for i := range stops {
		do(t, s, stop(i))
		mark(t, s, fmt.Sprintf("attempt-%d", i), time.Hour)
	}
	checkLen(t, s, "full", 16)
	for i := range 50 {
		if got := do(t, s, rateOp(fmt.Sprintf("fresh-%d", i), 1, time.Minute, 5), counterOp(fmt.Sprintf("fresh-count-%d", i), 1, 100, time.Hour)); !got[0].Spent || !got[1].Spent {
			t.Fatalf("fresh user %d: %+v, want spent", i, got)
		}
		if !mark(t, s, fmt.Sprintf("flood-%d", i), time.Hour) {
			t.Fatalf("flood mark %d already set", i)
		}
	}
	checkLen(t, s, "after the flood", 16)
	for i := range stops {
		if got := peek(t, s, stop(i))[0]; got.Allowed || got.Count != 1 {
			t.Errorf("hard stop %d (1 min, sooner than every mark): %+v, want kept", i, got)
		}
	}
	checkCounts(t, s)
}

// TestHardStopNewcomer: a batch whose every new key is a hard stop evicts a
// mark while one is left; in a store of hard stops alone it is denied like
// any other newcomer, and a mark finds no room: no check ever evicts a live
// hard stop.
func TestHardStopNewcomer(t *testing.T) {
	ctx := context.Background()
	s, _ := newTest(Config{MaxKeys: 3, Shards: 1})
	stop := func(key string, hold time.Duration) store.Op { return counterOp(key, 1, 1, hold) }
	do(t, s, stop("stop-short", time.Minute))
	do(t, s, stop("stop-long", time.Hour))
	mark(t, s, "attempt", 2*time.Hour)

	if got := do(t, s, stop("stop-new", 3*time.Hour))[0]; !got.Spent {
		t.Fatalf("hard stop newcomer with a mark left: %+v, want spent", got)
	}
	checkLen(t, s, "full", 3)
	if n := s.marks.Load(); n != 0 {
		t.Fatalf("%d marks left after a hard stop newcomer, want the mark evicted", n)
	}

	mixed := do(t, s, stop("stop-mixed", 3*time.Hour), rateOp("fresh", 1, time.Minute, 5))
	if mixed[0].Spent || mixed[1].Spent || mixed[1].Allowed {
		t.Errorf("hard stop and ordinary newcomers in a store of hard stops: %+v, want denied, nothing spent", mixed)
	}
	if ok, err := s.MarkOnce(ctx, "attempt-2", time.Hour); ok || !errors.Is(err, store.ErrFull) {
		t.Errorf("MarkOnce in a store of hard stops = %v, %v; want false, store.ErrFull", ok, err)
	}
	if got := do(t, s, stop("stop-last", 4*time.Hour))[0]; got.Spent || got.Allowed {
		t.Errorf("hard stop newcomer in a store of hard stops: %+v, want denied, nothing spent", got)
	}
	checkLen(t, s, "still full", 3)
	for _, k := range []string{"stop-short", "stop-long", "stop-new"} {
		if got := peek(t, s, stop(k, time.Hour))[0]; got.Count != 1 {
			t.Errorf("%s: %+v, want kept", k, got)
		}
	}
	checkCounts(t, s)
}

// TestSampleOrder: a sample takes an expired entry first, then the lowest
// rank, then the one that expires soonest, and leaves out what ranks above
// what it may take.
func TestSampleOrder(t *testing.T) {
	s, c := newTest(Config{Shards: 1})
	mark(t, s, "mark-soon", time.Minute)
	mark(t, s, "mark-late", 2*time.Hour)
	do(t, s, counterOp("stop", 1, 1, time.Second))
	do(t, s, rateOp("ordinary-late", 1, time.Hour, 5))
	now := c.Now().UnixMicro()
	cases := []struct {
		r    rank
		now  int64
		want string
	}{
		{ordinary, now, "ordinary-late"},
		{marked, now, "ordinary-late"},
		{hardStop, now, "ordinary-late"},
		// Two seconds on, the hard stop has expired: any sample takes it.
		{ordinary, now + 2_000_000, "stop"},
	}
	for _, tc := range cases {
		s.withShard(0, func(sh *shard) {
			if got, ok := sample(sh, tc.now, tc.r); !ok || got.key != tc.want {
				t.Errorf("sample(rank %d, +%d µs) = %q, %v; want %q", tc.r, tc.now-now, got.key, ok, tc.want)
			}
		})
	}
	if err := s.Delete(context.Background(), "ordinary-late"); err != nil {
		t.Fatal(err)
	}
	s.withShard(0, func(sh *shard) {
		sh.minExp = now // as an expired entry, removed since, leaves it
		if got, ok := sample(sh, now, ordinary); ok {
			t.Errorf("sample(ordinary) of marks and a hard stop = %q, want none", got.key)
		}
		if want := now + time.Second.Microseconds(); sh.minExp != want {
			t.Errorf("minExp after a sample saw every entry = %d, want the hard stop's expiry %d", sh.minExp, want)
		}
		if got, ok := sample(sh, now, marked); !ok || got.key != "mark-soon" {
			t.Errorf("sample(marked) = %q, %v; want mark-soon", got.key, ok)
		}
		if got, ok := sample(sh, now, hardStop); !ok || got.key != "mark-soon" {
			t.Errorf("sample(hardStop) = %q, %v; want mark-soon, a mark before a hard stop", got.key, ok)
		}
	})
}

// TestFullOfHardStopsOneExpired: in a store of hard stops, one that has
// expired makes room for any new key.
func TestFullOfHardStopsOneExpired(t *testing.T) {
	s, c := newTest(Config{MaxKeys: 2, Shards: 2})
	do(t, s, counterOp("stop-short", 1, 1, time.Minute))
	do(t, s, counterOp("stop-long", 1, 1, time.Hour))
	c.Advance(2 * time.Minute)
	if got := do(t, s, rateOp("fresh", 1, time.Minute, 5))[0]; !got.Spent {
		t.Errorf("fresh user in a store of hard stops, one expired: %+v, want spent", got)
	}
	if got := peek(t, s, counterOp("stop-long", 0, 1, time.Hour))[0]; got.Count != 1 {
		t.Errorf("stop-long: %+v, want kept", got)
	}
	checkLen(t, s, "full", 2)
	checkCounts(t, s)
}

// BenchmarkDoFullOfMarks is a fresh user's check in a store that holds
// nothing but marks, each of whose three new keys evicts one, and then what
// puts the store back as it was: deleting the check's keys and setting three
// new marks in their room.
func BenchmarkDoFullOfMarks(b *testing.B) {
	const keys = 1 << 16
	s := New(Config{MaxKeys: keys})
	ctx := context.Background()
	for i := range keys {
		if _, err := s.MarkOnce(ctx, "attempt-"+strconv.Itoa(i), time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	batches := loginBatches(1024)
	res := make([]store.Result, 3)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		batch := batches[i&1023]
		if err := s.Do(ctx, batch, res); err != nil || !res[0].Spent {
			b.Fatalf("fresh check in a store of marks: %v, %+v", err, res)
		}
		if err := s.Delete(ctx, batch[0].Key, batch[1].Key, batch[2].Key); err != nil {
			b.Fatal(err)
		}
		for j := range 3 {
			if _, err := s.MarkOnce(ctx, "refill-"+strconv.Itoa(3*i+j), time.Hour); err != nil {
				b.Fatal(err)
			}
		}
		i++
	}
}
