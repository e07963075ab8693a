package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestFloorScripts runs both floor scripts on a real redis-server: six
// decisions of one identity in one call spend the account's burst of 5 and
// no more; the built-in floor also counts the five spends on the hard stop
// and the account once in its network's current sub-window, and decides
// nothing once the hard stop is reached or the network holds its limit of
// distinct accounts.
func TestFloorScripts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs, err := startRedis(ctx, "redis-server", 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.stop()
	rc := redis.NewClient(&redis.Options{Addr: rs.addr})
	defer rc.Close()

	decide := func(fl *floor, ids ...string) []int64 {
		t.Helper()
		ks, args := []string(nil), slices.Clone(fl.fixed)
		for _, i := range ids {
			ks, args = fl.decision(ks, args, i, fl.window(time.Now()))
		}
		got, err := fl.script.Run(ctx, rc, ks, args...).Int64Slice()
		if err != nil {
			t.Fatalf("%s: %v", fl.Name, err)
		}
		return got
	}
	for _, fl := range floors {
		if got, want := decide(fl, "1", "1", "1", "1", "1", "1"), []int64{1, 1, 1, 1, 1, 0}; !slices.Equal(got, want) {
			t.Errorf("%s: six decisions of one identity = %v, want %v", fl.Name, got, want)
		}
	}

	// The built-in floor's keys of identity 1, in its KEYS order.
	ks, _ := builtinFloor.decision(nil, nil, "1", builtinFloor.window(time.Now()))
	if n, err := rc.Get(ctx, ks[4]).Int(); err != nil || n != 5 {
		t.Errorf("hard stop after five spends = %d, %v; want 5", n, err)
	}
	if n, err := rc.PFCount(ctx, ks[5:]...).Result(); err != nil || n != 1 {
		t.Errorf("distinct accounts of the network = %d, %v; want 1", n, err)
	}
	if ttl := rc.PTTL(ctx, ks[5]).Val(); ttl <= 0 {
		t.Errorf("current sub-window's expiry = %v, want one", ttl)
	}
	if n := rc.Exists(ctx, ks[0]).Val(); n != 0 {
		t.Errorf("the familiar list was written")
	}

	// Identity 2 at its hard stop, identity 3's network full of accounts.
	ks2, _ := builtinFloor.decision(nil, nil, "2", builtinFloor.window(time.Now()))
	rc.Set(ctx, ks2[4], 100, 0)
	ks3, _ := builtinFloor.decision(nil, nil, "3", builtinFloor.window(time.Now()))
	for m := range 20 {
		rc.PFAdd(ctx, ks3[5+m%5], m)
	}
	if got, want := decide(&builtinFloor, "2", "3", "4"), []int64{0, 0, 1}; !slices.Equal(got, want) {
		t.Errorf("at the hard stop, a full network, a new identity = %v, want %v", got, want)
	}
}
