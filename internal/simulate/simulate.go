// Package simulate runs built-in attack scenarios against a rule set: what
// the rules do to an attacker, and what they cost the legitimate users,
// before the rules ship. Each scenario is a simulated day (a legitimate
// population logging in, and one attack) run through the real engine on
// the embedded store, on a simulated clock: nothing sleeps, a day runs in
// seconds. The same rules and scenarios give the same figures, byte for
// byte, run after run: every random draw comes from a fixed seed, the
// engine's keys from a fixed key, and nothing reads the wall clock.
//
// The scenarios (Names) are those of the contract: stuffing, spray,
// targeted, lockout, cgnat and sms_pumping; each one's setup says what it
// models. The legitimate population (population.go) is the same in every
// scenario: 10,000 users at Config.Population 1, each logging in one to
// three times a day, four logins in five from their home network (which
// guardian knows from earlier logins), three in five on their trusted
// device, one in twenty after a typo, one user in ten with an SMS second
// factor. The auth service sends a secret fingerprint with every login,
// verifies every attempt the rules let ahead and reports it, and handles a
// challenge by having the user solve it (nine users in ten do, an
// attacker's bot one time in twenty) and checking again with
// challenge_passed. A slowed user waits and retries, up to three times
// within 15 minutes; an attacker moves on to its next guess.
//
// Figures are of the rule set as written, enforced together: what the
// attacker got (guesses that went ahead, the most against one account,
// the accounts reached and, under the model's reused and common passwords,
// compromised), and the share of the users' logins slowed, challenged or
// blocked, the owner's apart in lockout and cgnat. Per rule, the guesses
// and logins it was the deciding rule of.
package simulate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/guardian-sec/guardian/internal/rules"
)

// ErrUnknownScenario reports a scenario name that is not one of Names.
var ErrUnknownScenario = errors.New("simulate: unknown scenario")

// day is the simulated day every scenario runs on.
var day = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// Names lists the scenarios, in the order they run.
func Names() []string {
	out := make([]string, len(scenarios))
	for i, s := range scenarios {
		out[i] = s.name
	}
	return out
}

// Config tunes a simulation. The zero value runs every scenario at the
// documented size.
type Config struct {
	// Scenarios names the scenarios to run, in this order; empty means
	// every one, in the order of Names.
	Scenarios []string
	// Population scales the legitimate population: 10,000 users at 1; zero
	// means 1.
	Population float64
	// Attack scales every attacker's volume (its guesses, accounts and
	// numbers); zero means 1. Figures at another scale than 1 are not the
	// documented ones: it is for quick looks and tests.
	Attack float64
	// Progress, when set, is called as each scenario starts, every few
	// thousand events while it runs, and as it ends.
	Progress func(Progress)
}

// Progress is how far a simulation is.
type Progress struct {
	Scenario string
	// Done is the share of the scenario's simulated day run so far, from 0
	// to 1; Finished is set on the scenario's last call.
	Done     float64
	Finished bool
	// Checks counts the checks the engine decided so far in the scenario.
	Checks int64
}

// seed returns the fixed seed of the random source number k.
func (c *Config) seed(k uint64) uint64 { return 0x5eed_0000_0000_0000 + k*0x9e37_79b9_7f4a_7c15 }

// Report is what a simulation found.
type Report struct {
	// Rules is where the rule set came from ("builtin" or its file), and
	// RulesHash its hash (guardian rules check prints it).
	Rules     string `json:"rules"`
	RulesHash string `json:"rules_hash"`
	// Population and Attack are the scales run; Users is the population's
	// size.
	Population float64 `json:"population"`
	Attack     float64 `json:"attack"`
	Users      int     `json:"users"`
	// Scenarios are in the order run.
	Scenarios []ScenarioReport `json:"scenarios"`
}

// ScenarioReport is what one scenario found.
type ScenarioReport struct {
	Scenario string `json:"scenario"`
	// What says what the scenario's attacker does.
	What     string   `json:"what"`
	Attacker Attacker `json:"attacker"`
	// Users is the friction of the legitimate population.
	Users Friction `json:"users"`
	// Owner is the friction of the attacked account's owner, by way in:
	// lockout and cgnat only.
	Owner []Way `json:"owner,omitempty"`
	// Rules are the rules that decided anything in the scenario, in file
	// order.
	Rules []RuleFigures `json:"rules"`
	// Checks counts the checks the engine decided: the scenario's work.
	Checks int64 `json:"checks"`
}

// Run runs the scenarios cfg names against set, one after the other, and
// returns their figures. It fails on an unknown scenario, when ctx ends, or
// when the engine fails, which the embedded store never makes it.
func Run(ctx context.Context, set *rules.Set, cfg Config) (*Report, error) {
	if cfg.Population == 0 {
		cfg.Population = 1
	}
	if cfg.Attack == 0 {
		cfg.Attack = 1
	}
	if cfg.Population < 0 || cfg.Attack < 0 {
		return nil, fmt.Errorf("simulate: a scale must be positive (population %v, attack %v)", cfg.Population, cfg.Attack)
	}
	names := cfg.Scenarios
	if len(names) == 0 {
		names = Names()
	}
	var run []scenario
	for _, n := range names {
		i := slices.IndexFunc(scenarios, func(s scenario) bool { return s.name == n })
		if i < 0 {
			return nil, fmt.Errorf("%w: %q is not one of %s", ErrUnknownScenario, n, strings.Join(Names(), ", "))
		}
		run = append(run, scenarios[i])
	}
	rep := &Report{Rules: set.Source, RulesHash: set.Hash(), Population: cfg.Population, Attack: cfg.Attack, Scenarios: []ScenarioReport{}}
	for _, sc := range run {
		sr, users, err := runScenario(ctx, set, sc, cfg)
		if err != nil {
			return nil, err
		}
		rep.Users = users
		rep.Scenarios = append(rep.Scenarios, sr)
	}
	return rep, nil
}

// runScenario runs one scenario on a world of its own, and returns its
// figures and the population's size.
func runScenario(ctx context.Context, set *rules.Set, sc scenario, cfg Config) (ScenarioReport, int, error) {
	rec := newRecorder(sc.ways)
	index := uint64(slices.IndexFunc(scenarios, func(s scenario) bool { return s.name == sc.name }))
	w := newWorld(ctx, set, day.Add(-3*time.Hour), cfg.seed(100+index), rec)
	r := &run{cfg: cfg, w: w, rec: rec, pop: rand.New(rand.NewPCG(cfg.seed(0), 3)), start: day, span: 24 * time.Hour}
	sc.setup(r)
	report := func(finished bool) {
		if cfg.Progress == nil {
			return
		}
		done := min(max(float64(w.clock.now.Sub(r.start))/float64(r.span), 0), 1)
		if finished {
			done = 1
		}
		cfg.Progress(Progress{Scenario: sc.name, Done: done, Finished: finished, Checks: w.checks})
	}
	report(false)
	if err := w.run(func() { report(false) }); err != nil {
		return ScenarioReport{}, 0, err
	}
	report(true)
	attacker, friction, owner, perRule := rec.figures(set)
	return ScenarioReport{Scenario: sc.name, What: sc.what, Attacker: attacker, Users: friction, Owner: owner, Rules: perRule, Checks: w.checks}, r.nUsers, nil
}
