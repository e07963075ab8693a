package memstore

import (
	"github.com/guardian-sec/guardian/internal/hll"
	"github.com/guardian-sec/guardian/internal/store"
)

// A Distinct key's state (store.Distinct): its sub-windows, each a
// HyperLogLog of 2^hllBits registers. A register array starts sparse, a
// list of the registers set, and becomes dense past hllSparseMax of them,
// so a key that saw few members holds a few bytes per member, and at most
// DistinctSlots × 16 KB. 2^14 registers are Redis's: a count that is the
// difference of two estimates (Except) errs as little as on Redis.
const (
	hllBits      = 14
	hllRegisters = 1 << hllBits
	hllSparseMax = hllRegisters / 16
)

// distinctState is a Distinct key's sub-windows. Like a famList it is
// replaced, never changed in place, once stored.
type distinctState struct {
	// window is the window number each slot holds, slot window%DistinctSlots.
	window [store.DistinctSlots]int64
	// end is when each slot ends (Unix µs): when its window leaves, or
	// sooner while only unconfirmed spends added to it (store's
	// distinct.go).
	end   [store.DistinctSlots]int64
	slots [store.DistinctSlots]*sketch
}

// sketch is one sub-window's HyperLogLog registers: sparse entries
// (register<<8 | rank) until dense is set.
type sketch struct {
	sparse []uint32
	dense  []uint8
}

// add returns a copy of l (nil: empty) with the register of hash h raised
// to at least its rank, or l when it is already; l itself is shared and
// never changed.
func (l *sketch) add(h uint64) *sketch {
	i, rank := hll.Register(h, hllBits)
	reg := uint32(i)
	if l.has(reg, rank) {
		return l
	}
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

// has reports whether l's register reg is at least rank.
func (l *sketch) has(reg uint32, rank uint8) bool {
	switch {
	case l == nil:
		return false
	case l.dense != nil:
		return l.dense[reg] >= rank
	}
	for _, e := range l.sparse {
		if e>>8 == reg {
			return uint8(e) >= rank
		}
	}
	return false
}

// mergeInto raises each register of u to l's.
func (l *sketch) mergeInto(u *hll.Union) {
	if l.dense != nil {
		u.Merge(l.dense)
		return
	}
	for _, e := range l.sparse {
		u.Raise(uint64(e>>8), uint8(e))
	}
}

// distinctEval is what a Distinct op found at now: its window number w,
// the live slots' estimate, and when the first and the last live slot
// ends (-1: none).
type distinctEval struct {
	now, w, count, first, last int64
}

// newDistinctEval returns the evaluation of a key of sub-windows of step
// at now, before any slot is read.
func newDistinctEval(now, step int64) distinctEval {
	return distinctEval{now: now, w: now / step, first: -1, last: -1}
}

// evaluateDistinct evaluates a Distinct op on its entry e (found or not)
// at now; the shard of its Except key, if it has one, must be locked too.
func (s *Store) evaluateDistinct(op *store.Op, l store.Distinct, ev *eval, e entry, found bool, now int64) {
	d := newDistinctEval(now, micros(l.Step))
	if found && e.dist.ends(&d) {
		var regs [hllRegisters]uint8
		u := hll.NewUnion(regs[:])
		e.dist.merge(&u, &d)
		d.count = s.countExcept(op, &u, d.w, now)
	}
	ev.cur, ev.ok = d.count, d.count <= l.Max
	ev.dist = d
}

// live reports whether slot j of st is in the window ending with w and has
// not ended at now.
func (st *distinctState) live(j int, w, now int64) bool {
	return st.slots[j] != nil && st.window[j] > w-store.DistinctSlots && st.window[j] <= w && st.end[j] > now
}

// ends keeps in d when the first and the last of st's live slots as d sees
// them end, and reports whether any slot is live. A nil st has none.
func (st *distinctState) ends(d *distinctEval) bool {
	if st == nil {
		return false
	}
	live := false
	for j := range st.slots {
		if st.live(j, d.w, d.now) {
			live = true
			if d.first < 0 || st.end[j] < d.first {
				d.first = st.end[j]
			}
			d.last = max(d.last, st.end[j])
		}
	}
	return live
}

// merge raises u to the registers of st's live slots as d sees them.
func (st *distinctState) merge(u *hll.Union, d *distinctEval) {
	for j := range st.slots {
		if st.live(j, d.w, d.now) {
			st.slots[j].mergeInto(u)
		}
	}
}

// countExcept estimates the members of u, the live registers of op's key
// in window w, that are not in the window of op's Except key:
// |own ∪ except| − |except|, never below 0 (store's distinct.go). It
// leaves u the union of both.
func (s *Store) countExcept(op *store.Op, u *hll.Union, w, now int64) int64 {
	if op.Except == "" {
		// Only an Except key's shard is locked (run).
		return u.Estimate()
	}
	e, found := s.shards[s.shardOf(op.Except)].m[op.Except]
	d := distinctEval{now: now, w: w, first: -1, last: -1}
	if !found || e.exp <= now || !e.dist.ends(&d) {
		return u.Estimate()
	}
	var regs [hllRegisters]uint8
	except := hll.NewUnion(regs[:])
	e.dist.merge(&except, &d)
	e.dist.merge(u, &d)
	return max(u.Estimate()-except.Estimate(), 0)
}

// addDistinct applies an Add: st.Member joins the current sub-window of
// the Distinct key st.Key, whose Step is st.Span, as a spend of a Distinct
// op without a Hold would add it, confirmed. A new key takes a slot like
// any new key (upsert).
func (s *Store) addDistinct(st *store.Settlement) {
	op := store.Op{Key: st.Key, Member: st.Member, Cost: 1}
	l := store.Distinct{Step: st.Span, Max: 1}
	s.upsert(st.Key, func(e entry, found bool, now int64) entry {
		if found && !settles(st, e) {
			return e
		}
		// The spend needs the slots' ends, not their count.
		ev := eval{dist: newDistinctEval(now, micros(l.Step))}
		if found {
			e.dist.ends(&ev.dist)
		}
		return s.spendDistinct(&op, l, &ev, e)
	})
}

// spendDistinct adds op's member to the current slot of e's state, making
// the slot end as l's Hold says (store's distinct.go); l is op's limit.
func (s *Store) spendDistinct(op *store.Op, l store.Distinct, ev *eval, e entry) entry {
	d := &ev.dist
	next := &distinctState{}
	if e.dist != nil {
		*next = *e.dist
	}
	slot := d.w % store.DistinctSlots
	end := (d.w + store.DistinctSlots) * micros(l.Step)
	hold := min(micros(l.Hold), maxSpan)
	if hold > 0 {
		end = min(end, d.now+hold)
	}
	switch {
	case !next.live(int(slot), d.w, d.now):
		next.window[slot], next.slots[slot], next.end[slot] = d.w, nil, end
	case end-next.end[slot] > hold/8:
		next.end[slot] = end
	}
	// A fixed hash: members are keyed hashes already, and an estimate that
	// depends on its members alone is the same in every process, so a
	// replay of the same events counts the same (and Redis's PFADD hashes
	// with a fixed seed too).
	next.slots[slot] = next.slots[slot].add(hll.Hash(op.Member))
	d.last = max(d.last, next.end[slot])
	return entry{exp: d.last, dist: next, kind: distinctKind}
}

// confirmDistinct applies a ConfirmDistinct to e, the live entry of a
// Distinct key st.Key in sh, which must be locked: each live slot ends when
// its window leaves.
func (s *Store) confirmDistinct(sh *shard, st *store.Settlement, e entry, now int64) {
	step := micros(st.Span)
	next := *e.dist
	d := newDistinctEval(now, step)
	for j := range next.slots {
		if next.live(j, d.w, now) {
			next.end[j] = max(next.end[j], (next.window[j]+store.DistinctSlots)*step)
			d.last = max(d.last, next.end[j])
		}
	}
	if d.last >= 0 {
		s.set(sh, st.Key, entry{exp: d.last, dist: &next, kind: distinctKind})
	}
}

// fillDistinct writes what a Distinct op held to l found, and its spend
// left, into r.
func fillDistinct(l store.Distinct, ev *eval, r *store.Result, now int64) {
	d := ev.dist
	*r = store.Result{Allowed: ev.ok, Spent: ev.spent, Remaining: max(l.Max-d.count, 0), Count: d.count}
	if d.last >= 0 {
		r.ResetAfter = duration(d.last - now)
	}
	if !ev.ok && d.first >= 0 {
		r.RetryAfter = duration(d.first - now)
	}
}
