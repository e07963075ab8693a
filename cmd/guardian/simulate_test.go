package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/guardian-sec/guardian/internal/simulate"
)

// quick is a small simulation: every scenario, a fiftieth of the users, a
// hundredth of each attack.
var quick = []string{"simulate", "--population", "0.02", "--attack", "0.01"}

// TestSimulateCommandIsDeterministic runs guardian simulate again and again,
// each time a process of its own (so that nothing a process draws once, a
// hash seed, can vary it unseen), and wants the same bytes, as a table and
// as JSON; stderr, not a terminal, gets no progress line.
func TestSimulateCommandIsDeterministic(t *testing.T) {
	bin := guardianBinary(t)
	for _, format := range []string{"table", "json"} {
		var first string
		for i := range 3 {
			code, out, errOut := runProcess(t, bin, append(append([]string{}, quick...), "--format", format)...)
			if code != exitOK || errOut != "" {
				t.Fatalf("%s: exit %d, stderr %q", format, code, errOut)
			}
			if i == 0 {
				first = out
			} else if out != first {
				t.Fatalf("%s: run %d differs from run 0:\n%s\n---\n%s", format, i, out, first)
			}
		}
		if format == "table" {
			for _, want := range []string{"SCENARIO  ", "stuffing  all rules", "lockout  owner: device", "sms_pumping: otp_send to 10,000 numbers"} {
				if !strings.Contains(strings.Join(strings.Fields(first), " "), strings.Join(strings.Fields(want), " ")) {
					t.Errorf("the table lacks %q:\n%s", want, first)
				}
			}
			continue
		}
		var rep simulate.Report
		if err := json.Unmarshal([]byte(first), &rep); err != nil {
			t.Fatalf("stdout is not a report: %v\n%s", err, first)
		}
		if rep.Rules != "builtin" || rep.Users != 200 || len(rep.Scenarios) != len(simulate.Names()) {
			t.Errorf("report of %s, %d users, %d scenarios; want the built-in rules, 200 users, every scenario", rep.Rules, rep.Users, len(rep.Scenarios))
		}
	}
}

func TestSimulateCommandScenariosAndRules(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	writeTestFile(t, path, `version: 1
rules:
  - name: login-account
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1m
    burst: 5
`)
	code, out, errOut := runCLI(append(quick, "--format", "json", "--rules", path, "--scenario", "targeted", "--scenario", "stuffing")...)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var rep simulate.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Rules != path || len(rep.Scenarios) != 2 || rep.Scenarios[0].Scenario != "targeted" || rep.Scenarios[1].Scenario != "stuffing" {
		t.Fatalf("report %+v, want targeted then stuffing under %s", rep, path)
	}
	// Without the hard stop, the targeted account's guesses go on at the
	// account's rate.
	if a := rep.Scenarios[0].Attacker; a.MaxPerAccount <= 100 {
		t.Errorf("targeted under login-account alone: %+v, want more than the hard stop's 100", a)
	}
}

func TestSimulateCommandUsage(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	writeTestFile(t, bad, "version: 1\nrules:\n  - name: a\n    flows: [login]\n    key: ip\n    type: rate\n    limit: 0\n    per: 1m\n")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown scenario", []string{"--scenario", "phishing"}, exitUsage, `"phishing" is not one of stuffing, spray, targeted, lockout, cgnat, sms_pumping`},
		{"bad format", []string{"--format", "xml"}, exitUsage, `"xml" is not table or json`},
		{"no population", []string{"--population", "0"}, exitUsage, "--population: 0 is not above 0"},
		{"a huge attack", []string{"--attack", "1000"}, exitUsage, "--attack: 1000 is not above 0 and at most 100"},
		{"an argument", []string{"stuffing"}, exitUsage, `unexpected argument "stuffing"`},
		{"invalid rules", []string{"--rules", bad}, exitUsage, bad + ":7: limit"},
	}
	for _, tt := range tests {
		code, out, errOut := runCLI(append([]string{"simulate"}, tt.args...)...)
		if code != tt.code || out != "" || !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d, nothing, and %q", tt.name, code, out, errOut, tt.code, tt.want)
		}
	}
}

// TestSimulateProgressLine: the line is rewritten in place while a
// scenario runs, and ends with a line of its own per scenario, each timed
// from its own start.
func TestSimulateProgressLine(t *testing.T) {
	var b strings.Builder
	p := progressLine(&b)
	for _, name := range []string{"spray", "spray"} {
		p(simulate.Progress{Scenario: name})
		p(simulate.Progress{Scenario: name, Done: 0.5, Checks: 10})
		p(simulate.Progress{Scenario: name, Done: 1, Finished: true, Checks: 20})
	}
	out := b.String()
	if n := strings.Count(out, "\r\033[Kguardian simulate: spray done, 20 checks in "); n != 2 || strings.Count(out, "\n") != 2 || !strings.Contains(out, "spray   0% of its day, 0 checks") {
		t.Errorf("progress %q: want the line rewritten and two done lines", out)
	}
}
