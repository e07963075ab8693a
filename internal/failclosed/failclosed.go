// Package failclosed keeps guardian deciding when its store does not answer.
//
// A Store wraps the primary store (Redis) with a deadline on every call. A
// call that errs or times out is decided by its rules' on_store_error, and
// a few such calls in a row, each sent after the one before had failed,
// mark the primary as failing: from then on every op is decided that way —
// the strict local fallback (an embedded store with each limit divided by
// the fleet size and a bounded number of keys), closed (deny, retry in a
// second) or open (allow) — until a probe, one at a time, finds the primary
// answering again. The probe is a write, since a Redis that refuses writes
// (out of memory) still answers a PING. State spent on the fallback is not
// copied back; it expires on its own.
//
// The fallback starts from what this instance last heard: every answer of
// the primary is remembered (package recall) for the keys it denied, so a
// key seen slowed stays slowed until its time and a hard stop stays in
// force while the fallback decides. The same memory answers, without a
// store call, a check the primary would deny because a key it slowed is
// still waiting for its retry time, while the fleet's resets are heard
// (Listening; package recall says when it answers).
//
// A caller that goes away is not a store failure: every call runs on a
// context the caller cannot cancel, bounded by the store deadline alone.
package failclosed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/recall"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/memstore"
)

// Config configures a Store. Primary, Probe and Metrics are required.
type Config struct {
	Primary store.Store
	// Probe is a cheap write to the primary that tells whether it takes
	// writes again; a read such as PING is not enough.
	Probe func(ctx context.Context) error
	// Timeout is the deadline of one primary call (default 5ms).
	Timeout time.Duration
	// ProbeInterval is the time between probes while failing (default
	// 250ms), so the primary is back in use well within 2s of answering.
	ProbeInterval time.Duration
	// ProbeTimeout is the deadline of one probe (default 50ms).
	ProbeTimeout time.Duration
	// FailAfter is how many calls in a row must fail before the primary
	// counts as failing and calls stop going to it (default 3). A failure
	// counts only if its call was sent after the last counted failure was
	// seen: one stall of a busy primary times out every call in flight at
	// once, and counts once. A call that fails is decided by the fallback
	// either way: one stall costs the calls it caught, not every call until
	// the next probe.
	FailAfter int
	// FleetSize divides every limit on the local fallback (default 1).
	FleetSize int
	// MaxLocalKeys bounds the fallback's keys (default 100,000). When it is
	// full, new keys evict what expires soonest, hard stops last
	// (package memstore).
	MaxLocalKeys int
	// Recall remembers the primary's denials for the fallback (default: a
	// memory of 100,000 keys of its own).
	Recall  *recall.Memory
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// Now is the fallback's clock (default time.Now).
	Now func() time.Time
	// Changed, when set, hears the fallback start (active) and end; it is
	// called on the path of the call that saw the change, so it must not
	// block (a webhook queue's non-blocking send).
	Changed func(active bool)
}

// Store is a store.Store that falls back per rule when the primary fails. It
// is safe for concurrent use.
type Store struct {
	cfg     Config
	local   *memstore.Store
	recall  *recall.Memory
	log     *slog.Logger
	healthy atomic.Bool
	// failures counts the failures of the current run; it is read without
	// the lock on every success, and changed under mu, which also guards
	// seen, when the last counted failure was seen (Config.Now).
	failures atomic.Int64
	mu       sync.Mutex
	seen     time.Time
	// since is when the current failure began (unix nanoseconds).
	since atomic.Int64
	// rejected counts the checks of the current episode the primary's
	// queue had no room for (store.ErrOverloaded); 0 outside one.
	rejected     atomic.Int64
	lastRejected atomic.Int64 // unix nanoseconds
	// active is guardian_fallback_active, which Healthy reports too: amu
	// keeps the two the same at every moment.
	amu    sync.Mutex
	active bool
}

var _ store.Store = (*Store)(nil)

// New returns a Store around cfg.Primary, which is assumed healthy until a
// call fails.
func New(cfg Config) *Store {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Millisecond
	}
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = 250 * time.Millisecond
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = 50 * time.Millisecond
	}
	if cfg.FleetSize < 1 {
		cfg.FleetSize = 1
	}
	if cfg.FailAfter < 1 {
		cfg.FailAfter = 3
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxLocalKeys <= 0 {
		cfg.MaxLocalKeys = 100_000
	}
	if cfg.Recall == nil {
		cfg.Recall = recall.New(0)
	}
	s := &Store{
		cfg:    cfg,
		local:  memstore.New(memstore.Config{Now: cfg.Now, MaxKeys: cfg.MaxLocalKeys}),
		recall: cfg.Recall,
		log:    cfg.Logger,
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.healthy.Store(true)
	s.setActive(false)
	return s
}

// Healthy reports whether the primary is answering: false from a failed
// call until the primary answers again, exactly while
// guardian_fallback_active is 1.
func (s *Store) Healthy() bool {
	s.amu.Lock()
	defer s.amu.Unlock()
	return !s.active
}

// usingPrimary reports whether calls go to the primary: they still do
// after a failure, until FailAfter of them in a row.
func (s *Store) usingPrimary() bool { return s.healthy.Load() }

// setActive sets guardian_fallback_active, and what Healthy reports.
func (s *Store) setActive(on bool) {
	s.amu.Lock()
	defer s.amu.Unlock()
	s.active = on
	v := 0.0
	if on {
		v = 1
	}
	s.cfg.Metrics.FallbackActive.Set(v)
}

// Do evaluates ops on the primary, or decides them by their on_store_error
// when the primary fails.
func (s *Store) Do(ctx context.Context, ops []store.Op, res []store.Result) error {
	return s.evaluate(ctx, ops, res, true)
}

// Peek is Do without spending.
func (s *Store) Peek(ctx context.Context, ops []store.Op, res []store.Result) error {
	return s.evaluate(ctx, ops, res, false)
}

// evaluate is Do when spend is true, Peek otherwise. The batch is validated
// once: by the primary, which refuses a bad one with store.ErrBadBatch (no
// store failure), or, when the fallback decides, here.
func (s *Store) evaluate(ctx context.Context, ops []store.Op, res []store.Result, spend bool) error {
	ctx = context.WithoutCancel(ctx)
	if store.CallerGone(ctx) != nil {
		// A caller that sent its check and left at once has usually
		// closed its connection already: yield so that the server's
		// reader sees it, and send nothing for no one (store.WithCaller).
		runtime.Gosched()
		if store.Gone(ctx) {
			return fmt.Errorf("failclosed: %w", store.ErrAbandoned)
		}
	}
	if s.healthy.Load() {
		now := s.cfg.Now()
		if spend && s.recall.Answer(ops, res, now) {
			s.cfg.Metrics.RecalledChecks.Inc()
			return nil
		}
		epoch := s.recall.Epoch()
		err := s.primary(ctx, func(ctx context.Context) error {
			if spend {
				return s.cfg.Primary.Do(ctx, ops, res)
			}
			return s.cfg.Primary.Peek(ctx, ops, res)
		})
		switch {
		case err == nil:
			if spend {
				s.recall.ObserveAt(ops, res, now, epoch)
			}
			return nil
		case errors.Is(err, store.ErrBadBatch), errors.Is(err, store.ErrAbandoned):
			return err
		case errors.Is(err, store.ErrOverloaded):
			s.overloaded()
		}
	}
	if err := store.Validate(ops, res); err != nil {
		return err
	}
	return s.fallback(ctx, ops, res, spend)
}

// primary runs call against the primary under the store deadline, on a
// context the caller cannot cancel, and marks the primary failing when it
// errs: a call cut short because its caller went away would say nothing
// about the store. A call the primary refused as a bad batch says nothing
// about it either.
func (s *Store) primary(ctx context.Context, call func(context.Context) error) error {
	sent := s.cfg.Now()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.Timeout)
	err := call(cctx)
	cancel()
	if errors.Is(err, store.ErrBadBatch) || errors.Is(err, store.ErrAbandoned) || errors.Is(err, store.ErrOverloaded) {
		return err
	}
	if s.rejected.Load() > 0 {
		s.admitted()
	}
	if err != nil {
		s.fail(err, sent)
		return err
	}
	if s.failures.Load() > 0 && s.endRun() && s.healthy.Load() {
		s.setActive(false)
	}
	return nil
}

// overloaded counts a check the primary's queue had no room for, which the
// fallback answers, and logs the first of an episode.
func (s *Store) overloaded() {
	s.cfg.Metrics.StoreAdmissionRejected.Inc()
	s.lastRejected.Store(s.cfg.Now().UnixNano())
	if s.rejected.Add(1) == 1 {
		s.log.Warn("store queue full: checks answered from the local fallback at once until it drains")
	}
}

// episodeQuiet is how long no check may be refused for a full queue before
// the episode counts as over: a queue that fills and drains by the
// millisecond is one episode, logged once.
const episodeQuiet = time.Second

// admitted ends an episode of checks refused for a full queue once a call
// went through and none was refused for episodeQuiet.
func (s *Store) admitted() {
	if s.cfg.Now().UnixNano()-s.lastRejected.Load() < int64(episodeQuiet) {
		return
	}
	if n := s.rejected.Swap(0); n > 0 {
		s.log.Warn("store queue drained: checks go to the store again", "rejected", n)
	}
}

// endRun ends the current run of failures, and reports whether there was
// one.
func (s *Store) endRun() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = time.Time{}
	return s.failures.Swap(0) > 0
}

// fail counts err, from a call sent at sent, unless that call was already
// in flight when the last counted failure was seen; after FailAfter counted
// failures in a row it marks the primary failing and starts the prober.
func (s *Store) fail(err error, sent time.Time) {
	kind := Classify(err)
	s.cfg.Metrics.StoreErrors.WithLabelValues(kind).Inc()
	s.setActive(true)
	s.mu.Lock()
	var n int64
	if sent.Before(s.seen) {
		n = s.failures.Load()
	} else {
		n = s.failures.Add(1)
		s.seen = s.cfg.Now()
	}
	s.mu.Unlock()
	if n < int64(s.cfg.FailAfter) {
		return
	}
	if s.healthy.CompareAndSwap(true, false) {
		s.since.Store(time.Now().UnixNano())
		s.log.Warn("store failing: fallback active, every rule decided by its on_store_error", "kind", kind, "err", err)
		s.changed(true)
		go s.probe()
	}
}

// changed tells Config.Changed, if any, that the fallback started or ended.
func (s *Store) changed(active bool) {
	if s.cfg.Changed != nil {
		s.cfg.Changed(active)
	}
}

// probe writes to the primary until a write succeeds, then returns to it.
// Only one probe loop runs at a time: fail starts it on the healthy→failing
// edge. A refused write counts as a store error of its kind.
//
// The first probe comes after a sixteenth of ProbeInterval, each next one
// after twice the wait before, up to ProbeInterval: a store that missed
// FailAfter deadlines in a row because this instance was starved of CPU
// for a few milliseconds (a flood) is back in use in milliseconds, not
// after a whole interval of degraded answers, while one that is down is
// probed at ProbeInterval after the first few.
func (s *Store) probe() {
	wait := s.cfg.ProbeInterval / 16
	for ; ; wait = min(2*wait, s.cfg.ProbeInterval) {
		time.Sleep(wait)
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ProbeTimeout)
		err := s.cfg.Probe(ctx)
		cancel()
		if err != nil {
			if kind := Classify(err); kind == KindRejected {
				s.cfg.Metrics.StoreErrors.WithLabelValues(kind).Inc()
			}
			continue
		}
		s.endRun()
		s.healthy.Store(true)
		s.setActive(false)
		s.log.Warn("store answering again: fallback ended", "after", time.Since(time.Unix(0, s.since.Load())).Round(time.Millisecond).String())
		s.changed(false)
		return
	}
}

// fallback decides ops without the primary: each by its OnError, and a
// local op on a key the primary was last seen denying as it said. Every op
// of a rule counts in guardian_fallback_decisions_total; the ops of a
// check's features (its memory of guesses, its familiar list) are no rule
// and count nowhere.
func (s *Store) fallback(ctx context.Context, ops []store.Op, res []store.Result, spend bool) error {
	var localOps []store.Op
	var index []int
	closedDenies := false
	now := s.cfg.Now()
	for i := range ops {
		op := &ops[i]
		if spend && op.Rule != "" {
			s.cfg.Metrics.FallbackDecisions.WithLabelValues(op.Rule, onErrorName(op.OnError)).Inc()
		}
		switch op.OnError {
		case store.OnErrorClosed:
			res[i] = store.Result{RetryAfter: time.Second, Degraded: true}
			if op.Role.Denies() {
				closedDenies = true
			}
		case store.OnErrorOpen:
			res[i] = store.Result{Allowed: true, Degraded: true}
		default:
			if d, ok := s.recall.Denied(op.Key, now); ok && recallable(op, d) {
				res[i] = recalled(op, d, now)
				if op.Role.Denies() {
					closedDenies = true
				}
				continue
			}
			localOps = append(localOps, s.scale(*op))
			index = append(index, i)
		}
	}
	if len(localOps) == 0 {
		return nil
	}
	localRes := make([]store.Result, len(localOps))
	var err error
	if spend && !closedDenies {
		err = s.local.Do(ctx, localOps, localRes)
	} else {
		// A closed rule, or a denial remembered, denies the check, so
		// nothing may be spent.
		err = s.local.Peek(ctx, localOps, localRes)
	}
	if err != nil {
		return fmt.Errorf("failclosed: local fallback: %w", err)
	}
	for j, i := range index {
		res[i] = localRes[j]
		res[i].Degraded = true
	}
	return nil
}

// recallable reports whether d, the denial remembered for op's key, is of
// op's kind: a hard stop a Counter's, a slow a Rate's. A rule that changed
// type under the same name does not inherit the old kind's denial, as it
// does not its state (a hard stop would deny a rate rule for its hold).
func recallable(op *store.Op, d recall.Denial) bool {
	switch op.Limit.(type) {
	case store.Counter:
		return d.Stop
	case store.Rate:
		return !d.Stop
	}
	return false
}

// recalled is the result of op on a key the primary was last seen denying:
// a hard stop stays at its limit, a slowed key waits until the time it was
// told.
func recalled(op *store.Op, d recall.Denial, now time.Time) store.Result {
	left := d.Until.Sub(now)
	if l, ok := op.Limit.(store.Counter); ok && d.Stop {
		return store.Result{Count: l.Max, ResetAfter: left, Degraded: true}
	}
	return store.Result{RetryAfter: left, ResetAfter: left, Degraded: true}
}

// scale divides op's limit by the fleet size (store.Limit.Divided): the
// instances of a fleet each decide alone during an outage, so together they
// stay within the limit.
func (s *Store) scale(op store.Op) store.Op {
	if s.cfg.FleetSize > 1 {
		op.Limit = op.Limit.Divided(int64(s.cfg.FleetSize))
	}
	return op
}

// Settle applies settlements on the store that spent: the fallback for
// those marked Local, the primary for the rest. One the failing primary
// cannot take is dropped: a give-back, reset, lift, Add or Learn leaves the
// attempt counted, the strict side of the error, but a Confirm or
// ConfirmDistinct leaves the failure counted only as long as an unreported
// check's state lives (the unconfirmed hold, at most twice the attempt
// TTL), not for its rule's hold or window.
func (s *Store) Settle(ctx context.Context, settlements []store.Settlement) error {
	ctx = context.WithoutCancel(ctx)
	s.forget(settlements)
	local, primary := split(settlements)
	if len(local) > 0 {
		if err := s.local.Settle(ctx, local); err != nil {
			return fmt.Errorf("failclosed: local fallback: %w", err)
		}
	}
	if len(primary) > 0 && s.healthy.Load() {
		_ = s.primary(ctx, func(ctx context.Context) error { return s.cfg.Primary.Settle(ctx, primary) })
	}
	return nil
}

// forget drops from the recall the keys settlements change: what the store
// said about them no longer holds. A Confirm or a ConfirmDistinct changes
// nothing it said; a give-back lifts only a slow, a Reset or a Lift only a
// hard stop (a late report of a rule that changed type lifts nothing of
// the new rule's).
func (s *Store) forget(settlements []store.Settlement) {
	for i := range settlements {
		st := &settlements[i]
		switch st.Action {
		case store.Confirm, store.ConfirmDistinct:
		case store.GiveBack:
			s.recall.ForgetUnlessDenied(st.Key, false)
		case store.Reset, store.Lift:
			s.recall.ForgetUnlessDenied(st.Key, true)
		default:
			s.recall.Forget(st.Key)
		}
	}
}

// split separates the settlements of spends the fallback made from those
// the primary made.
func split(settlements []store.Settlement) (local, primary []store.Settlement) {
	for _, st := range settlements {
		if st.Local {
			local = append(local, st)
		} else {
			primary = append(primary, st)
		}
	}
	return local, primary
}

// Delete removes keys from both stores. It fails, with an error wrapping
// store.ErrUnavailable, while the primary is failing: an account reset must
// not be reported done when it is not.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	ctx = context.WithoutCancel(ctx)
	s.Forgotten(keys)
	if err := s.local.Delete(ctx, keys...); err != nil {
		return fmt.Errorf("failclosed: local fallback: %w", err)
	}
	if !s.healthy.Load() {
		return fmt.Errorf("failclosed: %w", store.ErrUnavailable)
	}
	if err := s.primary(ctx, func(ctx context.Context) error { return s.cfg.Primary.Delete(ctx, keys...) }); err != nil {
		return fmt.Errorf("failclosed: %w: %w", store.ErrUnavailable, err)
	}
	return nil
}

// Familiar reads the familiar list at key on the primary, or on the
// fallback while the primary is failing or cannot answer: what this
// instance learned during an outage.
func (s *Store) Familiar(ctx context.Context, key string) ([]string, error) {
	if s.healthy.Load() {
		var members []string
		err := s.primary(ctx, func(ctx context.Context) error {
			var err error
			members, err = s.cfg.Primary.Familiar(ctx, key)
			return err
		})
		if err == nil {
			return members, nil
		}
	}
	members, err := s.local.Familiar(context.WithoutCancel(ctx), key)
	if err != nil {
		return nil, fmt.Errorf("failclosed: local fallback: %w", err)
	}
	return members, nil
}

// Forgotten drops keys reset elsewhere in the fleet (or here) from what
// this instance remembers, and stops its memory answering checks until the
// store is asked again: an answer in flight may predate the reset.
func (s *Store) Forgotten(keys []string) {
	s.recall.Forget(keys...)
	s.recall.Invalidate()
}

// Listening says whether the fleet's resets are being heard: only then are
// checks answered from memory.
func (s *Store) Listening(up bool) { s.recall.Listening(up) }

// Invalidate stops what this instance remembers answering checks until the
// store is asked again; a reload of the rules calls it.
func (s *Store) Invalidate() { s.recall.Invalidate() }

// MarkOnce marks on the primary, or on the fallback while the primary fails:
// during an outage an attempt id is accepted once per instance. When the
// mark is new, settlements are applied where their check spent, like
// Settle: the primary's with the mark, in its one call; those the failing
// primary cannot take are dropped.
func (s *Store) MarkOnce(ctx context.Context, key string, ttl time.Duration, settlements ...store.Settlement) (bool, error) {
	ctx = context.WithoutCancel(ctx)
	s.forget(settlements)
	local, primary := split(settlements)
	if s.healthy.Load() {
		var first bool
		err := s.primary(ctx, func(ctx context.Context) error {
			var err error
			first, err = s.cfg.Primary.MarkOnce(ctx, key, ttl, primary...)
			return err
		})
		if err == nil {
			if first && len(local) > 0 {
				if err := s.local.Settle(ctx, local); err != nil {
					return true, fmt.Errorf("failclosed: local fallback: %w", err)
				}
			}
			return first, nil
		}
	}
	return s.local.MarkOnce(ctx, key, ttl, local...)
}

func onErrorName(o store.OnError) string {
	switch o {
	case store.OnErrorClosed:
		return "closed"
	case store.OnErrorOpen:
		return "open"
	}
	return "local"
}
