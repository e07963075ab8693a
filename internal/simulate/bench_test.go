//go:build unix

package simulate_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/simulate"
)

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkScenario runs each scenario at its documented size under the
// built-in rules, as guardian simulate does, and reports its time (s/op:
// the wall clock, which a loaded machine stretches; cpu-s/op: the CPU it
// used, the garbage collector's on the other cores included) and its
// checks. Each must run in under 30 s.
func BenchmarkScenario(b *testing.B) {
	for _, name := range simulate.Names() {
		b.Run(name, func(b *testing.B) {
			var checks int64
			var cpu, wall time.Duration
			for b.Loop() {
				c0, w0 := cpuTime(b), time.Now()
				rep, err := simulate.Run(context.Background(), rules.Default(), simulate.Config{Scenarios: []string{name}})
				if err != nil {
					b.Fatal(err)
				}
				cpu += cpuTime(b) - c0
				wall += time.Since(w0)
				checks = rep.Scenarios[0].Checks
			}
			b.ReportMetric(wall.Seconds()/float64(b.N), "s/op")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric(float64(checks), "checks/op")
		})
	}
}
