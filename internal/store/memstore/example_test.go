package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/testclock"
)

// A login check spends on the account's rate (5 back to back, then one a
// minute) and its consecutive-failure count, all or nothing.
func ExampleStore_Do() {
	clock := testclock.New(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	s := memstore.New(memstore.Config{Now: clock.Now})
	ops := []store.Op{
		{Key: "account", Cost: 1, Limit: store.Rate{Interval: time.Minute, Burst: 5}},
		{Key: "consecutive", Cost: 1, Limit: store.Counter{Max: 100, Hold: 90 * 24 * time.Hour}},
	}
	res := make([]store.Result, len(ops))
	for range 6 {
		if err := s.Do(context.Background(), ops, res); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("spent %v, remaining %d, retry after %v, failures %d\n",
			res[0].Spent, res[0].Remaining, res[0].RetryAfter, res[1].Count)
	}
	clock.Advance(time.Minute)
	if err := s.Do(context.Background(), ops, res); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("a minute later: spent %v, failures %d\n", res[0].Spent, res[1].Count)
	// Output:
	// spent true, remaining 4, retry after 0s, failures 1
	// spent true, remaining 3, retry after 0s, failures 2
	// spent true, remaining 2, retry after 0s, failures 3
	// spent true, remaining 1, retry after 0s, failures 4
	// spent true, remaining 0, retry after 0s, failures 5
	// spent false, remaining 0, retry after 1m0s, failures 5
	// a minute later: spent true, failures 6
}
