package incident_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/incident"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/testclock"
)

var (
	t0    = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	quiet = slog.New(slog.NewTextHandler(io.Discard, nil))
)

// name is the pseudonym a view gives a subject in these tests.
func name(subject string) string { return "h-" + subject }

// shared is an incident.Shared in memory that fails with err when set.
type shared struct {
	mu    sync.Mutex
	snaps map[string][]byte
	err   error
}

func (s *shared) Put(_ context.Context, instance string, snap []byte, _ time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.snaps[instance] = snap
	return nil
}

func (s *shared) Get(context.Context) (map[string][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snaps, s.err
}

// instance is one instance's Book and Fleet on a shared store.
func instance(id string, sh incident.Shared, clk *testclock.Clock) (*incident.Book, *incident.Fleet) {
	b := incident.NewBook(incident.BookConfig{Now: clk.Now})
	return b, incident.NewFleet(incident.FleetConfig{Book: b, Shared: sh, Instance: id, Name: name, Now: clk.Now, Logger: quiet})
}

func TestViewSumsTheFleet(t *testing.T) {
	clk := testclock.New(t0)
	sh := &shared{snaps: map[string][]byte{}}
	a, fa := instance("a", sh, clk)
	b, fb := instance("b", sh, clk)
	// Twenty minutes ago: out of the window.
	clk.Set(t0.Add(-20 * time.Minute))
	a.Decided(rules.Block, "old")
	clk.Set(t0.Add(-5 * time.Minute))
	for range 30 {
		a.Decided(rules.Slow, "login-ip")
		a.Tripped("login-ip", rules.Slow, "k1")
	}
	clk.Set(t0.Add(-30 * time.Second))
	for range 6 {
		b.Decided(rules.Slow, "login-ip")
		b.Tripped("login-ip", rules.Slow, "k2")
		b.Decided(rules.Allow, "")
	}
	b.Tripped("login-ip", rules.Slow, "k1")
	a.HardStopStarted("", "acct")
	b.Global("login-global", true)
	a.Global("login-global", false)
	clk.Set(t0)
	fa.Ride(context.Background(), true)
	fb.Ride(context.Background(), true)

	v := fa.View(context.Background())
	if !v.Fleet.Available || !v.Fleet.Shared || v.Fleet.Instances != 2 {
		t.Errorf("fleet %+v, want available, shared, 2 instances", v.Fleet)
	}
	if got, want := fmt.Sprint(v.Decisions), fmt.Sprint([]incident.Rate{{Rule: "login-ip", Decision: rules.Slow, Total: 36, PerSecond: 36.0 / 900, LastMinutePerSecond: 6.0 / 60}}); got != want {
		t.Errorf("decisions\n got %s\nwant %s", got, want)
	}
	if got, want := v.ChecksPerSecond, 42.0/900; got != want {
		t.Errorf("checks per second %v, want %v", got, want)
	}
	if got, want := fmt.Sprint(v.TopKeys), "[{login-ip slow [{h-k1 31} {h-k2 6}]}]"; got != want {
		t.Errorf("top keys %s, want %s", got, want)
	}
	if len(v.HardStops) != 1 || v.HardStops[0].Account != "h-acct" || v.HardStops[0].EndedAt != nil {
		t.Errorf("hard stops %+v, want h-acct, not ended", v.HardStops)
	}
	if got, want := fmt.Sprint(v.GlobalChallenge), fmt.Sprint([]incident.GlobalView{{Rule: "login-global", InForce: true, Since: t0.Add(-30 * time.Second), Instances: 1}}); got != want {
		t.Errorf("global challenge %s, want %s", got, want)
	}
	var slow, checks uint64
	for _, p := range v.Series {
		slow += p.Slow
		checks += p.Checks
	}
	if len(v.Series) != 90 || slow != 36 || checks != 42 {
		t.Errorf("series of %d points, %d slowed and %d checks; want 90, 36, 42", len(v.Series), slow, checks)
	}
	if got := fmt.Sprint(v.Instances); got != "[{a 30 30} {b 12 6}]" && got != "[{b 12 6} {a 30 30}]" {
		t.Errorf("instances %s", got)
	}

	// A reset on b ends the hard stop a saw start.
	b.HardStopEnded("", "acct")
	a.HardStopEnded("", "acct")
	clk.Advance(time.Second)
	fa.Ride(context.Background(), true)
	if v := fb.View(context.Background()); len(v.HardStops) != 1 || v.HardStops[0].EndedAt == nil {
		t.Errorf("hard stops after the reset %+v, want it ended", v.HardStops)
	}
	// A day later it is gone, and so is every decision.
	clk.Advance(incident.HardStopWindow)
	if v := fa.View(context.Background()); len(v.HardStops) != 0 || len(v.Decisions) != 0 || len(v.TopKeys) != 0 {
		t.Errorf("a day later: %+v", v)
	}
}

// TestViewWhileTheStoreFails shows this instance alone, marked
// unavailable, never the fleet's last figures.
func TestViewWhileTheStoreFails(t *testing.T) {
	clk := testclock.New(t0)
	sh := &shared{snaps: map[string][]byte{}}
	a, fa := instance("a", sh, clk)
	other, _ := json.Marshal(incident.Snapshot{Instance: "b", At: t0, Buckets: []incident.Bucket{{Start: t0.Unix() - 10, Checks: 472}}})
	sh.snaps["b"] = other
	a.Decided(rules.Block, "login-hard-stop")
	sh.err = errors.New("i/o timeout")
	v := fa.View(context.Background())
	if v.Fleet.Available || v.Fleet.Instances != 1 || len(v.Instances) != 1 || v.Instances[0].ID != "a" || v.Instances[0].Enforced != 1 {
		t.Errorf("view while the store fails: fleet %+v instances %+v; want this instance alone, unavailable", v.Fleet, v.Instances)
	}
	// On the embedded store this instance is the fleet.
	_, alone := instance("a", nil, clk)
	if v := alone.View(context.Background()); !v.Fleet.Available || v.Fleet.Shared {
		t.Errorf("embedded store: fleet %+v, want available, not shared", v.Fleet)
	}
}

func TestGlobalChanges(t *testing.T) {
	clk := testclock.New(t0)
	var got []incident.Change
	b := incident.NewBook(incident.BookConfig{Now: clk.Now, Changed: func(c incident.Change) { got = append(got, c) }})
	for _, in := range []bool{false, false, true, true, false, true} {
		b.Global("g", in)
		clk.Advance(time.Second)
	}
	want := []incident.Change{{Rule: "g", InForce: true, At: t0.Add(2 * time.Second)}, {Rule: "g", InForce: false, At: t0.Add(4 * time.Second)}, {Rule: "g", InForce: true, At: t0.Add(5 * time.Second)}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("changes\n got %v\nwant %v", got, want)
	}
}

// TestBookUnderConcurrency counts every decision of 50 callers exactly.
func TestBookUnderConcurrency(t *testing.T) {
	b := incident.NewBook(incident.BookConfig{Now: func() time.Time { return t0 }})
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			for range 20 {
				b.Decided(rules.Slow, "r")
				b.Tripped("r", rules.Slow, "k")
			}
		})
	}
	wg.Wait()
	s := b.Snapshot("a")
	if len(s.Buckets) != 1 || s.Buckets[0].Checks != 1000 || s.Buckets[0].Counts[0].N != 1000 || s.Top[0].Keys[0].Hits != 1000 {
		t.Errorf("snapshot %+v, want 1000 checks, 1000 slowed, k hit 1000 times", s)
	}
}
