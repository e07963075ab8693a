package redisagg_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/aggregate/redisagg"
	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/revocation"
	"github.com/guardian-sec/guardian/internal/tokens"
)

func testRevocations(t *testing.T, r *redisEnv) {
	ctx := context.Background()
	s := redisagg.NewRevocations(r.guardian)
	now := time.Now().UTC().Truncate(time.Millisecond)

	snap, changed, err := s.Load(ctx, "")
	if err != nil || changed || snap.Version != "" || len(snap.Entries) != 0 {
		t.Fatalf("Load on an empty store = %+v, %v, %v; want nothing, unchanged", snap, changed, err)
	}
	for _, e := range []revocation.Entry{
		{JTI: "a", Until: now.Add(time.Hour)},
		{JTI: "b", Until: now.Add(2 * time.Hour)},
		{JTI: "a", Until: now.Add(30 * time.Minute)}, // earlier: a keeps its hour
		{JTI: "gone", Until: now.Add(-time.Second)},
	} {
		if err := s.Add(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	snap, changed, err = s.Load(ctx, "")
	if err != nil || !changed || snap.Version == "" {
		t.Fatalf("Load = %+v, %v, %v; want the set", snap, changed, err)
	}
	slices.SortFunc(snap.Entries, func(x, y revocation.Entry) int { return strings.Compare(x.JTI, y.JTI) })
	want := []revocation.Entry{{JTI: "a", Until: now.Add(time.Hour)}, {JTI: "b", Until: now.Add(2 * time.Hour)}, {JTI: "gone", Until: now.Add(-time.Second)}}
	if fmt.Sprint(snap.Entries) != fmt.Sprint(want) {
		t.Fatalf("entries %v, want %v: a kept until the later expiry", snap.Entries, want)
	}
	again, changed, err := s.Load(ctx, snap.Version)
	if err != nil || changed || len(again.Entries) != 0 || again.Version != snap.Version {
		t.Fatalf("Load at the held version = %+v, %v, %v; want unchanged and no entries", again, changed, err)
	}
	if err := s.Add(ctx, revocation.Entry{JTI: "c", Until: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// That write forgot the revocation whose token expired.
	if third, changed, err := s.Load(ctx, snap.Version); err != nil || !changed || third.Version == snap.Version || len(third.Entries) != 3 || slices.ContainsFunc(third.Entries, func(e revocation.Entry) bool { return e.JTI == "gone" }) {
		t.Fatalf("Load after another revocation = %+v, %v, %v; want a new version and a, b and c", third, changed, err)
	}
	// A poll of a set that did not change is one GET and nothing else.
	latest, _, err := s.Load(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	before := redistest.CommandStats(t, r.plain)
	for range 3 {
		if _, changed, err := s.Load(ctx, latest.Version); err != nil || changed {
			t.Fatalf("Load at the latest version: changed %v, %v", changed, err)
		}
	}
	if ran := redistest.Ran(before, redistest.CommandStats(t, r.plain)); ran["get"] != 3 || len(ran) != 1 {
		t.Errorf("three polls of an unchanged set ran %v, want three GETs alone", ran)
	}
	// The expired revocation is forgotten by the next write, and both keys
	// expire after the longest token life.
	members, err := r.plain.ZRange(ctx, redisagg.RevokedKey, 0, -1).Result()
	if err != nil || slices.Contains(members, "gone") {
		t.Errorf("members %v, %v: the expired revocation is still stored", members, err)
	}
	for _, k := range []string{redisagg.RevokedKey, redisagg.RevokedVersionKey} {
		if ttl := r.plain.PTTL(ctx, k).Val(); ttl <= tokens.MaxTTL || ttl > tokens.MaxTTL+25*time.Hour {
			t.Errorf("PTTL %s = %v, want just past tokens.MaxTTL", k, ttl)
		}
	}
	if err := s.Add(ctx, revocation.Entry{}); err == nil {
		t.Error("Add of an empty entry succeeded")
	}
}
