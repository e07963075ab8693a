package aggregate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrBadTotals reports a Shared store that answered a sync with a number of
// totals other than the number of buckets read.
var ErrBadTotals = errors.New("aggregate: shared store answered the wrong number of totals")

// Shared is the store the instances of a fleet share their failure counts
// through. Package redisagg implements it on Redis.
type Shared interface {
	// Sync applies b.Sets and then reads the fleet's totals of b.Reads into
	// b.Totals, as one step no other Sync interleaves with. After an error
	// the Aggregate assumes nothing about b.Sets and sends them again.
	Sync(ctx context.Context, b *Batch) error
}

// Bucket names one time bucket of a flow: the failures reported in
// (Index·Width, (Index+1)·Width], Unix time, Width being the Batch's.
type Bucket struct {
	Flow  string
	Index int64
}

// Total is one instance's count of the failures in a bucket.
type Total struct {
	Bucket
	N int64
}

// Batch is one round trip between an Aggregate and its Shared store.
type Batch struct {
	// Instance names the Aggregate, randomly, unique in the fleet.
	Instance string
	// Width is the bucket width: buckets of different widths are distinct.
	Width time.Duration
	// TTL is how long the store keeps a bucket after a set changed it.
	TTL time.Duration
	// Sets are Instance's totals of buckets. A set raises the instance's
	// total of its bucket to N, and the bucket's fleet total by as much; an
	// N at or below the instance's stored total changes nothing, so a set
	// applied twice, or after a newer one, counts once.
	Sets []Total
	// Reads are the buckets whose fleet totals to read once Sets are
	// applied.
	Reads []Bucket
	// Totals receives the fleet total of each of Reads, every instance's
	// failures in it, 0 for a bucket never set or expired.
	Totals []int64
}

// fleet is an Aggregate's part in a fleet: the loop that flushes and
// refreshes, and the state of the view.
type fleet struct {
	shared       Shared
	id           string
	fleetSize    int64
	flushEvery   time.Duration
	refreshEvery time.Duration
	syncTimeout  time.Duration
	observe      func(flow string, perSecond float64)
	log          *slog.Logger

	// degraded is set when a sync fails and cleared by a good refresh.
	degraded atomic.Bool
	// lastGood is when the last good refresh started, Unix nanoseconds
	// (0: none yet); the estimate covers the time since.
	lastGood atomic.Int64

	// syncMu serialises syncs; it guards batch, taken, and the synced and
	// syncTotal of every series.
	syncMu sync.Mutex
	batch  Batch
	taken  []taken

	runMu  sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// taken is the dirty mark a sync took from a series, put back if the sync
// fails.
type taken struct {
	s  *series
	lo int64
}

// Start runs the background loop that flushes and refreshes, until Close.
// The first refresh starts at once. Without a Shared store the loop only
// calls Observe. Calling Start on a running Aggregate does nothing.
func (a *Aggregate) Start() {
	a.runMu.Lock()
	defer a.runMu.Unlock()
	if a.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel, a.done = cancel, make(chan struct{})
	go a.run(ctx, a.done)
}

// Close stops the loop, waiting for a round trip in progress, and flushes
// what is left, within SyncTimeout. It returns the flush's error; the
// failures it could not send are still counted here.
func (a *Aggregate) Close() error {
	a.runMu.Lock()
	cancel, done := a.cancel, a.done
	a.cancel, a.done = nil, nil
	a.runMu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return a.Flush(context.Background())
}

// Flush sends this instance's totals of the buckets that changed since the
// last flush to the Shared store, in one round trip bounded by
// SyncTimeout; with nothing to send, or no Shared store, it does nothing.
// The loop calls it; tests call it to step a fleet by hand.
func (a *Aggregate) Flush(ctx context.Context) error {
	return a.sync(ctx, false)
}

// Refresh flushes like Flush and, in the same round trip, reads the fleet's
// counts of every flow over the longest window its counts asked for, then
// calls Observe. A failure makes the view Degraded; a success ends that.
func (a *Aggregate) Refresh(ctx context.Context) error {
	err := a.sync(ctx, true)
	a.publish()
	return err
}

// run is the loop Start runs: a flush every flushEvery, a refresh instead
// once refreshEvery has passed since the last one, and, while degraded, a
// refresh at every tick so that the view recovers as soon as the store
// answers. The cadence follows the wall
// clock, not Config.Now; a round trip slower than a tick delays the next
// tick, never the next refresh.
func (a *Aggregate) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	period := a.flushEvery
	if a.shared == nil {
		period = a.refreshEvery
	}
	// A round trip in progress when Close is called finishes, within its
	// timeout, instead of failing and marking the view degraded.
	bg := context.WithoutCancel(ctx)
	last := time.Now()
	_ = a.Refresh(bg)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Half a tick early rather than a whole tick late.
		if a.shared == nil || a.degraded.Load() || time.Since(last) >= a.refreshEvery-period/2 {
			last = time.Now()
			_ = a.Refresh(bg)
		} else {
			_ = a.Flush(bg)
		}
	}
}

// publish hands every flow's rate to Observe.
func (a *Aggregate) publish() {
	if a.observe == nil {
		return
	}
	for flow := range *a.flows.Load() {
		if !strings.HasSuffix(flow, givenBack) {
			a.observe(flow, a.Rate(flow))
		}
	}
}

// sync is one round trip: the dirty buckets' totals, and with read the
// buckets every flow's counts need.
func (a *Aggregate) sync(ctx context.Context, read bool) error {
	if a.shared == nil {
		return nil
	}
	a.syncMu.Lock()
	defer a.syncMu.Unlock()

	now := a.now().UnixNano()
	cur := a.bucketOf(now)
	// Buckets before oldest have left every window.
	oldest := a.bucketOf(now - int64(a.window))
	b := &a.batch
	b.Instance, b.Width, b.TTL = a.id, time.Duration(a.bucket), a.window+2*time.Duration(a.bucket)+ttlSlack
	b.Sets, b.Reads, b.Totals = b.Sets[:0], b.Reads[:0], b.Totals[:0]
	a.taken = a.taken[:0]
	m := *a.flows.Load()
	for flow, s := range m {
		if s.synced == nil {
			s.synced = make([]slot, len(s.cum))
		}
		first := len(b.Sets)
		s.mu.Lock()
		s.syncTotal = s.total
		lo := s.dirty
		s.dirty = noDirty
		if lo != noDirty {
			for i := max(lo, oldest); i <= s.last; i++ {
				b.Sets = append(b.Sets, Total{Bucket{flow, i}, s.cumAt(i) - s.cumAt(i-1)})
			}
		}
		s.mu.Unlock()
		if lo != noDirty {
			a.taken = append(a.taken, taken{s, lo})
		}
		// Send only the buckets whose total changed.
		kept := b.Sets[:first]
		for _, t := range b.Sets[first:] {
			if t.N != s.syncedAt(t.Index) {
				kept = append(kept, t)
			}
		}
		b.Sets = kept
		if read {
			// The bucket before the window's edge, for the edge's weight,
			// and the one after now, for an instance whose clock is ahead.
			for i := a.bucketOf(now-s.span.Load()) - 1; i <= cur+1; i++ {
				b.Reads = append(b.Reads, Bucket{flow, i})
			}
		}
	}
	if len(b.Sets) == 0 && !read {
		return nil
	}

	ctx, cancel := context.WithTimeout(ctx, a.syncTimeout)
	err := a.shared.Sync(ctx, b)
	cancel()
	if err == nil && len(b.Totals) != len(b.Reads) {
		err = fmt.Errorf("%w: %d for %d buckets", ErrBadTotals, len(b.Totals), len(b.Reads))
	}
	if err != nil {
		for _, t := range a.taken {
			t.s.mu.Lock()
			t.s.dirty = min(t.s.dirty, t.lo)
			t.s.mu.Unlock()
		}
		if a.degraded.CompareAndSwap(false, true) {
			a.log.Warn("global failure rate degraded: shared store unreachable, counting this instance's failures × fleet size", "fleet_size", a.fleetSize, "err", err)
		}
		return fmt.Errorf("aggregate: sync: %w", err)
	}

	for _, t := range b.Sets {
		s := m[t.Flow]
		s.synced[s.slot(t.Index)] = slot{t.Index, t.N}
	}
	if !read {
		return nil
	}
	// Reads come grouped by flow, oldest bucket first.
	for i := 0; i < len(b.Reads); {
		flow := b.Reads[i].Flow
		s := m[flow]
		j := i
		for j < len(b.Reads) && b.Reads[j].Flow == flow {
			j++
		}
		v := &view{first: b.Reads[i].Index, cum: make([]int64, j-i)}
		var sum int64
		for k := i; k < j; k++ {
			// The fleet total holds this instance's confirmed total: the
			// rest is the other instances'. Below zero means the store lost
			// data; this instance's own failures still count from memory.
			sum += max(0, b.Totals[k]-s.syncedAt(b.Reads[k].Index))
			v.cum[k-i] = sum
		}
		s.fleet.Store(v)
		i = j
	}
	for _, s := range m {
		s.mu.Lock()
		s.goodTotal = s.syncTotal
		s.mu.Unlock()
	}
	a.lastGood.Store(now)
	if a.degraded.CompareAndSwap(true, false) {
		a.log.Info("global failure rate recovered: shared store answers again")
	}
	return nil
}
