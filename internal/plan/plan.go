// Package plan is the plan of one check: every rule and feature of the check
// as an entry holding the store op it evaluates, if any, and, built beside
// that op, what a success report and what a failure report of the check do
// to the state the op spent (store.Settlement), as rate.Reservation cancels
// from the object that reserved.
//
// One builder (package engine) makes a check's plan from the rule set and
// the check's subjects; the packages of features add their own entries to
// it: package loginlimits an account's buckets (trusted devices, passed
// challenges, familiar networks) and the lessons of a success, package
// engine the account's memory of guesses. The store sees only the ops
// (Batch). A report rebuilds the plan from what its attempt id sealed, and
// settles the entries its check spent (Settlements): an entry's Bit is its
// place in the attempt's mask of spent entries, so an attempt id carries a
// mask and a few subjects, never store keys.
package plan

import (
	"slices"
	"sync"

	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
)

// Kind says what an entry is.
type Kind uint8

const (
	// Limit is one of a rule's limits, evaluated by the entry's op.
	Limit Kind = iota
	// Global is a failure_rate rule: the global failure rate decides it
	// (package aggregate), with no op.
	Global
	// Familiar reads the account's familiar list; the list decides which
	// of the plan's conditional ops count (store.When).
	Familiar
	// Guesses is the account's memory of its last failed guesses.
	Guesses
	// Repeats is the account's allowance of free repeats of a remembered
	// guess (store.Op.OnRepeat).
	Repeats
	// Learning is a lesson of a success, with no op: a network learned as
	// familiar, or the count a rule kept for it reset.
	Learning
)

// NoBit is the Bit of an entry whose spend no attempt records.
const NoBit = -1

// Entry is one step of a check's plan.
type Entry struct {
	// Rule is the rule the entry is of; nil for a feature of the check
	// (the account's familiar list, its memory of guesses, the network a
	// success learns).
	Rule *rules.Rule
	Kind Kind
	// Op is what the store evaluates for the entry; an entry whose Op has
	// no Limit has no op (Global, Learning).
	Op store.Op
	// Subject is the subject Op.Key is of, what shadow tallies name.
	Subject string
	// Bit is the entry's place in an attempt's mask of spent entries, or
	// NoBit. Entries that settle alike share a bit: the two buckets of an
	// account rule under familiar networks, of which the store counts one.
	Bit int
	// Exempt reports that the check is exempt from the entry's rule: its
	// op counts as usual where it fits (the engine makes it soft, so that
	// it denies nothing), and the rule decides nothing for the check: a
	// trusted device on an address rule, a trusted device or a passed
	// challenge on a distinct rule (contract 8.1).
	Exempt bool
	// Success and Failure are what a report of each outcome does to the
	// state Op spent, on Op.Key unless they name a key of their own; the
	// zero Settlement does nothing. An entry without an op settles on a
	// success whatever was spent.
	Success, Failure store.Settlement

	// at is the index of Op in the plan's batch, -1 when it has none.
	at int
}

// HasOp reports whether the entry has a store op.
func (e *Entry) HasOp() bool { return e.Op.Limit != nil }

// Plan is the plan of one check: its entries, the batch of their ops and
// the store's results. The zero Plan is empty and ready to use; plans are
// reused through a pool (Get, Release), so that a check allocates none.
// A Plan is used by one goroutine at a time, and a store keeps neither ops
// nor results once its call has returned.
type Plan struct {
	entries []Entry
	ops     []store.Op
	res     []store.Result
	settled []store.Settlement
}

// capacity is how many entries a new plan has room for: the built-in
// login rules with a familiar network's buckets take 10.
const capacity = 16

var pool = sync.Pool{New: func() any {
	return &Plan{
		entries: make([]Entry, 0, capacity),
		ops:     make([]store.Op, 0, capacity),
		res:     make([]store.Result, 0, capacity),
		settled: make([]store.Settlement, 0, capacity),
	}
}}

// Get returns an empty plan from the pool.
func Get() *Plan { return pool.Get().(*Plan) }

// Release empties p, dropping what it refers to, and returns it to the
// pool. Nothing p returned may be used afterwards.
func (p *Plan) Release() {
	clear(p.entries)
	clear(p.ops)
	clear(p.settled)
	p.entries, p.ops, p.res, p.settled = p.entries[:0], p.ops[:0], p.res[:0], p.settled[:0]
	pool.Put(p)
}

// Add appends e to p.
func (p *Plan) Add(e Entry) {
	e.at = -1
	p.entries = append(p.entries, e)
}

// Entries returns p's entries, in the order they were added. Callers may
// change them until Batch.
func (p *Plan) Entries() []Entry { return p.entries }

// Has reports whether p has an entry of kind k.
func (p *Plan) Has(k Kind) bool {
	for i := range p.entries {
		if p.entries[i].Kind == k {
			return true
		}
	}
	return false
}

// Batch returns the ops of p's entries, in entry order, for one store call,
// and zeroed room for the store's results.
func (p *Plan) Batch() ([]store.Op, []store.Result) {
	p.ops = p.ops[:0]
	for i := range p.entries {
		e := &p.entries[i]
		if e.HasOp() {
			e.at = len(p.ops)
			p.ops = append(p.ops, e.Op)
		}
	}
	p.res = slices.Grow(p.res[:0], len(p.ops))[:len(p.ops)]
	clear(p.res)
	return p.ops, p.res
}

// Result returns what the store found for e's op, an entry of p after
// Batch; nil when e has no op.
func (p *Plan) Result(e *Entry) *store.Result {
	if e.at < 0 {
		return nil
	}
	return &p.res[e.at]
}

// Familiar reports whether the plan's Familiar entry found the check's
// network on the account's list, after the store call: then its
// conditional ops counted in the network's buckets. False without one.
func (p *Plan) Familiar() bool {
	return store.FamiliarFound(p.ops, p.res)
}

// Spent returns the mask of p's spent entries after the store call: bit b
// set when an entry whose Bit is b spent its op.
func (p *Plan) Spent() uint64 {
	var mask uint64
	for i := range p.entries {
		e := &p.entries[i]
		if e.Bit != NoBit && e.at >= 0 && p.res[e.at].Spent {
			mask |= 1 << e.Bit
		}
	}
	return mask
}

// Settlements returns what a report settles on p, the plan of its check
// rebuilt: on a success each entry's Success, on a failure its Failure, for
// every entry whose Bit is in the mask spent, among conditional entries
// only those that counted given familiar (whether the check's network was
// found familiar), and on a success every entry without an op. The slice
// is p's own, valid until Release.
func (p *Plan) Settlements(success bool, spent uint64, familiar bool) []store.Settlement {
	p.settled = p.settled[:0]
	for i := range p.entries {
		e := &p.entries[i]
		st := e.Failure
		if success {
			st = e.Success
		}
		if st.Key == "" {
			st.Key = e.Op.Key
		}
		switch {
		case st.Action == 0:
		case !e.HasOp():
			if success {
				p.settled = append(p.settled, st)
			}
		case e.Bit != NoBit && spent&(1<<e.Bit) != 0 && e.Op.When.Counts(familiar):
			p.settled = append(p.settled, st)
		}
	}
	return p.settled
}
