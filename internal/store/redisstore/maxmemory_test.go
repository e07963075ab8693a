package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/failclosed"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
)

// evictionArgs are the eviction settings deploy/ gives Redis.
var evictionArgs = []string{"--maxmemory-policy", "volatile-ttl", "--maxmemory-samples", "10"}

// TestFullRedisEvictsLeastConfirmed: a Redis at its maxmemory under the
// configured policy keeps taking writes through a flood of random accounts,
// keeps every hard stop and nearly every confirmed count, and evicts the
// flood's short-lived state instead.
func TestFullRedisEvictsLeastConfirmed(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs(append([]string{"--maxmemory", "2mb"}, evictionArgs...)...))
	c := srv.Client(t)
	s := redisstore.New(c, redisstore.Config{})

	const stops, confirmed = 100, 1000
	stop := func(i int) store.Op {
		return counter(fmt.Sprintf("guardian:v3:{stop%d}:login-hard-stop", i), 1, 100, 90*24*time.Hour)
	}
	for i := range stops {
		op := stop(i)
		op.Cost = 100
		do(t, s, op)
	}
	held := func(i int) store.Op {
		return counter(fmt.Sprintf("guardian:v3:{held%d}:login-hard-stop", i), 1, 100, 24*time.Hour)
	}
	for i := range confirmed {
		do(t, s, held(i))
	}

	const workers, each = 8, 3000
	flood(t, s, workers, each, accountFlood)
	evicted := infoField(t, c, "stats", "evicted_keys")
	if evicted == 0 {
		t.Fatalf("no key evicted: the flood did not fill Redis")
	}

	for i := range stops {
		if got := peek(t, s, stop(i))[0]; got.Count != 100 {
			t.Fatalf("hard stop %d after the flood: count %d, want 100", i, got.Count)
		}
	}
	kept := 0
	for i := range confirmed {
		if peek(t, s, held(i))[0].Count == 1 {
			kept++
		}
	}
	floodLeft := dbSize(t, c) - stops - int64(kept)
	t.Logf("%d keys evicted; %d of %d confirmed counts kept; %d flood keys of %d left", evicted, kept, confirmed, floodLeft, 2*workers*each)
	if kept < confirmed*99/100 {
		t.Errorf("%d of %d confirmed counts kept, want at least 99%%: the least confirmed must go first", kept, confirmed)
	}
}

// accountFlood is the check of a random account, subject: it leaves a rate
// key full again in a minute and a count nobody reported, kept 20 minutes
// (twice the default --attempt-ttl).
func accountFlood(subject string) []store.Op {
	return []store.Op{
		rate("guardian:v3:{"+subject+"}:login-account", 1, time.Minute, 5),
		counter("guardian:v3:{"+subject+"}:login-hard-stop", 1, 100, 20*time.Minute),
	}
}

// networkFlood is the check of a random account from a new network,
// subject, under the built-in distinct rule (24 hours in sub-windows of 6,
// not counting the network's succeeded accounts): it leaves the network's
// index and a HyperLogLog nobody reported, kept 20 minutes, besides what
// accountFlood leaves.
func networkFlood(subject string) []store.Op {
	d := store.Op{
		Key:    "guardian:v3:{" + subject + "}:login-ip-distinct-accounts",
		Except: "guardian:v3:{" + subject + "}:login-ip-distinct-accounts:succeeded",
		Member: "account", Cost: 1, Role: store.Soft,
		Limit: store.Distinct{Step: 6 * time.Hour, Max: 20, Hold: 20 * time.Minute},
	}
	return append(accountFlood(subject), d)
}

// flood runs workers × each checks of random subjects, each the ops of
// check. Every write must be taken.
func flood(t *testing.T, s *redisstore.Store, workers, each int, check func(subject string) []store.Op) {
	t.Helper()
	var failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				ops := check(fmt.Sprintf("flood%d-%d", w, i))
				if err := s.Do(context.Background(), ops, make([]store.Result, len(ops))); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of %d flood checks failed (first: %v), want every write taken", n, workers*each, firstErr.Load())
	}
}

// TestFullRedisKeepsReportMarks: the marks that make a report count once
// live about 12 minutes (--attempt-ttl + skew), less than the 20 minutes a
// flood's unreported state is kept; under volatile-ttl a full Redis must
// still evict the flood's state first, so that no second report of an
// attempt is accepted because its mark was evicted: after a flood of
// accounts, and after a flood of new networks, whose distinct state lives
// as briefly as the counts until a failure report confirms it.
func TestFullRedisKeepsReportMarks(t *testing.T) {
	for name, check := range map[string]func(string) []store.Op{"accounts": accountFlood, "networks": networkFlood} {
		t.Run(name, func(t *testing.T) { testFloodKeepsMarks(t, check) })
	}
}

func testFloodKeepsMarks(t *testing.T, check func(string) []store.Op) {
	srv := redistest.Start(t, redistest.WithArgs(append([]string{"--maxmemory", "2mb"}, evictionArgs...)...))
	c := srv.Client(t)
	s := redisstore.New(c, redisstore.Config{})
	ctx := context.Background()
	const marks, onceTTL = 2000, 12 * time.Minute
	mark := func(i int) string { return fmt.Sprintf("guardian:v3:{attempt%d}:reported", i) }
	for i := range marks {
		if first, err := s.MarkOnce(ctx, mark(i), onceTTL); err != nil || !first {
			t.Fatalf("mark %d: %v, %v", i, first, err)
		}
	}
	flood(t, s, 8, 3000, check)
	evicted := infoField(t, c, "stats", "evicted_keys")
	if evicted == 0 {
		t.Fatal("no key evicted: the flood did not fill Redis")
	}
	again := 0
	for i := range marks {
		first, err := s.MarkOnce(ctx, mark(i), onceTTL)
		if err != nil {
			t.Fatal(err)
		}
		if first {
			again++
		}
	}
	t.Logf("%d keys evicted; %d of %d report marks lost", evicted, again, marks)
	// volatile-ttl evicts the soonest to expire of a sample of keys, not of
	// all of them: a sample that holds only marks loses one now and then
	// (1 in about 10,000 here). State that outlives the marks loses them
	// all.
	if again > marks/500 {
		t.Errorf("%d of %d attempts could be reported a second time after a flood: their marks were evicted before the flood's state", again, marks)
	}
}

// TestRefusedWritesKeepFallback: a Redis that refuses writes (out of memory
// with noeviction) answers PING, but guardian's probe writes: the fallback
// stays on and every refusal counts as rejected, until writes succeed again,
// and then the fallback is off within two seconds. So it goes for a Store
// on the script and one on the function library (whose calls Redis
// refuses before they run; the Store then runs the script).
func TestRefusedWritesKeepFallback(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	t.Run("script", func(t *testing.T) {
		testRefusedWritesKeepFallback(t, c, redisstore.New(c, redisstore.Config{}))
	})
	t.Run("library", func(t *testing.T) {
		testRefusedWritesKeepFallback(t, c, warmed(t, c, redisstore.Config{}))
	})
}

func testRefusedWritesKeepFallback(t *testing.T, c *redis.Client, primary *redisstore.Store) {
	ctx := context.Background()
	m := metrics.New(prometheus.NewRegistry())
	fc := failclosed.New(failclosed.Config{Primary: primary, Probe: primary.Probe, Timeout: time.Second, Metrics: m})
	do(t, primary, rate("guardian:v3:{warm}:r", 1, time.Minute, 5))

	setConfig(t, c, "maxmemory-policy", "noeviction")
	setConfig(t, c, "maxmemory", "1")
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING while out of memory: %v, want an answer", err)
	}
	if ratio, ok, err := primary.MemoryRatio(ctx); err != nil || !ok || ratio <= 1 {
		t.Errorf("MemoryRatio while out of memory = %v, %v, %v; want above 1", ratio, ok, err)
	}
	for i := range 5 {
		res := make([]store.Result, 1)
		if err := fc.Do(ctx, []store.Op{rate(fmt.Sprintf("guardian:v3:{oom%d}:r", i), 1, time.Minute, 5)}, res); err != nil || !res[0].Degraded {
			t.Fatalf("check %d while Redis refuses writes = %+v, %v; want decided by the fallback", i, res[0], err)
		}
	}
	time.Sleep(time.Second) // four probes
	if fc.Healthy() {
		t.Fatal("store healthy while Redis refuses writes")
	}
	if n := testutil.ToFloat64(m.StoreErrors.WithLabelValues("rejected")); n < 5 {
		t.Errorf("rejected = %v, want every refusal counted", n)
	}
	if v := testutil.ToFloat64(m.FallbackActive); v != 1 {
		t.Errorf("fallback active = %v while writes are refused, want 1", v)
	}

	setConfig(t, c, "maxmemory", "0")
	back := time.Now()
	for !fc.Healthy() && time.Since(back) < 2*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	if !fc.Healthy() || testutil.ToFloat64(m.FallbackActive) != 0 {
		t.Fatalf("fallback still on %v after writes succeed again, want off within 2s", time.Since(back))
	}
	res := make([]store.Result, 1)
	if err := fc.Do(ctx, []store.Op{rate("guardian:v3:{after}:r", 1, time.Minute, 5)}, res); err != nil || res[0].Degraded || !res[0].Spent {
		t.Errorf("check after recovery = %+v, %v; want decided by Redis", res[0], err)
	}
}

// TestMemoryPerKey logs what one tracked key costs Redis, for
// docs/performance.md: used_memory over 10,000 flooded accounts (a rate key
// and a count each) and over 10,000 report marks, and MEMORY USAGE of one of
// each.
func TestMemoryPerKey(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	s := redisstore.New(c, redisstore.Config{})
	before := settledMemory(t, c)
	const accounts = 10_000
	for i := range accounts {
		subject := fmt.Sprintf("AbCdEfGhIjKlMnOpQr%04d", i)
		do(t, s,
			rate("guardian:v3:{"+subject+"}:login-account", 1, time.Minute, 5),
			counter("guardian:v3:{"+subject+"}:login-hard-stop", 1, 100, 20*time.Minute))
	}
	after := settledMemory(t, c)
	perKey := float64(after-before) / (2 * accounts)
	for i := range accounts {
		if _, err := s.MarkOnce(context.Background(), fmt.Sprintf("guardian:v3:{AbCdEfGhIjKlMnOpQr%04d}:reported", i), 12*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	perMark := float64(settledMemory(t, c)-after) / accounts
	usage := func(key string) int64 {
		n, err := c.MemoryUsage(context.Background(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	t.Logf("used_memory per tracked key: %.0f B, per report mark %.0f B; MEMORY USAGE rate %d B, counter %d B, mark %d B",
		perKey, perMark, usage("guardian:v3:{AbCdEfGhIjKlMnOpQr0000}:login-account"), usage("guardian:v3:{AbCdEfGhIjKlMnOpQr0000}:login-hard-stop"),
		usage("guardian:v3:{AbCdEfGhIjKlMnOpQr0000}:reported"))
	if perKey > 200 {
		t.Errorf("%.0f B per tracked key, want at most 200", perKey)
	}
}

// settledMemory returns Redis' used_memory once it has stopped moving: while
// the keyspace's hash table grows, Redis rehashes it a step at a time and
// holds the old table and the new one both, some 6 B more per key of a
// test's size than either alone.
func settledMemory(tb testing.TB, c *redis.Client) int64 {
	tb.Helper()
	last := infoField(tb, c, "memory", "used_memory")
	for range 40 {
		time.Sleep(50 * time.Millisecond)
		now := infoField(tb, c, "memory", "used_memory")
		if now == last {
			return now
		}
		last = now
	}
	return last
}

func setConfig(tb testing.TB, c *redis.Client, name, value string) {
	tb.Helper()
	if err := c.ConfigSet(context.Background(), name, value).Err(); err != nil {
		tb.Fatalf("CONFIG SET %s %s: %v", name, value, err)
	}
}

func dbSize(tb testing.TB, c *redis.Client) int64 {
	tb.Helper()
	n, err := c.DBSize(context.Background()).Result()
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// infoField returns an integer field of an INFO section.
func infoField(tb testing.TB, c *redis.Client, section, name string) int64 {
	tb.Helper()
	info, err := c.Info(context.Background(), section).Result()
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	tb.Fatalf("INFO %s has no %s", section, name)
	return 0
}
