package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
)

// BenchmarkWaitAfterDo measures what `WAIT 1 <ms>` after a store call
// costs on a master with one replica (the Sentinel setup's containers):
// the price of knowing a hard stop reached a replica before answering,
// so a failover cannot lose it.
//
//	go test -run '^$' -bench WaitAfterDo ./test/integration/
func BenchmarkWaitAfterDo(b *testing.B) {
	sn := redistest.StartSentinel(b)
	c := sn.Master(b).Client(b)
	s := redisstore.New(c, redisstore.Config{})
	ctx := context.Background()
	ops := []store.Op{{Key: "guardian:bench:{wait}:hard-stop", Cost: 1, Limit: store.Counter{Max: 1 << 40, Hold: time.Hour}}}
	res := make([]store.Result, 1)
	b.Run("do", func(b *testing.B) {
		for b.Loop() {
			if err := s.Do(ctx, ops, res); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, ms := range []int{5, 50} {
		b.Run(fmt.Sprintf("do+wait_1_%dms", ms), func(b *testing.B) {
			for b.Loop() {
				if err := s.Do(ctx, ops, res); err != nil {
					b.Fatal(err)
				}
				n, err := c.Do(ctx, "WAIT", 1, ms).Int64()
				if err != nil || n != 1 {
					b.Fatalf("WAIT 1 %d: %d replicas, %v", ms, n, err)
				}
			}
		})
	}
}
