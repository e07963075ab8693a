// Package shadow keeps guardian's bookkeeping of shadow rules: for each rule
// in shadow mode, how many checks it evaluated, how many it would have
// slowed, blocked or challenged, and which keys it would have stopped most
// often. It backs GET /v1/shadow; the decision itself is made elsewhere.
package shadow

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/guardian-sec/guardian/internal/rules"
)

const (
	// PromotedFor is how long a rule promoted from shadow to enforce keeps
	// its last shadow tallies in the report.
	PromotedFor = 24 * time.Hour
	// sketchCapacity is the number of top-key counters kept per rule.
	sketchCapacity = 64
	// reportedKeys is how many top keys a RuleReport lists, as the contract
	// allows at most ten.
	reportedKeys = 10
)

// Book tallies what each shadow rule would have done since it was loaded.
//
// A Book counts only the rules it tracks: hand it every newly loaded rule
// set with Track (or name the rules with Sync, and Reset a rule that
// changed). Events of other rules are dropped, so a check still finishing
// on a replaced rule set cannot bring a removed rule back into the report.
//
// A rule that Track sees go from shadow to enforce keeps its last tally, no
// longer counting, for PromotedFor after the promotion, reported with
// PromotedAt: what the rule did while on trial stays readable after it
// ships. Put back in shadow with the same definition, it counts on from
// there.
//
// Record is lock-free apart from the top-keys counters of a rule that
// tripped, and allocates nothing once those counters have held a key of
// each length. A Book is safe for concurrent use; use NewBook.
type Book struct {
	// mu serialises Sync, Track and Reset, which replace tallies as a
	// whole.
	mu sync.Mutex
	// tallies maps a rule name to its tally. The map is never modified once
	// stored: writers store a copy.
	tallies atomic.Pointer[map[string]*tally]
	// promoted maps a promoted rule's name to its last tally, likewise.
	promoted atomic.Pointer[map[string]promotion]
	// now tells when a promotion is over (default time.Now).
	now func() time.Time
}

// promotion is the last tally of a rule promoted at at.
type promotion struct {
	t  *tally
	at time.Time
}

// tally is one rule's counts since it was loaded.
type tally struct {
	evaluated atomic.Uint64
	slow      atomic.Uint64
	block     atomic.Uint64
	challenge atomic.Uint64
	top       *TopK
	// changes counts the trips recorded, each once it is complete, so that
	// a flush can tell a tally changed.
	changes atomic.Uint64
	// def is the rule's rules.Rule.Hash and since when this Book first
	// tracked that definition; both are empty for a rule named by Sync.
	def   string
	since time.Time
}

func newTally() *tally { return &tally{top: NewTopK(sketchCapacity)} }

// RuleReport is what one shadow rule would have done since it was loaded,
// as GET /v1/shadow shows it.
type RuleReport struct {
	Rule string `json:"rule"`
	// Evaluated counts the checks the rule was evaluated on.
	Evaluated uint64 `json:"evaluated"`
	// WouldSlow, WouldBlock and WouldChallenge count the checks the rule
	// would have slowed, blocked or challenged.
	WouldSlow      uint64 `json:"would_slow"`
	WouldBlock     uint64 `json:"would_block"`
	WouldChallenge uint64 `json:"would_challenge"`
	// TopKeys are at most ten hashed keys the rule would have stopped most
	// often, by hits descending then key; never nil. Hits may be over by the
	// bound TopK documents once a rule has tripped on more than 64 keys.
	TopKeys []KeyCount `json:"top_keys"`
	// Since is when the rule's definition was first loaded: by this Book
	// in Report, anywhere in the fleet in Fleet.Report. Zero for a rule
	// named by Sync.
	Since time.Time `json:"since,omitzero"`
	// PromotedAt is set on a rule promoted to enforce within PromotedFor:
	// when this instance loaded the promotion (the rule set's LoadedAt,
	// to the second). Its counts stopped then.
	PromotedAt time.Time `json:"promoted_at,omitzero"`
}

// NewBook returns a Book that tracks no rules yet.
func NewBook() *Book {
	b := &Book{now: time.Now}
	b.tallies.Store(&map[string]*tally{})
	b.promoted.Store(&map[string]promotion{})
	return b
}

// WithClock makes now the clock that tells when a promotion's PromotedFor
// is over, and returns b. Call it before b is used.
func (b *Book) WithClock(now func() time.Time) *Book {
	b.now = now
	return b
}

// Record counts one evaluation of rule. When tripped is slow, block or
// challenge it also counts the would-be decision and adds key, the hashed
// subject of the check, to the rule's top keys; an empty key is counted but
// not listed. tripped is "" (or allow) when the rule would have allowed.
// Record ignores a rule the Book does not track.
func (b *Book) Record(rule string, tripped rules.Action, key string) {
	t := (*b.tallies.Load())[rule]
	if t == nil {
		return
	}
	t.evaluated.Add(1)
	switch tripped {
	case rules.Slow:
		t.slow.Add(1)
	case rules.Block:
		t.block.Add(1)
	case rules.Challenge:
		t.challenge.Add(1)
	default:
		return
	}
	if key != "" {
		t.top.Add(key)
	}
	t.changes.Add(1)
}

// Sync makes the Book track exactly the rules named: a rule it already
// tracks keeps its counts, a new one starts at zero, and the tallies of
// rules not named are dropped. Call it with the shadow rules of every newly
// loaded rule set; a rule whose definition changed keeps its counts here,
// so Reset it as well.
func (b *Book) Sync(rules []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := *b.tallies.Load()
	next := make(map[string]*tally, len(rules))
	for _, r := range rules {
		if t, ok := old[r]; ok {
			next[r] = t
		} else {
			next[r] = newTally()
		}
	}
	b.tallies.Store(&next)
}

// Track makes the Book track exactly the shadow rules of set, each by its
// definition (rules.Rule.Hash): a rule whose definition the Book already
// tracks keeps its counts, whatever its position in the file; a new rule,
// or one whose definition changed, starts at zero, since set.LoadedAt. A
// tracked rule that set enforces is promoted: its tally stops and stays
// reported for PromotedFor from set.LoadedAt, while set keeps it enforced.
// Call it with every newly loaded rule set.
func (b *Book) Track(set *rules.Set) {
	b.mu.Lock()
	defer b.mu.Unlock()
	at := set.LoadedAt.UTC().Truncate(time.Second)
	old, oldPromoted := *b.tallies.Load(), *b.promoted.Load()
	next, promoted := make(map[string]*tally), make(map[string]promotion)
	enforced := map[string]bool{}
	for i := range set.Rules {
		r := &set.Rules[i]
		if r.Mode != rules.Shadow {
			enforced[r.Name] = true
			continue
		}
		def := r.Hash()
		if t, ok := old[r.Name]; ok && t.def == def {
			next[r.Name] = t
			continue
		}
		if p, ok := oldPromoted[r.Name]; ok && p.t.def == def {
			// Back in shadow as it was: it counts on.
			next[r.Name] = p.t
			continue
		}
		t := newTally()
		t.def, t.since = def, at
		next[r.Name] = t
	}
	for name, t := range old {
		if enforced[name] && t.def != "" {
			promoted[name] = promotion{t: t, at: at}
		}
	}
	for name, p := range oldPromoted {
		if _, now := promoted[name]; !now && enforced[name] && at.Sub(p.at) < PromotedFor {
			promoted[name] = p
		}
	}
	b.tallies.Store(&next)
	b.promoted.Store(&promoted)
}

// promotions returns the promotions not yet over.
func (b *Book) promotions() map[string]promotion {
	now := b.now()
	live := map[string]promotion{}
	for name, p := range *b.promoted.Load() {
		if now.Sub(p.at) < PromotedFor {
			live[name] = p
		}
	}
	return live
}

// Reset starts rule's tally afresh, and tracks rule if it was not tracked.
// A Record racing with Reset may land in the discarded tally.
func (b *Book) Reset(rule string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := *b.tallies.Load()
	next := make(map[string]*tally, len(old)+1)
	for r, t := range old {
		next[r] = t
	}
	next[rule] = newTally()
	b.tallies.Store(&next)
	if _, ok := (*b.promoted.Load())[rule]; ok {
		promoted := maps.Clone(*b.promoted.Load())
		delete(promoted, rule)
		b.promoted.Store(&promoted)
	}
}

// Report returns the counts of every tracked rule, and of every rule
// promoted within PromotedFor, sorted by rule name. A report taken while
// checks run is not a snapshot, but the would-be counts never add up to
// more than Evaluated: Record counts the evaluation first and Report reads
// it last.
func (b *Book) Report() []RuleReport {
	m, promoted := *b.tallies.Load(), b.promotions()
	out := make([]RuleReport, 0, len(m)+len(promoted))
	for r, t := range m {
		out = append(out, t.report(r))
	}
	for r, p := range promoted {
		rr := p.t.report(r)
		rr.PromotedAt = p.at
		out = append(out, rr)
	}
	slices.SortFunc(out, func(x, y RuleReport) int { return cmp.Compare(x.Rule, y.Rule) })
	return out
}

// report returns t as the report of rule.
func (t *tally) report(rule string) RuleReport {
	rr := RuleReport{
		Rule:           rule,
		WouldSlow:      t.slow.Load(),
		WouldBlock:     t.block.Load(),
		WouldChallenge: t.challenge.Load(),
		TopKeys:        t.top.Top(reportedKeys),
		Since:          t.since,
	}
	rr.Evaluated = t.evaluated.Load()
	return rr
}
