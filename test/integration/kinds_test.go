package integration

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/redistest"
)

// storeErrors reads guardian_store_errors_total by kind from in's
// /metrics, with guardian_fallback_active and /readyz's store, read one
// after the other.
func storeErrors(t *testing.T, in *instance) (kinds map[string]float64, active float64, ready string) {
	t.Helper()
	a := in.must(t, "GET", "/metrics", "", nil)
	kinds = map[string]float64{}
	for line := range strings.SplitSeq(string(a.raw), "\n") {
		if rest, ok := strings.CutPrefix(line, `guardian_store_errors_total{kind="`); ok {
			kind, v, _ := strings.Cut(rest, `"} `)
			kinds[kind], _ = strconv.ParseFloat(v, 64)
		}
		if v, ok := strings.CutPrefix(line, "guardian_fallback_active "); ok {
			active, _ = strconv.ParseFloat(v, 64)
		}
	}
	return kinds, active, in.must(t, "GET", "/readyz", "", nil).str("store")
}

// TestStoreErrorKinds: a Redis that refuses connections and one whose name
// does not resolve count as unreachable, a paused one as timeout; /readyz
// says degraded exactly while guardian_fallback_active is 1.
func TestStoreErrorKinds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	paused := redistest.Start(t)
	baseline := new(map[string]float64) // errors counted before the pause

	tests := []struct {
		name   string
		url    string
		before func(t *testing.T, in *instance)
		want   string
	}{
		{"refused", "redis://" + closed + "/0", nil, "unreachable"},
		{"no such host", "redis://guardian-redis.invalid:6379/0", nil, "unreachable"},
		{"paused", paused.URL(), func(t *testing.T, in *instance) {
			// Connected first, so that the calls meet a Redis that
			// accepted them and never answers. A loaded machine may miss
			// a deadline here too: wait for one answer from Redis, and
			// count errors from the pause on.
			deadline := time.Now().Add(5 * time.Second)
			for in.check(t, loginCheck("warm", 0)).degraded() {
				if time.Now().After(deadline) {
					t.Fatal("no check answered by Redis before the pause")
				}
				time.Sleep(50 * time.Millisecond)
			}
			*baseline, _, _ = storeErrors(t, in)
			paused.Pause(t)
			t.Cleanup(func() { paused.Unpause(t) })
		}, "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			*baseline = nil
			in := startFleet(t, 1, fleetConfig{redisURL: tt.url, storeTimeout: 100 * time.Millisecond})[0]
			if tt.before != nil {
				tt.before(t, in)
			}
			for i := range 5 {
				if a := in.check(t, loginCheck("alice", i)); a.status != 200 && a.status != 429 {
					t.Fatalf("check %d: %d %s", i, a.status, a.raw)
				}
			}
			kinds, active, ready := storeErrors(t, in)
			for kind, n := range *baseline {
				kinds[kind] -= n
			}
			if kinds[tt.want] < 1 {
				t.Errorf("guardian_store_errors_total = %v, want %s counted", kinds, tt.want)
			}
			for kind, n := range kinds {
				if kind != tt.want && n > 0 {
					t.Errorf("guardian_store_errors_total{kind=%q} = %v, want only %s", kind, n, tt.want)
				}
			}
			if active != 1 || ready != "degraded" {
				t.Errorf("fallback_active %v, /readyz store %q; want 1 and degraded", active, ready)
			}
		})
	}
}
