package redisagg_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/testclock"
)

// BenchmarkFleetCommands reports failures of login to an Aggregate sharing
// through a Redis container at 100 and at 10,000 failures a second of
// simulated time, flushing every 100ms and refreshing every 500ms as the
// loop does, and reports per simulated second the commands Redis ran (from
// INFO commandstats, the script's own reads and writes included) and the
// script calls: flush-bound, the same at both rates.
func BenchmarkFleetCommands(b *testing.B) {
	srv := redistest.Start(b)
	c := srv.Client(b)
	for _, rate := range []int{100, 10000} {
		b.Run(fmt.Sprintf("failures_per_s=%d", rate), func(b *testing.B) {
			clk := testclock.New(t0)
			a := newAgg(c, clk, 1)
			step := time.Second / time.Duration(rate)
			before := redistest.CommandStats(b, c)
			var at time.Duration
			for b.Loop() {
				at += step
				clk.Set(t0.Add(at))
				a.Add("login", 1)
				tick(b, a, at, step)
			}
			cmds, calls := ran(before, redistest.CommandStats(b, c))
			b.ReportMetric(float64(cmds)/at.Seconds(), "redis_cmds/s")
			b.ReportMetric(float64(calls)/at.Seconds(), "redis_calls/s")
		})
	}
}
