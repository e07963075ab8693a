package engine

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/guardian-sec/guardian/internal/plan"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
)

// guessBit is the Bit of an account's memory of guesses in an attempt's
// mask, after the bits of the flow's rules that settle; this fails to
// compile when the mask has no room for both.
const guessBit = rules.MaxSettlingRules

const _ uint64 = 1 << guessBit

// ruleSet is a rule set as checks and reports use it: each rule's op built
// once, its limit boxed once (so a check allocates none), and its Bit among
// its flow's rules that settle (rules.Rule.GivesBack, in file order, the
// order the parser counts them in). A ruleSet is immutable once built, but
// for retired, which its history guards.
type ruleSet struct {
	set   *rules.Set
	hash  string
	flows map[rules.Flow][]ruleOp
	// retired is when another set replaced this one; zero while in force.
	retired time.Time
}

// ruleOp is one rule of a flow as a plan uses it.
type ruleOp struct {
	rule *rules.Rule
	// op is the rule's op without its key: role, limit, cost (but for a
	// rate rule, which spends the check's), rule name and on_store_error.
	op  store.Op
	bit int
}

// compile builds the ruleSet of set, keeping what only unreported checks
// count at most hold (twice the attempt TTL). The rules a report settles
// get bits in file order, the distinct rules after the others, so that an
// attempt id sealed before distinct rules settled keeps its meaning.
func compile(set *rules.Set, hold time.Duration) *ruleSet {
	rs := &ruleSet{set: set, hash: set.Hash(), flows: make(map[rules.Flow][]ruleOp, len(rules.Flows))}
	for _, f := range rules.Flows {
		for _, r := range set.For(f) {
			rs.flows[f] = append(rs.flows[f], ruleOp{rule: r, op: newRuleOp(r, hold), bit: plan.NoBit})
		}
		bit := 0
		for _, distinct := range []bool{false, true} {
			for i := range rs.flows[f] {
				c := &rs.flows[f][i]
				if c.rule.GivesBack() && (c.rule.Type == rules.Distinct) == distinct {
					c.bit, bit = bit, bit+1
				}
			}
		}
	}
	return rs
}

// newRuleOp returns the op of rule r without its key, its counts held at
// most hold while unconfirmed. A consecutive_failures or distinct rule
// costs one; a rate rule costs what its check spends (set by the caller).
func newRuleOp(r *rules.Rule, hold time.Duration) store.Op {
	op := store.Op{Rule: r.Name, OnError: onError(r.OnStoreError), Cost: 1}
	switch {
	case r.Mode == rules.Shadow:
		op.Role = store.Shadow
	case r.Action == rules.Challenge:
		op.Role = store.Soft
	case tolls(r):
		op.Role = store.Toll
	}
	switch r.Type {
	case rules.Rate:
		op.Limit = store.Rate{Interval: r.Interval(), Burst: r.Burst}
	case rules.ConsecutiveFailures:
		op.Limit = store.Counter{Max: r.Limit, Hold: min(r.Hold, hold)}
	case rules.Distinct:
		// A count: attempts rule counts every check for its window: there
		// is no report to wait for.
		l := store.Distinct{Step: r.Per / (store.DistinctSlots - 1), Max: r.Limit}
		if r.Count == rules.Failures {
			l.Hold = hold
		}
		op.Limit = l
	}
	return op
}

// onError is a rule's on_store_error as the fail-closed store takes it.
func onError(o rules.OnStoreError) store.OnError {
	switch o {
	case rules.Closed:
		return store.OnErrorClosed
	case rules.Open:
		return store.OnErrorOpen
	}
	return store.OnErrorLocal
}

// tolls reports whether rule r's op is a toll (store.Toll): an enforced
// rate rule by address that slows, which a check slowed by another rule
// still pays. So a poller that keeps knocking on an account held at zero
// spends its own address's budget, and soon stops draining the account.
func tolls(r *rules.Rule) bool {
	return r.Key == rules.KeyIP && r.Type == rules.Rate && r.Mode == rules.Enforce && r.Action != rules.Challenge
}

// history is the rule sets an engine decided checks by lately, by hash: a
// report settles by the rules in force when its check was decided, even
// after a reload. A set stays known for keep after another replaced it,
// the longest an attempt of it can still be reported. It is safe for
// concurrent use.
type history struct {
	cur  atomic.Pointer[ruleSet]
	keep time.Duration
	hold time.Duration

	mu     sync.Mutex
	byHash map[string]*ruleSet
	// unknown holds the hashes of reports already logged as unsettled, at
	// most maxUnknown of them.
	unknown map[string]bool
}

// maxUnknown bounds how many unknown rules hashes a history remembers
// having logged.
const maxUnknown = 64

// newHistory returns an empty history keeping replaced sets for keep,
// whose sets hold unconfirmed counts at most hold.
func newHistory(keep, hold time.Duration) *history {
	return &history{keep: keep, hold: hold, byHash: make(map[string]*ruleSet), unknown: make(map[string]bool)}
}

// current returns the ruleSet of set, the set in force at now, compiling
// it the first time it is asked for.
func (h *history) current(set *rules.Set, now time.Time) *ruleSet {
	if rs := h.cur.Load(); rs != nil && rs.set == set {
		return rs
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if rs := h.cur.Load(); rs != nil && rs.set == set {
		return rs
	}
	rs := compile(set, h.hold)
	if old := h.cur.Load(); old != nil && old.hash != rs.hash {
		old.retired = now
	}
	h.byHash[rs.hash] = rs
	for hash, old := range h.byHash {
		if !old.retired.IsZero() && now.Sub(old.retired) > h.keep {
			delete(h.byHash, hash)
		}
	}
	h.cur.Store(rs)
	return rs
}

// lookup returns the ruleSet whose hash is hash, nil when h does not know
// it (replaced longer ago than keep, before a restart, or never in force
// here).
func (h *history) lookup(hash string) *ruleSet {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.byHash[hash]
}

// missed records a report of the unknown rules hash, and reports whether
// it is the first of them (of the first maxUnknown hashes).
func (h *history) missed(hash string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.unknown[hash] || len(h.unknown) >= maxUnknown {
		return false
	}
	h.unknown[hash] = true
	return true
}
