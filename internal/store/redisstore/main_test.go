package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/storetest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// t0 is the instant the tests with an overridden clock start at.
var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// The conformance suite's op builders, shortened.
var (
	rate    = storetest.Rate
	counter = storetest.Counter
	shadow  = storetest.Shadow
	soft    = storetest.Soft
)

// do runs one Do and fails the test on an error.
func do(tb testing.TB, s store.Store, ops ...store.Op) []store.Result {
	tb.Helper()
	res := make([]store.Result, len(ops))
	if err := s.Do(context.Background(), ops, res); err != nil {
		tb.Fatalf("Do: %v", err)
	}
	return res
}

// peek runs one Peek and fails the test on an error.
func peek(tb testing.TB, s store.Store, ops ...store.Op) []store.Result {
	tb.Helper()
	res := make([]store.Result, len(ops))
	if err := s.Peek(context.Background(), ops, res); err != nil {
		tb.Fatalf("Peek: %v", err)
	}
	return res
}

// checkResults compares results with wants.
func checkResults(tb testing.TB, label string, got, want []store.Result) {
	tb.Helper()
	if len(got) != len(want) {
		tb.Fatalf("%s: %d results, want %d", label, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			tb.Errorf("%s: op %d:\n got %+v\nwant %+v", label, i, got[i], want[i])
		}
	}
}

// forEachNode runs f on every node holding data: the client itself, or each
// master of a cluster.
func forEachNode(tb testing.TB, c redis.UniversalClient, f func(*redis.Client)) {
	tb.Helper()
	switch c := c.(type) {
	case *redis.Client:
		f(c)
	case *redis.ClusterClient:
		var mu sync.Mutex
		err := c.ForEachMaster(context.Background(), func(_ context.Context, m *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			f(m)
			return nil
		})
		if err != nil {
			tb.Fatalf("for each master: %v", err)
		}
	default:
		tb.Fatalf("client %T", c)
	}
}

// flush empties every node's database.
func flush(tb testing.TB, c redis.UniversalClient) {
	tb.Helper()
	forEachNode(tb, c, func(n *redis.Client) {
		if err := n.FlushDB(context.Background()).Err(); err != nil {
			tb.Fatalf("FLUSHDB: %v", err)
		}
	})
}

// state returns the value that holds key's state in Redis, and whether
// there is one.
func state(tb testing.TB, c redis.UniversalClient, key string) (string, bool) {
	tb.Helper()
	v, err := c.Get(context.Background(), key).Result()
	if err == redis.Nil {
		return "", false
	}
	if err != nil {
		tb.Fatalf("GET %s: %v", key, err)
	}
	return v, true
}

// setState writes v where key's state lives, as if the scripts had.
func setState(tb testing.TB, c redis.UniversalClient, key, v string) {
	tb.Helper()
	if err := c.Set(context.Background(), key, v, time.Hour).Err(); err != nil {
		tb.Fatalf("SET %s: %v", key, err)
	}
}

// keyTTL returns the PTTL of key.
func keyTTL(tb testing.TB, c redis.UniversalClient, key string) time.Duration {
	tb.Helper()
	ttl, err := c.PTTL(context.Background(), key).Result()
	if err != nil {
		tb.Fatalf("PTTL %s: %v", key, err)
	}
	return ttl
}

// keyTTLs returns every key in the store with its PTTL.
func keyTTLs(tb testing.TB, c redis.UniversalClient) map[string]time.Duration {
	tb.Helper()
	ctx := context.Background()
	out := map[string]time.Duration{}
	forEachNode(tb, c, func(n *redis.Client) {
		iter := n.Scan(ctx, 0, "*", 100).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			ttl, err := n.PTTL(ctx, k).Result()
			if err != nil {
				tb.Fatalf("PTTL %s: %v", k, err)
			}
			out[k] = ttl
		}
		if err := iter.Err(); err != nil {
			tb.Fatalf("SCAN: %v", err)
		}
	})
	return out
}

// checkEveryKeyExpires asserts that the store holds keys and that each has a
// TTL.
func checkEveryKeyExpires(tb testing.TB, c redis.UniversalClient) {
	tb.Helper()
	ttls := keyTTLs(tb, c)
	if len(ttls) == 0 {
		tb.Fatal("no keys in the store, want the workload's keys")
	}
	for k, ttl := range ttls {
		if ttl <= 0 {
			tb.Errorf("key %s has PTTL %v, want a TTL", k, ttl)
		}
	}
}

// sentCounter is a go-redis hook counting what a client sends: commands,
// and round trips (a pipeline is one).
type sentCounter struct {
	mu         sync.Mutex
	cmds       int
	roundTrips int
}

func (h *sentCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *sentCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		h.cmds++
		h.roundTrips++
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *sentCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		h.cmds += len(cmds)
		h.roundTrips++
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

// take returns the counts so far and resets them.
func (h *sentCounter) take() (cmds, roundTrips int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cmds, roundTrips = h.cmds, h.roundTrips
	h.cmds, h.roundTrips = 0, 0
	return cmds, roundTrips
}

// budget runs callers concurrent Do calls of batch(i), spread over stores,
// and returns which callers had every enforced op spent. It fails the test
// when a batch is spent only in part.
func budget(t *testing.T, stores []store.Store, callers int, batch func(i int) []store.Op) []bool {
	t.Helper()
	won := make([]bool, callers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-start
			ops := batch(i)
			res := make([]store.Result, len(ops))
			if err := stores[i%len(stores)].Do(context.Background(), ops, res); err != nil {
				t.Errorf("caller %d: Do: %v", i, err)
				return
			}
			for j := range res {
				if res[j].Spent != res[0].Spent {
					t.Errorf("caller %d: results %+v: want every op spent or none", i, res)
				}
			}
			won[i] = res[0].Spent
		})
	}
	close(start)
	wg.Wait()
	return won
}

// count returns how many of bs are true.
func count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
