// Package memstore is guardian's embedded security store: limit state kept in
// process memory, correct for one instance. It is also the local fallback of
// a fleet whose Redis is failing, so it is bounded: Config.MaxKeys entries at
// most. A full store makes room by evicting, never by refusing: a flood of
// new keys pushes out what holds least, and the users who come after it are
// decided as on an empty store.
//
// The arithmetic, which the Redis store mirrors exactly (both pass the
// conformance suite in package storetest), is in integer microseconds: now is
// the clock's Unix time rounded down to whole µs, T is Interval rounded up to
// whole µs, and spans saturate at 2^62 µs.
//
// A Rate key holds its theoretical arrival time TAT (absent: now), with
// tolerance τ = T×Burst:
//
//	newTAT     = max(TAT, now) + Cost×T; the op fits iff newTAT − now ≤ τ
//	RetryAfter = newTAT − now − τ when it does not fit, else 0
//	Remaining  = clamp(floor((now + τ − max(TAT', now)) / T), 0, Burst)
//	ResetAfter = max(TAT' − now, 0), which is also the key's time to live
//
// where TAT' is newTAT when the op was spent and TAT otherwise. A GiveBack
// moves TAT back by its Span, rounded up to whole µs as T is (so that it
// gives back exactly what a spend of one unit took, and never more than
// the spend of Cost units: ⌈Cost×T⌉ ≤ Cost×⌈T⌉), and removes the key once
// TAT ≤ now.
//
// A Counter key holds a count C (absent: 0) and a deadline D: the op fits
// iff C + Cost ≤ Max; a spend adds Cost and keeps the key until max(D,
// now + Hold), Hold rounded up to whole µs. Remaining is max(Max − C', 0)
// and Count is C', the count after the call; ResetAfter is the key's time to
// live, 0 when absent; RetryAfter is 0. A Reset removes the key; a Confirm
// keeps the count and makes D max(D, now + store.ConfirmedHold(Span, Max,
// C)). A spend with a Member attributes its Cost to it, and a Lift takes a
// member's units off C (store's attribute.go).
//
// Cost 0 evaluates and never spends, refreshes or adds a key.
//
// A Guesses key holds up to Max guesses, oldest first, each with the
// instant it is forgotten; the key expires with its most recent one. The op
// always fits; it finds whether its Guess is remembered (Repeat), and how
// many are (Count). When the batch is spent, the guess becomes the most
// recent, remembered for Hold, and the oldest beyond Max is forgotten.
// When it finds its guess, the batch's FreeOnRepeat ops are evaluated and
// not spent. A Forget of a Guesses key removes it; a Confirm keeps its
// Guess until now + Span at least.
//
// A Distinct key holds sub-windows, each a HyperLogLog of its members and
// when it ends (distinct.go and the store's distinct.go); the key expires
// with the last of them, so state that only unreported checks left goes
// Hold after the last of them, and a ConfirmDistinct keeps it until its
// sub-windows leave the window.
//
// Eviction. When a key must be added and the store is full, the store evicts
// one entry per key among a sample (evictSample entries from each of
// evictShards shards, like Redis's volatile-ttl). Entries come in three
// ranks: ordinary entries, MarkOnce marks, and hard stops (a Counter at its
// Limit). Eviction takes an expired entry first; then an ordinary entry,
// the one that expires soonest; then, while no ordinary entry is left, a
// mark, the one that expires soonest, whatever the new key is; and never a
// hard stop before it expires. Since guardian's unconfirmed state is
// short-lived and confirmed state long-lived (a count is held longer the
// higher it is), the soonest to expire is the least confirmed. So a flood of
// marks (one per reported attempt) cannot lock out the users who come after
// it: only a store that holds nothing but hard stops denies an op on a new
// key: Allowed is false, nothing is spent, RetryAfter and ResetAfter are the
// op's Interval for a Rate and one second for a Counter.
// A mark evicted before its time no longer refuses a second MarkOnce of its
// key.
package memstore

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

const (
	// defaultMaxKeys is Config.MaxKeys when it is not set.
	defaultMaxKeys = 1_000_000
	// defaultShards is Config.Shards when it is not set.
	defaultShards = 64
	// maxShards caps Config.Shards.
	maxShards = 1 << 16
	// smallBatch is the batch size Do handles without allocating.
	smallBatch = 8
	// sweepSample is how many entries an insert looks at for expiry, so that
	// expired entries leave a busy shard without a full sweep.
	sweepSample = 2
	// fullCounterRetry is the RetryAfter of a Counter op on a new key while
	// the store holds nothing it may evict.
	fullCounterRetry = time.Second
)

// Config configures a Store. The zero value is ready to use.
type Config struct {
	// Now is the store's clock. Nil means time.Now.
	Now func() time.Time
	// MaxKeys bounds how many keys the store holds, across all shards.
	// Zero or less means 1,000,000. A new key beyond it evicts an entry
	// (see the package comment).
	MaxKeys int
	// Shards is how many independently locked parts the keys are spread
	// over, rounded up to a power of two. Zero or less means 64; at most
	// 65,536.
	Shards int
}

// Store is guardian's embedded security store. It implements store.Store:
// every batch is evaluated at one instant of its clock, and is atomic with
// respect to every other call touching the same keys. Keys are spread over
// shards, each with its own lock; a batch locks the shards it touches in
// ascending order. Every entry expires when its state is back to full (a
// Rate), at its deadline (a Counter) or after its ttl (MarkOnce); expired
// entries are removed when next touched, a few at a time as keys are added,
// when eviction meets them, and all at once by Sweep. A Store is safe for
// concurrent use; create one with New.
type Store struct {
	now    func() time.Time
	max    int64
	seed   maphash.Seed
	mask   uint64
	shards []shard
	// lists holds the Lists sets (lists.go), apart from the keys.
	lists listSets

	// n counts entries and slots taken for entries about to be added; marks
	// and stops count the entries ranked marked and hardStop (evict.go);
	// cursor is the shard eviction looks at next. They change as keys come
	// and go, so they have a cache line of their own, away from the fields
	// every call reads.
	_      [64]byte
	n      atomic.Int64
	marks  atomic.Int64
	stops  atomic.Int64
	cursor atomic.Uint64
	_      [32]byte
}

var _ store.Store = (*Store)(nil)

// shard is one independently locked part of the keys, padded to its own
// cache line.
type shard struct {
	mu sync.Mutex
	m  map[string]entry
	// minExp is at most the expiry of every entry: until it passes, a
	// sweep would find nothing.
	minExp int64
	// marks and stops count the entries of m ranked marked and hardStop.
	marks, stops int64
	_            [24]byte
}

// entry is the state of one key: a Rate's theoretical arrival time, a
// Counter's count, or nothing for MarkOnce; exp is the instant (Unix µs) from
// which it counts as absent. rank is how much it holds against eviction
// (evict.go), kind which limit's state it is. A Guesses key holds its
// memory instead (guesses.go).
type entry struct {
	v    int64
	exp  int64
	rank rank
	kind kind
	// mem is a Guesses key's memory, fam a Familiar key's list
	// (familiar.go), dist a Distinct key's sub-windows (distinct.go); nil
	// for other keys.
	mem  *memory
	fam  *famList
	dist *distinctState
	// attr is a Counter key's attributed units (attribute.go), nil for
	// none.
	attr *attribution
}

// kind is which of the limits a rule's key may hold an entry is the state
// of. A rule that changed type under the same name finds its key holding
// another kind's state: an op reads it as absent and a spend replaces it,
// and a settlement, which settles by the rule its check was decided by,
// leaves it alone.
type kind uint8

const (
	// otherKind is every entry that is not a rule's: marks, guesses and
	// familiar lists, whose keys are their own.
	otherKind kind = iota
	rateKind
	counterKind
	distinctKind
)

// kindOf is the kind of entry an op held to l reads and writes.
func kindOf(l store.Limit) kind {
	switch l.(type) {
	case store.Rate:
		return rateKind
	case store.Counter:
		return counterKind
	case store.Distinct:
		return distinctKind
	}
	return otherKind
}

// settles reports whether st applies to e, a live entry: one that holds
// another kind's state than st settles is left alone. A Forget removes
// whatever its key holds. (An Add reaches it from addDistinct.)
func settles(st *store.Settlement, e entry) bool {
	switch {
	case st.Action == store.GiveBack:
		return e.kind == rateKind
	case st.Action == store.Confirm && st.Guess == 0, st.Action == store.Lift, st.Action == store.Reset:
		return e.kind == counterKind
	case st.Action == store.ConfirmDistinct, st.Action == store.Add:
		return e.kind == distinctKind
	}
	return true
}

// New returns an empty Store configured by cfg.
func New(cfg Config) *Store {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	maxKeys := cfg.MaxKeys
	if maxKeys <= 0 {
		maxKeys = defaultMaxKeys
	}
	n := shardCount(cfg.Shards)
	s := &Store{
		now:    now,
		max:    int64(maxKeys),
		seed:   maphash.MakeSeed(),
		mask:   uint64(n - 1),
		shards: make([]shard, n),
	}
	for i := range s.shards {
		s.shards[i].m = make(map[string]entry)
		s.shards[i].minExp = math.MaxInt64
	}
	return s
}

// shardCount rounds a configured shard count to the power of two in use.
func shardCount(n int) int {
	if n <= 0 {
		return defaultShards
	}
	if n > maxShards {
		return maxShards
	}
	c := 1
	for c < n {
		c <<= 1
	}
	return c
}

// Len reports how many entries the store holds, expired ones not yet removed
// included.
func (s *Store) Len() int {
	return int(s.n.Load())
}

// Sweep removes every expired entry now.
func (s *Store) Sweep() {
	now := s.now().UnixMicro()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		s.sweep(sh, now)
		sh.mu.Unlock()
	}
}

// eval is what Do learned about one op while its shards are locked.
type eval struct {
	shard uint32
	// live reports that the key was found unexpired.
	live bool
	// ok reports that the op fits on its own.
	ok bool
	// full reports that the op needed a new key and the store had no room.
	full  bool
	spent bool
	// cur and curExp are the state as found: a TAT (now when absent) or a
	// count (0 when absent), and for a Counter its expiry (now when absent).
	cur, curExp int64
	// next is the state if the op is spent.
	next int64
	// retry is the GCRA retry span in µs when the op does not fit.
	retry int64
	// mem is what a Guesses op found, and after a spend what it left;
	// repeat reports that it found its guess, free (capped: found, but the
	// allowance of free repeats was spent). waived marks a FreeOnRepeat op
	// of a batch whose guess is a free repeat, or the allowance of a batch
	// whose guess is not: evaluated, never spent.
	mem                    *memory
	repeat, waived, capped bool
	// skip reports a conditional op that does not count (familiar.go).
	skip bool
	// dist is what a Distinct op found (distinct.go).
	dist distinctEval
	// found is the entry found, for a Distinct or a Counter op's spend.
	found entry
}

// needsKey reports whether spending the op would add a key.
func (ev *eval) needsKey(op *store.Op) bool {
	return ev.ok && !ev.live && op.Cost > 0 && !ev.waived && !ev.skip
}

// Do evaluates ops at one instant and fills res: the enforced ops are spent
// only if all of them fit, and each shadow op is spent if it fits on its own.
// See store.Store.
func (s *Store) Do(ctx context.Context, ops []store.Op, res []store.Result) error {
	return s.run(ctx, ops, res, true)
}

// Peek evaluates ops like Do and spends nothing; it adds no key.
func (s *Store) Peek(ctx context.Context, ops []store.Op, res []store.Result) error {
	return s.run(ctx, ops, res, false)
}

// roomTries is how many times a batch that needs new keys in a full store
// lets go of its shards to evict and evaluates again.
const roomTries = 3

// run is Do when spend is true, Peek otherwise. A batch that needs room the
// store lacks unlocks its shards, evicts (see evict) and is evaluated again,
// with the slots it freed set aside for it.
func (s *Store) run(ctx context.Context, ops []store.Op, res []store.Result, spend bool) error {
	if err := store.Validate(ops, res); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}

	var evBuf [smallBatch]eval
	var setBuf [smallBatch]uint32
	evs, set := evBuf[:0], setBuf[:0]
	if len(ops) > smallBatch {
		evs, set = make([]eval, 0, len(ops)), make([]uint32, 0, len(ops))
	}
	evs = evs[:len(ops)]
	for i := range ops {
		evs[i].shard = s.shardOf(ops[i].Key)
		set = addShard(set, evs[i].shard)
		if ops[i].Except != "" {
			// Read, never written, by the op (distinct.go).
			set = addShard(set, s.shardOf(ops[i].Except))
		}
	}

	var held int64 // slots taken for this batch's new keys
	for try := 0; ; try++ {
		for _, i := range set {
			s.shards[i].mu.Lock()
		}
		now := s.now().UnixMicro()
		allOK, tollsOK, need := s.evaluateAll(ops, evs, now, spend)
		if held < need {
			held += s.take(need - held)
		}
		if held < need && try < roomTries {
			s.unlock(set)
			// A check never evicts a live hard stop, not even with a hard
			// stop of its own: a table of hard stops alone keeps them all.
			held += s.makeRoom(need-held, now)
			continue
		}
		if held < need {
			// Nothing left to evict: every op that needs a new key is
			// denied, and so the batch.
			allOK, tollsOK = denyNew(ops, evs)
			need = 0
		}
		s.n.Add(need - held)
		for i := range ops {
			op, ev := &ops[i], &evs[i]
			if spend && ev.ok && !ev.skip && !ev.waived && op.Cost > 0 && (op.Role == store.Shadow || op.Role == store.Toll && tollsOK || allOK) {
				s.spend(op, ev, now)
			}
			fill(op, ev, &res[i], now)
		}
		s.unlock(set)
		return nil
	}
}

// evaluateAll evaluates every op at now, and reports whether the enforced
// ops fit together, whether the Toll ops do, and how many new keys spending
// the batch adds (none when spend is false).
func (s *Store) evaluateAll(ops []store.Op, evs []eval, now int64, spend bool) (allOK, tollsOK bool, need int64) {
	allOK, tollsOK = true, true
	var enforcedNew, shadowNew, tollNew int64
	familiar := s.evaluateFamiliar(ops, evs, now)
	for i := range ops {
		op, ev := &ops[i], &evs[i]
		if isFamiliar(op) {
			continue
		}
		*ev = eval{shard: ev.shard}
		if !op.When.Counts(familiar) {
			ev.ok, ev.skip = true, true
			continue
		}
		s.evaluate(op, ev, now)
	}
	waive(ops, evs)
	for i := range ops {
		op, ev := &ops[i], &evs[i]
		if isFamiliar(op) || ev.skip {
			continue
		}
		switch {
		case op.Role == store.Shadow:
			if ev.needsKey(op) {
				shadowNew++
			}
		case op.Role == store.Toll:
			tollsOK = tollsOK && ev.ok
			allOK = allOK && ev.ok
			if ev.needsKey(op) {
				tollNew++
			}
		case !ev.ok:
			// A soft op that does not fit is left alone; it never denies.
			allOK = allOK && op.Role == store.Soft
		case ev.needsKey(op):
			enforcedNew++
		}
	}
	switch {
	case !spend:
		return allOK, tollsOK, 0
	case allOK:
		return allOK, tollsOK, enforcedNew + tollNew + shadowNew
	case tollsOK:
		return allOK, tollsOK, tollNew + shadowNew
	}
	return allOK, tollsOK, shadowNew
}

// denyNew marks every op that needs a new key as met by a full store, and
// reports whether the enforced ops, and the Toll ops, still fit together.
func denyNew(ops []store.Op, evs []eval) (allOK, tollsOK bool) {
	allOK, tollsOK = true, true
	for i := range ops {
		op, ev := &ops[i], &evs[i]
		if ev.needsKey(op) {
			ev.ok, ev.full = false, true
		}
		if _, guesses := op.Limit.(store.Guesses); !ev.ok && op.Role.Denies() && !guesses {
			allOK = false
			tollsOK = tollsOK && op.Role != store.Toll
		}
	}
	return allOK, tollsOK
}

// unlock releases the shards of set, in reverse order.
func (s *Store) unlock(set []uint32) {
	for j := len(set) - 1; j >= 0; j-- {
		s.shards[set[j]].mu.Unlock()
	}
}

// evaluate reads op's key, removing it if it has expired, and decides
// whether op fits. The key's shard must be locked.
func (s *Store) evaluate(op *store.Op, ev *eval, now int64) {
	sh := &s.shards[ev.shard]
	e, found := sh.m[op.Key]
	if found && e.exp <= now {
		s.remove(sh, op.Key, e)
		found = false
	}
	// live stays set for a key of another kind's state, read as absent:
	// the spend that replaces it takes no new room.
	ev.live = found
	if k := kindOf(op.Limit); found && k != otherKind && e.kind != k {
		e, found = entry{}, false
	}
	switch l := op.Limit.(type) {
	case store.Distinct:
		ev.found = e
		s.evaluateDistinct(op, l, ev, e, found, now)
	case store.Rate:
		ev.cur = now
		if found {
			ev.cur = e.v
		}
		ev.next, ev.ok, ev.retry = gcra(ev.cur, now, micros(l.Interval), l.Burst, op.Cost)
	case store.Counter:
		ev.cur, ev.curExp, ev.found = 0, now, e
		if found {
			ev.cur, ev.curExp = e.v, e.exp
		}
		ev.next, ev.ok = count(ev.cur, l.Max, op.Cost)
	case store.Guesses:
		evaluateGuesses(op, ev, e, found, now)
	}
}

// isFamiliar reports whether op reads a familiar list.
func isFamiliar(op *store.Op) bool {
	_, ok := op.Limit.(store.Familiar)
	return ok
}

// counterExp is the deadline a spend of a Counter held to l leaves: its
// Hold from now, or the deadline the key already had if that is later.
func counterExp(l store.Counter, ev *eval, now int64) int64 {
	return max(ev.curExp, now+min(micros(l.Hold), maxSpan))
}

// spend writes op's new state. Room for a new key must have been taken.
func (s *Store) spend(op *store.Op, ev *eval, now int64) {
	e := entry{v: ev.next, exp: ev.next, kind: kindOf(op.Limit)}
	switch l := op.Limit.(type) {
	case store.Counter:
		e.exp = counterExp(l, ev, now)
		e.rank = counterRank(ev.next, l.Max)
		e.attr = attributeSpend(op, ev)
	case store.Guesses:
		e = spendGuesses(op, l, ev, now)
	case store.Distinct:
		e = s.spendDistinct(op, l, ev, ev.found)
	}
	sh := &s.shards[ev.shard]
	s.set(sh, op.Key, e)
	ev.spent = true
	if !ev.live {
		s.sweepSome(sh, now)
	}
}

// fill writes what op found, and left behind, into r.
func fill(op *store.Op, ev *eval, r *store.Result, now int64) {
	if ev.skip {
		*r = store.Result{Allowed: true}
		return
	}
	switch l := op.Limit.(type) {
	case store.Familiar:
		*r = store.Result{Allowed: ev.ok, ResetAfter: duration(max(ev.curExp-now, 0)), Count: ev.cur}
	case store.Distinct:
		if ev.full {
			*r = store.Result{RetryAfter: l.Step, ResetAfter: l.Step}
			return
		}
		fillDistinct(l, ev, r, now)
	case store.Rate:
		if ev.full {
			*r = store.Result{RetryAfter: l.Interval, ResetAfter: l.Interval}
			return
		}
		tat := ev.cur
		if ev.spent {
			tat = ev.next
		}
		remaining, reset := gcraLeft(tat, now, micros(l.Interval), l.Burst)
		*r = store.Result{
			Allowed:    ev.ok,
			Spent:      ev.spent,
			Remaining:  remaining,
			ResetAfter: duration(reset),
		}
		if !ev.ok {
			r.RetryAfter = duration(ev.retry)
		}
	case store.Counter:
		if ev.full {
			*r = store.Result{RetryAfter: fullCounterRetry, ResetAfter: fullCounterRetry}
			return
		}
		c, exp := ev.cur, ev.curExp
		if ev.spent {
			c, exp = ev.next, counterExp(l, ev, now)
		}
		*r = store.Result{
			Allowed:    ev.ok,
			Spent:      ev.spent,
			Remaining:  max(l.Max-c, 0),
			ResetAfter: duration(max(exp-now, 0)),
			Count:      c,
		}
	case store.Guesses:
		fillGuesses(ev, r, now)
	}
}

// set stores e under key in sh, which must be locked. A new key's slot must
// have been taken.
func (s *Store) set(sh *shard, key string, e entry) {
	if old, found := sh.m[key]; found {
		s.count(sh, old.rank, -1)
	}
	s.count(sh, e.rank, 1)
	sh.m[key] = e
	sh.minExp = min(sh.minExp, e.exp)
}

// remove deletes key, whose entry is e, from sh, which must be locked, and
// frees its slot.
func (s *Store) remove(sh *shard, key string, e entry) {
	s.drop(sh, key, e)
	s.n.Add(-1)
}

// drop deletes key, whose entry is e, from sh, which must be locked, and
// keeps its slot taken: the caller frees it or fills it.
func (s *Store) drop(sh *shard, key string, e entry) {
	delete(sh.m, key)
	s.count(sh, e.rank, -1)
}

// take takes up to n slots under the bound and reports how many it took.
func (s *Store) take(n int64) int64 {
	for {
		used := s.n.Load()
		free := s.max - used
		if free <= 0 {
			return 0
		}
		got := min(n, free)
		if s.n.CompareAndSwap(used, used+got) {
			return got
		}
	}
}

// sweep removes every expired entry of sh, which must be locked, and reports
// how many it removed.
func (s *Store) sweep(sh *shard, now int64) int64 {
	if now < sh.minExp {
		return 0
	}
	var removed int64
	next := int64(math.MaxInt64)
	for k, e := range sh.m {
		if e.exp <= now {
			s.remove(sh, k, e)
			removed++
			continue
		}
		next = min(next, e.exp)
	}
	sh.minExp = next
	return removed
}

// sweepSome looks at a few entries of sh, which must be locked, and removes
// those that have expired.
func (s *Store) sweepSome(sh *shard, now int64) {
	seen := 0
	for k, e := range sh.m {
		if e.exp <= now {
			s.remove(sh, k, e)
		}
		if seen++; seen == sweepSample {
			return
		}
	}
}

// shardOf returns the index of key's shard.
func (s *Store) shardOf(key string) uint32 {
	return uint32(maphash.String(s.seed, key) & s.mask)
}

// addShard inserts i into the ascending set, once.
func addShard(set []uint32, i uint32) []uint32 {
	j := len(set)
	for j > 0 && set[j-1] > i {
		j--
	}
	if j > 0 && set[j-1] == i {
		return set
	}
	set = append(set, 0)
	copy(set[j+1:], set[j:])
	set[j] = i
	return set
}

// Settle applies settlements: a GiveBack moves a Rate key's arrival time
// back by its Span (rounded up to whole µs), removing the key once that
// makes it full; a Reset or a Forget removes its key; a Confirm keeps a
// Counter until at least Span from now, or a Guesses key's Guess until then;
// a Lift takes a member's units off a Counter (attribute.go);
// a Learn puts its member on a familiar list (familiar.go); an Add puts its
// member in a Distinct key, and a ConfirmDistinct keeps one's sub-windows
// until they leave the window (distinct.go). Absent keys are
// left alone, but for a Learn. A settlement store.ValidateSettlements
// refuses is store.ErrBadBatch, and then none is applied.
func (s *Store) Settle(ctx context.Context, settlements []store.Settlement) error {
	if err := store.ValidateSettlements(settlements); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	for i := range settlements {
		s.settle(&settlements[i])
	}
	return nil
}

// settle applies one settlement.
func (s *Store) settle(st *store.Settlement) {
	switch st.Action {
	case store.Learn:
		s.addFamiliar(st)
		return
	case store.Add:
		s.addDistinct(st)
		return
	}
	sh := &s.shards[s.shardOf(st.Key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.now().UnixMicro()
	e, found := sh.m[st.Key]
	if !found {
		return
	}
	if e.exp > now {
		if !settles(st, e) {
			return
		}
		switch {
		case st.Action == store.Confirm && st.Guess != 0:
			s.confirmGuess(sh, st, e, now)
			return
		case st.Action == store.GiveBack:
			tat := e.v - min(micros(st.Span), maxSpan)
			if tat > now {
				s.set(sh, st.Key, entry{v: tat, exp: tat, kind: rateKind})
				return
			}
		case st.Action == store.Confirm:
			hold := store.ConfirmedHold(st.Span, st.Max, e.v)
			e.exp = max(e.exp, now+min(micros(hold), maxSpan))
			s.set(sh, st.Key, e)
			return
		case st.Action == store.Lift:
			s.lift(sh, st, e)
			return
		case st.Action == store.ConfirmDistinct:
			s.confirmDistinct(sh, st, e, now)
			return
		}
	}
	s.remove(sh, st.Key, e)
}

// Delete removes keys; absent keys are ignored.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	for _, k := range keys {
		sh := &s.shards[s.shardOf(k)]
		sh.mu.Lock()
		if e, found := sh.m[k]; found {
			s.remove(sh, k, e)
		}
		sh.mu.Unlock()
	}
	return nil
}

// MarkOnce sets key for ttl if it is not set, reports whether this call set
// it and, when it did, applies settlements. A full store makes room for a
// mark as for any new key: it evicts an ordinary entry, or while none is
// left the mark that expires soonest, never a hard stop. Only a store that
// holds nothing but hard stops sets nothing; it applies settlements all the
// same and is store.ErrFull. An empty key, a ttl that is not positive or a
// bad settlement is store.ErrBadBatch.
func (s *Store) MarkOnce(ctx context.Context, key string, ttl time.Duration, settlements ...store.Settlement) (bool, error) {
	if key == "" || ttl <= 0 {
		return false, fmt.Errorf("memstore: mark once: %w", store.ErrBadBatch)
	}
	if err := store.ValidateSettlements(settlements); err != nil {
		return false, fmt.Errorf("memstore: mark once: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("memstore: %w", err)
	}
	first, err := s.mark(key, ttl)
	if first || errors.Is(err, store.ErrFull) {
		for i := range settlements {
			s.settle(&settlements[i])
		}
	}
	return first, err
}

// mark sets key for ttl if it is not set, and reports whether it did.
func (s *Store) mark(key string, ttl time.Duration) (bool, error) {
	sh := &s.shards[s.shardOf(key)]
	var held int64
	for try := 0; ; try++ {
		sh.mu.Lock()
		now := s.now().UnixMicro()
		e, found := sh.m[key]
		if found && e.exp > now {
			sh.mu.Unlock()
			s.n.Add(-held)
			return false, nil
		}
		if !found && held == 0 {
			held = s.take(1)
		}
		if !found && held == 0 {
			sh.mu.Unlock()
			if try == roomTries {
				return false, fmt.Errorf("memstore: mark once: %w", store.ErrFull)
			}
			held = s.makeRoom(1, now)
			continue
		}
		if found {
			s.n.Add(-held) // the expired mark's slot is reused
		}
		s.set(sh, key, entry{exp: now + min(micros(ttl), maxSpan), rank: marked})
		if !found {
			s.sweepSome(sh, now)
		}
		sh.mu.Unlock()
		return true, nil
	}
}
