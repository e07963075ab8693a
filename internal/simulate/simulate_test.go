package simulate_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/simulate"
)

// small is a small simulation: a fiftieth of the users and a hundredth of
// each attack.
var small = simulate.Config{Population: 0.02, Attack: 0.01}

// scaled is the scale the invariant tests run at: the documented one, or,
// in -short and under the race detector, where a check takes ten times
// longer, small. The invariants hold at any scale: each attack still
// spreads over its whole span, the attacked account and owner are the
// same, and every attack still goes past the bound the test holds it to
// (each test checks it does, or the day proves nothing).
func scaled() simulate.Config {
	if reduced() {
		return small
	}
	return simulate.Config{}
}

// reduced reports whether the tests run small: in -short and under the race
// detector.
func reduced() bool { return testing.Short() || raceEnabled }

// sharedRun is one run of every scenario under the built-in rules at
// scaled(), with its progress, which every test of a scenario's figures
// reads: a day is run once, not once per test.
var sharedRun struct {
	once     sync.Once
	rep      *simulate.Report
	progress []simulate.Progress
	took     time.Duration
	err      error
}

// runShared runs sharedRun, once; it is safe for concurrent use.
func runShared() {
	sharedRun.once.Do(func() {
		start := time.Now()
		cfg := scaled()
		cfg.Progress = func(p simulate.Progress) { sharedRun.progress = append(sharedRun.progress, p) }
		sharedRun.rep, sharedRun.err = simulate.Run(context.Background(), rules.Default(), cfg)
		sharedRun.took = time.Since(start)
	})
}

// shared returns the report of sharedRun.
func shared(t *testing.T) *simulate.Report {
	t.Helper()
	runShared()
	if sharedRun.err != nil {
		t.Fatal(sharedRun.err)
	}
	t.Logf("every scenario at population ×%g, attack ×%g: %v", sharedRun.rep.Population, sharedRun.rep.Attack, sharedRun.took.Round(time.Millisecond))
	return sharedRun.rep
}

// sharedScenario returns one scenario's report of sharedRun.
func sharedScenario(t *testing.T, name string) simulate.ScenarioReport {
	t.Helper()
	for _, s := range shared(t).Scenarios {
		if s.Scenario == name {
			t.Logf("%s: %d checks", name, s.Checks)
			return s
		}
	}
	t.Fatalf("the shared run has no scenario %s", name)
	return simulate.ScenarioReport{}
}

// TestTargetedStopsAt100 is NIST's 100: one account guessed once a second
// for a day from 1,000 addresses gets at most 100 failed guesses through,
// and the hard stop blocks the rest.
func TestTargetedStopsAt100(t *testing.T) {
	t.Parallel()
	s := sharedScenario(t, "targeted")
	a := s.Attacker
	if a.MaxPerAccount > 100 || a.Allowed > 100 || a.AccountsReached != 1 || a.AccountsCompromised != 0 {
		t.Errorf("attacker %+v: want at most 100 failed guesses against its one account", a)
	}
	if a.Guesses <= 100 || a.Blocked == 0 {
		t.Errorf("attacker %+v: no more than 100 guesses, or the hard stop never blocked: the day proves nothing", a)
	}
}

// TestLockoutOwnerOnADeviceIsNeverSlowed: an attacker polling the owner's
// account slows neither the owner's trusted device nor the owner at home;
// from a new network without either, the owner shares the attacker's
// bucket.
func TestLockoutOwnerOnADeviceIsNeverSlowed(t *testing.T) {
	t.Parallel()
	s := sharedScenario(t, "lockout")
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
	t.Parallel()
	s := sharedScenario(t, "spray")
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
	// tenth of the day: a password's bucket holds its burst and refills
	// limit every per, burst + floor(window·limit/per) in all.
	window := 24 * time.Hour / 10
	bound := r.Burst + int64(window)*r.Limit/int64(r.Per)
	a := s.Attacker
	if a.MaxUnchallengedPerSecret == 0 || a.MaxUnchallengedPerSecret > bound {
		t.Errorf("attacker %+v: one password got %d guesses through unchallenged, want 1 to %d (login-secret-spray's burst and rate over %v)",
			a, a.MaxUnchallengedPerSecret, bound, window)
	}
	// The bound is what holds the spray: login-secret-spray challenged
	// it, and a password got past its burst.
	var bySecret int64
	for _, rf := range s.Rules {
		if rf.Rule == r.Name {
			bySecret = rf.Attacker.Challenged
		}
	}
	if a.Challenged == 0 || bySecret == 0 || a.MaxUnchallengedPerSecret <= r.Burst {
		t.Errorf("attacker %+v, %d challenged by %s: the spray never reached the bound, the day proves nothing", a, bySecret, r.Name)
	}
}

// TestEveryScenarioRunsAndAddsUp checks, on every scenario of the shared
// run, what every report must hold: the attacker's guesses are split by what the
// rules answered, the rules' stops add up to the attacker's, and shares
// are of the logins.
func TestEveryScenarioRunsAndAddsUp(t *testing.T) {
	t.Parallel()
	rep := shared(t)
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
	if want := int(math.Round(10_000 * rep.Population)); rep.Users != want {
		t.Errorf("%d users at population ×%g, want %d", rep.Users, rep.Population, want)
	}
}

// TestRunIsDeterministic runs three of the scenarios small three times and
// wants the same bytes each time, as JSON and as a table. Where the shared
// run is small (reduced), it is one of the three: a
// scenario's figures depend on nothing outside it, not the run, nor the
// scenarios run with it.
//
// It is not parallel, so that it runs before the parallel tests, which
// wait for the shared run, and the shared run is made beside its own.
func TestRunIsDeterministic(t *testing.T) {
	go runShared()
	cfg := small
	cfg.Scenarios = []string{"cgnat", "stuffing", "lockout"}
	var outs [3]string
	own := outs[:]
	if reduced() {
		own = outs[1:]
	}
	for i := range own {
		rep, err := simulate.Run(context.Background(), rules.Default(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		own[i] = reportBytes(t, rep)
	}
	if reduced() {
		all := shared(t)
		sub := *all
		sub.Scenarios = nil
		for _, name := range cfg.Scenarios {
			for _, s := range all.Scenarios {
				if s.Scenario == name {
					sub.Scenarios = append(sub.Scenarios, s)
				}
			}
		}
		outs[0] = reportBytes(t, &sub)
	}
	for i := 1; i < len(outs); i++ {
		if outs[i] != outs[0] {
			t.Fatalf("run %d differs from run 0:\n%s\n---\n%s", i, outs[i], outs[0])
		}
	}
}

// reportBytes is rep as JSON and as a table.
func reportBytes(t *testing.T, rep *simulate.Report) string {
	t.Helper()
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var tb strings.Builder
	if err := rep.WriteTable(&tb); err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n" + tb.String()
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

// TestProgress: each scenario of the shared run reported its start, its
// way through its day (every few thousand events: each scenario with more
// checks than that), and its end, in order.
func TestProgress(t *testing.T) {
	t.Parallel()
	rep := shared(t)
	stepped := 0
	for _, s := range rep.Scenarios {
		var mine []simulate.Progress
		for _, p := range sharedRun.progress {
			if p.Scenario == s.Scenario {
				mine = append(mine, p)
			}
		}
		if len(mine) < 2 || mine[0].Done != 0 || mine[0].Finished || !mine[len(mine)-1].Finished || mine[len(mine)-1].Done != 1 || mine[len(mine)-1].Checks != s.Checks {
			t.Errorf("%s: progress %+v, want a start and a finished end at %d checks", s.Scenario, mine, s.Checks)
			continue
		}
		for i := 1; i < len(mine); i++ {
			if mine[i].Done < mine[i-1].Done || mine[i].Checks < mine[i-1].Checks || mine[i-1].Finished {
				t.Errorf("%s: progress went back or on after the end: %+v then %+v", s.Scenario, mine[i-1], mine[i])
			}
		}
		if s.Checks > progressEvents {
			if len(mine) < 3 {
				t.Errorf("%s: %d checks, progress %+v: want steps between the start and the end", s.Scenario, s.Checks, mine)
			}
			stepped++
		}
	}
	if stepped == 0 {
		t.Errorf("no scenario ran more than %d checks: the steps are untested", progressEvents)
	}
	// Scenarios report one after the other.
	for i := 1; i < len(sharedRun.progress); i++ {
		if p, q := sharedRun.progress[i-1], sharedRun.progress[i]; p.Scenario != q.Scenario && !p.Finished {
			t.Errorf("%s started before %s finished", q.Scenario, p.Scenario)
		}
	}
}

// progressEvents is how many events a world runs between two progress
// reports (world.run): a scenario of more checks has more events.
const progressEvents = 4096
