package memstore

const (
	// evictSample is how many candidates eviction looks at in one shard.
	evictSample = 8
	// evictShards is how many shards with candidates eviction looks at
	// before it picks its victim.
	evictShards = 2
)

// victim is an entry eviction may take.
type victim struct {
	shard int
	key   string
	e     entry
}

// before reports whether eviction takes v before w at now: an expired
// entry first, then one that is not kept, then the one that expires soonest.
func (v *victim) before(w *victim, now int64) bool {
	if ve, we := v.e.exp <= now, w.e.exp <= now; ve != we {
		return ve
	}
	if v.e.kept != w.e.kept {
		return !v.e.kept
	}
	return v.e.exp < w.e.exp
}

// makeRoom evicts up to n entries to make room for new ones, and reports how
// many slots it took for the caller, who must hold no shard lock. A victim
// is the entry that expires soonest among what evict samples; kept entries
// are taken only when nothing else is left, and hard stops only for a kept
// newcomer (keep).
func (s *Store) makeRoom(n, now int64, keep bool) int64 {
	var got int64
	for misses := 0; got < n && misses < roomTries; {
		if took := s.take(n - got); took > 0 {
			got += took
			continue
		}
		if s.evict(now, keep) {
			got++
		} else {
			misses++
		}
	}
	return got
}

// evict removes one entry and keeps its slot taken for the caller. It
// reports false when there was nothing it may evict, or when its victim
// changed before it could take it.
func (s *Store) evict(now int64, keep bool) bool {
	best := victim{shard: -1}
	if s.kept.Load() < s.n.Load() {
		best = s.pick(now, true, keep)
	}
	if best.shard < 0 {
		// Nothing but kept entries, and slots taken for new ones, which
		// n counts too.
		best = s.pick(now, false, keep)
	}
	if best.shard < 0 {
		return false
	}
	sh := &s.shards[best.shard]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e, ok := sh.m[best.key]; !ok || e != best.e {
		return false
	}
	s.drop(sh, best.key, best.e)
	return true
}

// pick returns the victim eviction would take first among the samples of
// evictShards shards with candidates (see sample), its shard -1 when no
// shard has one.
func (s *Store) pick(now int64, loose, keep bool) victim {
	best := victim{shard: -1}
	found := 0
	start := s.cursor.Add(1)
	for j := range uint64(len(s.shards)) {
		i := int((start + j) & s.mask)
		sh := &s.shards[i]
		sh.mu.Lock()
		c, ok := sample(sh, now, loose, keep)
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
	return best
}

// sample returns the entry of sh, which must be locked, that eviction would
// take first among up to evictSample candidates: with loose only those
// that are not kept or have expired; otherwise any entry for a kept newcomer
// (keep), and a mark or an expired entry for another.
func sample(sh *shard, now int64, loose, keep bool) (victim, bool) {
	if loose && int64(len(sh.m)) == sh.kept && now < sh.minExp {
		return victim{}, false
	}
	if !loose && !keep && sh.marks == 0 && now < sh.minExp {
		return victim{}, false
	}
	var best victim
	seen := 0
	for k, e := range sh.m {
		if e.kept && e.exp > now && (loose || !keep && !e.mark) {
			continue
		}
		c := victim{key: k, e: e}
		if seen == 0 || c.before(&best, now) {
			best = c
		}
		if seen++; seen == evictSample {
			break
		}
	}
	return best, seen > 0
}
