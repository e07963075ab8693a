package replay_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/replay"
)

// BenchmarkReplayMillionEvents replays a generated day of about a million
// events (a hundred thousand users, both attacks) through the day's rules,
// and reports events per second and the peak live heap of the replay above
// what was live before it. The file is generated once, outside the timer.
func BenchmarkReplayMillionEvents(b *testing.B) {
	path := filepath.Join(b.TempDir(), "day.jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	st, err := traffic{users: 100_000, perSecond: 5.26, attacks: true, seed: 42}.write(f)
	if err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	info, _ := os.Stat(path)
	b.Logf("%d events (%d checks, %d reports), %d MiB", st.events, st.checks, st.reports, info.Size()>>20)
	set := mustParse(b, dayRules)

	var peak uint64
	var ms runtime.MemStats
	for b.Loop() {
		in, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		base := ms.HeapAlloc
		start := time.Now()
		s, err := replay.Run(context.Background(), set, bufio.NewReaderSize(in, 1<<20), replay.Config{
			ProgressEvery: 50_000,
			Progress: func(replay.Progress) {
				runtime.ReadMemStats(&ms)
				if ms.HeapAlloc > base {
					peak = max(peak, ms.HeapAlloc-base)
				}
			},
		})
		elapsed := time.Since(start)
		in.Close()
		if err != nil {
			b.Fatal(err)
		}
		if s.Input.Checks+s.Input.Reports != st.events || s.Input.Malformed != 0 {
			b.Fatalf("replayed %+v, want %d events", s.Input, st.events)
		}
		b.ReportMetric(float64(st.events)/elapsed.Seconds(), "events/s")
		b.ReportMetric(elapsed.Seconds(), "s/replay")
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
}
