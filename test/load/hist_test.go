package main

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketsAreContiguousAndOrdered(t *testing.T) {
	// Every value lands in a bucket whose bounds hold it, and consecutive
	// buckets tile the line with no gap and no overlap.
	prevHi := uint64(0)
	for i := 0; i <= bucketOf(uint64(maxValue)); i++ {
		lo, hi := bucketBounds(i)
		if i > 0 && lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, want %d", i, lo, prevHi+1)
		}
		if got := bucketOf(lo); got != i {
			t.Fatalf("bucketOf(%d) = %d, want %d", lo, got, i)
		}
		if got := bucketOf(hi); got != i {
			t.Fatalf("bucketOf(%d) = %d, want %d", hi, got, i)
		}
		prevHi = hi
	}
}

func TestBucketWidthBoundsTheError(t *testing.T) {
	for _, v := range []uint64{0, 1, 127, 128, 129, 255, 256, 1000, 123_456, 999_999_999, uint64(maxValue)} {
		lo, hi := bucketBounds(bucketOf(v))
		if v < lo || v > hi {
			t.Fatalf("value %d outside its bucket [%d, %d]", v, lo, hi)
		}
		if width := hi - lo; v >= subCount && float64(width)/float64(v) > 1.0/subCount {
			t.Fatalf("bucket of %d is %d wide: more than 1/%d of the value", v, width, subCount)
		}
		if v < subCount && lo != hi {
			t.Fatalf("value %d below %d not exact: bucket [%d, %d]", v, subCount, lo, hi)
		}
	}
}

func TestQuantilesOfKnownValues(t *testing.T) {
	var h Histogram
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	for _, tt := range []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 500 * time.Microsecond},
		{0.9, 900 * time.Microsecond},
		{0.99, 990 * time.Microsecond},
		{0.999, 999 * time.Microsecond},
		{1, 1000 * time.Microsecond},
	} {
		got := h.Quantile(tt.q)
		// Never below the exact value, and above it by less than a bucket.
		if got < tt.want || float64(got-tt.want) > float64(tt.want)/subCount {
			t.Errorf("Quantile(%v) = %v, want %v (within 1/%d above)", tt.q, got, tt.want, subCount)
		}
	}
	if got, want := h.Max(), time.Millisecond; got != want {
		t.Errorf("Max = %v, want %v", got, want)
	}
	if got, want := h.Mean(), 500500*time.Nanosecond; got != want {
		t.Errorf("Mean = %v, want %v", got, want)
	}
	if got, want := h.Count(), uint64(1000); got != want {
		t.Errorf("Count = %d, want %d", got, want)
	}
}

func TestQuantilesMatchSortedSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	vals := make([]time.Duration, 50_000)
	for i := range vals {
		// Log-normal-ish: most fast, a long tail, as latencies are.
		v := time.Duration(float64(100*time.Microsecond) * (1 + rng.ExpFloat64()*rng.ExpFloat64()*5))
		vals[i] = v
		h.Record(v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		rank := int(float64(len(vals))*q+0.999999) - 1
		exact := vals[rank]
		got := h.Quantile(q)
		if got < exact || float64(got-exact) > float64(exact)/subCount {
			t.Errorf("Quantile(%v) = %v, exact %v", q, got, exact)
		}
	}
}

func TestMergeEqualsRecordingInOne(t *testing.T) {
	var a, b, all Histogram
	for i := range 300 {
		d := time.Duration(i*i) * time.Microsecond
		all.Record(d)
		if i%3 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	var m Histogram
	m.Merge(&a)
	m.Merge(&b)
	m.Merge(&Histogram{}) // an empty one changes nothing
	for _, q := range []float64{0, 0.25, 0.5, 0.9, 0.99, 1} {
		if got, want := m.Quantile(q), all.Quantile(q); got != want {
			t.Errorf("merged Quantile(%v) = %v, want %v", q, got, want)
		}
	}
	if m.Count() != all.Count() || m.Max() != all.Max() || m.Mean() != all.Mean() {
		t.Errorf("merged count/max/mean = %d/%v/%v, want %d/%v/%v", m.Count(), m.Max(), m.Mean(), all.Count(), all.Max(), all.Mean())
	}
}

func TestEmptyAndOutOfRange(t *testing.T) {
	var h Histogram
	if got := h.Quantile(0.99); got != 0 {
		t.Errorf("empty Quantile = %v, want 0", got)
	}
	h.Record(-time.Second)
	h.Record(time.Hour)
	if got := h.Quantile(0); got != 0 {
		t.Errorf("negative latency recorded as %v, want 0", got)
	}
	if got := h.Max(); got != maxValue {
		t.Errorf("hour-long latency recorded as %v, want the cap %v", got, maxValue)
	}
}

func TestRecordDoesNotAllocateOnceGrown(t *testing.T) {
	var h Histogram
	h.Record(time.Millisecond)
	allocs := testing.AllocsPerRun(1000, func() {
		h.Record(3 * time.Millisecond)
		h.Record(30 * time.Second)
	})
	if allocs != 0 {
		t.Fatalf("Record allocates %v times per run, want 0", allocs)
	}
}

func BenchmarkRecord(b *testing.B) {
	var h Histogram
	d := 123 * time.Microsecond
	for b.Loop() {
		h.Record(d)
		d = (d*7 + 13) % (10 * time.Millisecond)
	}
}
