package redisagg_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/aggregate"
	"github.com/guardian-sec/guardian/internal/aggregate/redisagg"
	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/revocation"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
	"github.com/guardian-sec/guardian/internal/testclock"
)

// TestRedis runs everything that needs a single Redis against one
// container, one subtest after another.
func TestRedis(t *testing.T) {
	srv := redistest.Start(t)
	r := &redisEnv{srv: srv, plain: srv.Client(t), guardian: open(t, srv.URL())}
	for _, st := range []struct {
		name string
		run  func(*testing.T, *redisEnv)
	}{
		{"sets_then_reads", testSetsThenReads},
		{"set_counts_once", testSetCountsOnce},
		{"fleet", testFleet},
		{"late_flush", testLateFlush},
		{"commands_independent_of_traffic", testCommandsIndependentOfTraffic},
		{"every_key_expires", testEveryKeyExpires},
		{"heartbeats", testHeartbeats},
		{"shadow_tallies", testShadowTallies},
		{"incident_snapshots", testIncidentSnapshots},
		{"webhook_claims", testWebhookClaims},
		{"revocations", testRevocations},
		// Last: it pauses the container.
		{"paused", testPaused},
	} {
		t.Run(st.name, func(t *testing.T) {
			if err := r.plain.FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			st.run(t, r)
		})
	}
}

// redisEnv is the Redis of TestRedis and two clients of it.
type redisEnv struct {
	srv *redistest.Server
	// plain dials nothing in the background, so it can count commands; it
	// also inspects keys.
	plain *redis.Client
	// guardian is the client guardian runs with (redisstore.Open), which
	// honours context deadlines.
	guardian redis.UniversalClient
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

func mustSync(t *testing.T, s *redisagg.Shared, b *aggregate.Batch) {
	t.Helper()
	if err := s.Sync(context.Background(), b); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

func testSetsThenReads(t *testing.T, r *redisEnv) {
	c := r.plain
	ctx := context.Background()
	s := redisagg.New(c)
	b := &aggregate.Batch{Instance: "i1", Width: time.Second, TTL: time.Minute,
		Sets: []aggregate.Total{{Bucket: aggregate.Bucket{Flow: "login", Index: 100}, N: 3}, {Bucket: aggregate.Bucket{Flow: "otp_verify", Index: 100}, N: 1}},
		Reads: []aggregate.Bucket{{Flow: "login", Index: 99}, {Flow: "login", Index: 100},
			{Flow: "otp_verify", Index: 100}, {Flow: "login", Index: 101}},
	}
	mustSync(t, s, b)
	if got, want := b.Totals, []int64{0, 3, 1, 0}; !slices.Equal(got, want) {
		t.Errorf("Totals = %v, want %v", got, want)
	}

	key := redisagg.Key("login", time.Second, 100)
	if want := "guardian:v1:{agg}:login:1s:100"; key != want {
		t.Errorf("Key = %q, want %q", key, want)
	}
	if got := c.Get(ctx, key).Val(); got != "3" {
		t.Errorf("GET %s = %q, want 3", key, got)
	}
	if got := c.HGetAll(ctx, key+":by").Val(); len(got) != 1 || got["i1"] != "3" {
		t.Errorf("HGETALL %s:by = %v, want i1=3", key, got)
	}
	for _, k := range []string{key, key + ":by"} {
		if ttl := c.PTTL(ctx, k).Val(); ttl <= 0 || ttl > time.Minute {
			t.Errorf("PTTL %s = %v, want in (0, 1m]", k, ttl)
		}
	}

	// Reads alone write nothing.
	b = &aggregate.Batch{Width: time.Second, Reads: []aggregate.Bucket{{Flow: "password_reset", Index: 7}}}
	mustSync(t, s, b)
	if got, want := b.Totals, []int64{0}; !slices.Equal(got, want) {
		t.Errorf("Totals of a missing bucket = %v, want %v", got, want)
	}
	if n := c.Exists(ctx, redisagg.Key("password_reset", time.Second, 7)).Val(); n != 0 {
		t.Error("a read created its bucket")
	}
	// An empty batch makes no call.
	b = &aggregate.Batch{Totals: []int64{9}}
	mustSync(t, s, b)
	if len(b.Totals) != 0 {
		t.Errorf("Totals of an empty batch = %v, want none", b.Totals)
	}
}

func testSetCountsOnce(t *testing.T, r *redisEnv) {
	c := r.plain
	s := redisagg.New(c)
	bucket := aggregate.Bucket{Flow: "login", Index: 5}
	steps := []struct {
		instance string
		n        int64
		want     int64
	}{
		{"i1", 3, 3},
		{"i1", 3, 3}, // sent again: counts once
		{"i1", 2, 3}, // an older total arriving late: changes nothing
		{"i2", 4, 7}, // another instance adds its own
		{"i1", 5, 9}, // i1's total grows by 2
		{"i2", 4, 9},
	}
	for i, st := range steps {
		b := &aggregate.Batch{Instance: st.instance, Width: time.Second, TTL: time.Minute,
			Sets: []aggregate.Total{{Bucket: bucket, N: st.n}}, Reads: []aggregate.Bucket{bucket}}
		mustSync(t, s, b)
		if got := b.Totals[0]; got != st.want {
			t.Errorf("step %d: %s sets %d: fleet total %d, want %d", i, st.instance, st.n, got, st.want)
		}
	}
	// Widths are distinct buckets.
	b := &aggregate.Batch{Width: 2 * time.Second, Reads: []aggregate.Bucket{bucket}}
	mustSync(t, s, b)
	if b.Totals[0] != 0 {
		t.Errorf("the same index at another width reads %d, want 0", b.Totals[0])
	}
}

func testFleet(t *testing.T, r *redisEnv) {
	c := r.guardian
	// Three instances, one clock each; 31 failures round-robin, no instance
	// seeing more than 11.
	clocks := []*testclock.Clock{testclock.New(t0), testclock.New(t0), testclock.New(t0)}
	aggs := make([]*aggregate.Aggregate, 3)
	for i := range aggs {
		aggs[i] = newAgg(c, clocks[i], 3)
	}
	for i := range 31 {
		clocks[i%3].Set(t0.Add(time.Second + time.Duration(i)*50*time.Millisecond))
		aggs[i%3].Add("login", 1)
	}
	for _, clk := range clocks {
		clk.Set(t0.Add(3 * time.Second))
	}
	for _, a := range aggs {
		if err := a.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for i, a := range aggs {
		if err := a.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		if force, count := a.InForce("login-global", []string{"login"}, time.Minute, 30, 30*time.Second); !force || count != 31 {
			t.Errorf("instance %d: InForce = %v, %d; want true, 31", i, force, count)
		}
	}
}

func testLateFlush(t *testing.T, r *redisEnv) {
	ctx := context.Background()
	c := r.plain
	ca, cb := testclock.New(t0), testclock.New(t0)
	a, b := newAgg(r.guardian, ca, 2), newAgg(r.guardian, cb, 2)
	ca.Set(t0.Add(950 * time.Millisecond))
	a.Add("login", 3)
	ca.Set(t0.Add(1050 * time.Millisecond))
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Bucket t0.Unix() is (t0, t0+1s].
	for _, k := range []struct {
		index int64
		want  string
	}{{t0.Unix(), "3"}, {t0.Unix() + 1, ""}} {
		key := redisagg.Key("login", time.Second, k.index)
		if got := c.Get(ctx, key).Val(); got != k.want {
			t.Errorf("GET %s = %q, want %q", key, got, k.want)
		}
	}
	cb.Set(t0.Add(1100 * time.Millisecond))
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		at, per time.Duration
		want    int64
	}{
		{time.Second, time.Second, 3},
		{1100 * time.Millisecond, 100 * time.Millisecond, 0},
	} {
		cb.Set(t0.Add(k.at))
		if got := b.Count([]string{"login"}, k.per); got != k.want {
			t.Errorf("B at t0+%v: Count(per %v) = %d, want %d", k.at, k.per, got, k.want)
		}
	}
}

func testCommandsIndependentOfTraffic(t *testing.T, r *redisEnv) {
	c := r.plain
	// Ten simulated seconds at 100 and at 10,000 failures a second: the
	// same script calls (one per 100ms tick) and the same commands.
	type run struct{ failures, cmds, calls int64 }
	var runs []run
	for _, rate := range []int{100, 10000} {
		if err := c.FlushAll(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		clk := testclock.New(t0)
		a := newAgg(c, clk, 1)
		before := redistest.CommandStats(t, c)
		n := drive(t, a, clk, rate, 10*time.Second)
		cmds, calls := ran(before, redistest.CommandStats(t, c))
		runs = append(runs, run{int64(n), cmds, calls})
		if got := a.Count([]string{"login"}, time.Minute); got != int64(n) {
			t.Errorf("rate %d: Count = %d, want %d", rate, got, n)
		}
	}
	t.Logf("100/s: %+v; 10,000/s: %+v", runs[0], runs[1])
	if runs[0].calls != 100 || runs[1].calls != 100 {
		t.Errorf("script calls = %d and %d, want 100 each (one per tick)", runs[0].calls, runs[1].calls)
	}
	if runs[0].cmds != runs[1].cmds {
		t.Errorf("commands = %d at 100/s and %d at 10,000/s, want the same", runs[0].cmds, runs[1].cmds)
	}
}

func testEveryKeyExpires(t *testing.T, r *redisEnv) {
	ctx := context.Background()
	c := r.plain
	clk := testclock.New(t0)
	a := newAgg(r.guardian, clk, 1)
	drive(t, a, clk, 50, 3*time.Second)
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("no keys after three seconds of failures")
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "guardian:v1:{agg}:login:1s:") {
			t.Errorf("key %q outside guardian:v1:{agg}:login:1s:", k)
		}
		// The window (1m), two buckets and a minute for clock skew.
		if ttl := c.PTTL(ctx, k).Val(); ttl <= 0 || ttl > 2*time.Minute+2*time.Second {
			t.Errorf("PTTL %s = %v, want in (0, 2m2s]", k, ttl)
		}
	}
}

func testPaused(t *testing.T, r *redisEnv) {
	ctx := context.Background()
	c, srv := r.plain, r.srv
	ca, cb := testclock.New(t0), testclock.New(t0)
	a, b := newAgg(r.guardian, ca, 3), newAgg(r.guardian, cb, 3)
	count := func(x *aggregate.Aggregate) int64 { return x.Count([]string{"login"}, time.Minute) }

	ca.Set(t0.Add(time.Second))
	a.Add("login", 2)
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}

	// A stalled Redis: the call times out, perhaps after Redis has taken
	// it, and runs when Redis resumes.
	srv.Pause(t)
	ca.Set(t0.Add(2 * time.Second))
	a.Add("login", 3)
	start := time.Now()
	err := a.Refresh(ctx)
	if err == nil {
		t.Fatal("Refresh against a paused Redis: nil error")
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Refresh against a paused Redis took %v, want its 200ms timeout", took)
	}
	if !a.Degraded() {
		t.Error("Degraded() = false with Redis paused")
	}
	// 2 read before; since the last good refresh at t0+1s, A's 3 and as
	// many for each of the two other instances.
	if got, want := count(a), int64(2+3+2*3); got != want {
		t.Errorf("degraded count = %d, want %d", got, want)
	}
	srv.Unpause(t)

	ca.Set(t0.Add(3 * time.Second))
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if a.Degraded() {
		t.Error("Degraded() = true after a good refresh")
	}
	if got := c.Get(ctx, redisagg.Key("login", time.Second, t0.Unix()+1)).Val(); got != "3" {
		t.Errorf("fleet total of (t0+1s, t0+2s] = %q, want 3: the outage's failures counted once, in their bucket", got)
	}
	cb.Set(t0.Add(3 * time.Second))
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := [2]int64{count(a), count(b)}; got != [2]int64{5, 5} {
		t.Errorf("counts after Redis resumed = %v, want [5 5]", got)
	}
}

func TestCluster(t *testing.T) {
	cluster := redistest.StartCluster(t)
	c := open(t, strings.Join(cluster.Addrs(), ","))
	if _, ok := c.(*redis.ClusterClient); !ok {
		t.Fatalf("client %T, want a cluster client", c)
	}
	// Every bucket of every flow in one slot: one script call, no
	// CROSSSLOT.
	ca, cb := testclock.New(t0), testclock.New(t0)
	a, b := newAgg(c, ca, 2), newAgg(c, cb, 2)
	a.Watch("otp_verify", time.Minute)
	b.Watch("otp_verify", time.Minute)
	ca.Set(t0.Add(time.Second))
	a.Add("login", 4)
	a.Add("otp_verify", 1)
	cb.Set(t0.Add(time.Second))
	b.Add("login", 2)
	for _, x := range []*aggregate.Aggregate{a, b, a} {
		if err := x.Refresh(context.Background()); err != nil {
			t.Fatalf("Refresh on Redis Cluster: %v", err)
		}
	}
	for i, x := range []*aggregate.Aggregate{a, b} {
		got := [2]int64{x.Count([]string{"login"}, time.Minute), x.Count([]string{"otp_verify"}, time.Minute)}
		if got != [2]int64{6, 1} {
			t.Errorf("instance %d: login, otp_verify = %v, want [6 1]", i, got)
		}
	}
	// Revocations: both keys in one slot, written and read without
	// CROSSSLOT.
	rev := redisagg.NewRevocations(c)
	if err := rev.Add(context.Background(), revocation.Entry{JTI: "cluster", Until: time.Now().Add(time.Hour)}); err != nil {
		t.Fatalf("revoke on Redis Cluster: %v", err)
	}
	if snap, changed, err := rev.Load(context.Background(), ""); err != nil || !changed || len(snap.Entries) != 1 {
		t.Fatalf("revocations on Redis Cluster: %+v, %v, %v", snap, changed, err)
	}
}

func TestUnreachable(t *testing.T) {
	// Nothing listens on port 1 of the loopback address.
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	s := redisagg.New(c)
	b := &aggregate.Batch{Instance: "i1", Width: time.Second, TTL: time.Minute,
		Sets: []aggregate.Total{{Bucket: aggregate.Bucket{Flow: "login", Index: 1}, N: 1}}}
	err := s.Sync(context.Background(), b)
	if err == nil || !strings.HasPrefix(err.Error(), "redisagg: ") {
		t.Fatalf("Sync to a closed port: %v, want a redisagg error", err)
	}
	if errors.Is(err, redisagg.ErrBadReply) {
		t.Errorf("Sync to a closed port: %v is not a bad reply", err)
	}
}
