package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
	"github.com/guardian-sec/guardian/internal/store/storetest"
	"github.com/guardian-sec/guardian/internal/testclock"
)

// TestRedis runs everything that needs a single Redis against one
// container, one subtest after another.
func TestRedis(t *testing.T) {
	srv := redistest.Start(t)
	c := open(t, srv.URL())
	// Counting commands needs a client that dials nothing in the background.
	plain := srv.Client(t)

	t.Run("conformance", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
			flush(t, c)
			return redisstore.New(c, redisstore.Config{Now: now})
		})
	})
	t.Run("conformance_functions", func(t *testing.T) {
		testConformanceFunctions(t, c)
	})
	t.Run("functions", func(t *testing.T) {
		flush(t, c)
		testFunctions(t, plain)
	})
	t.Run("functions_after_refused_writes", func(t *testing.T) {
		flush(t, c)
		testFunctionsAfterRefusedWrites(t, plain)
	})
	t.Run("one_script_call_per_batch", func(t *testing.T) {
		flush(t, c)
		testOneCallPerBatch(t, plain)
	})
	t.Run("script_flush", func(t *testing.T) {
		flush(t, c)
		testScriptFlush(t, plain)
	})
	t.Run("warm", func(t *testing.T) {
		flush(t, c)
		testWarm(t, plain)
	})
	t.Run("redis_clock", func(t *testing.T) {
		flush(t, c)
		testRedisClock(t, c)
	})
	t.Run("concurrent_instances", func(t *testing.T) {
		flush(t, c)
		testConcurrentInstances(t, func(t *testing.T) redis.UniversalClient { return open(t, srv.URL()) })
	})
	t.Run("every_key_expires", func(t *testing.T) {
		flush(t, c)
		testEveryKeyExpires(t, c)
	})
	t.Run("bad_state", func(t *testing.T) {
		flush(t, c)
		testBadState(t, c)
	})
	t.Run("long_hold", func(t *testing.T) {
		flush(t, c)
		testLongHold(t, c)
	})
	t.Run("distinct_expiry", func(t *testing.T) {
		flush(t, c)
		testDistinctExpiry(t, c)
	})
	t.Run("reset_by_kind", func(t *testing.T) {
		flush(t, c)
		testResetByKind(t, c)
	})
	// 10,000 accounts logging in successfully from one network leave it
	// a count of 0, and made-up accounts are challenged from the 17th to
	// the 36th (exactly the 22nd with an exact count): the band of
	// storetest.SharedNetwork over the seeds "0" to "29".
	t.Run("shared_network", func(t *testing.T) {
		flush(t, c)
		storetest.CheckSharedNetwork(t, func(t *testing.T, now func() time.Time) store.Store {
			return redisstore.New(c, redisstore.Config{Now: now})
		}, 17, 36)
	})
	t.Run("documented_sub_window_cleanup", func(t *testing.T) {
		flush(t, c)
		testSubWindowCleanup(t, c, srv.Addr())
	})
}

// open returns a client from redisstore.Open, closed when tb ends.
func open(tb testing.TB, url string) redis.UniversalClient {
	tb.Helper()
	c, err := redisstore.Open(url)
	if err != nil {
		tb.Fatalf("Open(%q): %v", url, err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// testOneCallPerBatch: a three-op batch, spent or denied, is one EVALSHA in
// one round trip; inside it the script reads the clock and each key once,
// and writes each key it spends.
func testOneCallPerBatch(t *testing.T, node *redis.Client) {
	sent := &sentCounter{}
	node.AddHook(sent)
	s := redisstore.New(node, redisstore.Config{})
	batch := []store.Op{
		rate("guardian:v2:{acct}:login-account", 1, time.Minute, 4),
		rate("guardian:v2:{ip}:login-ip", 1, 20*time.Second, 30),
		counter("guardian:v2:{acct}:hard-stop", 1, 100, 90*24*time.Hour),
	}
	do(t, s, batch...) // loads the script, creates the keys
	// A spend reads each key and writes it with its expiry; nothing else.
	spent := map[string]int64{"evalsha": 1, "get": 3, "set": 3, "time": 1}
	denied := map[string]int64{"evalsha": 1, "time": 1, "get": 3}
	for i, want := range []map[string]int64{spent, spent, spent, denied} {
		before := redistest.CommandStats(t, node)
		sent.take()
		res := do(t, s, batch...)
		cmds, roundTrips := sent.take()
		got := redistest.Ran(before, redistest.CommandStats(t, node))
		if res[0].Spent != (want["set"] > 0) {
			t.Errorf("call %d: spent %v, want %v", i, res[0].Spent, want["set"] > 0)
		}
		if cmds != 1 || roundTrips != 1 {
			t.Errorf("call %d: sent %d commands in %d round trips, want 1 in 1", i, cmds, roundTrips)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("call %d: Redis ran %v, want %v", i, got, want)
		}
	}
}

// testScriptFlush: after SCRIPT FLUSH (or a restart) the scripts are sent
// again and every call still works.
func testScriptFlush(t *testing.T, node *redis.Client) {
	ctx := context.Background()
	clk := testclock.New(t0)
	s := redisstore.New(node, redisstore.Config{Now: clk.Now})
	op := rate("guardian:v2:{acct}:login-account", 1, time.Minute, 5)
	cnt := counter("guardian:v2:{acct}:hard-stop", 1, 100, time.Hour)

	checkResults(t, "before flush", do(t, s, op, cnt), []store.Result{
		{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Minute},
		{Allowed: true, Spent: true, Remaining: 99, ResetAfter: time.Hour, Count: 1},
	})
	flushScripts := func() {
		t.Helper()
		if err := node.ScriptFlush(ctx).Err(); err != nil {
			t.Fatalf("SCRIPT FLUSH: %v", err)
		}
	}

	flushScripts()
	checkResults(t, "Do after flush", do(t, s, op, cnt), []store.Result{
		{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute},
		{Allowed: true, Spent: true, Remaining: 98, ResetAfter: time.Hour, Count: 2},
	})
	flushScripts()
	checkResults(t, "Peek after flush", peek(t, s, op, cnt), []store.Result{
		{Allowed: true, Remaining: 3, ResetAfter: 2 * time.Minute},
		{Allowed: true, Remaining: 98, ResetAfter: time.Hour, Count: 2},
	})
	flushScripts()
	if err := s.Settle(ctx, []store.Settlement{{Key: op.Key, Action: store.GiveBack, Span: time.Minute}}); err != nil {
		t.Fatalf("Settle after flush: %v", err)
	}
	checkResults(t, "after settlement", peek(t, s, op), []store.Result{
		{Allowed: true, Remaining: 4, ResetAfter: time.Minute},
	})
	flushScripts()
	if ok, err := s.MarkOnce(ctx, "guardian:v2:{attempt}:a1", time.Minute); err != nil || !ok {
		t.Fatalf("MarkOnce after flush = %v, %v; want true", ok, err)
	}

	// The fallback sent the script itself, so EVALSHA finds it again.
	flushScripts()
	do(t, s, op)
	before := redistest.CommandStats(t, node)
	do(t, s, op)
	got := redistest.Ran(before, redistest.CommandStats(t, node))
	if got["evalsha"] != 1 || got["eval"] != 0 {
		t.Errorf("after the fallback Redis ran %v, want one EVALSHA and no EVAL", got)
	}
}

// testRedisClock: without an override the scripts use Redis TIME, and a
// key's TTL matches what its result says.
func testRedisClock(t *testing.T, c redis.UniversalClient) {
	s := redisstore.New(c, redisstore.Config{})
	r := "guardian:v2:{acct}:login-account"
	k := "guardian:v2:{acct}:hard-stop"
	res := do(t, s, rate(r, 3, time.Minute, 5), counter(k, 1, 100, time.Hour))
	if !res[0].Spent || res[0].Remaining != 2 || res[0].ResetAfter != 3*time.Minute {
		t.Errorf("rate: got %+v, want spent, 2 remaining, reset after 3m", res[0])
	}
	if !res[1].Spent || res[1].Count != 1 || res[1].ResetAfter != time.Hour {
		t.Errorf("counter: got %+v, want spent, count 1, reset after 1h", res[1])
	}
	for key, want := range map[string]time.Duration{r: 3 * time.Minute, k: time.Hour} {
		if ttl := keyTTL(t, c, key); ttl <= want-5*time.Second || ttl > want+2*time.Millisecond {
			t.Errorf("PTTL of %s = %v, want just under %v", key, ttl, want)
		}
	}

	// Redis's clock moves on: a key spent 50ms ago has less to wait for.
	time.Sleep(50 * time.Millisecond)
	got := peek(t, s, rate(r, 1, time.Minute, 5))[0]
	if got.ResetAfter > 3*time.Minute-50*time.Millisecond || got.ResetAfter < 3*time.Minute-10*time.Second {
		t.Errorf("ResetAfter 50ms later = %v, want a little under 3m-50ms", got.ResetAfter)
	}
}

// testConcurrentInstances: 50 checks through five clients, as five guardian
// instances would send them, against a budget of 20: exactly 20 spent, and
// every batch spent whole or not at all.
func testConcurrentInstances(t *testing.T, newClient func(*testing.T) redis.UniversalClient) {
	// Warmed, the odd ones call the do script's function library where
	// Redis takes it; the others run the script. Both count the same keys.
	var stores []store.Store
	for i := range 5 {
		c := newClient(t)
		s := redisstore.New(c, redisstore.Config{Functions: i%2 == 1})
		if err := s.Warm(context.Background()); err != nil {
			t.Fatalf("Warm: %v", err)
		}
		_, cluster := c.(*redis.ClusterClient)
		if on, why := s.Functions(); on != (i%2 == 1 && !cluster) {
			t.Fatalf("instance %d: Functions() = %v, %v", i, on, why)
		}
		stores = append(stores, s)
	}
	shared := rate("guardian:v2:{ip}:login-ip", 1, time.Hour, 20)
	won := budget(t, stores, 50, func(i int) []store.Op {
		return []store.Op{shared, rate(fmt.Sprintf("guardian:v2:{acct%d}:login-account", i), 1, time.Hour, 5)}
	})
	if n := count(won); n != 20 {
		t.Errorf("%d of 50 batches spent, want exactly 20", n)
	}
	s := stores[0]
	if got := peek(t, s, shared)[0]; got.Allowed || got.Remaining != 0 {
		t.Errorf("shared budget after: %+v, want exhausted", got)
	}
	for i, w := range won {
		got := peek(t, s, rate(fmt.Sprintf("guardian:v2:{acct%d}:login-account", i), 1, time.Hour, 5))[0]
		if want := int64(5 - b2i(w)); got.Remaining != want {
			t.Errorf("caller %d (won %v): own key has %d left, want %d", i, w, got.Remaining, want)
		}
	}

	counterOp := counter("guardian:v2:{acct}:hard-stop", 1, 20, time.Hour)
	won = budget(t, stores, 50, func(int) []store.Op { return []store.Op{counterOp} })
	if n := count(won); n != 20 {
		t.Errorf("counter: %d of 50 spent, want exactly 20", n)
	}
	if got := peek(t, s, counterOp)[0]; got.Count != 20 {
		t.Errorf("counter after: %+v, want count 20", got)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// workload exercises every kind of write the store makes.
func workload(t *testing.T, s store.Store) {
	ctx := context.Background()
	for i := range 5 {
		acct := fmt.Sprintf("guardian:v2:{acct%d}:", i)
		ip := fmt.Sprintf("guardian:v2:{ip%d}:", i%2)
		for range 3 {
			do(t, s,
				rate(acct+"login-account", 1, time.Minute, 5),
				rate(ip+"login-ip", 1, 20*time.Second, 2),
				counter(acct+"hard-stop", 1, 100, 90*24*time.Hour),
				shadow(rate(acct+"new-rule", 1, time.Minute, 1)),
			)
		}
		if err := s.Settle(ctx, []store.Settlement{{Key: acct + "login-account", Action: store.GiveBack, Span: time.Minute}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.MarkOnce(ctx, acct+"attempt", 10*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
}

// testEveryKeyExpires: after a workload, every key in Redis has a TTL.
func testEveryKeyExpires(t *testing.T, c redis.UniversalClient) {
	workload(t, redisstore.New(c, redisstore.Config{}))
	checkEveryKeyExpires(t, c)
}

// testBadState: a key holding something the scripts did not write is an
// error, never a panic or a decision.
func testBadState(t *testing.T, c redis.UniversalClient) {
	ctx := context.Background()
	s := redisstore.New(c, redisstore.Config{})
	// Keys holding garbage, some of it near another kind's state (which a
	// rule that changed type reads as absent), and a key of another type
	// where a string should be.
	if err := c.HSet(ctx, "guardian:v2:{x}:s", "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	bad := []store.Op{rate("guardian:v2:{x}:s", 1, time.Minute, 5)}
	for i, v := range []string{"garbage", "1:2 x", "5:", "1,2", "1:2,3:4", "1,2,3,4,5,6"} {
		k := fmt.Sprintf("guardian:v2:{xyz%d}:r", i)
		setState(t, c, k, v)
		bad = append(bad, rate(k, 1, time.Minute, 5), counter(k, 1, 5, time.Hour),
			store.Op{Key: k, Member: "m", Cost: 1, Limit: store.Distinct{Step: time.Hour, Max: 5}})
	}
	setState(t, c, "guardian:v2:{xyz}:r", "garbage")
	for _, op := range bad {
		res := make([]store.Result, 1)
		err := s.Do(ctx, []store.Op{op}, res)
		if err == nil || !strings.HasPrefix(err.Error(), "redisstore: do: ") {
			t.Errorf("Do on %s (limit %T): err = %v, want a redisstore error", op.Key, op.Limit, err)
		}
		if res[0] != (store.Result{}) {
			t.Errorf("Do on %s: result %+v, want none", op.Key, res[0])
		}
	}
	if err := s.Settle(ctx, []store.Settlement{{Key: "guardian:v2:{xyz}:r", Action: store.GiveBack, Span: time.Second}}); err == nil {
		t.Error("Settle of a garbage rate key: no error")
	}
	if _, err := s.MarkOnce(ctx, "guardian:v2:{att}:reported", time.Minute,
		store.Settlement{Key: "guardian:v2:{xyz}:r", Action: store.GiveBack, Span: time.Second}); err == nil {
		t.Error("MarkOnce with a settlement of a garbage rate key: no error")
	}
}

// testLongHold: the 90-day hold of the hard stop is kept in full.
func testLongHold(t *testing.T, c redis.UniversalClient) {
	const hold = 90 * 24 * time.Hour
	s := redisstore.New(c, redisstore.Config{})
	k := "guardian:v2:{acct}:hard-stop"
	res := do(t, s, counter(k, 100, 100, hold))
	if got, want := res[0], (store.Result{Allowed: true, Spent: true, ResetAfter: hold, Count: 100}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if ttl := keyTTL(t, c, k); ttl <= hold-time.Minute || ttl > hold+2*time.Millisecond {
		t.Errorf("PTTL = %v, want just under %v", ttl, hold)
	}
}

// testDistinctExpiry: a distinct key's index and sub-window expire when
// the store says they end: the unconfirmed hold after a spend, the window
// after a ConfirmDistinct; a sub-window evicted under its index comes back
// with an expiry; an index of the earlier format ("w,w,w,w,w") still
// counts.
func testDistinctExpiry(t *testing.T, c redis.UniversalClient) {
	const step, hold = 6 * time.Hour, 20 * time.Minute
	ctx := context.Background()
	// The store's time, fixed an hour into a sub-window: what a key's PTTL
	// should be follows from it, whenever the test runs.
	at := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	s := redisstore.New(c, redisstore.Config{Now: func() time.Time { return at }})
	k := "guardian:v2:{net}:login-ip-distinct-accounts"
	op := func(member string, cost int64) store.Op {
		return store.Op{Key: k, Member: member, Cost: cost, Limit: store.Distinct{Step: step, Max: 20, Hold: hold}}
	}
	w := int(at.UnixMicro() / step.Microseconds())
	slot := redisstore.DistinctSlotKey(k, w%store.DistinctSlots)
	near := func(label, key string, want time.Duration) {
		t.Helper()
		if ttl := keyTTL(t, c, key); ttl < want-time.Second || ttl > want+time.Second {
			t.Errorf("%s: PTTL %s = %v, want about %v", label, key, ttl, want)
		}
	}
	do(t, s, op("a", 1))
	near("after a spend", k, hold)
	near("after a spend", slot, hold)

	if err := c.Del(ctx, slot).Err(); err != nil {
		t.Fatal(err)
	}
	do(t, s, op("b", 1))
	near("a sub-window evicted under its index", slot, hold)

	if err := s.Settle(ctx, []store.Settlement{{Key: k, Action: store.ConfirmDistinct, Span: step}}); err != nil {
		t.Fatal(err)
	}
	window := time.UnixMicro(int64(w+store.DistinctSlots) * step.Microseconds()).Sub(at)
	near("after a ConfirmDistinct", k, window)
	near("after a ConfirmDistinct", slot, window)
	if got := peek(t, s, op("z", 0))[0]; got.Count != 1 {
		t.Errorf("count after the confirm = %d, want 1 (b; a went with its evicted sub-window)", got.Count)
	}

	flush(t, c)
	old := []string{"0", "0", "0", "0", "0"}
	old[w%store.DistinctSlots] = strconv.Itoa(w)
	setState(t, c, k, strings.Join(old, ","))
	if err := c.PFAdd(ctx, slot, "old").Err(); err != nil {
		t.Fatal(err)
	}
	got := peek(t, s, op("z", 0))[0]
	if got.Count != 1 || got.ResetAfter < window-time.Second || got.ResetAfter > window+time.Second {
		t.Errorf("an index of the earlier format: %+v, want count 1 until its window leaves (%v)", got, window)
	}
}

// TestDeadline: against a stalled Redis a call returns when its context
// does, with the context's error, and works again once Redis is back.
func TestDeadline(t *testing.T) {
	srv := redistest.Start(t)
	c := open(t, srv.URL())
	s := redisstore.New(c, redisstore.Config{})
	op := rate("guardian:v2:{acct}:login-account", 1, time.Minute, 5)
	do(t, s, op)

	srv.Pause(t)
	const deadline = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	err := s.Do(ctx, []store.Op{op}, make([]store.Result, 1))
	took := time.Since(start)
	if err == nil {
		t.Fatal("Do against a paused Redis: no error")
	}
	if !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
		t.Errorf("err = %v, want a timeout", err)
	}
	if took > deadline+500*time.Millisecond {
		t.Errorf("Do took %v with a %v deadline", took, deadline)
	}

	srv.Unpause(t)
	var res []store.Result
	deadlineAt := time.Now().Add(10 * time.Second)
	for {
		res = make([]store.Result, 1)
		err = s.Do(context.Background(), []store.Op{op}, res)
		if err == nil || time.Now().After(deadlineAt) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("Do after Unpause: %v", err)
	}
	if res[0].Remaining > 3 {
		t.Errorf("after Unpause: %+v, want the earlier spends counted", res[0])
	}
}

// isTimeout reports whether err is a network timeout.
func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// testWarm: Warm loads every script, so that the first batch after a start
// needs no NOSCRIPT round trip.
func testWarm(t *testing.T, node *redis.Client) {
	ctx := context.Background()
	if err := node.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := redisstore.New(node, redisstore.Config{}).Warm(ctx); err != nil {
		t.Fatalf("Warm: %v", err)
	}
	info, err := node.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	// do, give back, once, and the familiar list's members.
	if !strings.Contains(info, "number_of_cached_scripts:4") {
		t.Fatalf("after Warm, INFO memory says %q; want 4 cached scripts", grepLine(info, "number_of_cached_scripts"))
	}
}

func grepLine(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// testResetByKind: a Reset deletes a counter, and what is not guardian's
// state (garbage, a key of another type), but leaves a rate's arrival
// time and a distinct index, and an absent key absent.
func testResetByKind(t *testing.T, c redis.UniversalClient) {
	ctx := context.Background()
	s := redisstore.New(c, redisstore.Config{})
	k := func(name string) string { return "guardian:v3:{reset}:" + name }
	setState(t, c, k("counter"), "3:99999999999999999")
	setState(t, c, k("garbage"), "garbage")
	setState(t, c, k("rate"), "99999999999999999")
	setState(t, c, k("index"), "0,0,1:2,0,0")
	if err := c.HSet(ctx, k("hash"), "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	var resets []store.Settlement
	for _, name := range []string{"counter", "garbage", "rate", "index", "hash", "absent"} {
		resets = append(resets, store.Settlement{Key: k(name), Action: store.Reset})
	}
	if err := s.Settle(ctx, resets); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{"counter": 0, "garbage": 0, "rate": 1, "index": 1, "hash": 0, "absent": 0} {
		if n, err := c.Exists(ctx, k(name)).Result(); err != nil || n != want {
			t.Errorf("%s after a Reset: exists %d, %v; want %d", name, n, err, want)
		}
	}
}

// testSubWindowCleanup runs docs/operations.md's command that gives the
// distinct sub-windows an earlier release left without an expiry one, as
// written, with a redis-cli that talks to the server at addr: such a key
// gets 30 hours and keeps its members; a sub-window with an expiry keeps
// its own, and a key of another shape without an expiry keeps none.
func testSubWindowCleanup(t *testing.T, c redis.UniversalClient, addr string) {
	ctx := context.Background()
	s := redisstore.New(c, redisstore.Config{})
	network := "guardian:v3:{net}:login-ip-distinct-accounts"
	look := store.Op{Key: network, Member: "z", Limit: store.Distinct{Step: 6 * time.Hour, Max: 20, Hold: 20 * time.Minute}}
	spend := look
	spend.Member, spend.Cost = "a", 1
	do(t, s, spend)
	live, err := c.Keys(ctx, network+":[0-4]").Result()
	if err != nil || len(live) != 1 {
		t.Fatalf("the network's sub-windows: %q, %v; want one", live, err)
	}
	leaked := "guardian:v3:{old}:login-ip-distinct-accounts:2"
	if err := c.PFAdd(ctx, leaked, "x", "y").Err(); err != nil {
		t.Fatal(err)
	}
	// A key of another shape without an expiry, its name ending in a
	// digit.
	other := "guardian:v3:{acct}:login-account:net:ab2"
	setState(t, c, other, "1")
	if err := c.Persist(ctx, other).Err(); err != nil {
		t.Fatal(err)
	}
	liveTTL := keyTTL(t, c, live[0])

	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redis-cli (Debian's redis-tools) is needed to run the documented command: %v", err)
	}
	host, port, _ := net.SplitHostPort(addr)
	bin := t.TempDir()
	shim := "#!/bin/sh\nexec " + cli + " -h " + host + " -p " + port + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "redis-cli"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", documentedCleanup(t))
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the documented command: %v\n%s", err, out)
	}

	if ttl := keyTTL(t, c, leaked); ttl < 30*time.Hour-time.Minute || ttl > 30*time.Hour {
		t.Errorf("the sub-window without an expiry: PTTL %v after the command, want 30h", ttl)
	}
	if n, err := c.PFCount(ctx, leaked).Result(); err != nil || n != 2 {
		t.Errorf("its members after the command: %d, %v; want both", n, err)
	}
	if ttl := keyTTL(t, c, live[0]); ttl > liveTTL || ttl < liveTTL-time.Minute {
		t.Errorf("a live sub-window: PTTL %v after the command, want its own %v", ttl, liveTTL)
	}
	if ttl, err := c.PTTL(ctx, other).Result(); err != nil || ttl != -1 {
		t.Errorf("a key of another shape: PTTL %v, %v after the command, want none", ttl, err)
	}
	if got := peek(t, s, look)[0]; got.Count != 1 {
		t.Errorf("the live network after the command: %+v, want its one account", got)
	}
}

// documentedCleanup is the command docs/operations.md gives for the
// sub-windows without an expiry: the indented block that starts with its
// scan.
func documentedCleanup(t *testing.T) string {
	doc, err := os.ReadFile("../../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	const first = "    redis-cli --scan --pattern 'guardian:v3:*:[0-4]'"
	lines := strings.Split(string(doc), "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, first) })
	if i < 0 {
		t.Fatal("docs/operations.md has no sub-window cleanup command")
	}
	var block []string
	for _, l := range lines[i:] {
		rest, ok := strings.CutPrefix(l, "    ")
		if !ok {
			break
		}
		block = append(block, rest)
	}
	return strings.Join(block, "\n")
}
