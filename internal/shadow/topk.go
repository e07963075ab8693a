package shadow

import (
	"cmp"
	"hash/maphash"
	"slices"
	"sync"
)

// KeyCount is one key of a top-keys report and how often it was seen.
type KeyCount struct {
	// Key is the hashed subject, never clear text.
	Key string `json:"key"`
	// Hits is the key's count; see TopK for how far it may be over.
	Hits uint64 `json:"hits"`
}

// TopK finds the keys seen most often in a stream using a fixed number of
// counters (the Space-Saving algorithm), so its memory does not grow with
// traffic however many distinct keys arrive.
//
// While fewer distinct keys than the capacity have been added, every count is
// exact. Once the counters are full, a new key takes over the counter with
// the smallest count m and starts at m+1. The guarantees after N additions
// with capacity k:
//   - a key's reported count is never below its true count, and exceeds it by
//     at most the smallest counter at the time the key took its counter over,
//     which is at most Min() and at most N/k;
//   - every key seen more than Min() times (so every key seen more than N/k
//     times) holds a counter.
//
// Add costs O(log k) and allocates only while a counter first stores a key
// longer than any it held before; with fixed-length hashed keys that stops
// once each counter has been used. A TopK is safe for concurrent use. Use
// NewTopK: the zero value has no counters.
type TopK struct {
	mu   sync.Mutex
	seed maphash.Seed
	// counters holds the counters in use; its capacity is the TopK's.
	counters []counter
	// heap orders indexes into counters as a min-heap by count, so the
	// counter to evict is heap[0].
	heap []int32
	// index is an open-addressing hash table with linear probing from a
	// key's hash to the counter holding it: each slot is a counters index
	// plus one, or zero when empty. It is at least twice the capacity.
	index []int32
	mask  uint64
}

// counter is one Space-Saving counter.
type counter struct {
	// key is reused from one key to the next to keep Add free of
	// allocation.
	key  []byte
	hash uint64
	hits uint64
	// pos is the counter's position in TopK.heap.
	pos int32
}

// NewTopK returns a TopK with capacity counters; a capacity below 1 is
// taken as 1. The capacity bounds both memory and the error of the counts.
func NewTopK(capacity int) *TopK {
	capacity = max(capacity, 1)
	size := 2
	for size < 2*capacity {
		size *= 2
	}
	return &TopK{
		seed:     maphash.MakeSeed(),
		counters: make([]counter, 0, capacity),
		heap:     make([]int32, 0, capacity),
		index:    make([]int32, size),
		mask:     uint64(size - 1),
	}
}

// Add counts one occurrence of key.
func (t *TopK) Add(key string) {
	h := maphash.String(t.seed, key)
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.find(key, h); ok {
		t.counters[c].hits++
		t.down(t.counters[c].pos)
		return
	}
	if n := len(t.counters); n < cap(t.counters) {
		t.counters = append(t.counters, counter{
			key:  []byte(key),
			hash: h,
			hits: 1,
			pos:  int32(n),
		})
		t.heap = append(t.heap, int32(n))
		t.insert(int32(n))
		t.up(int32(n))
		return
	}
	// Space-Saving: the new key takes over the smallest counter, whose count
	// it inherits as its possible overestimate.
	c := t.heap[0]
	t.remove(c)
	e := &t.counters[c]
	e.key = append(e.key[:0], key...)
	e.hash = h
	e.hits++
	t.insert(c)
	t.down(0)
}

// Top returns up to n keys with the highest counts, by count descending and
// then by key. It never returns nil.
func (t *TopK) Top(n int) []KeyCount {
	t.mu.Lock()
	out := make([]KeyCount, len(t.counters))
	for i, c := range t.counters {
		out[i] = KeyCount{Key: string(c.key), Hits: c.hits}
	}
	t.mu.Unlock()
	sortByHits(out)
	return out[:min(max(n, 0), len(out))]
}

// sortByHits sorts keys by hits descending, then by key.
func sortByHits(keys []KeyCount) {
	slices.SortFunc(keys, func(a, b KeyCount) int {
		if c := cmp.Compare(b.Hits, a.Hits); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
}

// Len returns how many counters are in use, never more than the capacity.
func (t *TopK) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.counters)
}

// find returns the counter holding key, whose hash is h.
func (t *TopK) find(key string, h uint64) (int32, bool) {
	for i := h & t.mask; t.index[i] != 0; i = (i + 1) & t.mask {
		c := t.index[i] - 1
		if t.counters[c].hash == h && string(t.counters[c].key) == key {
			return c, true
		}
	}
	return 0, false
}

// insert adds counter c to the index under its hash.
func (t *TopK) insert(c int32) {
	i := t.counters[c].hash & t.mask
	for t.index[i] != 0 {
		i = (i + 1) & t.mask
	}
	t.index[i] = c + 1
}

// remove takes counter c out of the index, shifting later entries of its
// probe run back so that lookups never stop at a hole.
func (t *TopK) remove(c int32) {
	i := t.counters[c].hash & t.mask
	for t.index[i] != c+1 {
		i = (i + 1) & t.mask
	}
	for j := (i + 1) & t.mask; t.index[j] != 0; j = (j + 1) & t.mask {
		home := t.counters[t.index[j]-1].hash & t.mask
		// The entry at j stays put when its home lies cyclically in (i, j]:
		// moving it to i would put it before its home.
		if (i <= j && i < home && home <= j) || (i > j && (i < home || home <= j)) {
			continue
		}
		t.index[i] = t.index[j]
		i = j
	}
	t.index[i] = 0
}

// up moves the heap entry at p towards the root while it is smaller than
// its parent.
func (t *TopK) up(p int32) {
	for p > 0 {
		parent := (p - 1) / 2
		if t.hitsAt(parent) <= t.hitsAt(p) {
			return
		}
		t.swap(p, parent)
		p = parent
	}
}

// down moves the heap entry at p towards the leaves while a child is
// smaller.
func (t *TopK) down(p int32) {
	n := int32(len(t.heap))
	for {
		least := p
		if l := 2*p + 1; l < n && t.hitsAt(l) < t.hitsAt(least) {
			least = l
		}
		if r := 2*p + 2; r < n && t.hitsAt(r) < t.hitsAt(least) {
			least = r
		}
		if least == p {
			return
		}
		t.swap(p, least)
		p = least
	}
}

func (t *TopK) hitsAt(p int32) uint64 { return t.counters[t.heap[p]].hits }

func (t *TopK) swap(p, q int32) {
	t.heap[p], t.heap[q] = t.heap[q], t.heap[p]
	t.counters[t.heap[p]].pos = p
	t.counters[t.heap[q]].pos = q
}
