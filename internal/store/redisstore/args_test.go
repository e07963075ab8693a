package redisstore

import (
	"testing"

	"github.com/guardian-sec/guardian/internal/store"
)

// TestAppendSubKeys: a distinct op's sub-window and count keys are the
// keys distinctSlotKey and distinctCountKey name, in order, made in one
// allocation.
func TestAppendSubKeys(t *testing.T) {
	k := "guardian:v2:{net-203.0.113.0/24}:login-ip-distinct-accounts"
	for _, count := range []bool{false, true} {
		var want []string
		for j := range store.DistinctSlots {
			want = append(want, distinctSlotKey(k, j))
		}
		if count {
			want = append(want, distinctCountKey(k))
		}
		got := appendSubKeys([]string{"before"}, k, count)
		if len(got) != 1+len(want) || got[0] != "before" {
			t.Fatalf("count %v: appendSubKeys = %q, want %q after %q", count, got, want, "before")
		}
		for j, w := range want {
			if got[1+j] != w {
				t.Errorf("count %v: key %d = %q, want %q", count, j, got[1+j], w)
			}
		}
		keys := make([]string, 0, store.DistinctSlots+1)
		if n := testing.AllocsPerRun(100, func() { keys = appendSubKeys(keys[:0], k, count) }); n != 1 {
			t.Errorf("count %v: appendSubKeys made %v allocations, want 1", count, n)
		}
	}
}

// TestBoxes: what a batch boxes reads back as the values given, past the
// room its arrays started with too, and numbers below 256 are boxed as
// themselves.
func TestBoxes(t *testing.T) {
	b := boxes{ops: 1}
	var got []any
	var want []int64
	for v := range int64(10) {
		want = append(want, v*1000, v)
		got = append(got, b.num(v*1000), b.num(v))
	}
	for i, w := range want {
		var v int64
		switch g := got[i].(type) {
		case int64:
			if w >= 256 {
				t.Errorf("arg %d: %d boxed as itself, want a pointer", i, w)
			}
			v = g
		case *int64:
			v = *g
		default:
			t.Fatalf("arg %d: %T", i, g)
		}
		if v != w {
			t.Errorf("arg %d = %d, want %d", i, v, w)
		}
	}
	var strs []any
	for j := range 5 {
		strs = append(strs, b.str(string(rune('a'+j))))
	}
	for j, s := range strs {
		if p, ok := s.(*string); !ok || *p != string(rune('a'+j)) {
			t.Errorf("string %d = %v, want %q", j, s, string(rune('a'+j)))
		}
	}
}
