package redisstore

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// probeTTL is how long a probe's mark lives.
const probeTTL = time.Second

// probes numbers the probes of this process, so that each writes a key of
// its own.
var probes atomic.Uint64

// Probe writes a short-lived mark through the scripts, the way a check
// writes. It fails while Redis refuses writes (out of memory, a read-only
// replica), when a PING would still answer: the store is back only once a
// write succeeds.
func (s *Store) Probe(ctx context.Context) error {
	key := fmt.Sprintf("guardian:probe:{%d}:%d", time.Now().UnixNano(), probes.Add(1))
	if _, err := s.markOnce(ctx, s.nowArg(), key, micros(probeTTL), nil); err != nil {
		return fmt.Errorf("redisstore: probe: %w", err)
	}
	return nil
}

// MemoryRatio reports used_memory ÷ maxmemory from INFO memory, the highest
// over the masters of a Cluster; ok is false when no maxmemory is set.
func (s *Store) MemoryRatio(ctx context.Context) (ratio float64, ok bool, err error) {
	var mu sync.Mutex
	read := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return fmt.Errorf("redisstore: INFO memory: %w", err)
		}
		used, max := infoInt(info, "used_memory"), infoInt(info, "maxmemory")
		if max > 0 {
			mu.Lock()
			ratio, ok = math.Max(ratio, float64(used)/float64(max)), true
			mu.Unlock()
		}
		return nil
	}
	switch c := s.c.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, read)
	case *redis.Client:
		err = read(ctx, c)
	}
	return ratio, ok, err
}

// WatchMemory calls report with MemoryRatio every interval, in the
// background, until the returned stop is called: INFO is read on a timer,
// never per check. Errors and a Redis without maxmemory report nothing.
func (s *Store) WatchMemory(interval time.Duration, report func(ratio float64)) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			cctx, c := context.WithTimeout(ctx, interval)
			ratio, ok, err := s.MemoryRatio(cctx)
			c()
			if err == nil && ok {
				report(ratio)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() error {
		cancel()
		<-done
		return nil
	}
}

// infoInt returns the integer field name of an INFO reply, or 0.
func infoInt(info, name string) int64 {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
