package shadow

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// keyNames returns n distinct hashed-looking keys of equal length.
func keyNames(tb testing.TB, n int) []string {
	tb.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%064x", i)
	}
	return keys
}

// trueCounts tallies a stream exactly.
func trueCounts(stream []string) map[string]uint64 {
	m := make(map[string]uint64)
	for _, k := range stream {
		m[k]++
	}
	return m
}

// zipfStream returns events over keys drawn from a Zipf-like law with a
// fixed seed, the most frequent key first in keys.
func zipfStream(tb testing.TB, events int, keys []string) []string {
	tb.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	z := rand.NewZipf(r, 1.1, 1, uint64(len(keys)-1))
	stream := make([]string, events)
	for i := range stream {
		stream[i] = keys[z.Uint64()]
	}
	return stream
}

func TestTopKExactBelowCapacity(t *testing.T) {
	tests := []struct {
		name     string
		capacity int
		stream   []string
		n        int
		want     []KeyCount
	}{
		{
			name:     "empty",
			capacity: 4,
			n:        10,
			want:     []KeyCount{},
		},
		{
			name:     "one key",
			capacity: 4,
			stream:   []string{"a", "a", "a"},
			n:        10,
			want:     []KeyCount{{"a", 3}},
		},
		{
			name:     "ordered by hits then key",
			capacity: 8,
			stream:   []string{"c", "b", "a", "b", "c", "d", "c", "a", "e"},
			n:        10,
			want:     []KeyCount{{"c", 3}, {"a", 2}, {"b", 2}, {"d", 1}, {"e", 1}},
		},
		{
			name:     "truncated to n",
			capacity: 8,
			stream:   []string{"c", "b", "a", "b", "c", "d", "c", "a", "e"},
			n:        2,
			want:     []KeyCount{{"c", 3}, {"a", 2}},
		},
		{
			name:     "exactly capacity distinct keys",
			capacity: 3,
			stream:   []string{"x", "y", "z", "z", "y", "z"},
			n:        3,
			want:     []KeyCount{{"z", 3}, {"y", 2}, {"x", 1}},
		},
		{
			name:     "n zero",
			capacity: 3,
			stream:   []string{"x"},
			n:        0,
			want:     []KeyCount{},
		},
		{
			name:     "n negative",
			capacity: 3,
			stream:   []string{"x"},
			n:        -1,
			want:     []KeyCount{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := NewTopK(tt.capacity)
			for _, k := range tt.stream {
				tk.Add(k)
			}
			got := tk.Top(tt.n)
			if got == nil {
				t.Fatal("Top returned nil, want an empty slice")
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Top(%d) = %v, want %v", tt.n, got, tt.want)
			}
			if got, want := floor(tk), uint64(0); len(tt.stream) > 0 && tt.capacity > len(trueCounts(tt.stream)) && got != want {
				t.Errorf("floor with free counters = %d, want %d", got, want)
			}
		})
	}
}

func TestTopKEvictsSmallest(t *testing.T) {
	tk := NewTopK(2)
	for _, k := range []string{"a", "a", "a", "b", "c"} {
		tk.Add(k)
	}
	// "c" took over b's counter (1) and starts at 2; a is untouched.
	got := tk.Top(10)
	want := []KeyCount{{"a", 3}, {"c", 2}}
	if !slices.Equal(got, want) {
		t.Errorf("Top = %v, want %v", got, want)
	}
	if got, want := floor(tk), uint64(2); got != want {
		t.Errorf("floor = %d, want %d", got, want)
	}
	// b comes back and takes over c's counter.
	tk.Add("b")
	got = tk.Top(10)
	want = []KeyCount{{"a", 3}, {"b", 3}}
	if !slices.Equal(got, want) {
		t.Errorf("after b returns, Top = %v, want %v", got, want)
	}
}

func TestTopKCapacityBelowOne(t *testing.T) {
	for _, capacity := range []int{0, -5} {
		tk := NewTopK(capacity)
		tk.Add("a")
		tk.Add("b")
		got := tk.Top(10)
		want := []KeyCount{{"b", 2}}
		if !slices.Equal(got, want) {
			t.Errorf("NewTopK(%d): Top = %v, want %v", capacity, got, want)
		}
		if got, want := tk.Len(), 1; got != want {
			t.Errorf("NewTopK(%d): Len() = %d, want %d", capacity, got, want)
		}
	}
}

func TestTopKZipfFindsTrueTop(t *testing.T) {
	keys := keyNames(t, 10_000)
	stream := zipfStream(t, 100_000, keys)
	truth := trueCounts(stream)

	tk := NewTopK(64)
	for _, k := range stream {
		tk.Add(k)
	}

	ranked := make([]string, 0, len(truth))
	for k := range truth {
		ranked = append(ranked, k)
	}
	slices.SortFunc(ranked, func(a, b string) int {
		if truth[a] != truth[b] {
			if truth[a] > truth[b] {
				return -1
			}
			return 1
		}
		if a < b {
			return -1
		}
		return 1
	})

	top := tk.Top(10)
	reported := make(map[string]uint64, len(top))
	for _, kc := range top {
		reported[kc.Key] = kc.Hits
	}
	for i, k := range ranked[:5] {
		if _, ok := reported[k]; !ok {
			t.Errorf("true top key #%d (%d hits) missing from Top(10) = %v", i+1, truth[k], top)
		}
	}
	top5 := tk.Top(5)
	for i, kc := range top5 {
		if kc.Key != ranked[i] {
			t.Errorf("Top(5)[%d] = %s, want true rank %d %s", i, kc.Key, i+1, ranked[i])
		}
	}
}

func TestTopKErrorBound(t *testing.T) {
	const capacity = 64
	keys := keyNames(t, 10_000)
	stream := zipfStream(t, 100_000, keys)
	truth := trueCounts(stream)

	tk := NewTopK(capacity)
	for _, k := range stream {
		tk.Add(k)
	}

	if got, want := tk.Len(), capacity; got != want {
		t.Errorf("Len() = %d, want %d (counters never exceed the capacity)", got, want)
	}
	low := floor(tk)
	if n := uint64(len(stream)); low > n/capacity {
		t.Errorf("floor = %d, over N/capacity = %d", low, n/capacity)
	}
	all := tk.Top(capacity)
	seen := make(map[string]bool, len(all))
	var sum uint64
	for _, kc := range all {
		if seen[kc.Key] {
			t.Errorf("key %s holds two counters", kc.Key)
		}
		seen[kc.Key] = true
		sum += kc.Hits
		if tc := truth[kc.Key]; kc.Hits < tc || kc.Hits > tc+low {
			t.Errorf("key %s: hits %d, true %d, want within [true, true+%d]", kc.Key, kc.Hits, tc, low)
		}
	}
	if got, want := sum, uint64(len(stream)); got != want {
		t.Errorf("sum of counters = %d, want N = %d", got, want)
	}
	for k, tc := range truth {
		if tc > low && !seen[k] {
			t.Errorf("key %s seen %d times > floor %d but holds no counter", k, tc, low)
		}
	}
}

func TestTopKBoundedUnderManyDistinctKeys(t *testing.T) {
	const capacity = 16
	tk := NewTopK(capacity)
	keys := keyNames(t, 5_000)
	for round := range 3 {
		for _, k := range keys {
			tk.Add(k)
		}
		if got := tk.Len(); got > capacity {
			t.Fatalf("round %d: Len() = %d, want at most %d", round, got, capacity)
		}
	}
	// Every counter is still reachable by its key: adding a held key again
	// raises its count rather than taking another counter.
	for _, kc := range tk.Top(capacity) {
		tk.Add(kc.Key)
		var found bool
		for _, after := range tk.Top(capacity) {
			if after.Key == kc.Key {
				found = true
				if got, want := after.Hits, kc.Hits+1; got != want {
					t.Errorf("key %s: hits %d after one more Add, want %d", kc.Key, got, want)
				}
			}
		}
		if !found {
			t.Errorf("key %s lost its counter on Add", kc.Key)
		}
	}
}

// checkIndex asserts that every counter is found by its key through the
// hash index and sits where the heap says, with the heap ordered by count.
func checkIndex(tb testing.TB, tk *TopK) {
	tb.Helper()
	for c, e := range tk.counters {
		if got, ok := tk.find(string(e.key), e.hash); !ok || got != int32(c) {
			tb.Fatalf("counter %d (%q) found as %d, %v", c, e.key, got, ok)
		}
		if tk.heap[e.pos] != int32(c) {
			tb.Fatalf("counter %d says heap position %d, heap holds %d there", c, e.pos, tk.heap[e.pos])
		}
	}
	for p := 1; p < len(tk.heap); p++ {
		if parent := (p - 1) / 2; tk.hitsAt(int32(parent)) > tk.hitsAt(int32(p)) {
			tb.Fatalf("heap out of order at %d", p)
		}
	}
	var used int
	for _, slot := range tk.index {
		if slot != 0 {
			used++
		}
	}
	if used != len(tk.counters) {
		tb.Fatalf("index holds %d entries for %d counters", used, len(tk.counters))
	}
}

func TestTopKIndexSurvivesEvictions(t *testing.T) {
	keys := keyNames(t, 200)
	r := rand.New(rand.NewPCG(3, 4))
	for _, capacity := range []int{1, 2, 5, 8, 33} {
		tk := NewTopK(capacity)
		for range 5_000 {
			tk.Add(keys[r.IntN(len(keys))])
			checkIndex(t, tk)
		}
	}
}

func TestTopKConcurrent(t *testing.T) {
	const (
		goroutines = 50
		perKey     = 200
	)
	keys := keyNames(t, 20)
	tk := NewTopK(64)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perKey * len(keys) {
				tk.Add(keys[(i+g)%len(keys)])
			}
		})
	}
	wg.Wait()
	got := tk.Top(len(keys))
	if len(got) != len(keys) {
		t.Fatalf("Top returned %d keys, want %d", len(got), len(keys))
	}
	for _, kc := range got {
		if want := uint64(goroutines * perKey); kc.Hits != want {
			t.Errorf("key %s: hits %d, want %d", kc.Key, kc.Hits, want)
		}
	}
}

func BenchmarkTopKAdd(b *testing.B) {
	for _, distinct := range []int{10, 10_000} {
		b.Run(fmt.Sprintf("keys=%d", distinct), func(b *testing.B) {
			keys := keyNames(b, distinct)
			tk := NewTopK(64)
			for _, k := range keys {
				tk.Add(k)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				tk.Add(keys[i%len(keys)])
			}
		})
	}
}

// floor returns the smallest count tk holds, or 0 while counters are free.
// Once the counters are full, no key without a counter was seen more than
// floor times, and no count is over by more than floor.
func floor(tk *TopK) uint64 {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	if len(tk.counters) < cap(tk.counters) {
		return 0
	}
	return tk.counters[tk.heap[0]].hits
}
