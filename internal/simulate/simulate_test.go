package simulate_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/simulate"
)

// scaled is the scale the invariant tests run at: the documented one, or,
// in -short and under the race detector, where a check takes ten times
// longer, a tenth of the users and a twentieth of each attack. The
// invariants hold at any scale: each attack still spreads over its whole
// span, and the attacked account and owner are the same.
func scaled() simulate.Config {
	if testing.Short() || raceEnabled {
		return simulate.Config{Population: 0.1, Attack: 0.05}
	}
	return simulate.Config{}
}

// runScenario runs one scenario under the built-in rules and logs how long
// it took.
func runScenario(t *testing.T, name string, cfg simulate.Config) simulate.ScenarioReport {
	t.Helper()
	cfg.Scenarios = []string{name}
	start := time.Now()
	rep, err := simulate.Run(context.Background(), rules.Default(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s at population ×%g, attack ×%g: %d checks in %v", name, rep.Population, rep.Attack, rep.Scenarios[0].Checks, time.Since(start).Round(time.Millisecond))
	return rep.Scenarios[0]
}

// TestTargetedStopsAt100 is NIST's 100: one account guessed once a second
// for a day from 1,000 addresses gets at most 100 failed guesses through,
// and the hard stop blocks the rest.
func TestTargetedStopsAt100(t *testing.T) {
	s := runScenario(t, "targeted", scaled())
	a := s.Attacker
	if a.MaxPerAccount > 100 || a.Allowed > 100 || a.AccountsReached != 1 || a.AccountsCompromised != 0 {
		t.Errorf("attacker %+v: want at most 100 failed guesses against its one account", a)
	}
	if a.Blocked == 0 {
		t.Errorf("attacker %+v: the hard stop never blocked: the day proves nothing", a)
	}
}

// TestLockoutOwnerOnADeviceIsNeverSlowed: an attacker polling the owner's
// account slows neither the owner's trusted device nor the owner at home;
// from a new network without either, the owner shares the attacker's
// bucket.
func TestLockoutOwnerOnADeviceIsNeverSlowed(t *testing.T) {
	s := runScenario(t, "lockout", scaled())
	ways := map[string]simulate.Way{}
	for _, w := range s.Owner {
		ways[w.Way] = w
	}
	if d := ways["device"]; d.Logins == 0 || d.Slowed+d.Challenged+d.Blocked+d.Failed != 0 {
		t.Errorf("owner on a device: %+v, want every login through untouched", d)
	}
	if h := ways["home"]; h.Logins == 0 || h.Slowed+h.Blocked+h.Failed != 0 {
		t.Errorf("owner at home: %+v, want never slowed or blocked", h)
	}
	if s.Attacker.Slowed == 0 {
		t.Errorf("attacker %+v: never slowed: the scenario proves nothing", s.Attacker)
	}
}

// TestSprayChallengedWithinTheSecretBound: no sprayed password gets more
// guesses through unchallenged than login-secret-spray allows over the
// span it is sprayed in: its burst, then its rate.
func TestSprayChallengedWithinTheSecretBound(t *testing.T) {
	s := runScenario(t, "spray", scaled())
	var r *rules.Rule
	set := rules.Default()
	for i := range set.Rules {
		if set.Rules[i].Name == "login-secret-spray" {
			r = &set.Rules[i]
		}
	}
	if r == nil {
		t.Fatal("the built-in rules have no login-secret-spray")
	}
	// The ten passwords are sprayed one after the other, each over a
	// tenth of the day.
	window := 24 * time.Hour / 10
	bound := r.Burst + int64(window/r.Per)*r.Limit
	a := s.Attacker
	if a.MaxUnchallengedPerSecret == 0 || a.MaxUnchallengedPerSecret > bound {
		t.Errorf("attacker %+v: one password got %d guesses through unchallenged, want 1 to %d (login-secret-spray's burst and rate over %v)",
			a, a.MaxUnchallengedPerSecret, bound, window)
	}
	if a.Challenged == 0 {
		t.Errorf("attacker %+v: never challenged", a)
	}
}

// TestEveryScenarioRunsAndAddsUp runs every scenario small and checks what
// every report must hold: the attacker's guesses are split by what the
// rules answered, the rules' stops add up to the attacker's, and shares
// are of the logins.
func TestEveryScenarioRunsAndAddsUp(t *testing.T) {
	rep, err := simulate.Run(context.Background(), rules.Default(), simulate.Config{Population: 0.02, Attack: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range rep.Scenarios {
		names = append(names, s.Scenario)
		a := s.Attacker
		if a.Guesses == 0 || a.Unchallenged > a.Allowed || a.MaxPerAccount > a.Allowed || a.AccountsReached > a.Allowed {
			t.Errorf("%s: attacker %+v does not add up", s.Scenario, a)
		}
		// Every guess was allowed, or first answered a stop (a solved
		// challenge goes ahead too).
		if first := a.Unchallenged + a.Slowed + a.Challenged + a.Blocked; first != a.Guesses {
			t.Errorf("%s: %d guesses, %d allowed unchallenged and %d/%d/%d stopped", s.Scenario, a.Guesses, a.Unchallenged, a.Slowed, a.Challenged, a.Blocked)
		}
		var sum simulate.Stops
		for _, r := range s.Rules {
			sum.Slowed += r.Attacker.Slowed
			sum.Challenged += r.Attacker.Challenged
			sum.Blocked += r.Attacker.Blocked
			if r.Users.Logins != s.Users.Logins {
				t.Errorf("%s, %s: shares of %d logins, want of the users' %d", s.Scenario, r.Rule, r.Users.Logins, s.Users.Logins)
			}
		}
		if sum != (simulate.Stops{Slowed: a.Slowed, Challenged: a.Challenged, Blocked: a.Blocked}) {
			t.Errorf("%s: the rules' stops %+v, the attacker's %d/%d/%d", s.Scenario, sum, a.Slowed, a.Challenged, a.Blocked)
		}
		u := s.Users
		if u.Logins < int64(rep.Users) {
			t.Errorf("%s: %d logins for %d users, want one a day at least", s.Scenario, u.Logins, rep.Users)
		}
		for _, f := range []struct {
			n     int64
			share float64
		}{{u.Slowed, u.SlowedShare}, {u.Challenged, u.ChallengedShare}, {u.Blocked, u.BlockedShare}, {u.Failed, u.FailedShare}} {
			if math.Abs(f.share-float64(f.n)/float64(u.Logins)) > 1e-6 {
				t.Errorf("%s: share %v of %d logins for %d", s.Scenario, f.share, u.Logins, f.n)
			}
		}
		if (s.Scenario == "lockout" || s.Scenario == "cgnat") != (len(s.Owner) == 3) {
			t.Errorf("%s: owner %+v", s.Scenario, s.Owner)
		}
	}
	if !slices.Equal(names, simulate.Names()) {
		t.Errorf("ran %v, want every scenario in order %v", names, simulate.Names())
	}
	if rep.Users != 200 {
		t.Errorf("%d users at population ×0.02, want 200", rep.Users)
	}
}

// TestRunIsDeterministic runs the scenarios three times and wants the same
// bytes, as JSON and as a table.
func TestRunIsDeterministic(t *testing.T) {
	cfg := simulate.Config{Population: 0.02, Attack: 0.01, Scenarios: []string{"cgnat", "stuffing", "lockout"}}
	var first string
	for i := range 3 {
		rep, err := simulate.Run(context.Background(), rules.Default(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		var tb strings.Builder
		if err := rep.WriteTable(&tb); err != nil {
			t.Fatal(err)
		}
		got := string(b) + "\n" + tb.String()
		if i == 0 {
			first = got
		} else if got != first {
			t.Fatalf("run %d differs from run 0:\n%s\n---\n%s", i, got, first)
		}
	}
}

func TestRunRefusesAnUnknownScenario(t *testing.T) {
	_, err := simulate.Run(context.Background(), rules.Default(), simulate.Config{Scenarios: []string{"spray", "phishing"}})
	if !errors.Is(err, simulate.ErrUnknownScenario) || !strings.Contains(err.Error(), `"phishing"`) || !strings.Contains(err.Error(), "sms_pumping") {
		t.Fatalf("err = %v, want ErrUnknownScenario naming phishing and the scenarios", err)
	}
}

func TestRunStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := simulate.Run(ctx, rules.Default(), simulate.Config{Scenarios: []string{"targeted"}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// TestProgress: each scenario reports its start, its way through its day,
// and its end.
func TestProgress(t *testing.T) {
	var got []simulate.Progress
	_, err := simulate.Run(context.Background(), rules.Default(), simulate.Config{Population: 0.05, Attack: 0.02, Scenarios: []string{"targeted", "sms_pumping"},
		Progress: func(p simulate.Progress) { got = append(got, p) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"targeted", "sms_pumping"} {
		var mine []simulate.Progress
		for _, p := range got {
			if p.Scenario == name {
				mine = append(mine, p)
			}
		}
		if len(mine) < 3 || mine[0].Done != 0 || mine[0].Finished || !mine[len(mine)-1].Finished || mine[len(mine)-1].Done != 1 {
			t.Errorf("%s: progress %+v, want a start, some steps and a finished end", name, mine)
		}
		for i := 1; i < len(mine); i++ {
			if mine[i].Done < mine[i-1].Done || mine[i].Checks < mine[i-1].Checks {
				t.Errorf("%s: progress went back: %+v then %+v", name, mine[i-1], mine[i])
			}
		}
	}
}
