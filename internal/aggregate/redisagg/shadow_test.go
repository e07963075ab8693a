package redisagg_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/aggregate/redisagg"
	"github.com/guardian-sec/guardian/internal/shadow"
)

func testShadowTallies(t *testing.T, r *redisEnv) {
	ctx := context.Background()
	s := redisagg.NewShadow(r.guardian)
	since := time.Date(2026, 11, 29, 9, 58, 12, 0, time.UTC)
	a1 := shadow.Tally{Instance: "a", Def: "0123456789abcdef", Since: since, Evaluated: 10, Slow: 4, Block: 1, Challenge: 2,
		Top: []shadow.KeyCount{{Key: "0a7Yc4pQ9sVbN2mXe1LkRw", Hits: 3}, {Key: "global", Hits: 1}}}
	b1 := shadow.Tally{Instance: "b", Def: "0123456789abcdef", Since: since.Add(time.Minute), Evaluated: 1, Top: []shadow.KeyCount{}}
	other := shadow.Tally{Instance: "a", Def: "fedcba9876543210", Since: since, Evaluated: 7, Top: []shadow.KeyCount{}}
	if err := s.Put(ctx, []shadow.Tally{a1, b1, other}, time.Hour); err != nil {
		t.Fatal(err)
	}
	// A later write replaces the instance's tally.
	a1.Evaluated, a1.Slow = 12, 5
	if err := s.Put(ctx, []shadow.Tally{a1}, time.Hour); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, []string{"0123456789abcdef", "unknown"})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(x, y shadow.Tally) int { return strings.Compare(x.Instance, y.Instance) })
	for i := range got {
		slices.SortFunc(got[i].Top, func(x, y shadow.KeyCount) int { return strings.Compare(x.Key, y.Key) })
	}
	if want := fmt.Sprint([]shadow.Tally{a1, b1}); fmt.Sprint(got) != want {
		t.Errorf("got  %v\nwant %v", got, want)
	}
	for _, def := range []string{"0123456789abcdef", "fedcba9876543210"} {
		if d := r.plain.PTTL(ctx, redisagg.ShadowKey(def)).Val(); d <= 0 || d > time.Hour {
			t.Errorf("PTTL of %s = %v, want in (0, 1h]", def, d)
		}
	}
	if err := s.Put(ctx, []shadow.Tally{{Def: "x"}}, time.Hour); !errors.Is(err, redisagg.ErrBadBatch) {
		t.Errorf("a tally without an instance: got %v, want ErrBadBatch", err)
	}
	// One instance's tally that is not JSON leaves out that tally alone.
	if err := r.plain.HSet(ctx, redisagg.ShadowKey("0123456789abcdef"), "bad", "not json").Err(); err != nil {
		t.Fatal(err)
	}
	got, err = s.Get(ctx, []string{"0123456789abcdef", "fedcba9876543210"})
	if err != nil {
		t.Fatalf("Get with one unreadable tally: %v", err)
	}
	if len(got) != 3 {
		t.Errorf("Get with one unreadable tally = %v, want the three readable ones", got)
	}
}
