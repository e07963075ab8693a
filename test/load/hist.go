package main

import (
	"math"
	"math/bits"
	"time"
)

// subBits sets the histogram's precision: every power-of-two range of
// values is split into 2^subBits equal buckets, so a recorded value is known
// to within 1/2^subBits (under 0.8%) of itself.
const subBits = 7

// subCount is the number of buckets per power-of-two range.
const subCount = 1 << subBits

// maxValue is the largest latency the histogram tells apart; longer ones are
// counted as maxValue. A request that takes longer than a minute has failed
// for every purpose guardian is measured for.
const maxValue = time.Minute

// Histogram records latencies in log-linear buckets, the layout of an HDR
// histogram: exact below subCount nanoseconds, then subCount buckets per
// doubling. Recording is one index computation and one increment, with no
// allocation. The zero value is empty and ready to use; a Histogram is not
// safe for concurrent use: give each worker its own and Merge them.
type Histogram struct {
	counts   []uint64
	n        uint64
	min, max time.Duration
	sum      float64
}

// bucketOf returns the index of the bucket holding v nanoseconds.
func bucketOf(v uint64) int {
	if v < subCount {
		return int(v)
	}
	e := bits.Len64(v) - subBits - 1 // v>>e is in [subCount, 2·subCount)
	return (e+1)*subCount + int(v>>e) - subCount
}

// bucketBounds returns the smallest and largest value bucket i holds.
func bucketBounds(i int) (lo, hi uint64) {
	if i < subCount {
		return uint64(i), uint64(i)
	}
	e := i/subCount - 1
	m := uint64(i%subCount + subCount)
	return m << e, (m+1)<<e - 1
}

// Record adds one latency. Negative latencies count as zero.
func (h *Histogram) Record(d time.Duration) {
	d = min(max(d, 0), maxValue)
	i := bucketOf(uint64(d))
	if i >= len(h.counts) {
		h.grow(i)
	}
	h.counts[i]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	h.max = max(h.max, d)
	h.n++
	h.sum += float64(d)
}

// grow makes room for bucket i, and for all of maxValue at once so that a
// histogram grows at most once.
func (h *Histogram) grow(i int) {
	n := max(i+1, bucketOf(uint64(maxValue))+1)
	c := make([]uint64, n)
	copy(c, h.counts)
	h.counts = c
}

// Merge adds every latency recorded in o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	if len(o.counts) > len(h.counts) {
		h.grow(len(o.counts) - 1)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// Count is how many latencies were recorded.
func (h *Histogram) Count() uint64 { return h.n }

// Max is the largest latency recorded, exactly; zero when empty.
func (h *Histogram) Max() time.Duration { return h.max }

// Mean is the mean latency; zero when empty.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n))
}

// Quantile returns the latency at or below which a fraction q of the
// recorded latencies lie: the upper bound of the bucket holding the
// ⌈q·n⌉-th smallest, never more than the exact maximum. It overstates the
// exact value by less than 1/subCount, never understates it. Zero when
// empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			_, hi := bucketBounds(i)
			return min(time.Duration(hi), h.max)
		}
	}
	return h.max
}
