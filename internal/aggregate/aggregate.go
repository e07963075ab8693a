// Package aggregate keeps guardian's global failure rate, which failure_rate
// rules compare with their limit: reported failures per flow, counted in
// fine time buckets in this process so that a check reads the rate without
// a store call.
//
// The counts are this instance's own. A fleet-wide view will add the counts
// of other instances to the same buckets; until then Degraded is always
// false.
package aggregate

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

const (
	defaultBucket = time.Second
	defaultWindow = time.Hour
	// maxBuckets bounds the buckets kept per flow; a finer Bucket is widened
	// to Window/maxBuckets.
	maxBuckets = 1 << 16
	// rateSpan is the span Rate averages over.
	rateSpan = 10 * time.Second
)

// Config configures an Aggregate. The zero value is usable.
type Config struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Bucket is the width of a time bucket, and so the resolution of a
	// count; 0 means 1s. It is widened if Window would need more than 65536
	// buckets.
	Bucket time.Duration
	// Window is the longest span a count covers, rounded up to whole
	// buckets; 0 means 1h. Count clamps a longer per to Window, so a rule
	// whose per exceeds it counts only the last Window: set Window to at
	// least the longest per of the loaded rules.
	Window time.Duration
}

// Aggregate counts reported failures per flow over a sliding window and
// keeps the in-force state of failure_rate rules.
//
// Each flow has a ring of Window/Bucket buckets holding cumulative counts,
// so Add and Count take constant time whatever the window, and Add
// allocates nothing once the flow has been seen. Counts are exact at bucket
// boundaries; see Count for the error inside a bucket. An Aggregate is safe
// for concurrent use; use New.
type Aggregate struct {
	now    func() time.Time
	bucket int64 // bucket width in nanoseconds
	window time.Duration
	// size is the ring length per flow: the window's buckets, plus the one
	// straddling the window's start, plus the one before it.
	size int64

	// mu serialises writers of flows and rules. Both maps are never
	// modified once stored: writers store a copy, so readers need no lock.
	mu    sync.Mutex
	flows atomic.Pointer[map[string]*series]
	rules atomic.Pointer[map[string]*ruleState]
}

// New returns an Aggregate configured by cfg, with defaults for zero fields.
func New(cfg Config) *Aggregate {
	a := &Aggregate{now: cfg.Now}
	if a.now == nil {
		a.now = time.Now
	}
	bucket := cfg.Bucket
	if bucket <= 0 {
		bucket = defaultBucket
	}
	window := cfg.Window
	if window <= 0 {
		window = defaultWindow
	}
	if window < bucket {
		window = bucket
	}
	if window/bucket > maxBuckets {
		bucket = (window + maxBuckets - 1) / maxBuckets
	}
	n := (window + bucket - 1) / bucket
	a.bucket = int64(bucket)
	a.window = n * bucket
	a.size = int64(n) + 2
	a.flows.Store(&map[string]*series{})
	a.rules.Store(&map[string]*ruleState{})
	return a
}

// Window returns the longest span a count covers.
func (a *Aggregate) Window() time.Duration { return a.window }

// Bucket returns the width of a time bucket.
func (a *Aggregate) Bucket() time.Duration { return time.Duration(a.bucket) }

// Add records n reported failures of flow now. A non-positive n is ignored.
// Each flow seen keeps its own ring of buckets, so flow should be one of
// the contract's few flows.
func (a *Aggregate) Add(flow string, n int64) {
	if n <= 0 {
		return
	}
	now := a.now()
	s := a.series(flow)
	s.mu.Lock()
	s.add(a.bucketOf(now.UnixNano()), n)
	s.mu.Unlock()
}

// Count returns the failures of flows over the sliding window (now−per,
// now], per clamped to Window; each flow should be listed once.
//
// Buckets fully inside the window count whole, the current one included.
// The bucket straddling the window's start counts in proportion to the part
// of it inside, as if its failures were spread evenly, and the sum is
// rounded to the nearest integer. So a count is off by at most the failures
// of one bucket, and exact when per is a whole number of buckets and now is
// on a bucket boundary: a failure exactly per ago is out, one just after it
// is in.
func (a *Aggregate) Count(flows []string, per time.Duration) int64 {
	return int64(math.Round(a.countAt(flows, per, a.now())))
}

// Rate returns the failures per second of flow over the last 10s (or over
// Window, if shorter), as Count estimates them.
func (a *Aggregate) Rate(flow string) float64 {
	span := min(rateSpan, a.window)
	return a.countAt([]string{flow}, span, a.now()) / span.Seconds()
}

// InForce reports whether the failure_rate rule called rule is in force
// now, and the count it compared: Count(flows, per). The rule comes into
// force when the count exceeds limit and stays in force until the count has
// stayed at or below limit for hysteresis, measured from the first call
// that saw it there; a count above limit in between starts that wait again.
// The state is kept by rule name until Forget drops it.
func (a *Aggregate) InForce(rule string, flows []string, per time.Duration, limit int64, hysteresis time.Duration) (inForce bool, count int64) {
	st := a.ruleState(rule)
	st.mu.Lock()
	defer st.mu.Unlock()
	// The clock is read under the rule's lock so the state only moves
	// forward in time.
	now := a.now()
	count = int64(math.Round(a.countAt(flows, per, now)))
	switch {
	case count > limit:
		st.inForce = true
		st.calm = false
	case st.inForce:
		if !st.calm {
			st.calm = true
			st.calmSince = now
		}
		if now.Sub(st.calmSince) >= hysteresis {
			st.inForce = false
			st.calm = false
		}
	}
	return st.inForce, count
}

// Forget drops the state of every rule not named in keep, so a rule removed
// by a reload, or loaded again later, starts out of force.
func (a *Aggregate) Forget(keep []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := *a.rules.Load()
	next := make(map[string]*ruleState, len(keep))
	for _, r := range keep {
		if st, ok := old[r]; ok {
			next[r] = st
		}
	}
	a.rules.Store(&next)
}

// Degraded reports whether counts lack part of the fleet. Counts are local
// to this instance in this version, never partial, so it is always false.
func (a *Aggregate) Degraded() bool { return false }

// ruleState is the hysteresis state of one failure_rate rule.
type ruleState struct {
	mu      sync.Mutex
	inForce bool
	// calm is set while in force with the count at or below the limit,
	// since calmSince.
	calm      bool
	calmSince time.Time
}

// countAt returns the weighted count of flows over (at−per, at].
func (a *Aggregate) countAt(flows []string, per time.Duration, at time.Time) float64 {
	if per <= 0 {
		return 0
	}
	per = min(per, a.window)
	end := at.UnixNano()
	start := end - int64(per)
	cur := a.bucketOf(end)
	edge := a.bucketOf(start)
	// The part of the edge bucket, (edge·w, (edge+1)·w], inside the window.
	frac := float64((edge+1)*a.bucket-start) / float64(a.bucket)
	m := *a.flows.Load()
	var sum float64
	for _, f := range flows {
		s := m[f]
		if s == nil {
			continue
		}
		s.mu.Lock()
		whole := s.cumAt(cur) - s.cumAt(edge)
		partial := s.cumAt(edge) - s.cumAt(edge-1)
		s.mu.Unlock()
		sum += float64(whole) + frac*float64(partial)
	}
	return sum
}

// bucketOf returns the bucket holding instant ns (Unix nanoseconds).
// Bucket b covers (b·w, (b+1)·w]: open at the start like the window, so
// windows starting on a boundary take whole buckets.
func (a *Aggregate) bucketOf(ns int64) int64 {
	q := (ns - 1) / a.bucket
	if (ns-1)%a.bucket < 0 {
		q--
	}
	return q
}

// series returns flow's ring, creating it on first use.
func (a *Aggregate) series(flow string) *series {
	if s := (*a.flows.Load())[flow]; s != nil {
		return s
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	old := *a.flows.Load()
	if s := old[flow]; s != nil {
		return s
	}
	next := make(map[string]*series, len(old)+1)
	for f, s := range old {
		next[f] = s
	}
	s := newSeries(a.size)
	next[flow] = s
	a.flows.Store(&next)
	return s
}

// ruleState returns rule's state, creating it on first use.
func (a *Aggregate) ruleState(rule string) *ruleState {
	if st := (*a.rules.Load())[rule]; st != nil {
		return st
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	old := *a.rules.Load()
	if st := old[rule]; st != nil {
		return st
	}
	next := make(map[string]*ruleState, len(old)+1)
	for r, st := range old {
		next[r] = st
	}
	st := &ruleState{}
	next[rule] = st
	a.rules.Store(&next)
	return st
}
