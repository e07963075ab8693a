package redisagg_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/aggregate/redisagg"
	"github.com/guardian-sec/guardian/internal/fleet"
)

func testHeartbeats(t *testing.T, r *redisEnv) {
	ctx := context.Background()
	f := redisagg.NewFleet(r.guardian)
	loaded := time.Date(2026, 11, 29, 9, 58, 12, 0, time.UTC)
	a := fleet.Instance{ID: "host-a", Version: "v1", RulesHash: "0123456789abcdef", RulesLoadedAt: loaded, Store: fleet.StoreOK}
	b := fleet.Instance{ID: "host-b", Version: "v1", RulesHash: "fedcba9876543210", RulesLoadedAt: loaded, Store: fleet.StoreDegraded}
	const ttl = 400 * time.Millisecond
	before := time.Now().Add(-time.Second)
	for _, in := range []fleet.Instance{a, b} {
		if err := f.Beat(ctx, in, ttl); err != nil {
			t.Fatal(err)
		}
	}
	list, err := f.List(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(list, func(x, y fleet.Instance) int { return strings.Compare(x.ID, y.ID) })
	if len(list) != 2 {
		t.Fatalf("listed %+v, want a and b", list)
	}
	for i, want := range []fleet.Instance{a, b} {
		got := list[i]
		if got.LastSeen.Before(before) || got.LastSeen.After(time.Now().Add(time.Second)) {
			t.Errorf("%s: last seen %v, want about now by the store's clock", got.ID, got.LastSeen)
		}
		got.LastSeen = time.Time{}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	}

	// b stops beating; a goes on. Past the TTL, b is not listed, and a's
	// next heartbeat removes it from both keys.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := f.Beat(ctx, a, ttl); err != nil {
			t.Fatal(err)
		}
		list, err = f.List(ctx, ttl)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(list) != 1 || list[0].ID != "host-a" {
		t.Fatalf("after b's TTL: listed %+v, want a alone", list)
	}
	time.Sleep(ttl)
	if err := f.Beat(ctx, a, ttl); err != nil {
		t.Fatal(err)
	}
	if n := r.plain.HLen(ctx, redisagg.HeartbeatsKey).Val(); n != 1 {
		t.Errorf("heartbeats hash holds %d instances, want 1", n)
	}
	if n := r.plain.ZCard(ctx, redisagg.InstancesKey).Val(); n != 1 {
		t.Errorf("instances set holds %d, want 1", n)
	}
	for _, k := range []string{redisagg.InstancesKey, redisagg.HeartbeatsKey} {
		if d := r.plain.PTTL(ctx, k).Val(); d <= 0 || d > ttl {
			t.Errorf("PTTL %s = %v, want in (0, %v]", k, d, ttl)
		}
	}

	// Leave removes a at once.
	if err := f.Leave(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if list, err = f.List(ctx, ttl); err != nil || len(list) != 0 {
		t.Errorf("after a left: listed %+v (%v), want none", list, err)
	}
	// No account, address or key: the stored heartbeat is the instance's
	// fields alone.
	if err := f.Beat(ctx, a, time.Minute); err != nil {
		t.Fatal(err)
	}
	raw := r.plain.HGet(ctx, redisagg.HeartbeatsKey, a.ID).Val()
	if want := `{"version":"v1","rules_hash":"0123456789abcdef","rules_loaded_at":"2026-11-29T09:58:12Z","store":"ok"}`; raw != want {
		t.Errorf("stored heartbeat %s, want %s", raw, want)
	}
	if err := f.Beat(ctx, fleet.Instance{}, ttl); !errors.Is(err, redisagg.ErrBadBatch) {
		t.Errorf("a heartbeat without an id: got %v, want ErrBadBatch", err)
	}
	// One instance's heartbeat that is not JSON (another version's format)
	// leaves out that instance alone.
	if err := f.Beat(ctx, fleet.Instance{ID: "host-c"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := r.plain.HSet(ctx, redisagg.HeartbeatsKey, "host-c", "not json").Err(); err != nil {
		t.Fatal(err)
	}
	if list, err = f.List(ctx, time.Minute); err != nil || len(list) != 1 || list[0].ID != a.ID {
		t.Errorf("with one unreadable heartbeat: listed %+v (%v), want a alone", list, err)
	}
}
