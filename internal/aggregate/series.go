package aggregate

import (
	"math"
	"sync"
	"sync/atomic"
)

// noDirty is a series' dirty mark when nothing was added since the last
// flush took it.
const noDirty = math.MaxInt64

// series is one flow's failures: this instance's own as a ring of
// cumulative counts (the count of a span of buckets is the difference of
// two entries, so a count costs the same whatever its span), and, with a
// Shared store, the other instances' as last read.
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
	// dirty is the oldest bucket added to since a flush last took the
	// mark, or noDirty.
	dirty int64
	// goodTotal is total when the last good refresh started: the failures
	// since are total−goodTotal.
	goodTotal int64

	// span is the longest window, in nanoseconds, a count of this flow has
	// asked for: how far back a refresh reads.
	span atomic.Int64
	// fleet is the other instances' failures as last read, nil before the
	// first refresh.
	fleet atomic.Pointer[view]
	// synced is this instance's total of each bucket as the shared store
	// last confirmed it, and syncTotal is total when the sync in progress
	// started. Only a sync, under Aggregate.syncMu, touches them.
	synced    []slot
	syncTotal int64
}

func newSeries(size, span int64) *series {
	// Starting far in the past makes the first add fill the ring with zeros.
	s := &series{last: math.MinInt64 / 2, cum: make([]int64, size), dirty: noDirty}
	s.span.Store(span)
	return s
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

// weigh returns the count of the buckets (edge, cur] plus frac of bucket
// edge's.
func (s *series) weigh(cur, edge int64, frac float64) float64 {
	return float64(s.cumAt(cur)-s.cumAt(edge)) + frac*float64(s.cumAt(edge)-s.cumAt(edge-1))
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
	default:
		return
	}
	s.dirty = min(s.dirty, b)
}

// want raises the span a refresh reads to per, in nanoseconds.
func (s *series) want(per int64) {
	for {
		old := s.span.Load()
		if per <= old || s.span.CompareAndSwap(old, per) {
			return
		}
	}
}

// slot is one bucket's entry in a ring keyed by bucket index.
type slot struct{ b, n int64 }

// syncedAt returns this instance's confirmed total of bucket b.
func (s *series) syncedAt(b int64) int64 {
	if e := s.synced[s.slot(b)]; e.b == b {
		return e.n
	}
	return 0
}

// view is the other instances' failures of one flow as a refresh read
// them: cum[i] counts buckets first through first+i. A view is never
// modified once published, so readers need no lock.
type view struct {
	first int64
	cum   []int64
}

// cumAt returns the failures of buckets first through b: none before the
// view, all of them after it.
func (v *view) cumAt(b int64) int64 {
	switch i := b - v.first; {
	case i < 0:
		return 0
	case i < int64(len(v.cum)):
		return v.cum[i]
	default:
		return v.cum[len(v.cum)-1]
	}
}

// weigh is series.weigh for the view.
func (v *view) weigh(cur, edge int64, frac float64) float64 {
	return float64(v.cumAt(cur)-v.cumAt(edge)) + frac*float64(v.cumAt(edge)-v.cumAt(edge-1))
}
