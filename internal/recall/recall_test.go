package recall

import (
	"fmt"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func TestObserve(t *testing.T) {
	m := New(0)
	rate := store.Op{Key: "rate", Kind: store.Rate, Cost: 1, Interval: time.Minute, Burst: 5}
	stop := store.Op{Key: "stop", Kind: store.Counter, Cost: 1, Limit: 100, Hold: time.Hour}
	fallback := store.Op{Key: "fallback", Kind: store.Rate, Cost: 1, Interval: time.Minute, Burst: 5}
	m.Observe([]store.Op{rate, stop, fallback}, []store.Result{
		{RetryAfter: 30 * time.Second, ResetAfter: 5 * time.Minute},
		{Count: 100, ResetAfter: time.Hour},
		{RetryAfter: time.Second, Degraded: true},
	}, t0)
	tests := []struct {
		key  string
		at   time.Time
		want Denial
		ok   bool
	}{
		{"rate", t0.Add(29 * time.Second), Denial{Until: t0.Add(30 * time.Second)}, true},
		{"rate", t0.Add(30 * time.Second), Denial{}, false},
		{"stop", t0.Add(59 * time.Minute), Denial{Until: t0.Add(time.Hour), Stop: true}, true},
		{"fallback", t0, Denial{}, false},
		{"unknown", t0, Denial{}, false},
	}
	for _, tt := range tests {
		got, ok := m.Denied(tt.key, tt.at)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Denied(%s, t0+%v) = %+v, %v; want %+v, %v", tt.key, tt.at.Sub(t0), got, ok, tt.want, tt.ok)
		}
	}
	// An answer that allows the key forgets it; Forget does too.
	m.Observe([]store.Op{stop}, []store.Result{{Allowed: true, Count: 1}}, t0)
	if _, ok := m.Denied("stop", t0); ok {
		t.Error("stop still denied after an answer allowed it")
	}
	m.Observe([]store.Op{rate}, []store.Result{{RetryAfter: time.Minute}}, t0)
	m.Forget("rate")
	if _, ok := m.Denied("rate", t0); ok {
		t.Error("rate still denied after Forget")
	}
}

// TestBounded: a memory holds at most about its bound, and forgets slowed
// keys before hard stops.
func TestBounded(t *testing.T) {
	const max = 640
	m := New(max)
	stop := func(i int) string { return fmt.Sprintf("stop-%d", i) }
	for i := range 100 {
		k := stop(i)
		m.Observe([]store.Op{{Key: k, Kind: store.Counter, Limit: 1}}, []store.Result{{Count: 1, ResetAfter: time.Hour}}, t0)
	}
	for i := range 10_000 {
		k := fmt.Sprintf("slow-%d", i)
		m.Observe([]store.Op{{Key: k, Kind: store.Rate}}, []store.Result{{RetryAfter: time.Minute}}, t0)
	}
	if n := m.Len(); n > max+shards {
		t.Errorf("Len = %d, want at most %d", n, max+shards)
	}
	kept := 0
	for i := range 100 {
		if d, ok := m.Denied(stop(i), t0); ok && d.Stop {
			kept++
		}
	}
	if kept != 100 {
		t.Errorf("%d of 100 hard stops kept through a flood of slowed keys, want all", kept)
	}
}
