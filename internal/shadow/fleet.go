package shadow

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

const (
	defaultFleetTimeout = 500 * time.Millisecond
	// defaultKeep is how long the store keeps a definition's tallies after
	// an instance last wrote them.
	defaultKeep = 30 * 24 * time.Hour
	// rewriteEvery is how often a tally that did not change is written
	// again, so that the store keeps a quiet rule's counts.
	rewriteEvery = time.Hour
)

// Tally is one instance's counts of one rule definition, as the fleet's
// instances share them: totals since the instance began counting that
// definition, never increments, so a write repeated or reordered counts
// once.
type Tally struct {
	// Instance names the instance that counted.
	Instance string
	// Def is the rule's rules.Rule.Hash.
	Def string
	// Since is when the instance loaded the definition.
	Since                             time.Time
	Evaluated, Slow, Block, Challenge uint64
	// Top is every counter of the instance's top keys (at most 64), in any
	// order.
	Top []KeyCount

	// changes is the tally's trips recorded when it was read.
	changes uint64
}

// Shared is the store where the fleet's tallies meet. Package redisagg
// implements it on Redis.
type Shared interface {
	// Put stores tallies, each replacing what its instance stored before
	// for its definition, and keeps them for keep after this write.
	Put(ctx context.Context, tallies []Tally, keep time.Duration) error
	// Get returns every instance's stored tallies of the definitions defs.
	Get(ctx context.Context, defs []string) ([]Tally, error)
}

// FleetConfig configures a Fleet. Book and Instance are required.
type FleetConfig struct {
	// Book is this instance's tallies.
	Book *Book
	// Shared is where the tallies meet; nil means this instance alone, as
	// on the embedded store.
	Shared Shared
	// Instance names this instance in the store, unique in the fleet.
	Instance string
	// Timeout bounds the store call of Report; 0 means 500ms.
	Timeout time.Duration
	// Keep is how long the store keeps a definition's tallies after an
	// instance last wrote them; 0 means 30 days.
	Keep time.Duration
	// Now is the clock of the rewrite of quiet tallies; nil means time.Now.
	Now func() time.Time
	// Logger receives a line when flushes start failing and when they
	// recover; nil means slog.Default().
	Logger *slog.Logger
}

// Fleet sums the shadow tallies of every instance sharing a store.
//
// Each instance counts in its own Book, with no store call per check; on
// each round of the aggregate's loop (every 500ms by default) the Fleet
// writes the tallies that changed, in one round trip, as this instance's
// totals of each rule definition (rules.Rule.Hash). Report reads every
// instance's totals of the definitions in force and adds this instance's
// own as they are now, so a check on any instance shows on every other
// within a loop round plus the read. Because tallies are keyed by
// definition, a rule whose definition changed starts afresh everywhere,
// and a rule changed back finds its earlier counts again while the store
// keeps them.
//
// Merged top keys sum each key's hits over the instances that kept it among
// their 64 counters. Exact while every instance has tripped on at most 64
// keys of the rule; beyond that each instance's count of a key is over by
// at most its smallest counter (TopK), and an instance that no longer holds
// a key adds nothing for it, though it may have seen it up to its smallest
// counter's hits. So a merged count lies between the true count less the
// smallest counters of the instances that dropped the key and the true
// count plus those of the instances that kept it.
//
// A Fleet is safe for concurrent use; build one with NewFleet.
type Fleet struct {
	cfg FleetConfig
	log *slog.Logger

	// mu serialises flushes and guards sent.
	mu sync.Mutex
	// sent is, by definition, what the last good flush wrote of it.
	sent    map[string]sentTally
	failing atomic.Bool
}

// sentTally is what a flush wrote of one definition, and when.
type sentTally struct {
	evaluated, changes uint64
	at                 time.Time
}

// NewFleet returns a Fleet for cfg, with defaults for zero fields.
func NewFleet(cfg FleetConfig) *Fleet {
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultFleetTimeout
	}
	if cfg.Keep <= 0 {
		cfg.Keep = defaultKeep
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	f := &Fleet{cfg: cfg, log: cfg.Logger, sent: map[string]sentTally{}}
	if f.log == nil {
		f.log = slog.Default()
	}
	return f
}

// Ride writes this instance's tallies that changed since the last good
// write, or were last written an hour ago, in one store call; nothing when
// none did. The final round writes what is left.
func (f *Fleet) Ride(ctx context.Context, _ bool) {
	if err := f.Flush(ctx); err != nil {
		if f.failing.CompareAndSwap(false, true) {
			f.log.Warn("shadow: could not write this instance's tallies; the fleet's shadow counts lag until it can", "err", err)
		}
		return
	}
	if f.failing.CompareAndSwap(true, false) {
		f.log.Info("shadow: tallies written again")
	}
}

// Flush is one write of the tallies that changed; Ride calls it, tests call
// it to step a fleet by hand.
func (f *Fleet) Flush(ctx context.Context) error {
	if f.cfg.Shared == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.cfg.Now()
	var out []Tally
	for _, t := range f.cfg.Book.tallied(f.cfg.Instance, sketchCapacity) {
		if s, ok := f.sent[t.Def]; ok && s.evaluated == t.Evaluated && s.changes == t.changes && now.Sub(s.at) < rewriteEvery {
			continue
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil
	}
	if err := f.cfg.Shared.Put(ctx, out, f.cfg.Keep); err != nil {
		return err
	}
	for _, t := range out {
		f.sent[t.Def] = sentTally{evaluated: t.Evaluated, changes: t.changes, at: now}
	}
	// Forget what was sent of definitions no longer tracked.
	if len(f.sent) > 2*len(out)+16 {
		keep := map[string]bool{}
		for _, t := range f.cfg.Book.tallied(f.cfg.Instance, 0) {
			keep[t.Def] = true
		}
		for def := range f.sent {
			if !keep[def] {
				delete(f.sent, def)
			}
		}
	}
	return nil
}

// Report returns the fleet's counts of every shadow rule in force, and of
// every rule promoted from shadow within PromotedFor (with PromotedAt: when
// this instance loaded the promotion), sorted by rule name: the other
// instances' as they last wrote them, this instance's as they are now. Since is the earliest any instance loaded the rule's
// definition. On the embedded store, or when the store does not answer
// within Timeout, it returns this instance's counts alone and partial.
func (f *Fleet) Report(ctx context.Context) (rep []RuleReport, partial bool) {
	local, promoted := f.cfg.Book.tallies.Load(), f.cfg.Book.promotions()
	if f.cfg.Shared == nil {
		return f.cfg.Book.Report(), true
	}
	defs := make([]string, 0, len(*local)+len(promoted))
	for _, t := range *local {
		if t.def != "" {
			defs = append(defs, t.def)
		}
	}
	for _, p := range promoted {
		defs = append(defs, p.t.def)
	}
	var stored []Tally
	if len(defs) > 0 {
		ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
		var err error
		stored, err = f.cfg.Shared.Get(ctx, defs)
		cancel()
		if err != nil {
			f.log.Warn("shadow: could not read the fleet's tallies; reporting this instance's alone", "err", err)
			return f.cfg.Book.Report(), true
		}
	}
	byDef := map[string][]Tally{}
	for _, t := range stored {
		if t.Instance != f.cfg.Instance {
			byDef[t.Def] = append(byDef[t.Def], t)
		}
	}
	rep = make([]RuleReport, 0, len(*local)+len(promoted))
	for name, t := range *local {
		own := t.snapshot(f.cfg.Instance, sketchCapacity)
		rep = append(rep, merge(name, append(byDef[t.def], own)))
	}
	// A promoted rule's last tallies: this instance's, and those the others
	// wrote of the same definition, which stop when they load the promotion.
	for name, p := range promoted {
		own := p.t.snapshot(f.cfg.Instance, sketchCapacity)
		rr := merge(name, append(byDef[p.t.def], own))
		rr.PromotedAt = p.at
		rep = append(rep, rr)
	}
	slices.SortFunc(rep, func(x, y RuleReport) int { return cmp.Compare(x.Rule, y.Rule) })
	return rep, false
}

// merge sums the tallies of one rule into its report.
func merge(rule string, ts []Tally) RuleReport {
	rr := RuleReport{Rule: rule}
	hits := map[string]uint64{}
	for _, t := range ts {
		rr.Evaluated += t.Evaluated
		rr.WouldSlow += t.Slow
		rr.WouldBlock += t.Block
		rr.WouldChallenge += t.Challenge
		if !t.Since.IsZero() && (rr.Since.IsZero() || t.Since.Before(rr.Since)) {
			rr.Since = t.Since
		}
		for _, k := range t.Top {
			hits[k.Key] += k.Hits
		}
	}
	rr.TopKeys = make([]KeyCount, 0, len(hits))
	for k, n := range hits {
		rr.TopKeys = append(rr.TopKeys, KeyCount{Key: k, Hits: n})
	}
	sortByHits(rr.TopKeys)
	rr.TopKeys = rr.TopKeys[:min(len(rr.TopKeys), reportedKeys)]
	return rr
}

// tallied returns the tallies of every tracked definition as instance's,
// with up to top keys each, and those of the rules promoted within
// PromotedFor: their last counts reach the store, and stay there while the
// promotion is reported.
func (b *Book) tallied(instance string, top int) []Tally {
	m, promoted := *b.tallies.Load(), b.promotions()
	out := make([]Tally, 0, len(m)+len(promoted))
	for _, t := range m {
		if t.def != "" {
			out = append(out, t.snapshot(instance, top))
		}
	}
	for _, p := range promoted {
		out = append(out, p.t.snapshot(instance, top))
	}
	return out
}

// snapshot returns t as instance's Tally with up to top keys. Like Report,
// it reads the evaluations last, so the would-be counts never exceed them.
// It reads the changes first: a trip still being recorded while the
// snapshot is taken shows as a change at the next one.
func (t *tally) snapshot(instance string, top int) Tally {
	changes := t.changes.Load()
	s := Tally{
		changes:   changes,
		Instance:  instance,
		Def:       t.def,
		Since:     t.since,
		Slow:      t.slow.Load(),
		Block:     t.block.Load(),
		Challenge: t.challenge.Load(),
		Top:       t.top.Top(top),
	}
	s.Evaluated = t.evaluated.Load()
	return s
}
