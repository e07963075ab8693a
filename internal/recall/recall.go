// Package recall is an instance's bounded memory of what its store last
// said about keys that were denied: a key the store slowed, and until when,
// and a consecutive-failure count the store found at its limit (a hard
// stop). The fail-closed fallback starts from it when the store stops
// answering, so an outage lifts no hard stop and no wait it saw; a caller
// may also answer a key it knows is slowed without asking the store.
//
// A key is remembered from a denial until its time comes or an answer
// allows it again; an entry is never longer than what the store said.
// Keys are the store's, already hashed: nothing in clear is kept.
package recall

import (
	"hash/maphash"
	"sync"
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
}

type shard struct {
	mu sync.Mutex
	m  map[string]Denial
}

// New returns an empty Memory holding at most max keys (100,000 when max is
// zero or less).
func New(max int) *Memory {
	if max <= 0 {
		max = defaultMax
	}
	m := &Memory{seed: maphash.MakeSeed(), max: max/shards + 1}
	for i := range m.shards {
		m.shards[i].m = make(map[string]Denial)
	}
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
	for i := range ops {
		op, r := &ops[i], &res[i]
		if r.Degraded {
			continue
		}
		switch {
		case r.Allowed:
			m.forget(op.Key)
		case op.Kind == store.Rate && r.RetryAfter > 0:
			m.put(op.Key, Denial{Until: now.Add(r.RetryAfter)}, now)
		case op.Kind == store.Counter && r.RetryAfter == 0 && r.Count >= op.Limit && r.ResetAfter > 0:
			m.put(op.Key, Denial{Until: now.Add(r.ResetAfter), Stop: true}, now)
		}
	}
}

// Denied reports the denial in force for key at now, if there is one.
func (m *Memory) Denied(key string, now time.Time) (Denial, bool) {
	sh := m.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	d, ok := sh.m[key]
	if !ok {
		return Denial{}, false
	}
	if !now.Before(d.Until) {
		delete(sh.m, key)
		return Denial{}, false
	}
	return d, true
}

// Forget drops keys: their state was reset or given back.
func (m *Memory) Forget(keys ...string) {
	for _, k := range keys {
		m.forget(k)
	}
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

// put remembers d for key, making room in a full shard.
func (m *Memory) put(key string, d Denial, now time.Time) {
	sh := m.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if old, ok := sh.m[key]; ok && old.Stop && !d.Stop && now.Before(old.Until) {
		// A slow seen on a key known to be stopped: the stop stands.
		return
	}
	if _, ok := sh.m[key]; !ok && len(sh.m) >= m.max {
		sh.evict(now)
	}
	sh.m[key] = d
}

// evict drops the entry of a full shard that ends soonest among a sample of
// slowed keys, an ended entry first; a hard stop only when the shard holds
// nothing else.
func (sh *shard) evict(now time.Time) {
	var victim, stop string
	var best Denial
	seen := 0
	for k, d := range sh.m {
		if !now.Before(d.Until) {
			delete(sh.m, k)
			return
		}
		if d.Stop {
			stop = k
			continue
		}
		if seen == 0 || d.Until.Before(best.Until) {
			victim, best = k, d
		}
		if seen++; seen == evictSample {
			break
		}
	}
	if seen == 0 {
		victim = stop
	}
	delete(sh.m, victim)
}
