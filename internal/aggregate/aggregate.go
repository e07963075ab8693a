// Package aggregate keeps guardian's global failure rate, which failure_rate
// rules compare with their limit: failures per flow, counted in fine time
// buckets in this process so that a check reads the rate without a store
// call. A check counts as a failure when it is made, and a success report
// takes it back (GiveBack), so a check never reported, a challenge its user
// abandoned, stays counted.
//
// # The fleet
//
// Alone (no Config.Shared: the embedded store) an Aggregate counts this
// instance's failures. With a Shared store (package redisagg, on Redis) it
// counts the whole fleet's: each instance adds its failures to its own
// buckets in memory; a background loop (Start) flushes the buckets that
// changed every FlushEvery, as this instance's totals, and every
// RefreshEvery also reads the fleet's totals of the buckets the counts need,
// in the same round trip. A count is the other instances' failures as last
// read plus this instance's own as they are now, so nothing is counted
// twice and a check never waits on the store: the store sees a few calls a
// second whatever the traffic.
//
// Totals, not increments, go to the store: a flush that timed out and is
// sent again, or that reaches the store after a newer one, counts once.
// Failures that could not be flushed (the store unreachable) are flushed
// late, into the buckets they happened in, once the store answers, as long
// as they are inside Window; older ones have left every window and are
// dropped.
//
// While the store does not answer, Degraded is true and counts are an
// estimate: the other instances' failures read up to the last good refresh,
// plus this instance's since then multiplied by FleetSize (each of the
// FleetSize instances is assumed to see as many). The first good refresh
// ends the estimate.
//
// # Slack
//
// With the defaults (1s buckets, FlushEvery 100ms, RefreshEvery 500ms,
// SyncTimeout 200ms):
//
//   - Delay: a failure reported to one instance counts there at once, and
//     on every other instance within FlushEvery + RefreshEvery + two round
//     trips to the store: 0.6s plus two round trips, at most 1s since a
//     round trip slower than SyncTimeout fails. So an instance reacts to a
//     crossing of the fleet-wide limit at most that much after it happened
//     (0.4–0.5s measured on three instances sharing one local Redis).
//   - Count: a count may lack the failures other instances reported in that
//     delay (at most 1s of the fleet's failures, less this instance's
//     share). Besides, the bucket straddling the window's start counts in
//     proportion to the part inside (see Count): the count is off by at most
//     that bucket's failures, 1s of failures, 1/60 of a steady rate's count
//     over a 1m window, and exact when failures are spread evenly across the
//     bucket.
//   - Clocks: a failure is placed in time by the clock of the instance it
//     was reported to; instances whose clocks differ by d place the same
//     instant d apart.
//
// # Cost
//
// Per instance, whatever the traffic: at most one round trip per
// FlushEvery, and none while no failure comes; a flush sets the buckets
// that changed, normally one per flow; a refresh also reads, for each flow,
// the buckets of the longest window asked for plus three (63 for a 1m
// rule, 3603 for a 1h one: use a coarser Bucket for windows of hours).
package aggregate

import (
	"crypto/rand"
	"log/slog"
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

	defaultFlushEvery   = 100 * time.Millisecond
	defaultRefreshEvery = 500 * time.Millisecond
	defaultSyncTimeout  = 200 * time.Millisecond
	// ttlSlack keeps a shared bucket past Window, for instances whose
	// clocks run behind.
	ttlSlack = time.Minute
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
	// least the longest per of the loaded rules. Every instance of a fleet
	// must use the same Bucket; Window may differ.
	Window time.Duration

	// Shared is the store the fleet shares its counts through; nil counts
	// this instance alone, as on the embedded store.
	Shared Shared
	// FleetSize is how many instances share the store; while Degraded, this
	// instance's failures are multiplied by it. Below 1 means 1.
	FleetSize int
	// FlushEvery is how often the loop sends this instance's new failures
	// to Shared; 0 means 100ms.
	FlushEvery time.Duration
	// RefreshEvery is how often the loop reads the fleet's counts, in the
	// same round trip as a flush; 0 means 500ms. A refresh takes the place
	// of the flush of the first tick at least RefreshEvery−FlushEvery/2
	// after the last refresh.
	RefreshEvery time.Duration
	// SyncTimeout bounds one round trip to Shared; 0 means 200ms.
	SyncTimeout time.Duration
	// Observe, when set, is called by the loop after each refresh with
	// every flow's failures per second as Rate sees them (the fleet's), for
	// the guardian_global_failures_per_second gauge. Without Shared it is
	// called every RefreshEvery.
	Observe func(flow string, perSecond float64)
	// Logger receives a line when the view becomes degraded and when it
	// recovers; nil means slog.Default().
	Logger *slog.Logger
}

// Aggregate counts reported failures per flow over a sliding window and
// keeps the in-force state of failure_rate rules.
//
// Each flow has a ring of Window/Bucket buckets holding cumulative counts,
// so Add and Count take constant time whatever the window, and neither
// allocates once the flow has been seen; neither calls the store. Counts
// are exact at bucket boundaries; see Count for the error inside a bucket,
// and the package comment for the fleet's. An Aggregate is safe for
// concurrent use; use New, and with a Shared store Start and Close.
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

	fleet
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

	f := &a.fleet
	f.shared = cfg.Shared
	f.id = rand.Text()
	f.fleetSize = int64(max(cfg.FleetSize, 1))
	f.flushEvery = orDefault(cfg.FlushEvery, defaultFlushEvery)
	f.refreshEvery = orDefault(cfg.RefreshEvery, defaultRefreshEvery)
	f.syncTimeout = orDefault(cfg.SyncTimeout, defaultSyncTimeout)
	f.observe = cfg.Observe
	f.log = cfg.Logger
	if f.log == nil {
		f.log = slog.Default()
	}
	return a
}

// orDefault returns d for a non-positive v.
func orDefault(v, d time.Duration) time.Duration {
	if v <= 0 {
		return d
	}
	return v
}

// Window returns the longest span a count covers.
func (a *Aggregate) Window() time.Duration { return a.window }

// Bucket returns the width of a time bucket.
func (a *Aggregate) Bucket() time.Duration { return time.Duration(a.bucket) }

// Add records n failures of flow now: guardian counts each check when it
// is made, as a reserved failure (GiveBack takes a success back). A
// non-positive n is ignored. Each flow seen keeps its own ring of buckets,
// so flow should be one of the contract's few flows. With a Shared store
// the failures reach the other instances with the next flush.
func (a *Aggregate) Add(flow string, n int64) {
	a.addAt(flow, a.now(), n)
}

// GiveBack takes back n of the failures Add recorded for flow at instant
// at: the checks made then proved successes. They leave the bucket they
// were counted in, so that every window that counted them stops counting
// them, and none that did not is changed; a bucket older than every window
// is left alone. Counts never go below what is left of Add's. Given-back
// failures are counted apart, in a series of their own that only grows,
// so the fleet's totals stay sums of rising counts (see the package
// comment): a flush sent twice still counts once.
func (a *Aggregate) GiveBack(flow string, at time.Time, n int64) {
	a.addAt(flow+givenBack, at, n)
}

// givenBack names the series of a flow's given-back failures.
const givenBack = "~given-back"

// addAt records n in flow's series at instant at.
func (a *Aggregate) addAt(flow string, at time.Time, n int64) {
	if n <= 0 {
		return
	}
	s := a.series(flow)
	s.mu.Lock()
	s.add(a.bucketOf(at.UnixNano()), n)
	s.mu.Unlock()
}

// Watch makes refreshes read flow over at least per (clamped to Window)
// from now on, as a count over per would. Counts ask for what they need
// themselves; watching the flows of the loaded failure_rate rules lets an
// instance see the fleet before its first check.
func (a *Aggregate) Watch(flow string, per time.Duration) {
	a.series(flow).want(int64(min(per, a.window)))
	a.series(flow + givenBack).want(int64(min(per, a.window)))
}

// Count returns the failures of flows over the sliding window (now−per,
// now], per clamped to Window; each flow should be listed once. With a
// Shared store they are the fleet's failures (see the package comment for
// how late they may be, and for the estimate while Degraded).
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
// Window, if shorter), as Count estimates them: the fleet's, with a Shared
// store.
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

// Degraded reports whether counts are an estimate because the last
// exchange with the Shared store failed: the failures since the last good
// refresh are this instance's multiplied by FleetSize. It is false again
// after the next good refresh, and always false without a Shared store.
func (a *Aggregate) Degraded() bool { return a.degraded.Load() }

// ruleState is the hysteresis state of one failure_rate rule.
type ruleState struct {
	mu      sync.Mutex
	inForce bool
	// calm is set while in force with the count at or below the limit,
	// since calmSince.
	calm      bool
	calmSince time.Time
}

// countAt returns the weighted count of flows over (at−per, at]: this
// instance's failures, the other instances' as last read, and while
// degraded this instance's since the last good refresh once more for each
// other instance of the fleet.
func (a *Aggregate) countAt(flows []string, per time.Duration, at time.Time) float64 {
	if per <= 0 {
		return 0
	}
	per = min(per, a.window)
	end := at.UnixNano()
	start := end - int64(per)
	cur, edge, frac := a.span(start, end)

	// While degraded, the failures since the last good refresh are
	// estimated: this instance's, once more for each other instance.
	others, since := 0.0, int64(0)
	if a.degraded.Load() {
		others, since = float64(a.fleetSize-1), a.lastGood.Load()
	}
	var sum float64
	for _, f := range flows {
		counted := a.seriesCount(a.series(f), per, start, cur, edge, frac, others, since)
		back := a.seriesCount(a.series(f+givenBack), per, start, cur, edge, frac, others, since)
		sum += max(counted-back, 0)
	}
	return sum
}

// seriesCount is countAt's count of one series.
func (a *Aggregate) seriesCount(s *series, per time.Duration, start, cur, edge int64, frac, others float64, since int64) float64 {
	s.want(int64(per))
	s.mu.Lock()
	local := s.weigh(cur, edge, frac)
	sum := local
	if others > 0 {
		if since > start {
			// All of them inside the window, counted exactly.
			local = float64(s.total - s.goodTotal)
		}
		sum += others * local
	}
	s.mu.Unlock()
	if v := s.fleet.Load(); v != nil {
		sum += v.weigh(cur, edge, frac)
	}
	return sum
}

// span returns the buckets of the window (start, end]: cur holds end, edge
// holds start, and frac is the part of edge, (edge·w, (edge+1)·w], inside
// the window.
func (a *Aggregate) span(start, end int64) (cur, edge int64, frac float64) {
	cur = a.bucketOf(end)
	edge = a.bucketOf(start)
	frac = float64((edge+1)*a.bucket-start) / float64(a.bucket)
	return cur, edge, frac
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
	s := newSeries(a.size, int64(min(rateSpan, a.window)))
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
