// Package incident keeps what on-call reads first in an incident: the
// enforced decisions of the last 15 minutes by decision and rule, the keys
// enforced rules stopped most, the accounts hard-stopped in the last 24
// hours and whether each global failure-rate rule is in force, per
// instance in a Book and fleet-wide through the store (Fleet), as GET
// /v1/incident and the console show them.
//
// No identifier is kept in clear: keys and accounts are hashed subjects,
// shown as their pseudonyms (keys.Hasher.SubjectPseudonym).
package incident

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/shadow"
)

const (
	// BucketWidth is the width of one bucket of counts.
	BucketWidth = 10 * time.Second
	// Window is how far back decisions are counted.
	Window = 15 * time.Minute
	// HardStopWindow is how long a hard stop is listed after it started.
	HardStopWindow = 24 * time.Hour

	buckets = int(Window / BucketWidth)
	// topCapacity is the number of top-key counters per rule and decision;
	// reportedKeys how many a view lists.
	topCapacity  = 64
	reportedKeys = 10
	// maxHardStops bounds the hard stops a Book remembers: the most recent
	// are kept.
	maxHardStops = 500
)

// cell is a rule and the decision it made.
type cell struct {
	rule     string
	decision rules.Action
}

// bucket is the counts of one BucketWidth: its start (Unix seconds, a
// multiple of the width), the checks decided and the enforced decisions
// by rule.
type bucket struct {
	start  int64
	checks uint64
	counts map[cell]uint64
}

// HardStop is an account's hard stop: its subject, when it started and,
// once reset, when it ended.
type HardStop struct {
	Subject string `json:"subject"`
	// Tenant is the account's tenant, "" for the default one.
	Tenant    string     `json:"tenant,omitempty"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
}

// Global is a failure_rate rule's state: in force or not, since when.
type Global struct {
	Rule    string    `json:"rule"`
	InForce bool      `json:"in_force"`
	Since   time.Time `json:"since"`
}

// Change is what a Book tells Config.Changed of: a failure_rate rule
// that came into force or left it, by this instance's checks.
type Change struct {
	Rule    string
	InForce bool
	At      time.Time
}

// Book counts one instance's decisions. Every method is safe for
// concurrent use; the zero Book is not usable, build one with NewBook.
type Book struct {
	mu      sync.Mutex
	now     func() time.Time
	changed func(Change)
	ring    [buckets]bucket
	// top holds the keys enforced rules stopped, in two generations of
	// Window each: a view sums both, so it covers the last 15 to 30
	// minutes.
	top, prevTop map[cell]*shadow.TopK
	topSince     time.Time
	stops        map[string]HardStop
	global       map[string]Global
}

// BookConfig configures a Book; every field is optional.
type BookConfig struct {
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Changed, when set, hears a failure_rate rule come into force or
	// leave it; it is called with the Book's lock held, so it must not
	// block (a webhook queue's non-blocking send).
	Changed func(Change)
}

// NewBook returns an empty Book.
func NewBook(cfg BookConfig) *Book {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Book{now: cfg.Now, changed: cfg.Changed, top: map[cell]*shadow.TopK{}, stops: map[string]HardStop{}, global: map[string]Global{}}
}

// at returns the bucket of t, emptied when it last held an older one.
// Call it with b.mu held.
func (b *Book) at(t time.Time) *bucket {
	start := t.Unix() - t.Unix()%int64(BucketWidth/time.Second)
	bk := &b.ring[int(start/int64(BucketWidth/time.Second))%buckets]
	if bk.start != start {
		*bk = bucket{start: start}
	}
	return bk
}

// Decided counts one check decided with decision, by rule ("" when
// allowed): every check counts in the checks per second, and a check
// not allowed counts under its rule and decision.
func (b *Book) Decided(decision rules.Action, rule string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bk := b.at(b.now())
	bk.checks++
	if decision == rules.Allow || decision == "" {
		return
	}
	if bk.counts == nil {
		bk.counts = map[cell]uint64{}
	}
	bk.counts[cell{rule, decision}]++
}

// Tripped adds subject, the hashed key an enforced rule stopped with
// decision, to the rule's top keys.
func (b *Book) Tripped(rule string, decision rules.Action, subject string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if now.Sub(b.topSince) >= Window {
		b.prevTop, b.top, b.topSince = b.top, map[cell]*shadow.TopK{}, now
	}
	c := cell{rule, decision}
	t := b.top[c]
	if t == nil {
		t = shadow.NewTopK(topCapacity)
		b.top[c] = t
	}
	t.Add(subject)
}

// Global records whether the failure_rate rule is in force, as a check
// found it, and tells Config.Changed when that changed.
func (b *Book) Global(rule string, inForce bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g, seen := b.global[rule]
	if seen && g.InForce == inForce {
		return
	}
	now := b.now()
	b.global[rule] = Global{Rule: rule, InForce: inForce, Since: now}
	if b.changed != nil && (seen || inForce) {
		b.changed(Change{Rule: rule, InForce: inForce, At: now})
	}
}

// Forget drops the state of every failure_rate rule not named in keep.
func (b *Book) Forget(keep []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for r := range b.global {
		if !slices.Contains(keep, r) {
			delete(b.global, r)
		}
	}
}

// HardStopStarted records the account of tenant whose subject is given
// entering a hard stop.
func (b *Book) HardStopStarted(tenant, subject string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stops[subject] = HardStop{Subject: subject, Tenant: tenant, StartedAt: b.now().UTC()}
	if len(b.stops) > maxHardStops {
		b.dropOldestStop()
	}
}

// dropOldestStop forgets the hard stop that started first. Call it with
// b.mu held.
func (b *Book) dropOldestStop() {
	var oldest string
	var at time.Time
	for s, h := range b.stops {
		if oldest == "" || h.StartedAt.Before(at) {
			oldest, at = s, h.StartedAt
		}
	}
	delete(b.stops, oldest)
}

// HardStopEnded records the account whose subject is given leaving its
// hard stop (a reset); a subject names its tenant already.
func (b *Book) HardStopEnded(_, subject string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.stops[subject]
	if !ok {
		return
	}
	end := b.now().UTC()
	h.EndedAt = &end
	b.stops[subject] = h
}

// Snapshot returns the Book's counts as of now, as the fleet shares
// them: the buckets of the window, the top keys, the hard stops of the
// last 24 hours and the failure_rate rules' states.
func (b *Book) Snapshot(instance string) Snapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	s := Snapshot{Instance: instance, At: now.UTC()}
	from := now.Add(-Window).Unix()
	for i := range b.ring {
		bk := &b.ring[i]
		if bk.start <= from || bk.start > now.Unix() {
			continue
		}
		sb := Bucket{Start: bk.start, Checks: bk.checks}
		for c, n := range bk.counts {
			sb.Counts = append(sb.Counts, Count{Rule: c.rule, Decision: c.decision, N: n})
		}
		s.Buckets = append(s.Buckets, sb)
	}
	s.Top = b.topKeys(now)
	for _, h := range b.stops {
		if now.Sub(h.StartedAt) < HardStopWindow {
			s.HardStops = append(s.HardStops, h)
		}
	}
	for _, g := range b.global {
		s.Global = append(s.Global, g)
	}
	s.sort()
	return s
}

// topKeys returns the counters of both generations of top keys, summed;
// the older one only while it is within two windows of now. Call it with
// b.mu held.
func (b *Book) topKeys(now time.Time) []TopKeys {
	sum := map[cell]map[string]uint64{}
	add := func(gen map[cell]*shadow.TopK) {
		for c, t := range gen {
			m := sum[c]
			if m == nil {
				m = map[string]uint64{}
				sum[c] = m
			}
			for _, k := range t.Top(topCapacity) {
				m[k.Key] += k.Hits
			}
		}
	}
	if now.Sub(b.topSince) < 2*Window {
		add(b.top)
		if now.Sub(b.topSince) < Window {
			add(b.prevTop)
		}
	}
	var out []TopKeys
	for c, m := range sum {
		out = append(out, TopKeys{Rule: c.rule, Decision: c.decision, Keys: keyCounts(m, topCapacity)})
	}
	return out
}

// keyCounts returns at most n of m's keys, most hits first.
func keyCounts(m map[string]uint64, n int) []shadow.KeyCount {
	out := make([]shadow.KeyCount, 0, len(m))
	for k, h := range m {
		out = append(out, shadow.KeyCount{Key: k, Hits: h})
	}
	slices.SortFunc(out, func(x, y shadow.KeyCount) int {
		return cmp.Or(cmp.Compare(y.Hits, x.Hits), cmp.Compare(x.Key, y.Key))
	})
	return out[:min(len(out), n)]
}
