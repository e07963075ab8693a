package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/simulate"
)

const simulateHelp = `Usage: guardian simulate [--rules FILE] [--scenario NAME]... [--format table|json]
                         [--population SCALE] [--attack SCALE] [--quiet]

Runs built-in attack scenarios against a rule set (the built-in rules
without --rules): each a simulated day of a legitimate population logging
in and one attack, through the real engine on the embedded store, on a
simulated clock, so a day runs in seconds. The same rules give the same
output, byte for byte, run after run.

Scenarios: stuffing, spray, targeted, lockout, cgnat, sms_pumping (all of
them without --scenario). For each: the attacker's guesses that went ahead
(in all, and against one account at most), the accounts reached, and the
share of the legitimate users' logins slowed, challenged or blocked (the
attacked owner's apart in lockout and cgnat); then per rule, the guesses and
logins it decided. README.md and docs/operations.md describe the population
(--population scales it) and the attackers (--attack scales their volume,
for a quick look).

A progress line goes to stderr when it is a terminal (--quiet: never).
Exit status: 0 done, 1 the simulation failed, 2 bad usage or a rules file
that does not validate.
`

// scenarioFlags collects --scenario, which may be given several times.
type scenarioFlags []string

func (s *scenarioFlags) String() string { return strings.Join(*s, ",") }

func (s *scenarioFlags) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// simulateCmd is `guardian simulate`.
func simulateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("guardian simulate", simulateHelp)
	fs := c.fs
	var rulesPath, format string
	var names scenarioFlags
	var population, attack float64
	var quiet bool
	fs.StringVar(&rulesPath, "rules", "", "the rules `file` to simulate (YAML); empty: the built-in rules")
	fs.Var(&names, "scenario", "run this scenario (repeatable): "+strings.Join(simulate.Names(), ", ")+"; none given: all")
	fs.StringVar(&format, "format", "table", "output: table (for people) or json (for machines)")
	fs.Float64Var(&population, "population", 1, "scale of the legitimate population (1: 10,000 users)")
	fs.Float64Var(&attack, "attack", 1, "scale of every attack's volume, for a quick look (the documented figures are at 1)")
	fs.BoolVar(&quiet, "quiet", false, "no progress line on stderr")
	pos, code, ok := c.parse(args, nil, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		c.fail(stderr, "unexpected argument %q", pos[0])
		return exitUsage
	}
	if format != "table" && format != "json" {
		c.fail(stderr, "--format: %q is not table or json", format)
		return exitUsage
	}
	for _, f := range []struct {
		name  string
		scale float64
	}{{"population", population}, {"attack", attack}} {
		if !(f.scale > 0 && f.scale <= 100) {
			c.fail(stderr, "--%s: %v is not above 0 and at most 100", f.name, f.scale)
			return exitUsage
		}
	}
	set := rules.Default()
	if rulesPath != "" {
		if set = loadRulesFile(rulesPath, stderr); set == nil {
			return exitUsage
		}
	}
	cfg := simulate.Config{Scenarios: names, Population: population, Attack: attack}
	if !quiet && isTerminal(stderr) {
		cfg.Progress = progressLine(stderr)
	}
	rep, err := simulate.Run(ctx, set, cfg)
	switch {
	case errors.Is(err, simulate.ErrUnknownScenario):
		c.fail(stderr, "--scenario: %v", strings.TrimPrefix(err.Error(), "simulate: "))
		return exitUsage
	case err != nil:
		fmt.Fprintln(stderr, "guardian simulate:", err)
		return exitFailure
	}
	return printResult(stdout, stderr, "guardian simulate", format, rep)
}

// progressLine returns a Progress that rewrites one line of w: the
// scenario, how much of its day has run, its checks and its time so far,
// and a line of its own once it is done.
func progressLine(w io.Writer) func(simulate.Progress) {
	var start, last time.Time
	var scenario string
	return func(p simulate.Progress) {
		now := time.Now()
		if p.Scenario != scenario {
			scenario, start = p.Scenario, now
		}
		switch {
		case p.Finished:
			fmt.Fprintf(w, "\r\033[Kguardian simulate: %s done, %d checks in %s\n", p.Scenario, p.Checks, now.Sub(start).Round(100*time.Millisecond))
			scenario = ""
			return
		case now.Sub(last) < progressRedraw:
			return
		}
		last = now
		fmt.Fprintf(w, "\r\033[Kguardian simulate: %s %3.0f%% of its day, %d checks, %s", p.Scenario, 100*p.Done, p.Checks, now.Sub(start).Round(time.Second))
	}
}

var _ flag.Value = (*scenarioFlags)(nil)
