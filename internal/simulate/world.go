package simulate

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/guardian-sec/guardian/internal/aggregate"
	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/store/memstore"
)

// worldKey keys every simulated engine: a fixed key, so that subjects, and
// what depends on their hashes (distinct-count estimates), are the same run
// after run. Nothing a simulation keys outlives it.
var worldKey = func() secret.Key {
	k, err := secret.New([]byte("guardian simulate: the fixed key of a simulated world, v1"))
	if err != nil {
		panic("simulate: " + err.Error()) // a constant longer than secret.MinLen
	}
	return k
}()

const (
	// storeKeys bounds the embedded store far above what a scenario holds,
	// so that no run meets the full store's wall.
	storeKeys = 1 << 26
	// sweepEvery is how many checks pass between sweeps of the store.
	sweepEvery = 1 << 16
	// verifyDelay is how long the auth service takes to verify a
	// credential and report it.
	verifyDelay = 150 * time.Millisecond
)

// clock is a world's simulated clock: the time of the event being run. A
// world runs on one goroutine, so it needs no lock.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// world is one scenario being run: an engine on the embedded store, on a
// simulated clock, and the events still to come, in time order.
type world struct {
	ctx    context.Context
	clock  clock
	eng    *engine.Engine
	store  *memstore.Store
	rng    *rand.Rand
	queue  events
	seq    uint64
	checks int64
	// err is the first error of the engine, which ends the run.
	err error
	// rec receives what every check decided.
	rec *recorder
}

func newWorld(ctx context.Context, set *rules.Set, start time.Time, seed uint64, rec *recorder) *world {
	w := &world{ctx: ctx, clock: clock{now: start}, rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), rec: rec}
	var holder rules.Holder
	holder.Store(set)
	window := time.Hour
	for i := range set.Rules {
		if r := &set.Rules[i]; r.Type == rules.FailureRate {
			window = max(window, r.Per)
		}
	}
	w.store = memstore.New(memstore.Config{Now: w.clock.Now, MaxKeys: storeKeys})
	w.eng = engine.New(engine.Config{
		Rules:     &holder,
		Store:     w.store,
		Key:       worldKey,
		Aggregate: aggregate.New(aggregate.Config{Now: w.clock.Now, Window: window}),
		Now:       w.clock.Now,
	})
	return w
}

// event is something that happens at a time: a check to make, a report to
// send. Events of one instant run in the order they were scheduled.
type event struct {
	at  int64 // Unix nanoseconds
	seq uint64
	run func()
}

// events is a min-heap of events by time, then by scheduling order.
type events []event

func (h events) Len() int { return len(h) }
func (h events) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h events) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *events) Push(x any)   { *h = append(*h, x.(event)) }
func (h *events) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = event{}
	*h = old[:len(old)-1]
	return x
}

// at schedules run at t; a time before the clock's runs now.
func (w *world) at(t time.Time, run func()) {
	if t.Before(w.clock.now) {
		t = w.clock.now
	}
	w.seq++
	heap.Push(&w.queue, event{at: t.UnixNano(), seq: w.seq, run: run})
}

// after schedules run d from now.
func (w *world) after(d time.Duration, run func()) { w.at(w.clock.now.Add(d), run) }

// run runs every event in time order until none is left, the engine fails
// or ctx ends; progress, when set, is called every few thousand events.
func (w *world) run(progress func()) error {
	n := 0
	for len(w.queue) > 0 && w.err == nil {
		ev := heap.Pop(&w.queue).(event)
		w.clock.now = time.Unix(0, ev.at).UTC()
		ev.run()
		if n++; n%4096 == 0 {
			if err := w.ctx.Err(); err != nil {
				return err
			}
			if progress != nil {
				progress()
			}
		}
	}
	return w.err
}

// check sends req to the engine. A failed engine ends the run: the
// embedded store never fails, so an error is a request no scenario should
// make, and the zero Decision is returned with ok false.
func (w *world) check(req engine.CheckRequest) (engine.Decision, bool) {
	d, err := w.eng.Check(w.ctx, req)
	if err != nil {
		if w.err == nil {
			w.err = fmt.Errorf("simulate: check %+v: %w", req, err)
		}
		return d, false
	}
	if w.checks++; w.checks%sweepEvery == 0 {
		w.store.Sweep()
	}
	return d, true
}

// report reports attemptID's outcome after the auth service verified it,
// and hands the device token of a success to got (when set).
func (w *world) report(attemptID string, outcome engine.Outcome, got func(deviceToken string)) {
	w.after(verifyDelay, func() {
		res, err := w.eng.Report(w.ctx, attemptID, outcome)
		if err != nil {
			if w.err == nil {
				w.err = fmt.Errorf("simulate: report: %w", err)
			}
			return
		}
		if got != nil {
			got(res.DeviceToken)
		}
	})
}

// chance reports true with probability p, from the world's random source.
func (w *world) chance(p float64) bool { return chance(w.rng, p) }

// chance reports true with probability p, drawn from rng.
func chance(rng *rand.Rand, p float64) bool { return rng.Float64() < p }
