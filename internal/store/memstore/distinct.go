package memstore

import (
	"github.com/guardian-sec/guardian/internal/hll"
	"github.com/guardian-sec/guardian/internal/store"
)

// A Distinct key's state (store.Distinct): its sub-windows, each a
// HyperLogLog of 2^hllBits registers. A register array starts sparse, a
// list of the registers set, and becomes dense past hllSparseMax of them,
// so a key that saw few members holds a few bytes per member, and at most
// DistinctSlots × 4 KB.
const (
	hllBits      = 12
	hllRegisters = 1 << hllBits
	hllSparseMax = hllRegisters / 16
)

// distinctState is a Distinct key's sub-windows. Like a famList it is
// replaced, never changed in place, once stored.
type distinctState struct {
	// window is the window number each slot holds, slot window%DistinctSlots.
	window [store.DistinctSlots]int64
	slots  [store.DistinctSlots]*sketch
}

// sketch is one sub-window's HyperLogLog registers: sparse entries
// (register<<8 | rank) until dense is set.
type sketch struct {
	sparse []uint32
	dense  []uint8
}

// add returns a copy of l (nil: empty) with the register of hash h raised
// to at least its rank; l itself is shared and never changed.
func (l *sketch) add(h uint64) *sketch {
	i, rank := hll.Register(h, hllBits)
	reg := uint32(i)
	out := &sketch{}
	if l != nil && l.dense != nil {
		out.dense = append([]uint8(nil), l.dense...)
		out.dense[reg] = max(out.dense[reg], rank)
		return out
	}
	if l != nil {
		out.sparse = make([]uint32, 0, len(l.sparse)+1)
		for _, e := range l.sparse {
			if e>>8 == reg {
				rank = max(rank, uint8(e))
				continue
			}
			out.sparse = append(out.sparse, e)
		}
	}
	out.sparse = append(out.sparse, reg<<8|uint32(rank))
	if len(out.sparse) > hllSparseMax {
		out.dense = make([]uint8, hllRegisters)
		for _, e := range out.sparse {
			out.dense[e>>8] = uint8(e)
		}
		out.sparse = nil
	}
	return out
}

// mergeInto raises each register of regs to l's.
func (l *sketch) mergeInto(regs *[hllRegisters]uint8) {
	if l.dense != nil {
		for i, r := range l.dense {
			regs[i] = max(regs[i], r)
		}
		return
	}
	for _, e := range l.sparse {
		regs[e>>8] = max(regs[e>>8], uint8(e))
	}
}

// distinctEval is what a Distinct op found: its window number, the live
// slots' estimate, and the oldest and newest live windows (-1: none).
type distinctEval struct {
	w, count, oldest, newest int64
}

// evaluateDistinct evaluates a Distinct op on its entry e (found or not)
// at now; the shard of its Except key, if it has one, must be locked too.
func (s *Store) evaluateDistinct(op *store.Op, l store.Distinct, ev *eval, e entry, found bool, now int64) {
	step := micros(l.Step)
	d := distinctEval{w: now / step, oldest: -1, newest: -1}
	var regs [hllRegisters]uint8
	if found && e.dist.merge(&regs, &d) {
		d.count = s.countExcept(op, &regs, d.w, now)
	}
	ev.cur, ev.ok = d.count, d.count <= l.Max
	ev.dist = d
}

// merge raises regs to the registers of st's live slots in the window
// ending with d.w, keeping the oldest and newest of them in d, and reports
// whether any slot was live. A nil st has none.
func (st *distinctState) merge(regs *[hllRegisters]uint8, d *distinctEval) bool {
	if st == nil {
		return false
	}
	live := false
	for j, w := range st.window {
		if l := st.slots[j]; l != nil && w > d.w-store.DistinctSlots && w <= d.w {
			l.mergeInto(regs)
			live = true
			if d.oldest < 0 || w < d.oldest {
				d.oldest = w
			}
			d.newest = max(d.newest, w)
		}
	}
	return live
}

// countExcept estimates the members of regs, the live registers of op's key
// in window w, that are not in the window of op's Except key:
// |own ∪ except| − |except|, never below 0 (store's distinct.go).
func (s *Store) countExcept(op *store.Op, regs *[hllRegisters]uint8, w, now int64) int64 {
	own := hll.Estimate(regs[:])
	if op.Except == "" {
		return own
	}
	sh := &s.shards[s.shardOf(op.Except)]
	e, found := sh.m[op.Except]
	if !found || e.exp <= now {
		return own
	}
	var except [hllRegisters]uint8
	if !e.dist.merge(&except, &distinctEval{w: w, oldest: -1, newest: -1}) {
		return own
	}
	left := hll.Estimate(except[:])
	for i, r := range except {
		regs[i] = max(regs[i], r)
	}
	return max(hll.Estimate(regs[:])-left, 0)
}

// addDistinct applies an Add: st.Member joins the current sub-window of
// the Distinct key st.Key, whose Step is st.Span, as a spend of a Distinct
// op would add it. A new key takes a slot like any new key (upsert).
func (s *Store) addDistinct(st *store.Settlement) {
	op := store.Op{Key: st.Key, Member: st.Member, Cost: 1}
	l := store.Distinct{Step: st.Span, Max: 1}
	s.upsert(st.Key, func(e entry, found bool, now int64) entry {
		var ev eval
		s.evaluateDistinct(&op, l, &ev, e, found, now)
		return s.spendDistinct(&op, l, &ev, e)
	})
}

// spendDistinct adds op's member to the current slot of e's state; l is
// op's limit.
func (s *Store) spendDistinct(op *store.Op, l store.Distinct, ev *eval, e entry) entry {
	step := micros(l.Step)
	next := &distinctState{}
	if e.dist != nil {
		*next = *e.dist
	}
	slot := ev.dist.w % store.DistinctSlots
	if next.window[slot] != ev.dist.w {
		next.window[slot], next.slots[slot] = ev.dist.w, nil
	}
	// A fixed hash: members are keyed hashes already, and an estimate that
	// depends on its members alone is the same in every process, so a
	// replay of the same events counts the same (and Redis's PFADD hashes
	// with a fixed seed too).
	next.slots[slot] = next.slots[slot].add(hll.Hash(op.Member))
	newest := max(ev.dist.newest, ev.dist.w)
	return entry{exp: (newest + store.DistinctSlots) * step, dist: next}
}

// fillDistinct writes what a Distinct op held to l found into r.
func fillDistinct(l store.Distinct, ev *eval, r *store.Result, now int64) {
	step := micros(l.Step)
	d := ev.dist
	newest := d.newest
	if ev.spent {
		newest = max(newest, d.w)
	}
	*r = store.Result{Allowed: ev.ok, Spent: ev.spent, Remaining: max(l.Max-d.count, 0), Count: d.count}
	if newest >= 0 {
		r.ResetAfter = duration((newest+store.DistinctSlots)*step - now)
	}
	if !ev.ok && d.oldest >= 0 {
		r.RetryAfter = duration((d.oldest+store.DistinctSlots)*step - now)
	}
}
