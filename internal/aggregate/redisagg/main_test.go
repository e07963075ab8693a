package redisagg_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/aggregate"
	"github.com/guardian-sec/guardian/internal/aggregate/redisagg"
	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/testclock"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// t0 is on a bucket boundary.
var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newAgg returns an Aggregate with 1s buckets over a minute, sharing
// through c, watching login over a minute.
func newAgg(c redis.UniversalClient, clk *testclock.Clock, fleetSize int) *aggregate.Aggregate {
	a := aggregate.New(aggregate.Config{Now: clk.Now, Bucket: time.Second, Window: time.Minute,
		Shared: redisagg.New(c), FleetSize: fleetSize, Logger: quiet})
	a.Watch("login", time.Minute)
	return a
}

// ran returns the commands run between two CommandStats, INFO aside, and
// how many of them were script calls.
func ran(before, after map[string]int64) (cmds, calls int64) {
	ran := redistest.Ran(before, after)
	for _, d := range ran {
		cmds += d
	}
	return cmds, redistest.ScriptCalls(ran)
}

// drive reports rate failures of login a second to a for d of simulated
// time from t0, flushing every 100ms and refreshing every 500ms as the
// loop does; it returns how many failures it reported.
func drive(tb testing.TB, a *aggregate.Aggregate, clk *testclock.Clock, rate int, d time.Duration) int {
	tb.Helper()
	step := time.Second / time.Duration(rate)
	n := 0
	for at := step; at <= d; at += step {
		clk.Set(t0.Add(at))
		a.Add("login", 1)
		n++
		tick(tb, a, at, step)
	}
	return n
}

// tick runs the flush or refresh due at simulated time at, if a tick of
// 100ms fell in (at−step, at].
func tick(tb testing.TB, a *aggregate.Aggregate, at, step time.Duration) {
	tb.Helper()
	const flushEvery = 100 * time.Millisecond
	if at/flushEvery == (at-step)/flushEvery {
		return
	}
	var err error
	if at/flushEvery%5 == 0 {
		err = a.Refresh(context.Background())
	} else {
		err = a.Flush(context.Background())
	}
	if err != nil {
		tb.Fatalf("sync at t0+%v: %v", at, err)
	}
}
