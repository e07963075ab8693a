package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// Keys of two subjects, an account and an IP prefix, as one login check
// carries them: each subject's keys share a slot, the two slots differ.
const (
	acctRate    = "guardian:v2:{acct1}:login-account"
	acctCounter = "guardian:v2:{acct1}:hard-stop"
	ipRate      = "guardian:v2:{ip2}:login-ip"
	newRule     = "guardian:v2:{ip4}:new-rule"
)

// TestCluster runs everything that needs Redis Cluster against one
// three-master cluster, one subtest after another.
func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t)
	c := open(t, strings.Join(cl.Addrs(), ","))
	if _, ok := c.(*redis.ClusterClient); !ok {
		t.Fatalf("Open(%q) is a %T, want a cluster client", cl.Addrs(), c)
	}
	// The test keys must span masters for the cross-slot
	// tests to mean anything.
	masterOf := func(key string) string {
		n, err := c.(*redis.ClusterClient).MasterForKey(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		return n.Options().Addr
	}
	if masterOf(acctRate) == masterOf(ipRate) {
		t.Fatalf("%s and %s on one master; pick other hash tags", acctRate, ipRate)
	}

	t.Run("conformance", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
			flush(t, c)
			return redisstore.New(c, redisstore.Config{Now: now})
		})
	})
	t.Run("warm", func(t *testing.T) {
		testFunctionsOnCluster(t, c)
	})
	t.Run("slot_matches_cluster_keyslot", func(t *testing.T) {
		testSlotMatchesKeyslot(t, c)
	})
	t.Run("cross_slot_denied_gives_back", func(t *testing.T) {
		flush(t, c)
		testCrossSlotDenied(t, c)
	})
	t.Run("cross_slot_denied_keeps_attribution", func(t *testing.T) {
		flush(t, c)
		testCrossSlotAttribution(t, c)
	})
	t.Run("cross_slot_spent_in_one_round_trip", func(t *testing.T) {
		flush(t, c)
		testCrossSlotOneRoundTrip(t, cl)
	})
	t.Run("script_flush", func(t *testing.T) {
		flush(t, c)
		testClusterScriptFlush(t, c)
	})
	t.Run("concurrent_instances", func(t *testing.T) {
		flush(t, c)
		testConcurrentInstances(t, func(t *testing.T) redis.UniversalClient {
			return open(t, strings.Join(cl.Addrs(), ","))
		})
	})
	t.Run("concurrent_cross_slot_budgets", func(t *testing.T) {
		flush(t, c)
		testConcurrentCrossSlot(t, cl)
	})
	t.Run("every_key_expires", func(t *testing.T) {
		flush(t, c)
		testEveryKeyExpires(t, c)
	})
	t.Run("delete_and_settle_across_slots", func(t *testing.T) {
		flush(t, c)
		testClusterDeleteSettle(t, c)
	})
	t.Run("failing_slot_gives_back", func(t *testing.T) {
		flush(t, c)
		testFailingSlot(t, c)
	})
}

// testSlotMatchesKeyslot: the store groups keys by the slot Redis itself
// computes, so no script ever touches two slots.
func testSlotMatchesKeyslot(t *testing.T, c redis.UniversalClient) {
	ctx := context.Background()
	clk := testclock.New(t0)
	s := redisstore.New(c, redisstore.Config{Now: clk.Now})
	// Ten subjects, each with two rules, in one batch: the store must split
	// it by slot or Redis refuses the script with CROSSSLOT.
	var ops []store.Op
	for i := range 10 {
		tag := fmt.Sprintf("subject-%d", i)
		ops = append(ops,
			rate("guardian:v2:{"+tag+"}:a", 1, time.Minute, 5),
			counter("guardian:v2:{"+tag+"}:b", 1, 5, time.Hour))
	}
	for i, r := range do(t, s, ops...) {
		if !r.Spent {
			t.Errorf("op %d (%s): %+v, want spent", i, ops[i].Key, r)
		}
	}

	// The slot the store computes is the one Redis computes, for keys with
	// and without hash tags, and for the odd cases of the tag rules.
	rnd := rand.New(rand.NewPCG(1, 2))
	keys := []string{"", "{", "}", "{}", "{}{x}", "{{x}}", "x{}", "{x", "x}", "guardian:v2:{}:r"}
	for range 500 {
		b := make([]byte, rnd.IntN(24))
		for i := range b {
			b[i] = "ab{}:xyz0123"[rnd.IntN(12)]
		}
		keys = append(keys, string(b))
	}
	for _, k := range keys {
		want, err := c.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := redisstore.Slot(k); int64(got) != want {
			t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT says %d", k, got, want)
		}
	}
}

// testCrossSlotDenied: a batch over two masters whose IP budget is spent
// leaves the account's keys exactly as they were, and reports them as found.
func testCrossSlotDenied(t *testing.T, c redis.UniversalClient) {
	clk := testclock.New(t0)
	s := redisstore.New(c, redisstore.Config{Now: clk.Now})

	// The account has some history; the IP prefix is out of budget.
	do(t, s, rate(acctRate, 2, time.Minute, 5), counter(acctCounter, 3, 100, time.Hour))
	do(t, s, rate(ipRate, 2, time.Minute, 2))
	before := map[string]string{}
	for _, k := range []string{acctRate, acctCounter} {
		v, ok := state(t, c, k)
		if !ok {
			t.Fatalf("%s has no state after its spend", k)
		}
		before[k] = v
	}

	clk.Set(t0.Add(time.Second))
	batch := []store.Op{
		rate(acctRate, 1, time.Minute, 5),
		counter(acctCounter, 1, 100, time.Hour),
		rate(ipRate, 1, time.Minute, 2),
		shadow(rate(newRule, 1, time.Minute, 5)),
	}
	checkResults(t, "denied batch", do(t, s, batch...), []store.Result{
		{Allowed: true, Remaining: 3, ResetAfter: 2*time.Minute - time.Second},
		{Allowed: true, Remaining: 97, ResetAfter: time.Hour, Count: 3},
		{RetryAfter: 59 * time.Second, ResetAfter: 2*time.Minute - time.Second},
		{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Minute},
	})
	for k, want := range before {
		got, _ := state(t, c, k)
		// The counter keeps its count; its deadline moved to the give-back's.
		if k == acctCounter {
			got, _, _ = strings.Cut(got, ":")
			want, _, _ = strings.Cut(want, ":")
		}
		if got != want {
			t.Errorf("%s after the give-back = %q, want %q as before", k, got, want)
		}
	}
	checkResults(t, "peek after", peek(t, s, batch[:3]...), []store.Result{
		{Allowed: true, Remaining: 3, ResetAfter: 2*time.Minute - time.Second},
		{Allowed: true, Remaining: 97, ResetAfter: time.Hour, Count: 3},
		{RetryAfter: 59 * time.Second, ResetAfter: 2*time.Minute - time.Second},
	})

	// A fresh account denied by the IP leaves no key behind.
	fresh := rate("guardian:v2:{acct-fresh}:login-account", 1, time.Minute, 5)
	checkResults(t, "fresh account", do(t, s, fresh, rate(ipRate, 1, time.Minute, 2)), []store.Result{
		{Allowed: true, Remaining: 5},
		{RetryAfter: 59 * time.Second, ResetAfter: 2*time.Minute - time.Second},
	})
	if v, ok := state(t, c, fresh.Key); ok {
		t.Errorf("%s holds %q, want no state", fresh.Key, v)
	}

	// A soft op in another slot is given back too.
	checkResults(t, "soft", do(t, s, rate(ipRate, 1, time.Minute, 2), soft(rate(acctRate, 1, time.Minute, 5))), []store.Result{
		{RetryAfter: 59 * time.Second, ResetAfter: 2*time.Minute - time.Second},
		{Allowed: true, Remaining: 3, ResetAfter: 2*time.Minute - time.Second},
	})
	if got, _ := state(t, c, acctRate); got != before[acctRate] {
		t.Errorf("%s after a soft give-back = %q, want %q", acctRate, got, before[acctRate])
	}
}

// testCrossSlotOneRoundTrip: a batch over two masters that fits is spent in
// one pipelined round trip, one EVALSHA per master.
func testCrossSlotOneRoundTrip(t *testing.T, cl *redistest.Cluster) {
	cc := cl.Client(t)
	sent := &sentCounter{}
	cc.AddHook(sent)
	s := redisstore.New(cc, redisstore.Config{})
	batch := []store.Op{
		rate(acctRate, 1, time.Minute, 5),
		counter(acctCounter, 1, 100, time.Hour),
		rate(ipRate, 1, time.Hour, 30),
	}
	do(t, s, batch...) // loads the script on both masters
	sent.take()
	for i, r := range do(t, s, batch...) {
		if !r.Spent {
			t.Errorf("op %d: %+v, want spent", i, r)
		}
	}
	if cmds, roundTrips := sent.take(); cmds != 2 || roundTrips != 1 {
		t.Errorf("sent %d commands in %d round trips, want 2 (one per slot) in 1", cmds, roundTrips)
	}

	// Denied: the same round trip, then one to give back.
	do(t, s, rate(ipRate, 28, time.Hour, 30))
	sent.take()
	for i, r := range do(t, s, batch...) {
		if r.Spent {
			t.Errorf("denied op %d: %+v, want not spent", i, r)
		}
	}
	if cmds, roundTrips := sent.take(); cmds != 3 || roundTrips != 2 {
		t.Errorf("denied: sent %d commands in %d round trips, want 3 in 2", cmds, roundTrips)
	}
}

// testClusterScriptFlush: after SCRIPT FLUSH on every master a cross-slot
// batch still runs, and is decided once.
func testClusterScriptFlush(t *testing.T, c redis.UniversalClient) {
	ctx := context.Background()
	clk := testclock.New(t0)
	s := redisstore.New(c, redisstore.Config{Now: clk.Now})
	batch := []store.Op{rate(acctRate, 1, time.Minute, 5), rate(ipRate, 1, time.Minute, 5)}
	do(t, s, batch...)
	forEachNode(t, c, func(n *redis.Client) {
		if err := n.ScriptFlush(ctx).Err(); err != nil {
			t.Fatalf("SCRIPT FLUSH: %v", err)
		}
	})
	checkResults(t, "after flush", do(t, s, batch...), []store.Result{
		{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute},
		{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute},
	})
	// The give-back script after a flush, too.
	forEachNode(t, c, func(n *redis.Client) {
		if err := n.ScriptFlush(ctx).Err(); err != nil {
			t.Fatalf("SCRIPT FLUSH: %v", err)
		}
	})
	if err := s.Settle(ctx, []store.Settlement{
		{Key: acctRate, Action: store.GiveBack, Span: time.Minute},
		{Key: ipRate, Action: store.GiveBack, Span: time.Minute},
	}); err != nil {
		t.Fatalf("Settle after flush: %v", err)
	}
	checkResults(t, "after settlement", peek(t, s, batch...), []store.Result{
		{Allowed: true, Remaining: 4, ResetAfter: time.Minute},
		{Allowed: true, Remaining: 4, ResetAfter: time.Minute},
	})
}

// testConcurrentCrossSlot: 50 checks from five instances against an
// account and an IP budget on different masters. Every batch is spent whole
// or not at all, no budget is ever exceeded, and after the give-backs each
// key holds exactly what the winning batches spent.
func testConcurrentCrossSlot(t *testing.T, cl *redistest.Cluster) {
	var stores []store.Store
	for range 5 {
		stores = append(stores, redisstore.New(open(t, strings.Join(cl.Addrs(), ",")), redisstore.Config{}))
	}
	tests := []struct {
		name            string
		acct, ip        int64
		exact           bool
		acctKey, ipKeys string
	}{
		// Only the IP denies: its spends are never given back, so exactly
		// its budget wins, and the account keeps exactly those spends.
		{"ip_denies", 50, 20, true, "{acct-a}", "{ip-a}"},
		// Both deny: a batch denied by one side gives back the other's spend,
		// and a concurrent batch may be denied by a spend about to be given
		// back, so fewer may win; never more than the smaller budget.
		{"both_deny", 20, 10, false, "{acct-b}", "{ip-b}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			acct := rate("guardian:v1:"+tt.acctKey+":login-account", 1, time.Hour, tt.acct)
			ip := rate("guardian:v1:"+tt.ipKeys+":login-ip", 1, time.Hour, tt.ip)
			won := budget(t, stores, 50, func(int) []store.Op { return []store.Op{acct, ip} })
			n := int64(count(won))
			if tt.exact && n != tt.ip {
				t.Errorf("%d of 50 batches spent, want exactly %d", n, tt.ip)
			}
			if n > min(tt.acct, tt.ip) {
				t.Errorf("%d of 50 batches spent, want at most %d", n, min(tt.acct, tt.ip))
			}
			got := peek(t, stores[0], acct, ip)
			if want := tt.acct - n; got[0].Remaining != want {
				t.Errorf("account budget after: %d left, want %d (%d less %d spent)", got[0].Remaining, want, tt.acct, n)
			}
			if want := tt.ip - n; got[1].Remaining != want {
				t.Errorf("IP budget after: %d left, want %d (%d less %d spent)", got[1].Remaining, want, tt.ip, n)
			}
		})
	}
}

// testClusterDeleteSettle: Delete and Settle take keys of many slots at once.
func testClusterDeleteSettle(t *testing.T, c redis.UniversalClient) {
	ctx := context.Background()
	clk := testclock.New(t0)
	s := redisstore.New(c, redisstore.Config{Now: clk.Now})
	var keys []string
	var settlements []store.Settlement
	for i := range 8 {
		k := fmt.Sprintf("guardian:v2:{s%d}:r", i)
		keys = append(keys, k)
		settlements = append(settlements, store.Settlement{Key: k, Action: store.GiveBack, Span: time.Minute})
		do(t, s, rate(k, 2, time.Minute, 5))
	}
	if err := s.Settle(ctx, settlements); err != nil {
		t.Fatalf("Settle: %v", err)
	}
	for _, k := range keys {
		if got := peek(t, s, rate(k, 1, time.Minute, 5))[0]; got.Remaining != 4 {
			t.Errorf("%s after settlement: %+v, want 4 left", k, got)
		}
	}
	if err := s.Delete(ctx, keys...); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if ttls := keyTTLs(t, c); len(ttls) != 0 {
		t.Errorf("keys left after Delete: %v", ttls)
	}
}

// testFailingSlot: when one slot's script fails, a cross-slot batch is an
// error, and what the other slots spent is given back.
func testFailingSlot(t *testing.T, c redis.UniversalClient) {
	ctx := context.Background()
	s := redisstore.New(c, redisstore.Config{})
	do(t, s, rate(acctRate, 1, time.Minute, 5), rate(ipRate, 1, time.Minute, 5))

	// The IP's key holds something no script wrote: its slot fails.
	setState(t, c, ipRate, "not a rate")
	res := make([]store.Result, 2)
	err := s.Do(ctx, []store.Op{rate(acctRate, 1, time.Minute, 5), rate(ipRate, 1, time.Minute, 5)}, res)
	if err == nil || !strings.HasPrefix(err.Error(), "redisstore: do: ") {
		t.Fatalf("Do with a failing slot: err = %v, want a redisstore error", err)
	}
	if got := peek(t, s, rate(acctRate, 1, time.Minute, 5))[0]; got.Remaining != 4 {
		t.Errorf("account after the failed batch: %+v, want 4 left (its spend given back)", got)
	}
}

// testCrossSlotAttribution: a counter's spend that another slot's denial
// gives back takes its units off the source it was attributed to, so that
// a later Lift of that source takes back what it really spent.
func testCrossSlotAttribution(t *testing.T, c redis.UniversalClient) {
	clk := testclock.New(t0)
	s := redisstore.New(c, redisstore.Config{Now: clk.Now})
	do(t, s, storetest.From(counter(acctCounter, 2, 100, time.Hour), "ownerA"))
	do(t, s, storetest.From(counter(acctCounter, 2, 100, time.Hour), "otherB"))
	do(t, s, rate(ipRate, 2, time.Minute, 2))
	res := do(t, s, storetest.From(counter(acctCounter, 1, 100, time.Hour), "otherB"), rate(ipRate, 1, time.Minute, 2))
	if res[0].Spent || res[1].Allowed {
		t.Fatalf("denied batch: %+v, want the counter given back", res)
	}
	if err := s.Settle(context.Background(), []store.Settlement{{Key: acctCounter, Action: store.Lift, Member: "otherB"}}); err != nil {
		t.Fatal(err)
	}
	r := make([]store.Result, 1)
	if err := s.Peek(context.Background(), []store.Op{counter(acctCounter, 1, 100, time.Hour)}, r); err != nil {
		t.Fatal(err)
	}
	if r[0].Count != 2 {
		t.Errorf("after lifting otherB: count %d, want ownerA's 2", r[0].Count)
	}
}
