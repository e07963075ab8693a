package memstore

import "math"

const (
	// evictSample is how many candidates eviction looks at in one shard.
	evictSample = 8
	// evictShards is how many shards with candidates eviction looks at
	// before it picks its victim.
	evictShards = 2
)

// rank is how much an entry holds against eviction: a full store evicts
// the lower ranks first.
type rank uint8

const (
	// ordinary is every entry that is neither a mark nor a hard stop.
	ordinary rank = iota
	// marked is a MarkOnce mark, evicted only when no ordinary entry is
	// left.
	marked
	// hardStop is a Counter at its Limit, never evicted before it expires.
	hardStop
)

// counterRank is the rank of a Counter entry holding count c of limit.
func counterRank(c, limit int64) rank {
	if c >= limit {
		return hardStop
	}
	return ordinary
}

// victim is an entry eviction may take.
type victim struct {
	shard int
	key   string
	e     entry
}

// before reports whether eviction takes v before w at now: an expired
// entry first, then the one of lower rank, then the one that expires
// soonest.
func (v *victim) before(w *victim, now int64) bool {
	if ve, we := v.e.exp <= now, w.e.exp <= now; ve != we {
		return ve
	}
	if v.e.rank != w.e.rank {
		return v.e.rank < w.e.rank
	}
	return v.e.exp < w.e.exp
}

// makeRoom evicts up to n entries to make room for new ones, and reports how
// many slots it took for the caller, who must hold no shard lock. A
// newcomer may evict ordinary entries and marks, never a live hard stop (see
// evict).
func (s *Store) makeRoom(n, now int64) int64 {
	var got int64
	for misses := 0; got < n && misses < roomTries; {
		if took := s.take(n - got); took > 0 {
			got += took
			continue
		}
		if s.evict(now, got) {
			got++
		} else {
			misses++
		}
	}
	return got
}

// evict removes one entry and keeps its slot taken for the caller. Its
// victim is, among what it samples, an expired entry, else the ordinary
// entry that expires soonest, else while no ordinary entry is left the mark
// that expires soonest; a hard stop only once it has expired. It reports
// false when there was nothing it may evict, or when its victim changed
// before it could take it. held is how many slots the caller already holds.
func (s *Store) evict(now, held int64) bool {
	const most = marked
	// An expired entry may go whatever its rank: start no higher than most.
	for r := min(s.lowest(held), most); r <= most; r++ {
		if v, ok := s.pick(now, r); ok {
			return s.claim(&v)
		}
	}
	return false
}

// lowest is the lowest rank the store's counts say it holds, held of its
// slots being the caller's, taken for keys about to be added. The counts are
// read one at a time, and another caller's slot counts as ordinary, so this
// is a hint where to start looking: eviction goes up a rank when a rank has
// nothing to give.
func (s *Store) lowest(held int64) rank {
	n, stops := s.n.Load()-held, s.stops.Load()
	switch {
	case stops+s.marks.Load() < n:
		return ordinary
	case stops < n:
		return marked
	}
	return hardStop
}

// pick returns the entry eviction takes first among the expired entries and
// those of rank r or lower it samples, from up to evictShards shards that
// have such entries, and reports false when no shard has any.
func (s *Store) pick(now int64, r rank) (victim, bool) {
	best := victim{shard: -1}
	found := 0
	start := s.cursor.Add(1)
	for j := range uint64(len(s.shards)) {
		i := int((start + j) & s.mask)
		sh := &s.shards[i]
		sh.mu.Lock()
		c, ok := sample(sh, now, r)
		sh.mu.Unlock()
		if !ok {
			continue
		}
		c.shard = i
		if best.shard < 0 || c.before(&best, now) {
			best = c
		}
		if found++; found == evictShards {
			break
		}
	}
	return best, best.shard >= 0
}

// claim removes v and keeps its slot taken for the caller, and reports false
// when v is no longer what its shard holds.
func (s *Store) claim(v *victim) bool {
	sh := &s.shards[v.shard]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e, ok := sh.m[v.key]; !ok || e != v.e {
		return false
	}
	s.drop(sh, v.key, v.e)
	return true
}

// sample returns the entry of sh, which must be locked, that eviction would
// take first among up to evictSample candidates: its entries of rank r or
// lower, and expired ones. When it looks at every entry of sh, it also
// sets sh.minExp to their earliest expiry, so that a shard with nothing
// sample may take is passed over until then.
func sample(sh *shard, now int64, r rank) (victim, bool) {
	if int64(len(sh.m)) == sh.above(r) && now < sh.minExp {
		return victim{}, false
	}
	var best victim
	seen := 0
	next := int64(math.MaxInt64)
	for k, e := range sh.m {
		next = min(next, e.exp)
		if e.rank > r && e.exp > now {
			continue
		}
		c := victim{key: k, e: e}
		if seen == 0 || c.before(&best, now) {
			best = c
		}
		if seen++; seen == evictSample {
			return best, true
		}
	}
	sh.minExp = next
	return best, seen > 0
}

// above reports how many entries of sh, which must be locked, rank above r.
func (sh *shard) above(r rank) int64 {
	switch r {
	case ordinary:
		return sh.marks + sh.stops
	case marked:
		return sh.stops
	}
	return 0
}

// count adds d to the counts of entries of rank r, in sh, which must be
// locked, and in the store.
func (s *Store) count(sh *shard, r rank, d int64) {
	switch r {
	case marked:
		sh.marks += d
		s.marks.Add(d)
	case hardStop:
		sh.stops += d
		s.stops.Add(d)
	}
}
