package aggregate

import (
	"math"
	"sync"
)

// series is one flow's failures as a ring of cumulative counts: the count
// of a span of buckets is the difference of two entries, so a count costs
// the same whatever its span.
type series struct {
	mu sync.Mutex
	// last is the newest bucket written.
	last int64
	// total is every failure kept: the cumulative count through last.
	total int64
	// base is the cumulative count through bucket last−len(cum), the one
	// just before the ring.
	base int64
	// cum[b mod len(cum)] is the cumulative count through bucket b, for b
	// in (last−len(cum), last]. Buckets skipped without failures are filled
	// in, so a stale entry is never read.
	cum []int64
}

func newSeries(size int64) *series {
	// Starting far in the past makes the first add fill the ring with zeros.
	return &series{last: math.MinInt64 / 2, cum: make([]int64, size)}
}

func (s *series) slot(b int64) int64 {
	i := b % int64(len(s.cum))
	if i < 0 {
		i += int64(len(s.cum))
	}
	return i
}

// cumAt returns the cumulative count through bucket b. Buckets older than
// the ring read as the one just before it: their failures have expired from
// every window.
func (s *series) cumAt(b int64) int64 {
	size := int64(len(s.cum))
	switch {
	case b >= s.last:
		return s.total
	case b <= s.last-size:
		return s.base
	default:
		return s.cum[s.slot(b)]
	}
}

// add records n failures in bucket b. A late b, older than the newest
// bucket, still counts while the ring holds it; an older one is dropped.
func (s *series) add(b, n int64) {
	size := int64(len(s.cum))
	switch {
	case b > s.last:
		// Move the ring forward: bucket b−size becomes the one before it.
		if b-size >= s.last {
			s.base = s.total
		} else {
			s.base = s.cum[s.slot(b)]
		}
		for i := max(s.last+1, b-size+1); i < b; i++ {
			s.cum[s.slot(i)] = s.total
		}
		s.total += n
		s.cum[s.slot(b)] = s.total
		s.last = b
	case b > s.last-size:
		for i := b; i <= s.last; i++ {
			s.cum[s.slot(i)] += n
		}
		s.total += n
	}
}
