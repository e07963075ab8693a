package replay_test

import (
	"context"
	"strings"
	"testing"

	"github.com/guardian-sec/guardian/internal/replay"
	"github.com/guardian-sec/guardian/internal/rules"
)

// TestRunSplitsByOutcome: each would-be decision is counted under the
// outcome its attempt was first reported with, or as unreported.
func TestRunSplitsByOutcome(t *testing.T) {
	// acct allows alice's first two checks (their success counts nowhere)
	// and would slow every other.
	lines := []string{
		`{"ts":"2026-11-29T10:00:00.000Z","type":"check","id":"c1","flow":"login","account":"alice","ip":"192.0.2.1"}`,
		`{"ts":"2026-11-29T10:00:00.100Z","type":"report","id":"c1","outcome":"success"}`,
		`{"ts":"2026-11-29T10:00:01.000Z","type":"check","id":"c2","flow":"login","account":"alice","ip":"192.0.2.1"}`,
		`{"ts":"2026-11-29T10:00:01.100Z","type":"report","id":"c2","outcome":"success"}`,
		// Would slow: a failure.
		`{"ts":"2026-11-29T10:00:02.000Z","type":"check","id":"c3","flow":"login","account":"alice","ip":"192.0.2.1"}`,
		`{"ts":"2026-11-29T10:00:02.100Z","type":"report","id":"c3","outcome":"failure"}`,
		// Would slow: never reported.
		`{"ts":"2026-11-29T10:00:03.000Z","type":"check","id":"c4","flow":"login","account":"alice","ip":"192.0.2.1"}`,
		// Would slow: reported twice, counted by the first report, a
		// success: the user got in.
		`{"ts":"2026-11-29T10:00:04.000Z","type":"check","id":"c5","flow":"login","account":"alice","ip":"192.0.2.1"}`,
		`{"ts":"2026-11-29T10:00:04.100Z","type":"report","id":"c5","outcome":"success"}`,
		`{"ts":"2026-11-29T10:00:04.200Z","type":"report","id":"c5","outcome":"failure"}`,
		// Would slow: production slowed it (no attempt, no report).
		`{"ts":"2026-11-29T10:00:05.000Z","type":"check","id":"c6","flow":"login","account":"alice","ip":"192.0.2.1","decision":"slow","rule":"acct"}`,
		// Would slow: a check of the same id later, which makes c7 the
		// first's last word: unreported.
		`{"ts":"2026-11-29T10:00:06.000Z","type":"check","id":"c7","flow":"login","account":"alice","ip":"192.0.2.1"}`,
		`{"ts":"2026-11-29T10:00:07.000Z","type":"check","id":"c7","flow":"login","account":"alice","ip":"192.0.2.1"}`,
		`{"ts":"2026-11-29T10:00:07.100Z","type":"report","id":"c7","outcome":"success"}`,
		// Would slow: its report comes after the replay forgot the check.
		`{"ts":"2026-11-29T10:00:08.000Z","type":"check","id":"c8","flow":"login","account":"alice","ip":"192.0.2.1"}`,
		`{"ts":"2026-11-29T10:30:08.000Z","type":"report","id":"c8","outcome":"success"}`,
	}
	got, err := replay.Run(context.Background(), mustParse(t, oneRule), strings.NewReader(strings.Join(lines, "\n")), replay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r := got.Rules[0]
	want := replay.ByOutcome{
		LaterSuccess: replay.Counts{WouldSlow: 2}, // c5, the second c7
		Failure:      replay.Counts{WouldSlow: 1}, // c3
		Unreported:   replay.Counts{WouldSlow: 4}, // c4, c6, the first c7, c8
	}
	if r.WouldSlow != 7 || jsonOf(t, r.ByOutcome) != jsonOf(t, want) {
		t.Errorf("would slow %d, by outcome %s; want 7, %s", r.WouldSlow, jsonOf(t, r.ByOutcome), jsonOf(t, want))
	}
	var b strings.Builder
	if err := got.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "acct  slow   2              1        4") {
		t.Errorf("the table does not split acct's 7 would-slow checks 2/1/4:\n%s", b.String())
	}
}

// TestByOutcomeAddsUp: over a generated day, each rule's split adds up to
// its would-be decisions, and the friction of normal users shows as
// later_success.
func TestByOutcomeAddsUp(t *testing.T) {
	t.Parallel()
	var events strings.Builder
	if _, err := (traffic{users: 50, perSecond: 0.01, attacks: true, seed: 6}).write(&events); err != nil {
		t.Fatal(err)
	}
	// A rule tight enough that normal users trip it too.
	set := mustParse(t, dayRules+`  - name: one-a-day
    flows: [login]
    key: account
    type: rate
    limit: 1
    per: 24h
    burst: 1
`)
	got, err := replay.Run(context.Background(), set, strings.NewReader(events.String()), replay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got.Rules {
		o := r.ByOutcome
		for _, a := range []rules.Action{rules.Slow, rules.Block, rules.Challenge} {
			sum := o.LaterSuccess.Of(a) + o.Failure.Of(a) + o.Unreported.Of(a)
			var total uint64
			switch a {
			case rules.Slow:
				total = r.WouldSlow
			case rules.Block:
				total = r.WouldBlock
			case rules.Challenge:
				total = r.WouldChallenge
			}
			if sum != total {
				t.Errorf("%s: would %s %d, split %d", r.Rule, a, total, sum)
			}
		}
		if r.Rule == "one-a-day" && o.LaterSuccess.WouldSlow == 0 {
			t.Errorf("one-a-day: no later_success: %+v", o)
		}
	}
}
