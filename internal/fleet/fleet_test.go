package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/fleet"
	"github.com/guardian-sec/guardian/internal/rules"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// fakeShared keeps heartbeats in a map, by a clock of its own.
type fakeShared struct {
	now   time.Time
	seen  map[string]fleet.Instance
	err   error
	beats int
}

func newFakeShared() *fakeShared { return &fakeShared{now: t0, seen: map[string]fleet.Instance{}} }

func (f *fakeShared) Beat(_ context.Context, in fleet.Instance, _ time.Duration) error {
	if f.err != nil {
		return f.err
	}
	f.beats++
	in.LastSeen = f.now
	f.seen[in.ID] = in
	return nil
}

func (f *fakeShared) List(_ context.Context, ttl time.Duration) ([]fleet.Instance, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []fleet.Instance
	for _, in := range f.seen {
		if f.now.Sub(in.LastSeen) < ttl {
			out = append(out, in)
		}
	}
	return out, nil
}

func (f *fakeShared) Leave(_ context.Context, id string) error {
	if f.err != nil {
		return f.err
	}
	delete(f.seen, id)
	return nil
}

func parse(t *testing.T, src string) *rules.Set {
	t.Helper()
	s, err := rules.Parse("rules.yaml", []byte(src), t0)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const oneRule = `version: 1
rules:
  - name: login-account
    flows: [login]
    key: account
    type: rate
    limit: 1
    per: 1m
`

func newFleet(id string, shared fleet.Shared, set *rules.Set, healthy *bool) *fleet.Fleet {
	return fleet.New(fleet.Config{
		ID:           id,
		Version:      "v9",
		Rules:        func() *rules.Set { return set },
		StoreHealthy: func() bool { return *healthy },
		Shared:       shared,
		Now:          func() time.Time { return t0.Add(time.Second) },
		Logger:       quiet,
	})
}

func ids(v fleet.View) string {
	var s []string
	for _, in := range v.Instances {
		s = append(s, in.ID)
	}
	return strings.Join(s, ",")
}

func TestViewListsEveryInstance(t *testing.T) {
	sh := newFakeShared()
	healthy := true
	set := rules.Default()
	a, b := newFleet("a", sh, set, &healthy), newFleet("b", sh, set, &healthy)
	a.Ride(context.Background(), false)
	b.Ride(context.Background(), false)
	v := a.View(context.Background())
	if got, want := ids(v), "a,b"; got != want {
		t.Fatalf("instances: got %s, want %s", got, want)
	}
	if !v.RulesConsistent || v.Partial {
		t.Errorf("rules_consistent %v partial %v, want true false", v.RulesConsistent, v.Partial)
	}
	got := v.Instances[1]
	want := fleet.Instance{ID: "b", Version: "v9", RulesHash: set.Hash(), RulesLoadedAt: set.LoadedAt.UTC().Truncate(time.Second), Store: "ok", LastSeen: t0}
	if got != want {
		t.Errorf("b: got %+v, want %+v", got, want)
	}

	// b stops beating: gone once its heartbeat is older than the TTL.
	sh.now = t0.Add(9 * time.Second)
	a.Ride(context.Background(), false)
	if got := ids(a.View(context.Background())); got != "a,b" {
		t.Errorf("9s after b's last heartbeat: got %s, want a,b", got)
	}
	sh.now = t0.Add(10 * time.Second)
	a.Ride(context.Background(), false)
	if got := ids(a.View(context.Background())); got != "a" {
		t.Errorf("10s after b's last heartbeat: got %s, want a", got)
	}
}

func TestViewSaysWhenRulesDiffer(t *testing.T) {
	sh := newFakeShared()
	healthy := true
	a := newFleet("a", sh, rules.Default(), &healthy)
	b := newFleet("b", sh, parse(t, oneRule), &healthy)
	a.Ride(context.Background(), false)
	b.Ride(context.Background(), false)
	if v := b.View(context.Background()); v.RulesConsistent {
		t.Errorf("rules_consistent with two rule sets: %+v", v)
	}
}

func TestViewShowsThisInstanceAsItIsNow(t *testing.T) {
	sh := newFakeShared()
	healthy := true
	a := newFleet("a", sh, rules.Default(), &healthy)
	// Before the first heartbeat, a is listed all the same.
	v := a.View(context.Background())
	if got := ids(v); got != "a" || v.Partial {
		t.Fatalf("before a heartbeat: got %s partial %v, want a, not partial", got, v.Partial)
	}
	a.Ride(context.Background(), false)
	healthy = false
	v = a.View(context.Background())
	if got := v.Instances[0]; got.Store != "degraded" || !got.LastSeen.Equal(t0) {
		t.Errorf("got %+v, want store degraded, last seen at the heartbeat", got)
	}
}

func TestViewAlone(t *testing.T) {
	healthy := true
	for _, tt := range []struct {
		name        string
		sh          fleet.Shared
		unavailable bool
	}{
		{"embedded store", nil, false},
		// The fleet cannot be seen: never consistent rules of instances
		// this one cannot see.
		{"store unreachable", &fakeShared{err: errors.New("dial tcp: connection refused")}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleet("a", tt.sh, rules.Default(), &healthy)
			f.Ride(context.Background(), false)
			v := f.View(context.Background())
			if got := ids(v); got != "a" || !v.Partial || v.RulesConsistent == tt.unavailable || v.Unavailable != tt.unavailable {
				t.Errorf("got %s partial %v consistent %v unavailable %v, want a alone, partial, unavailable %v", got, v.Partial, v.RulesConsistent, v.Unavailable, tt.unavailable)
			}
			if got, want := v.Instances[0].LastSeen, t0.Add(time.Second); !got.Equal(want) {
				t.Errorf("last_seen: got %v, want this instance's now %v", got, want)
			}
		})
	}
}

func TestFinalRideLeaves(t *testing.T) {
	sh := newFakeShared()
	healthy := true
	a, b := newFleet("a", sh, rules.Default(), &healthy), newFleet("b", sh, rules.Default(), &healthy)
	a.Ride(context.Background(), false)
	b.Ride(context.Background(), false)
	b.Ride(context.Background(), true)
	if got := ids(a.View(context.Background())); got != "a" {
		t.Errorf("after b left: got %s, want a", got)
	}
}

func TestViewJSON(t *testing.T) {
	healthy := true
	v := newFleet("a", nil, parse(t, oneRule), &healthy).View(context.Background())
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"instances":[{"id":"a","version":"v9","rules_hash":"` + parse(t, oneRule).Hash() +
		`","rules_loaded_at":"2026-11-29T10:00:00Z","store":"ok","last_seen":"2026-11-29T10:00:01Z"}],"rules_consistent":true,"partial":true}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

func TestDefaultID(t *testing.T) {
	a := fleet.New(fleet.Config{Rules: rules.Default})
	b := fleet.New(fleet.Config{Rules: rules.Default})
	if a.ID() == "" || a.ID() == b.ID() {
		t.Errorf("ids %q and %q: want two different non-empty ids", a.ID(), b.ID())
	}
}
