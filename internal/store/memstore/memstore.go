// Package memstore is guardian's embedded security store: limit state kept in
// process memory, correct for one instance. It is also the local fallback of
// a fleet whose Redis is failing, so it is bounded: an attacker spraying new
// keys fills it up to Config.MaxKeys and then meets a wall, never an open
// door.
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
// where TAT' is newTAT when the op was spent and TAT otherwise. A Refund
// moves TAT back by Amount, rounded down to whole µs, and removes the key
// once TAT ≤ now.
//
// A Counter key holds a count C (absent: 0): the op fits iff C + Cost ≤
// Limit; a spend adds Cost and keeps the key for Hold from now (rounded up to
// whole µs). Remaining is max(Limit − C', 0) and Count is C', the count after
// the call; ResetAfter is the key's time to live, 0 when absent; RetryAfter
// is 0. A Refund removes the key.
//
// Cost 0 evaluates and never spends, refreshes or adds a key.
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
	// the store is full.
	fullCounterRetry = time.Second
)

// Config configures a Store. The zero value is ready to use.
type Config struct {
	// Now is the store's clock. Nil means time.Now.
	Now func() time.Time
	// MaxKeys bounds how many keys the store holds, across all shards.
	// Zero or less means 1,000,000. When an op needs a new key and the
	// store is full even after removing what has expired, the op is not an
	// error but exhausted: Allowed is false, nothing is spent, RetryAfter
	// and ResetAfter are the op's Interval for a Rate and one second for a
	// Counter, and MarkOnce reports false. Keys the store already holds keep
	// working.
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
// Rate), after its Hold (a Counter) or after its ttl (MarkOnce); expired
// entries are removed when next touched, a few at a time as keys are added,
// and all at once by Sweep. A Store is safe for concurrent use; create one
// with New.
type Store struct {
	now    func() time.Time
	max    int64
	seed   maphash.Seed
	mask   uint64
	shards []shard

	// n counts entries. It changes as keys come and go, so it has a cache
	// line of its own, away from the fields every call reads.
	_ [64]byte
	n atomic.Int64
	_ [56]byte
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
	_      [40]byte
}

// entry is the state of one key: a Rate's theoretical arrival time, a
// Counter's count, or nothing for MarkOnce; exp is the instant (Unix µs) from
// which it counts as absent.
type entry struct {
	v   int64
	exp int64
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
}

// needsKey reports whether spending the op would add a key.
func (ev *eval) needsKey(op *store.Op) bool {
	return ev.ok && !ev.live && op.Cost > 0
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

// run is Do when spend is true, Peek otherwise.
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
	}

	for _, i := range set {
		s.shards[i].mu.Lock()
	}
	defer s.unlock(set)
	now := s.now().UnixMicro()

	allOK, need := true, int64(0)
	for i := range ops {
		op, ev := &ops[i], &evs[i]
		s.evaluate(op, ev, now)
		if op.Shadow {
			continue
		}
		if !ev.ok {
			// A soft op that does not fit is left alone; it never denies.
			allOK = allOK && op.Soft
		} else if ev.needsKey(op) {
			need++
		}
	}

	// Room for the enforced ops' new keys, held only if they will be spent.
	hold := spend && allOK
	if got := s.claim(need, set, now, hold); got < need {
		allOK = false
		if hold {
			s.n.Add(-got)
		}
		for i := range ops {
			op, ev := &ops[i], &evs[i]
			if op.Shadow || !ev.needsKey(op) {
				continue
			}
			if got > 0 {
				got--
				continue
			}
			ev.ok, ev.full = false, true
		}
	}

	for i := range ops {
		op, ev := &ops[i], &evs[i]
		if op.Shadow && ev.needsKey(op) && s.claim(1, set, now, spend) == 0 {
			ev.ok, ev.full = false, true
		}
		if spend && ev.ok && op.Cost > 0 && (op.Shadow || allOK) {
			s.spend(op, ev, now)
		}
		fill(op, ev, &res[i], now)
	}
	return nil
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
		delete(sh.m, op.Key)
		s.n.Add(-1)
		found = false
	}
	ev.live = found
	switch op.Kind {
	case store.Rate:
		ev.cur = now
		if found {
			ev.cur = e.v
		}
		ev.next, ev.ok, ev.retry = gcra(ev.cur, now, micros(op.Interval), op.Burst, op.Cost)
	case store.Counter:
		ev.cur, ev.curExp = 0, now
		if found {
			ev.cur, ev.curExp = e.v, e.exp
		}
		ev.next, ev.ok = count(ev.cur, op.Limit, op.Cost)
	}
}

// spend writes op's new state. Room for a new key must have been claimed.
func (s *Store) spend(op *store.Op, ev *eval, now int64) {
	e := entry{v: ev.next, exp: ev.next}
	if op.Kind == store.Counter {
		e.exp = now + min(micros(op.Hold), maxSpan)
	}
	sh := &s.shards[ev.shard]
	sh.m[op.Key] = e
	sh.minExp = min(sh.minExp, e.exp)
	ev.spent = true
	if !ev.live {
		s.sweepSome(sh, now)
	}
}

// fill writes what op found, and left behind, into r.
func fill(op *store.Op, ev *eval, r *store.Result, now int64) {
	switch op.Kind {
	case store.Rate:
		if ev.full {
			*r = store.Result{RetryAfter: op.Interval, ResetAfter: op.Interval}
			return
		}
		tat := ev.cur
		if ev.spent {
			tat = ev.next
		}
		remaining, reset := gcraLeft(tat, now, micros(op.Interval), op.Burst)
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
			c, exp = ev.next, now+min(micros(op.Hold), maxSpan)
		}
		*r = store.Result{
			Allowed:    ev.ok,
			Spent:      ev.spent,
			Remaining:  max(op.Limit-c, 0),
			ResetAfter: duration(max(exp-now, 0)),
			Count:      c,
		}
	}
}

// claim reports how many of n new keys the store has room for, sweeping
// expired entries if it is short: first in the shards of locked, which the
// caller holds, then in any other shard whose lock is free. If hold is true
// the room found is taken, and the caller must give back what it does not
// use with s.n.Add.
func (s *Store) claim(n int64, locked []uint32, now int64, hold bool) int64 {
	if n == 0 {
		return 0
	}
	got := s.take(n, hold)
	if got == n {
		return n
	}
	short := func() bool {
		if hold {
			got += s.take(n-got, true)
		} else {
			got = s.take(n, false)
		}
		return got < n
	}
	for _, i := range locked {
		s.sweep(&s.shards[i], now)
	}
	if !short() {
		return n
	}
	j := 0
	for i := range s.shards {
		if j < len(locked) && locked[j] == uint32(i) {
			j++
			continue
		}
		sh := &s.shards[i]
		if !sh.mu.TryLock() {
			continue
		}
		swept := s.sweep(sh, now)
		sh.mu.Unlock()
		if swept > 0 && !short() {
			return n
		}
	}
	return got
}

// take reports how many of n new keys fit under the bound, and takes them if
// hold is true.
func (s *Store) take(n int64, hold bool) int64 {
	for {
		used := s.n.Load()
		free := s.max - used
		if free <= 0 {
			return 0
		}
		got := min(n, free)
		if !hold || s.n.CompareAndSwap(used, used+got) {
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
			delete(sh.m, k)
			removed++
			continue
		}
		next = min(next, e.exp)
	}
	sh.minExp = next
	s.n.Add(-removed)
	return removed
}

// sweepSome looks at a few entries of sh, which must be locked, and removes
// those that have expired.
func (s *Store) sweepSome(sh *shard, now int64) {
	seen := 0
	for k, e := range sh.m {
		if e.exp <= now {
			delete(sh.m, k)
			s.n.Add(-1)
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

// Refund applies refunds: a Rate key's arrival time moves back by Amount
// (rounded down to whole µs), and the key is removed once that makes it full;
// a Counter key is removed. Absent keys are left alone. An empty key, an
// unknown kind or a negative amount is store.ErrBadBatch, and then no refund
// is applied.
func (s *Store) Refund(ctx context.Context, refunds []store.Refund) error {
	if err := store.ValidateRefunds(refunds); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	for i := range refunds {
		s.refund(&refunds[i])
	}
	return nil
}

// refund applies one refund.
func (s *Store) refund(r *store.Refund) {
	sh := &s.shards[s.shardOf(r.Key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.now().UnixMicro()
	e, found := sh.m[r.Key]
	if !found {
		return
	}
	if r.Kind == store.Rate && e.exp > now {
		tat := e.v - min(int64(r.Amount/time.Microsecond), maxSpan)
		if tat > now {
			sh.m[r.Key] = entry{v: tat, exp: tat}
			sh.minExp = min(sh.minExp, tat)
			return
		}
	}
	delete(sh.m, r.Key)
	s.n.Add(-1)
}

// Delete removes keys; absent keys are ignored.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memstore: %w", err)
	}
	for _, k := range keys {
		sh := &s.shards[s.shardOf(k)]
		sh.mu.Lock()
		if _, found := sh.m[k]; found {
			delete(sh.m, k)
			s.n.Add(-1)
		}
		sh.mu.Unlock()
	}
	return nil
}

// MarkOnce sets key for ttl if it is not set, reports whether this call set
// it and, when it did, applies refunds. While the store is full it sets
// nothing, applies refunds all the same and is store.ErrFull. An empty key,
// a ttl that is not positive or a bad refund is store.ErrBadBatch.
func (s *Store) MarkOnce(ctx context.Context, key string, ttl time.Duration, refunds ...store.Refund) (bool, error) {
	if key == "" || ttl <= 0 {
		return false, fmt.Errorf("memstore: mark once: %w", store.ErrBadBatch)
	}
	if err := store.ValidateRefunds(refunds); err != nil {
		return false, fmt.Errorf("memstore: mark once: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("memstore: %w", err)
	}
	first, err := s.mark(key, ttl)
	if first || errors.Is(err, store.ErrFull) {
		for i := range refunds {
			s.refund(&refunds[i])
		}
	}
	return first, err
}

// mark sets key for ttl if it is not set, and reports whether it did.
func (s *Store) mark(key string, ttl time.Duration) (bool, error) {
	i := s.shardOf(key)
	sh := &s.shards[i]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.now().UnixMicro()
	e, found := sh.m[key]
	if found && e.exp > now {
		return false, nil
	}
	if !found && s.claim(1, []uint32{i}, now, true) == 0 {
		return false, fmt.Errorf("memstore: mark once: %w", store.ErrFull)
	}
	exp := now + min(micros(ttl), maxSpan)
	sh.m[key] = entry{exp: exp}
	sh.minExp = min(sh.minExp, exp)
	if !found {
		s.sweepSome(sh, now)
	}
	return true, nil
}
