package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/event"
	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/replay"
	"github.com/guardian-sec/guardian/internal/rules"
)

// replayedRules are the rules the fleet runs, all in shadow mode so that
// every check is allowed and reported as the test says: per account, per
// /24 distinct accounts (counting attempts: with count: failures the test's
// accounts, each of which gets in, would stop counting), per guessed
// secret, and the global failure rate.
// Rates refill by less than one unit in the minutes the test takes.
const replayedRules = `version: 1
rules:
  - name: acct
    flows: [login]
    key: account
    type: rate
    limit: 1
    per: 1h
    burst: 1
    mode: shadow
  - name: net-distinct
    flows: [login]
    key: ip
    ipv4_prefix: 24
    type: distinct
    of: account
    count: attempts
    limit: 5
    per: 24h
    mode: shadow
  - name: spray
    flows: [login]
    key: secret
    type: rate
    count: failures
    limit: 1
    per: 1h
    burst: 5
    action: challenge
    mode: shadow
  - name: global
    flows: [login]
    key: global
    type: failure_rate
    limit: 20
    per: 1m
    mode: shadow
`

// TestReplayOfAFleetsDecisionLogs runs two instances on one Redis, each
// writing its own decision log, and drives logins through them as a load
// balancer would: each check to one instance, its report to the other.
// Replaying the two logs merged: is the same 20 times over, as a summary
// and as a comparison; equals replaying their events in one file in time
// order; splits each would-be stop by the attempt's reported outcome as the
// test reported it; and counts the key: secret rule from the logged
// pseudonyms, which hold no fingerprint.
func TestReplayOfAFleetsDecisionLogs(t *testing.T) {
	redis := redistest.Start(t)
	dir := t.TempDir()
	paths := []string{filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")}
	var logs []io.Writer
	for _, p := range paths {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		logs = append(logs, f)
	}
	fleet := startFleet(t, 2, fleetConfig{redisURL: redis.URL(), rulesYAML: replayedRules, decisionLogs: logs})

	// 20 accounts on one /24, four logins each, a round at a time: the
	// first allowed by acct, the next three each a would-be slow, whose
	// attempts are reported a success, a failure, and not at all. The
	// failures guess one common password: spray's would-be challenges.
	plan := []string{"success", "success", "failure", ""}
	const accounts = 20
	events := 0
	for round, outcome := range plan {
		for a := range accounts {
			in, other := fleet[(round+a)%2], fleet[(round+a+1)%2]
			fp := fmt.Sprintf("fp-account-%04d-right", a)
			if outcome != "success" {
				fp = "fp-common-password-01"
			}
			r := in.check(t, map[string]any{"flow": "login", "account": fmt.Sprintf("user%d@example.com", a), "ip": fmt.Sprintf("198.51.100.%d", 1+a), "secret_fingerprint": fp})
			id, _ := r.body["attempt_id"].(string)
			if r.status != 200 || id == "" {
				t.Fatalf("check: %d %s, want allowed (every rule is in shadow)", r.status, r.raw)
			}
			events++
			if outcome != "" {
				if rep := other.report(t, id, outcome); rep.status != 200 {
					t.Fatalf("report on the other instance: %d %s", rep.status, rep.raw)
				}
				events++
			}
		}
		// The rounds a few milliseconds apart: one account's checks never
		// share a logged millisecond.
		time.Sleep(5 * time.Millisecond)
	}
	// The logs are written every second.
	var files [][]byte
	waitFor(t, "both decision logs written", 10*time.Second, func() bool {
		files = files[:0]
		n := 0
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, b)
			n += bytes.Count(b, []byte("\n"))
		}
		return n == events
	})
	for i, f := range files {
		if bytes.Contains(f, []byte("fp-")) || bytes.Contains(f, []byte("example.com")) || bytes.Contains(f, []byte("198.51.100")) {
			t.Fatalf("log %d holds a fingerprint or an identifier in clear:\n%s", i, f)
		}
	}

	set, err := rules.Parse("rules.yaml", []byte(replayedRules), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	enforced := set.InMode(rules.Enforce)
	sources := func() []replay.Source {
		return []replay.Source{{Name: "a.jsonl", R: bytes.NewReader(files[0])}, {Name: "b.jsonl", R: bytes.NewReader(files[1])}}
	}
	ctx := context.Background()
	cfg := replay.Config{Malformed: func(e *replay.LineError) { t.Errorf("malformed: %v", e) }}
	var firstRun, firstCompare string
	var summary *replay.Summary
	for i := range 20 {
		s, err := replay.RunSources(ctx, set, sources(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		c, err := replay.CompareSources(ctx, set, enforced, sources(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		run, compare := rendered(t, s), rendered(t, c)
		if i == 0 {
			firstRun, firstCompare, summary = run, compare, s
			continue
		}
		if run != firstRun {
			t.Fatalf("replay %d differs from replay 0:\n%s\n---\n%s", i, run, firstRun)
		}
		if compare != firstCompare {
			t.Fatalf("compare %d differs from compare 0:\n%s\n---\n%s", i, compare, firstCompare)
		}
	}

	// The merge is the events in one file in time order.
	var lines [][]byte
	for _, f := range files {
		lines = append(lines, bytes.SplitAfter(bytes.TrimSuffix(f, []byte("\n")), []byte("\n"))...)
	}
	parse := func(l []byte) event.Event {
		ev, err := event.Parse(bytes.TrimSuffix(l, []byte("\n")))
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	// In time order; of one millisecond, checks first.
	slices.SortStableFunc(lines, func(x, y []byte) int {
		a, b := parse(x), parse(y)
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		return strings.Compare(string(a.Kind), string(b.Kind))
	})
	for i := range lines {
		if !bytes.HasSuffix(lines[i], []byte("\n")) {
			lines[i] = append(lines[i], '\n')
		}
	}
	one, err := replay.Run(ctx, set, bytes.NewReader(bytes.Join(lines, nil)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rendered(t, summary), rendered(t, one); got != want {
		t.Errorf("the two logs merged:\n%s\nwant what their events in one file give:\n%s", got, want)
	}
	if in := summary.Input; in.OutOfOrder != 0 || summary.Reports.Applied != in.Reports || in.Checks != 4*accounts {
		t.Errorf("input %+v, reports %+v: want %d checks in order, every report applied", in, summary.Reports, 4*accounts)
	}

	byRule := map[string]replay.RuleSummary{}
	for _, r := range summary.Rules {
		byRule[r.Rule] = r
	}
	// acct: every account's second, third and fourth checks.
	if got, want := byRule["acct"].ByOutcome, (replay.ByOutcome{
		LaterSuccess: replay.Counts{WouldSlow: accounts},
		Failure:      replay.Counts{WouldSlow: accounts},
		Unreported:   replay.Counts{WouldSlow: accounts},
	}); got != want {
		t.Errorf("acct by outcome %+v, want %+v", got, want)
	}
	// spray: the common password failing 40 times (20 reported, 20 never),
	// 5 allowed, the rest challenged; the right passwords spend nothing.
	if s := byRule["spray"]; s.Checks != 4*accounts || s.WouldChallenge != 2*accounts-5 || s.ByOutcome.LaterSuccess.WouldChallenge != 0 {
		t.Errorf("spray %+v: want %d checks, %d would-be challenges, none of a user who got in", s, 4*accounts, 2*accounts-5)
	}
	if d := byRule["net-distinct"]; d.WouldChallenge == 0 {
		t.Errorf("net-distinct %+v: never trips", d)
	}
}

// rendered is a replay's output as guardian replay prints it, as JSON and
// as a table.
func rendered(t *testing.T, out interface{ WriteTable(io.Writer) error }) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	if err := enc.Encode(out); err != nil {
		t.Fatal(err)
	}
	if err := out.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
