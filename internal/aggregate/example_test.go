package aggregate_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/guardian-sec/guardian/internal/aggregate"
)

func ExampleAggregate_InForce() {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	a := aggregate.New(aggregate.Config{Now: func() time.Time { return now }})
	flows := []string{"login"}

	// A global login rule: challenge when more than 3 failures a minute,
	// held for 30s after the rate falls back.
	a.Add("login", 3)
	fmt.Println(a.InForce("login-global", flows, time.Minute, 3, 30*time.Second))
	a.Add("login", 1)
	fmt.Println(a.InForce("login-global", flows, time.Minute, 3, 30*time.Second))

	now = now.Add(time.Minute) // every failure has left the window
	fmt.Println(a.InForce("login-global", flows, time.Minute, 3, 30*time.Second))
	now = now.Add(30 * time.Second)
	fmt.Println(a.InForce("login-global", flows, time.Minute, 3, 30*time.Second))
	// Output:
	// false 3
	// true 4
	// true 0
	// false 0
}

// memShared is an aggregate.Shared in memory, standing in for Redis
// (package redisagg) so that the example runs anywhere.
type memShared struct {
	mu    sync.Mutex
	fleet map[aggregate.Bucket]int64
	mine  map[string]int64 // by instance and bucket
}

func (m *memShared) Sync(_ context.Context, b *aggregate.Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range b.Sets {
		k := fmt.Sprint(b.Instance, t.Bucket)
		if old := m.mine[k]; t.N > old {
			m.mine[k] = t.N
			m.fleet[t.Bucket] += t.N - old
		}
	}
	b.Totals = b.Totals[:0]
	for _, r := range b.Reads {
		b.Totals = append(b.Totals, m.fleet[r])
	}
	return nil
}

func ExampleAggregate_Refresh() {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	shared := &memShared{fleet: map[aggregate.Bucket]int64{}, mine: map[string]int64{}}
	// Two instances of a fleet; in guardian, Start runs Flush and Refresh
	// in the background.
	a := aggregate.New(aggregate.Config{Now: clock, Shared: shared, FleetSize: 2})
	b := aggregate.New(aggregate.Config{Now: clock, Shared: shared, FleetSize: 2})
	flows := []string{"login"}
	b.Watch("login", time.Minute)

	a.Add("login", 3)
	b.Add("login", 2)
	fmt.Println(a.Count(flows, time.Minute), b.Count(flows, time.Minute))

	now = now.Add(100 * time.Millisecond)
	_ = a.Flush(context.Background())   // A's 3 reach the store
	_ = b.Refresh(context.Background()) // B sends its 2 and reads A's 3
	fmt.Println(a.Count(flows, time.Minute), b.Count(flows, time.Minute))
	// More than 4 failures a minute across the fleet: B challenges.
	fmt.Println(b.InForce("login-global", flows, time.Minute, 4, 30*time.Second))
	// Output:
	// 3 2
	// 3 5
	// true 5
}
