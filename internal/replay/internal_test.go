package replay

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func TestDistinctIsExactThenEstimates(t *testing.T) {
	t.Parallel()
	var d distinct
	for i := range exactKeys {
		if !d.add(fmt.Sprintf("key-%d", i)) {
			t.Fatalf("key %d reported as seen before", i)
		}
		if d.add(fmt.Sprintf("key-%d", i)) {
			t.Fatalf("key %d reported new twice", i)
		}
	}
	if n, exact := d.count(); n != exactKeys || !exact {
		t.Fatalf("count = %d, %v; want %d exactly", n, exact, exactKeys)
	}
	const total = 400_000
	for i := exactKeys; i < total; i++ {
		d.add(fmt.Sprintf("key-%d", i))
		d.add(fmt.Sprintf("key-%d", i/2)) // seen before: no change
	}
	n, exact := d.count()
	if exact {
		t.Fatal("count past the exact bound claims to be exact")
	}
	if err := math.Abs(float64(n)-total) / total; err > 0.03 {
		t.Fatalf("estimate %d of %d distinct keys is %.1f%% off, want within 3%%", n, total, 100*err)
	}
	if d.exact != nil || len(d.hll) != 1<<hllBits {
		t.Fatalf("memory not bounded: %d exact keys kept, %d registers", len(d.exact), len(d.hll))
	}
}

func TestPendingForgetsOldChecks(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	p := pending{m: map[string]*entry{}}
	p.put("a", []string{"att-a"}, t0)
	p.put("b", []string{"att-b"}, t0.Add(time.Minute))
	p.put("a", []string{"att-a2"}, t0.Add(2*time.Minute)) // a new check reusing the id
	tests := []struct {
		at        time.Duration
		wantA     string
		wantB     bool
		wantQueue int
	}{
		{at: 20 * time.Minute, wantA: "att-a2", wantB: true, wantQueue: 3},
		{at: 21*time.Minute + 1, wantA: "att-a2", wantB: false, wantQueue: 1},
		{at: 22*time.Minute + 1, wantA: "", wantB: false, wantQueue: 0},
	}
	for _, tt := range tests {
		p.expire(t0.Add(tt.at))
		var gotA string
		if e := p.m["a"]; e != nil {
			gotA = e.ids[0]
		}
		_, gotB := p.m["b"]
		if gotA != tt.wantA || gotB != tt.wantB || len(p.queue)-p.head != tt.wantQueue {
			t.Errorf("at +%v: a=%q b=%v queue %d; want a=%q b=%v queue %d", tt.at, gotA, gotB, len(p.queue)-p.head, tt.wantA, tt.wantB, tt.wantQueue)
		}
	}
}
