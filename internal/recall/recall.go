// Package recall is an instance's bounded memory of what its store last
// said about keys that were denied: a key the store slowed, and until when,
// and a consecutive-failure count the store found at its limit (a hard
// stop). The fail-closed fallback starts from it when the store stops
// answering, so an outage lifts no hard stop and no wait it saw.
//
// It also answers a check locally (Answer) while the store's own answer
// would deny it: a rate key the store slowed stays slowed until its retry
// time, so a flood against it needs no store call until then. For that,
// each key of a denied check is remembered with the store's whole answer
// for it (allowed keys too), and an answer is given only when every key of
// the check is remembered, one of its hard enforced rate keys is slowed and
// no shadow key and no toll would be spent: the store would spend nothing,
// so not asking it changes nothing there. A check under familiar networks
// is answered only while the answer of its account's familiar list for its
// network is remembered too, and that answer picks which of its buckets
// count, as the store's would. The answer is the store's last one,
// aged to the present by the rate arithmetic (the store said when each key
// refills), never a denial longer than the store gave.
//
// What the store said can stop holding elsewhere in the fleet: a reset
// deletes keys on another instance. Local answers are therefore given only
// while Listening, that is while the fleet's resets are being heard (the
// store publishes them; see package redisstore), and every reset heard,
// every reload and every gap in listening starts a new epoch: what was
// remembered before serves the fallback still, but answers nothing until
// the store is asked again. A success reported on another instance can
// give back to a slowed key early; its remembered slow then lasts at most until
// the retry time the store gave, which is the staleness a local answer may
// have.
//
// A key is remembered from a denial until its time comes or an answer
// allows it again; an entry is never longer than what the store said.
// Keys are the store's, already hashed: nothing in clear is kept.
package recall

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

const (
	// defaultMax is Config.Max when it is not set.
	defaultMax = 100_000
	// shards is how many independently locked parts the keys are spread
	// over.
	shards = 32
	// evictSample is how many entries a full shard looks at to pick the one
	// it forgets.
	evictSample = 8
)

// Denial is what the store last said about a denied key.
type Denial struct {
	// Until is when the denial ends: the retry time of a slowed key, the
	// end of the hold of a hard stop.
	Until time.Time
	// Stop reports a consecutive-failure count at its limit: only a reset
	// lifts it.
	Stop bool
}

// Memory remembers denials. It is safe for concurrent use; build one with
// New. Its size is bounded: when full it forgets first what ends soonest,
// hard stops last.
type Memory struct {
	seed   maphash.Seed
	max    int // per shard
	shards [shards]shard
	// epoch counts invalidations (Invalidate); odd while not Listening.
	epoch atomic.Uint64
}

type shard struct {
	mu sync.Mutex
	m  map[string]entry
}

// entry is one key: a denial, or (seen) a key the store allowed in a
// denied check; with the store's answer for it, at instant at (when the
// call was sent, so that every span measured from it ends no later than
// the store's), in epoch.
type entry struct {
	Denial
	seen  bool
	at    time.Time
	res   store.Result
	epoch uint64
}

// New returns an empty Memory holding at most max keys (100,000 when max is
// zero or less).
func New(max int) *Memory {
	if max <= 0 {
		max = defaultMax
	}
	m := &Memory{seed: maphash.MakeSeed(), max: max/shards + 1}
	for i := range m.shards {
		m.shards[i].m = make(map[string]entry)
	}
	m.epoch.Store(1) // not listening
	return m
}

func (m *Memory) shard(key string) *shard {
	return &m.shards[maphash.String(m.seed, key)%shards]
}

// Observe records what a store answered for ops at instant now: a rate op
// denied is slowed until its RetryAfter, a counter denied at its limit is a
// hard stop for its ResetAfter, and a key the answer allowed is no longer
// denied. Results decided by a fallback (Degraded) are not the store's
// answer and are ignored.
func (m *Memory) Observe(ops []store.Op, res []store.Result, now time.Time) {
	m.ObserveAt(ops, res, now, m.Epoch())
}

// ObserveAt is Observe of a call sent at instant sent, in epoch (Epoch,
// read before the call was sent): when the epoch has moved on since, the
// answer is kept for the fallback but answers nothing locally. The allowed
// keys of a check with a denial are kept too, for Answer.
//
// An op the batch's Familiar op made not count says nothing of its key and
// is left out. The Familiar op's answer is kept per list and member
// (familiarKey), as a key allowed in the check: for as long as the check's
// denial lasts, so that a network made familiar meanwhile elsewhere is
// taken for unfamiliar at worst until the retry time the store gave.
func (m *Memory) ObserveAt(ops []store.Op, res []store.Result, sent time.Time, epoch uint64) {
	var until time.Time
	familiar := store.FamiliarFound(ops, res)
	for i := range ops {
		if !ops[i].When.Counts(familiar) {
			continue
		}
		if d, ok := denial(&ops[i], &res[i], sent); ok && d.Until.After(until) {
			until = d.Until
		}
	}
	for i := range ops {
		op, r := &ops[i], &res[i]
		if r.Degraded || !op.When.Counts(familiar) {
			continue
		}
		key := op.Key
		if _, ok := op.Limit.(store.Familiar); ok {
			key = familiarKey(op)
		}
		e := entry{at: sent, res: *r, epoch: epoch}
		if d, ok := denial(op, r, sent); ok {
			e.Denial = d
			m.put(key, e, sent)
			continue
		}
		m.forget(key)
		if !until.IsZero() {
			e.seen, e.Until = true, until
			m.put(key, e, sent)
		}
	}
}

// isFamiliar reports whether op reads a familiar list.
func isFamiliar(op *store.Op) bool {
	_, ok := op.Limit.(store.Familiar)
	return ok
}

// familiarKey is what a Familiar op's answer is remembered under: its
// list's key and its member, which no store key is (a member never holds
// a zero byte).
func familiarKey(op *store.Op) string { return op.Key + "\x00" + op.Member }

// denial is what the store's answer r for op denies, if anything.
func denial(op *store.Op, r *store.Result, at time.Time) (Denial, bool) {
	if r.Degraded {
		return Denial{}, false
	}
	switch l := op.Limit.(type) {
	case store.Counter:
		if r.RetryAfter == 0 && r.Count >= l.Max && r.ResetAfter > 0 {
			// At its limit, also on the allowed spend that took it there:
			// the hard stop starts with that check.
			return Denial{Until: at.Add(r.ResetAfter), Stop: true}, true
		}
	case store.Rate:
		if !r.Allowed && r.RetryAfter > 0 {
			return Denial{Until: at.Add(r.RetryAfter)}, true
		}
	}
	return Denial{}, false
}

// Epoch is the current epoch, to pass to ObserveAt.
func (m *Memory) Epoch() uint64 { return m.epoch.Load() }

// Listening says whether the fleet's resets are being heard (up) or may be
// missed: local answers are given only while they are. Either way a new
// epoch begins.
func (m *Memory) Listening(up bool) {
	for {
		e := m.epoch.Load()
		next := e + 1
		if (next%2 == 0) != up {
			next++
		}
		if m.epoch.CompareAndSwap(e, next) {
			return
		}
	}
}

// Invalidate begins a new epoch: nothing remembered so far answers a check
// locally (the fallback still starts from it). A reload of the rules and a
// reset heard from the fleet call it.
func (m *Memory) Invalidate() { m.epoch.Add(2) }

// Answer decides ops locally at instant now, as the store last answered
// for their keys, and reports whether it did: only when every op's key is
// remembered in the current epoch while listening, a hard enforced rate op
// does not fit, and no shadow op and no toll would be spent. res is filled
// only when it reports true; nothing is spent, as the store would spend
// nothing.
//
// A batch's Familiar op is answered as remembered for its list and member
// (ObserveAt), and that answer decides which conditional ops count: the
// others are answered allowed alone and need not be remembered. So a check
// that would count in its network's bucket is never answered from the
// account's shared one.
func (m *Memory) Answer(ops []store.Op, res []store.Result, now time.Time) bool {
	epoch := m.epoch.Load()
	if epoch%2 == 1 || len(ops) == 0 || len(res) != len(ops) {
		return false
	}
	familiar := false
	for i := range ops {
		if op := &ops[i]; isFamiliar(op) {
			r, ok := m.recalled(op, familiarKey(op), epoch, now)
			if !ok {
				return false
			}
			familiar, res[i] = r.Allowed, r
		}
	}
	slowed, tollDue, tollsFit := false, false, true
	for i := range ops {
		op := &ops[i]
		switch {
		case isFamiliar(op):
			continue
		case !op.When.Counts(familiar):
			res[i] = store.Result{Allowed: true}
			continue
		}
		r, ok := m.recalled(op, op.Key, epoch, now)
		if !ok || (op.Role == store.Shadow && r.Allowed && op.Cost > 0) {
			return false
		}
		if op.Role == store.Toll {
			tollsFit = tollsFit && r.Allowed
			tollDue = tollDue || r.Allowed && op.Cost > 0
		}
		if _, rate := op.Limit.(store.Rate); rate && !r.Allowed && op.Role.Denies() {
			slowed = true
		}
		res[i] = r
	}
	// The store spends every toll of a denied batch when they all fit.
	return slowed && !(tollDue && tollsFit)
}

// recalled is the store's answer for op, remembered under key in epoch,
// as it stands at now.
func (m *Memory) recalled(op *store.Op, key string, epoch uint64, now time.Time) (store.Result, bool) {
	e, ok := m.lookup(key)
	if !ok || e.epoch != epoch || !now.Before(e.Until) {
		return store.Result{}, false
	}
	return aged(op, &e, now)
}

// aged is the store's answer e for op, as it stands at now: a rate key
// refilled for the time gone by, a counter as it was. It reports false when
// e cannot be aged (a counter that met a full store).
func aged(op *store.Op, e *entry, now time.Time) (store.Result, bool) {
	gone := now.Sub(e.at)
	switch l := op.Limit.(type) {
	case store.Rate:
		// The key's theoretical arrival time, as an offset from now.
		tat := e.res.ResetAfter - gone
		if tat < 0 {
			tat = 0
		}
		tau := l.Interval * time.Duration(l.Burst)
		over := tat + time.Duration(op.Cost)*l.Interval - tau
		r := store.Result{Allowed: over <= 0, ResetAfter: tat}
		if !r.Allowed {
			r.RetryAfter = over
		}
		r.Remaining = min(max(int64((tau-tat)/l.Interval), 0), l.Burst)
		return r, true
	case store.Counter:
		if e.res.RetryAfter > 0 {
			return store.Result{}, false
		}
		r := store.Result{Count: e.res.Count, ResetAfter: max(e.res.ResetAfter-gone, 0)}
		if r.ResetAfter == 0 {
			r.Count = 0
		}
		r.Allowed = r.Count+op.Cost <= l.Max
		r.Remaining = max(l.Max-r.Count, 0)
		return r, true
	case store.Familiar, store.Distinct:
		// As the store said, while what it said still holds: a member
		// stays on its list, a distinct count stays over its limit, until
		// their times.
		r := e.res
		r.ResetAfter = max(r.ResetAfter-gone, 0)
		if r.RetryAfter > 0 {
			if r.RetryAfter <= gone {
				return store.Result{}, false
			}
			r.RetryAfter -= gone
		}
		if isFamiliar(op) && r.Allowed && r.ResetAfter == 0 {
			return store.Result{}, false
		}
		return r, true
	}
	return store.Result{}, false
}

// lookup returns key's entry.
func (m *Memory) lookup(key string) (entry, bool) {
	sh := m.shard(key)
	sh.mu.Lock()
	e, ok := sh.m[key]
	sh.mu.Unlock()
	return e, ok
}

// Denied reports the denial in force for key at now, if there is one.
func (m *Memory) Denied(key string, now time.Time) (Denial, bool) {
	sh := m.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, ok := sh.m[key]
	if !ok || e.seen {
		return Denial{}, false
	}
	if !now.Before(e.Until) {
		delete(sh.m, key)
		return Denial{}, false
	}
	return e.Denial, true
}

// Forget drops keys: their state was reset or given back.
func (m *Memory) Forget(keys ...string) {
	for _, k := range keys {
		m.forget(k)
	}
}

// ForgetUnlessDenied drops key unless what it remembers is a denial of the
// other kind than a settlement that changes it settles: stop says that the
// settlement is a consecutive-failure count's (a Reset, a Lift), whose
// denials are hard stops, rather than a rate's (a give-back), whose are
// slows. So a late report of a rule that changed type under the same name
// does not lift what the new rule's key was last seen denying.
func (m *Memory) ForgetUnlessDenied(key string, stop bool) {
	sh := m.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e, ok := sh.m[key]; ok && !e.Until.IsZero() && e.Stop != stop {
		return
	}
	delete(sh.m, key)
}

// Len reports how many keys are remembered, ended ones not yet dropped
// included.
func (m *Memory) Len() int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// forget drops key.
func (m *Memory) forget(key string) {
	sh := m.shard(key)
	sh.mu.Lock()
	delete(sh.m, key)
	sh.mu.Unlock()
}

// put remembers e for key, making room in a full shard.
func (m *Memory) put(key string, e entry, now time.Time) {
	sh := m.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if old, ok := sh.m[key]; ok && old.Stop && !e.Stop && now.Before(old.Until) {
		// A slow seen on a key known to be stopped: the stop stands.
		return
	}
	if _, ok := sh.m[key]; !ok && len(sh.m) >= m.max && !sh.evict(now, e.Stop) {
		// A shard of hard stops alone keeps them: the newcomer, no stop,
		// gives way.
		return
	}
	sh.m[key] = e
}

// evict drops the entry of a full shard that matters least among a sample:
// an ended entry first, then a key kept only for local answers (seen),
// then the slowed key that ends soonest; a hard stop only for another
// (stop) when the shard holds nothing else. It reports whether it dropped
// one.
func (sh *shard) evict(now time.Time, stop bool) bool {
	var victim, stopped string
	var best entry
	sampled := 0
	for k, e := range sh.m {
		if !now.Before(e.Until) || e.seen {
			delete(sh.m, k)
			return true
		}
		if e.Stop {
			stopped = k
			continue
		}
		if sampled == 0 || e.Until.Before(best.Until) {
			victim, best = k, e
		}
		if sampled++; sampled == evictSample {
			break
		}
	}
	if sampled == 0 {
		if !stop {
			return false
		}
		victim = stopped
	}
	delete(sh.m, victim)
	return true
}
