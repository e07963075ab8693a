package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
	"github.com/guardian-sec/guardian/internal/testclock"
)

// TestBusyDistinctCount: a distinct key whose window holds 256 members or
// more remembers its count for a second of the store's clock: a check of a
// member it has seen counts without merging the sub-windows (no PFCOUNT),
// and so does a peek; a new member's check forgets the count so that the
// next one counts again, and so does the second's end. A key with fewer
// members counts on every check and remembers nothing, and a peek
// remembers no count.
func TestBusyDistinctCount(t *testing.T) {
	node := redistest.Start(t).Client(t)
	clk := testclock.New(time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC))
	s := redisstore.New(node, redisstore.Config{Now: clk.Now})
	op := func(key, member string) store.Op {
		return store.Op{Key: key, Member: member, Cost: 1, Limit: store.Distinct{Step: time.Hour, Max: 1_000_000}}
	}
	busy, quiet := "guardian:v3:{net1}:distinct", "guardian:v3:{net2}:distinct"
	for i := range 300 {
		do(t, s, op(busy, fmt.Sprintf("m%d", i)))
	}
	for i := range 100 {
		do(t, s, op(quiet, fmt.Sprintf("m%d", i)))
	}
	remembered := func(key string) bool {
		n, err := node.Exists(context.Background(), redisstore.DistinctCountKey(key)).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	// check runs o (peek: only evaluates) and returns its count and how
	// many PFCOUNTs Redis ran for it.
	check := func(o store.Op, peeking bool) (int64, int64) {
		t.Helper()
		before := redistest.CommandStats(t, node)
		var res []store.Result
		if peeking {
			res = peek(t, s, o)
		} else {
			res = do(t, s, o)
		}
		return res[0].Count, redistest.Ran(before, redistest.CommandStats(t, node))["pfcount"]
	}
	within := func(what string, count int64, want float64) {
		t.Helper()
		if d := (float64(count) - want) / want; d > 0.05 || d < -0.05 {
			t.Errorf("%s: count %d, want within 5%% of %v", what, count, want)
		}
	}

	first, n := check(op(busy, "m0"), false)
	within("a seen member's check", first, 300)
	if n != 1 || !remembered(busy) {
		t.Fatalf("a seen member's check: %d PFCOUNTs, count remembered %v; want 1 and the count remembered", n, remembered(busy))
	}
	if count, n := check(op(busy, "m1"), false); n != 0 || count != first {
		t.Errorf("the next seen member: count %d with %d PFCOUNTs, want %d with none", count, n, first)
	}
	if count, n := check(op(busy, "m1"), true); n != 0 || count != first {
		t.Errorf("a peek: count %d with %d PFCOUNTs, want the remembered %d with none", count, n, first)
	}
	if count, n := check(op(busy, "new1"), false); n != 0 || count != first || remembered(busy) {
		t.Errorf("a new member: count %d with %d PFCOUNTs, remembered %v; want %d with none, then forgotten", count, n, remembered(busy), first)
	}
	if count, n := check(op(busy, "m2"), false); n != 1 || !remembered(busy) {
		t.Errorf("after a new member: %d PFCOUNTs, remembered %v; want 1, remembered again", n, remembered(busy))
	} else {
		within("after a new member", count, 301)
	}
	clk.Advance(time.Second)
	if _, n := check(op(busy, "m3"), false); n != 1 {
		t.Errorf("a second later: %d PFCOUNTs, want 1", n)
	}
	// Forget the count (a new member), then peek: it counts, and
	// remembers nothing.
	check(op(busy, "new2"), false)
	for range 2 {
		if count, n := check(op(busy, "m4"), true); n != 1 || remembered(busy) {
			t.Errorf("a peek: %d PFCOUNTs, remembered %v; want 1 and nothing remembered", n, remembered(busy))
		} else {
			within("a peek", count, 302)
		}
	}
	for range 2 {
		if count, n := check(op(quiet, "m0"), false); n != 1 || remembered(quiet) {
			t.Errorf("100 members: %d PFCOUNTs, remembered %v; want 1 every check, nothing remembered", n, remembered(quiet))
		} else {
			within("100 members", count, 100)
		}
	}
}

// TestBusyDistinctCountExcept: the members of the except key count towards
// a busy window: 200 members of which 100 are excepted, with 100 more in
// the except key, make a window of 300, whose count (100) is remembered.
func TestBusyDistinctCountExcept(t *testing.T) {
	node := redistest.Start(t).Client(t)
	clk := testclock.New(time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC))
	s := redisstore.New(node, redisstore.Config{Now: clk.Now})
	own, except := "guardian:v3:{net}:distinct", "guardian:v3:{net}:succeeded"
	op := func(key, member, except string) store.Op {
		return store.Op{Key: key, Member: member, Cost: 1, Except: except, Limit: store.Distinct{Step: time.Hour, Max: 1_000_000}}
	}
	for i := range 200 {
		do(t, s, op(own, fmt.Sprintf("m%d", i), ""))
		if i%2 == 0 {
			do(t, s, op(except, fmt.Sprintf("m%d", i), ""))
		}
	}
	for i := range 100 {
		do(t, s, op(except, fmt.Sprintf("x%d", i), ""))
	}
	var counts [2]int64
	for i := range counts {
		before := redistest.CommandStats(t, node)
		counts[i] = do(t, s, op(own, "m1", except))[0].Count
		pfcounts := redistest.Ran(before, redistest.CommandStats(t, node))["pfcount"]
		if want := []int64{3, 0}[i]; pfcounts != want {
			t.Errorf("check %d: %d PFCOUNTs, want %d", i+1, pfcounts, want)
		}
	}
	if d := float64(counts[0]-100) / 100; d > 0.05 || d < -0.05 || counts[1] != counts[0] {
		t.Errorf("counts %v, want within 5%% of 100, the second the first's", counts)
	}
}

// TestBusyDistinctCountGrouped: in one grouped call each batch sees the
// count key the batch before it left. A seen member's batch counts (one
// PFCOUNT) and remembers; the next batch, a new member, reads that count
// and forgets it; the third, another new member, counts again (a second
// PFCOUNT) instead of reading a count that no longer holds.
func TestBusyDistinctCountGrouped(t *testing.T) {
	clk := testclock.New(time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC))
	busy := "guardian:v3:{net1}:distinct"
	op := func(member string) store.Op {
		return store.Op{Key: busy, Member: member, Cost: 1, Limit: store.Distinct{Step: time.Hour, Max: 1_000_000}}
	}
	held := rate("guardian:v3:{acct}:login", 1, time.Hour, 5)
	s, node, g, wg := holdLane(t, redisstore.Config{Now: clk.Now}, held)
	// Filled beside the held lane (never queued: each waits for the
	// gate's call to return otherwise), so through a second store.
	fill := redisstore.New(node, redisstore.Config{Now: clk.Now})
	for i := range 300 {
		do(t, fill, op(fmt.Sprintf("m%d", i)))
	}
	before := redistest.CommandStats(t, node)
	counts := make([]int64, 3)
	for i, member := range []string{"m0", "new1", "new2"} {
		wg.Go(func() { counts[i] = do(t, s, op(member))[0].Count })
		waitQueued(t, s, i+1)
	}
	close(g.opened)
	wg.Wait()
	ran := redistest.Ran(before, redistest.CommandStats(t, node))
	if ran["evalsha"] != 2 || ran["pfcount"] != 2 {
		t.Errorf("Redis ran %v: want 2 script calls (the held one, the group of three) and 2 PFCOUNTs, the first batch's and the third's", ran)
	}
	if counts[1] != counts[0] {
		t.Errorf("counts %v: the second batch should read the first's remembered count", counts)
	}
}
