package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/event"
	"github.com/guardian-sec/guardian/internal/replay"
	"github.com/guardian-sec/guardian/internal/rules"
)

// dayRules are the rules the generated day is replayed through.
const dayRules = `version: 1
rules:
  - name: login-account
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1m
    burst: 5
  - name: login-ip
    flows: [login]
    key: ip
    type: rate
    count: failures
    limit: 30
    per: 10m
    burst: 30
  - name: login-hard-stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 100
    action: block
  - name: login-ip-24
    flows: [login]
    key: ip
    ipv4_prefix: 24
    type: rate
    limit: 100
    per: 1h
    burst: 100
    mode: shadow
  - name: login-global
    flows: [login]
    key: global
    type: failure_rate
    limit: 100
    per: 1m
    # No hysteresis: a rule in force stays so until a check sees the rate
    # back under its limit, which after an attack window is the first
    # normal check; with hysteresis the next few would be challenged too.
    hysteresis: 0s
`

func mustParse(tb testing.TB, yaml string) *rules.Set {
	tb.Helper()
	set, err := rules.Parse("test.yaml", []byte(yaml), day)
	if err != nil {
		tb.Fatal(err)
	}
	return set
}

// ms returns the instant d after at.
func ms(at time.Time, d time.Duration) time.Time { return at.Add(d) }

func TestRunGeneratedDay(t *testing.T) {
	t.Parallel()
	var events bytes.Buffer
	st, err := traffic{users: 500, perSecond: 2000.0 / 86400, attacks: true, seed: 1}.write(&events)
	if err != nil {
		t.Fatal(err)
	}
	got, err := replay.Run(context.Background(), mustParse(t, dayRules), &events, replay.Config{
		Malformed: func(e *replay.LineError) { t.Errorf("malformed: %v", e) },
	})
	if err != nil {
		t.Fatal(err)
	}

	wantInput := replay.Input{Lines: st.events, Checks: st.checks, Reports: st.reports}
	if in := got.Input; in.Lines != wantInput.Lines || in.Checks != wantInput.Checks || in.Reports != wantInput.Reports || in.Malformed != 0 || in.OutOfOrder != 0 {
		t.Fatalf("input = %+v, want %+v", in, wantInput)
	}
	if want := (replay.ReportStats{Applied: st.reports}); got.Reports != want {
		t.Fatalf("reports = %+v, want %+v", got.Reports, want)
	}

	// Every check is a login with an account and an address, so every rule
	// is evaluated on every check. The attacks are alone in their windows,
	// so each count follows from the rule's burst:
	//   - the brute force (200 checks in 10s) gets 5 checks through
	//     login-account, 30 through login-ip, 100 through the hard stop and
	//     the /24 rule; the global rule is in force once more than 100
	//     failures were reported in the minute, from its 102nd check;
	//   - the stuffing burst (1000 checks in 10s, one per account, four
	//     addresses in turn) gets 30 checks per address through login-ip,
	//     100 through the /24 rule, and trips the global rule from its
	//     102nd check.
	// Normal users, a few logins a day each, never trip anything.
	checks := uint64(st.checks)
	want := []replay.RuleSummary{
		{Rule: "login-account", Mode: rules.Enforce, Checks: checks, WouldSlow: bruteChecks - 5, KeysHit: 1, KeysHitExact: true,
			FirstLimited: []replay.Hit{{Key: bruteAccount, At: ms(bruteAt, 250*time.Millisecond), Decision: rules.Slow}}},
		{Rule: "login-ip", Mode: rules.Enforce, Checks: checks, WouldSlow: bruteChecks - 30 + stuffChecks - 4*30, KeysHit: 5, KeysHitExact: true,
			FirstLimited: []replay.Hit{
				{Key: bruteIP + "/32", At: ms(bruteAt, 1500*time.Millisecond), Decision: rules.Slow},
				{Key: "192.0.2.1/32", At: ms(stuffAt, 1200*time.Millisecond), Decision: rules.Slow},
				{Key: "192.0.2.2/32", At: ms(stuffAt, 1210*time.Millisecond), Decision: rules.Slow},
				{Key: "192.0.2.3/32", At: ms(stuffAt, 1220*time.Millisecond), Decision: rules.Slow},
				{Key: "192.0.2.4/32", At: ms(stuffAt, 1230*time.Millisecond), Decision: rules.Slow},
			}},
		{Rule: "login-hard-stop", Mode: rules.Enforce, Checks: checks, WouldBlock: bruteChecks - 100, KeysHit: 1, KeysHitExact: true,
			FirstLimited: []replay.Hit{{Key: bruteAccount, At: ms(bruteAt, 5*time.Second), Decision: rules.Block}}},
		{Rule: "login-ip-24", Mode: rules.Shadow, Checks: checks, WouldSlow: bruteChecks - 100 + stuffChecks - 100, KeysHit: 2, KeysHitExact: true,
			FirstLimited: []replay.Hit{
				{Key: "198.51.100.0/24", At: ms(bruteAt, 5*time.Second), Decision: rules.Slow},
				{Key: "192.0.2.0/24", At: ms(stuffAt, time.Second), Decision: rules.Slow},
			}},
		{Rule: "login-global", Mode: rules.Enforce, Checks: checks, WouldChallenge: bruteChecks - 101 + stuffChecks - 101, KeysHit: 1, KeysHitExact: true,
			FirstLimited: []replay.Hit{{Key: "global", At: ms(bruteAt, 101*50*time.Millisecond), Decision: rules.Challenge}}},
	}
	// Every attack check is reported a failure, and no normal user trips a
	// rule: each would-be decision is of a failure.
	for i := range want {
		w := &want[i]
		w.ByOutcome.Failure = replay.Counts{WouldSlow: w.WouldSlow, WouldBlock: w.WouldBlock, WouldChallenge: w.WouldChallenge}
	}
	if len(got.Rules) != len(want) {
		t.Fatalf("%d rules in the summary, want %d", len(got.Rules), len(want))
	}
	for i := range want {
		g, w := jsonOf(t, got.Rules[i]), jsonOf(t, want[i])
		if g != w {
			t.Errorf("rule %s:\n got %s\nwant %s", want[i].Rule, g, w)
		}
	}
}

func jsonOf(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// tuningRules have every kind of rule whose counts could depend on the
// replay's own keys: a distinct count near its limit on many networks, a
// key: secret rule, the global failure rate, beside account and address
// rates and the hard stop.
const tuningRules = dayRules + `  - name: login-ip-distinct
    flows: [login]
    key: ip
    ipv4_prefix: 24
    type: distinct
    of: account
    count: failures
    limit: 20
    per: 24h
  - name: login-secret
    flows: [login]
    key: secret
    type: rate
    count: failures
    limit: 10
    per: 10m
    burst: 10
    action: challenge
`

// TestRunIsDeterministic replays one day 20 times, through Run and
// through Compare, and wants the same bytes every time: as a table and as
// JSON. The spray puts twelve /24s near the distinct rule's limit, where an
// estimate keyed differently each run would trip it at another check now
// and then; it fails one of three passwords on each account, which the
// secret rule sees, and more than the global rule allows in a minute. The
// normal users are few (some ninety logins, a tenth after a typo): they
// trip nothing, and replaying more of them only makes each run longer.
func TestRunIsDeterministic(t *testing.T) {
	t.Parallel()
	var events bytes.Buffer
	if _, err := (traffic{users: 100, perSecond: 0.001, sprayNets: 12, fingerprints: true, seed: 2}).write(&events); err != nil {
		t.Fatal(err)
	}
	set, old := mustParse(t, tuningRules), mustParse(t, dayRules)
	const runs = 20
	var first [2]string
	for i := range runs {
		s, err := replay.Run(context.Background(), set, bytes.NewReader(events.Bytes()), replay.Config{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := replay.Compare(context.Background(), old, set, bytes.NewReader(events.Bytes()), replay.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			// The day exercises what it is meant to.
			for _, r := range s.Rules {
				if tripping := r.Rule == "login-ip-distinct" || r.Rule == "login-secret" || r.Rule == "login-global"; tripping && r.WouldSlow+r.WouldBlock+r.WouldChallenge == 0 {
					t.Errorf("%s never trips: the day proves nothing about it", r.Rule)
				}
			}
			if c.Changed == 0 {
				t.Error("compare changed nothing: the day proves nothing about it")
			}
		}
		for j, out := range []interface{ WriteTable(io.Writer) error }{s, c} {
			var b strings.Builder
			if err := out.WriteTable(&b); err != nil {
				t.Fatal(err)
			}
			got := jsonOf(t, out) + "\n" + b.String()
			if i == 0 {
				first[j] = got
			} else if got != first[j] {
				t.Fatalf("run %d differs from run 0:\n%s\n---\n%s", i, got, first[j])
			}
		}
	}
}

// oneRule limits a login account to two checks back to back, then one an
// hour.
const oneRule = `version: 1
rules:
  - name: acct
    flows: [login, otp_send]
    key: account
    type: rate
    limit: 1
    per: 1h
    burst: 2
`

// TestRunSkipsWhatGuardianRefuses: every check guardian answers with a 400
// (engine.CheckRequest.Validate, which the HTTP API runs) is skipped, and
// nothing else is.
func TestRunSkipsWhatGuardianRefuses(t *testing.T) {
	const ts = `{"ts":"2026-11-29T10:00:00.000Z","type":"check","id":"c",`
	refused := []string{
		ts + `"flow":"signup","ip":"192.0.2.1"}`,
		ts + `"flow":"login","ip":"192.0.2.1","cost":0}`,
		ts + `"flow":"login","ip":"192.0.2.1","cost":-1}`,
		ts + `"flow":"login","ip":"192.0.2.1","cost":1001}`,
		ts + `"flow":"login","ip":"192.0.2.1","account":""}`,
		ts + `"flow":"login","ip":"192.0.2.1","account":"a\u0000b"}`,
		ts + `"flow":"login","ip":"192.0.2.1","account":"   "}`,
		ts + `"flow":"login","ip":""}`,
		ts + `"flow":"login","ip":"fe80::1%eth0"}`,
		ts + `"flow":"otp_send","ip":"192.0.2.1"}`,
		ts + `"flow":"otp_send","ip":"192.0.2.1","recipient":""}`,
		ts + `"flow":"otp_verify","ip":"192.0.2.1","recipient":"555-0100"}`,
	}
	accepted := []string{
		ts + `"flow":"login","ip":"192.0.2.1"}`,
		ts + `"flow":"login","ip":" 192.0.2.1 ","cost":1000}`,
		ts + `"flow":"otp_verify","ip":"192.0.2.1"}`,
		ts + `"flow":"otp_send","ip":"2001:db8::1","recipient":"+1 (555) 010-0000","account":"Alice"}`,
	}
	for _, line := range refused {
		var skipped []*replay.LineError
		got, err := replay.Run(context.Background(), mustParse(t, oneRule), strings.NewReader(line), replay.Config{
			Malformed: func(e *replay.LineError) { skipped = append(skipped, e) },
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(skipped) != 1 || got.Input.Checks != 0 {
			t.Errorf("%s: skipped %v and replayed %d checks; want it skipped", line, skipped, got.Input.Checks)
		}
	}
	got, err := replay.Run(context.Background(), mustParse(t, oneRule), strings.NewReader(strings.Join(accepted, "\n")), replay.Config{
		Malformed: func(e *replay.LineError) { t.Errorf("skipped %v, which guardian decides", e) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Input.Checks != int64(len(accepted)) {
		t.Errorf("replayed %d checks, want %d", got.Input.Checks, len(accepted))
	}
}

func TestRunBadInput(t *testing.T) {
	long := `{"ts":"2026-11-29T10:00:00.000Z","type":"check","id":"x","flow":"login","ip":"192.0.2.1","account":"` + strings.Repeat("a", replay.MaxLine) + `"}`
	lines := []string{
		/* 1 */ `{"ts":"2026-11-29T10:00:00.000Z","type":"check","id":"c1","flow":"login","account":"alice","ip":"192.0.2.1"}`,
		/* 2 */ `not json at all`,
		/* 3 */ `{"ts":"2026-11-29T10:00:01.000Z","type":"logout","id":"c2"}`,
		/* 4 */ `{"ts":"2026-11-29T10:00:02.000Z","type":"report","id":"never-checked","outcome":"failure"}`,
		/* 5 */ `{"ts":"2026-11-29T10:00:03.000Z","type":"check","id":"c3","flow":"login","account":"alice","ip":"300.1.1.1"}`,
		/* 6 */ ``,
		/* 7 */ `{"ts":"2026-11-29T09:00:00.000Z","type":"check","id":"c4","flow":"login","account":"alice","ip":"192.0.2.1"}`,
		/* 8 */ long,
		/* 9 */ `{"ts":"2026-11-29T10:00:04.000Z","type":"check","id":"c5","flow":"login","account":"alice","ip":"192.0.2.1","colour":"red"}`,
		/* 10 */ `{"ts":"2026-11-29T10:00:05.000Z","type":"check","id":"c6","flow":"otp_send","account":"alice","ip":"192.0.2.1"}`,
		/* 11 */ `{"ts":"yesterday","type":"check","id":"c7","flow":"login","ip":"192.0.2.1"}`,
		/* 12 */ `{"ts":"2026-11-29T10:00:06.000Z","type":"check","id":"c8","flow":"login","account":"ALICE","ip":"192.0.2.1"}`,
		/* 13 */ `{"ts":"2026-11-29T10:00:07.000Z","type":"report","id":"c8","outcome":"failure"}`,
		/* 14 */ `{"ts":"2026-11-29T10:00:08.000Z","type":"report","id":"c1","outcome":"maybe"}`,
		/* 15 */ `{"ts":"2026-11-29T10:00:09.000Z","type":"check","id":"c9","flow":"login","account":"alice","ip":"192.0.2.1"}`,
	}
	var skipped []*replay.LineError
	got, err := replay.Run(context.Background(), mustParse(t, oneRule), strings.NewReader(strings.Join(lines, "\n")), replay.Config{
		Malformed: func(e *replay.LineError) { skipped = append(skipped, e) },
	})
	if err != nil {
		t.Fatalf("Run: %v (bad lines must never be fatal)", err)
	}

	wantSkipped := []struct {
		line int64
		err  error
	}{
		{2, event.ErrMalformed},
		{3, event.ErrUnknownType},
		{5, replay.ErrRejected},
		{8, event.ErrMalformed},
		{9, event.ErrMalformed},
		{10, replay.ErrRejected}, // otp_send without a recipient
		{11, event.ErrMalformed},
		{14, event.ErrMalformed},
	}
	if len(skipped) != len(wantSkipped) {
		t.Fatalf("skipped %v, want lines %v", skipped, wantSkipped)
	}
	for i, w := range wantSkipped {
		if skipped[i].Line != w.line || !errors.Is(skipped[i], w.err) {
			t.Errorf("skipped[%d] = %v, want line %d: %v", i, skipped[i], w.line, w.err)
		}
	}

	wantInput := replay.Input{
		Lines: 15, Checks: 4, Reports: 2, Malformed: 8, OutOfOrder: 1,
		First: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC),
		Last:  time.Date(2026, 11, 29, 10, 0, 9, 0, time.UTC),
	}
	if got.Input != wantInput {
		t.Errorf("input = %+v, want %+v", got.Input, wantInput)
	}
	if want := (replay.ReportStats{Applied: 1, NoCheck: 1}); got.Reports != want {
		t.Errorf("reports = %+v, want %+v", got.Reports, want)
	}
	// Line 7 is an hour older than line 1: it is replayed at 10:00:00, so
	// it spends alice's second unit at once, and lines 12 and 15 (ALICE is
	// alice) find the bucket empty.
	r := got.Rules[0]
	if r.Checks != 4 || r.WouldSlow != 2 || r.KeysHit != 1 {
		t.Errorf("acct = %+v, want 4 checks, 2 would slow, 1 key", r)
	}
	if want := (replay.Hit{Key: "alice", At: time.Date(2026, 11, 29, 10, 0, 6, 0, time.UTC), Decision: rules.Slow}); len(r.FirstLimited) != 1 || r.FirstLimited[0] != want {
		t.Errorf("first limited = %+v, want [%+v]", r.FirstLimited, want)
	}
}

// oneFailure is a failures rule that allows one failure back to back: a
// success report gives its check's unit back, a failure keeps it.
const oneFailure = `version: 1
rules:
  - name: fail
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1h
    burst: 1
`

func TestRunReportsFindTheirChecks(t *testing.T) {
	lines := []string{
		`{"ts":"2026-11-29T10:00:00.000Z","type":"check","id":"a","flow":"login","account":"bob","ip":"192.0.2.1"}`,
		`{"ts":"2026-11-29T10:00:01.000Z","type":"report","id":"a","outcome":"success"}`,
		`{"ts":"2026-11-29T10:00:02.000Z","type":"report","id":"a","outcome":"success"}`,
		`{"ts":"2026-11-29T10:00:03.000Z","type":"check","id":"b","flow":"login","account":"bob","ip":"192.0.2.1"}`,
		`{"ts":"2026-11-29T10:11:00.000Z","type":"report","id":"b","outcome":"success"}`,
		`{"ts":"2026-11-29T10:11:01.000Z","type":"check","id":"c","flow":"login","account":"bob","ip":"192.0.2.1"}`,
		`{"ts":"2026-11-29T10:11:02.000Z","type":"report","id":"c","outcome":"failure"}`,
		`{"ts":"2026-11-29T11:00:00.000Z","type":"report","id":"a","outcome":"failure"}`,
	}
	got, err := replay.Run(context.Background(), mustParse(t, oneFailure), strings.NewReader(strings.Join(lines, "\n")+"\n"), replay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// a is reported once (its unit back), then again (duplicate), then an
	// hour later (forgotten: no check). b's report comes after its attempt
	// id expired, so b keeps its unit and c is limited.
	if want := (replay.ReportStats{Applied: 2, Duplicate: 1, Expired: 1, NoCheck: 1}); got.Reports != want {
		t.Errorf("reports = %+v, want %+v", got.Reports, want)
	}
	if r := got.Rules[0]; r.Checks != 3 || r.WouldSlow != 1 {
		t.Errorf("fail = %+v, want 3 checks, 1 would slow", r)
	}
}

// TestRunKeepsTenantsApart: one account name in two tenants is two
// accounts in a replay as in production, and a report settles its check in
// the check's tenant: bob in tenant a, his unit given back, then bob in
// tenant b and bob of the default tenant each have theirs.
func TestRunKeepsTenantsApart(t *testing.T) {
	lines := []string{
		`{"ts":"2026-11-29T10:00:00.000Z","type":"check","id":"a","flow":"login","account":"bob","ip":"192.0.2.1","tenant":"a"}`,
		`{"ts":"2026-11-29T10:00:01.000Z","type":"report","id":"a","outcome":"success"}`,
		`{"ts":"2026-11-29T10:00:02.000Z","type":"check","id":"b","flow":"login","account":"bob","ip":"192.0.2.1","tenant":"a"}`,
		`{"ts":"2026-11-29T10:00:03.000Z","type":"check","id":"c","flow":"login","account":"bob","ip":"192.0.2.1","tenant":"b"}`,
		`{"ts":"2026-11-29T10:00:04.000Z","type":"check","id":"d","flow":"login","account":"bob","ip":"192.0.2.1"}`,
		`{"ts":"2026-11-29T10:00:05.000Z","type":"check","id":"e","flow":"login","account":"bob","ip":"192.0.2.1","tenant":"b"}`,
	}
	got, err := replay.Run(context.Background(), mustParse(t, oneFailure), strings.NewReader(strings.Join(lines, "\n")+"\n"), replay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (replay.ReportStats{Applied: 1}); got.Reports != want {
		t.Errorf("reports = %+v, want %+v: the report settles in its check's tenant", got.Reports, want)
	}
	if r := got.Rules[0]; r.Checks != 5 || r.WouldSlow != 1 {
		t.Errorf("fail = %+v, want 5 checks, 1 would slow (tenant b's second)", r)
	}
}

// The compare scenario: the stuffing burst alone, under a per-address rule
// (OLD), then with a /24 rule enforced beside it (NEW).
const (
	compareOld = `version: 1
rules:
  - name: login-ip
    flows: [login]
    key: ip
    type: rate
    count: failures
    limit: 30
    per: 10m
    burst: 30
  - name: login-ip-24
    flows: [login]
    key: ip
    ipv4_prefix: 24
    type: rate
    limit: 100
    per: 1h
    burst: 100
    mode: shadow
`
	compareNew = `version: 1
rules:
  - name: login-ip
    flows: [login]
    key: ip
    type: rate
    count: failures
    limit: 30
    per: 10m
    burst: 30
  - name: login-ip-24
    flows: [login]
    key: ip
    ipv4_prefix: 24
    type: rate
    limit: 100
    per: 1h
    burst: 100
`
)

func TestCompare(t *testing.T) {
	t.Parallel()
	var events bytes.Buffer
	if _, err := (traffic{users: 200, perSecond: 0.01, attacks: true, seed: 3}).write(&events); err != nil {
		t.Fatal(err)
	}
	got, err := replay.Compare(context.Background(), mustParse(t, compareOld), mustParse(t, compareNew), &events, replay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// OLD lets 30 checks per address through, 120 in all, and slows the
	// other 880 by login-ip. NEW stops the /24 after 100 checks (25 per
	// address): from then on it decides every check, and login-ip, never
	// spent again, never does. The brute force from one address: OLD
	// slows 170 by login-ip, NEW too (30 < 100), so nothing changes there.
	slowIP := replay.Verdict{Decision: rules.Slow, Rule: "login-ip"}
	slow24 := replay.Verdict{Decision: rules.Slow, Rule: "login-ip-24"}
	allow := replay.Verdict{Decision: rules.Allow}
	want := []replay.Change{
		{From: slowIP, To: slow24, Checks: 880},
		{From: allow, To: slow24, Checks: 20},
	}
	if g, w := jsonOf(t, got.Changes), jsonOf(t, want); g != w {
		t.Errorf("changes = %s, want %s", g, w)
	}
	if got.Changed != 900 {
		t.Errorf("changed = %d, want 900", got.Changed)
	}
	wantRules := []replay.RuleChange{
		{Rule: "login-ip", OldDecided: 880 + 170, NewDecided: 170, Lost: 880},
		{Rule: "login-ip-24", OldDecided: 0, NewDecided: 900, Gained: 900},
	}
	if g, w := jsonOf(t, got.Rules), jsonOf(t, wantRules); g != w {
		t.Errorf("rules = %s, want %s", g, w)
	}
	// The checks NEW slows have no attempt id there: their reports count
	// as of checks not allowed, under each set its own.
	if got.NewReports.NotAllowed != 170+900 || got.OldReports.NotAllowed != 170+880 {
		t.Errorf("reports not allowed: old %d new %d, want %d and %d", got.OldReports.NotAllowed, got.NewReports.NotAllowed, 170+880, 170+900)
	}
}

func TestCompareOfASetWithItselfChangesNothing(t *testing.T) {
	t.Parallel()
	var events bytes.Buffer
	if _, err := (traffic{users: 200, perSecond: 0.01, attacks: true, seed: 4}).write(&events); err != nil {
		t.Fatal(err)
	}
	set := mustParse(t, dayRules)
	got, err := replay.Compare(context.Background(), set, set, &events, replay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Changed != 0 || len(got.Changes) != 0 {
		t.Fatalf("changed %d, changes %v; want none", got.Changed, got.Changes)
	}
	if got.OldReports != got.NewReports {
		t.Fatalf("reports differ: %+v and %+v", got.OldReports, got.NewReports)
	}
	for _, r := range got.Rules {
		if r.OldDecided != r.NewDecided || r.Gained != 0 || r.Lost != 0 {
			t.Errorf("rule %+v changed", r)
		}
	}
}

func TestRunStopsWhenTheContextEnds(t *testing.T) {
	var events bytes.Buffer
	if _, err := (traffic{users: 100, perSecond: 0.2, seed: 5}).write(&events); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := replay.Run(ctx, mustParse(t, dayRules), &events, replay.Config{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after cancel = %v, want context.Canceled", err)
	}
}

func TestRunReportsProgress(t *testing.T) {
	var b strings.Builder
	for range 25 {
		b.WriteString(`{"ts":"2026-11-29T10:00:00.000Z","type":"check","id":"a","flow":"login","account":"bob","ip":"192.0.2.1"}` + "\n")
	}
	var got []int64
	_, err := replay.Run(context.Background(), mustParse(t, oneRule), strings.NewReader(b.String()), replay.Config{
		ProgressEvery: 10,
		Progress:      func(p replay.Progress) { got = append(got, p.Lines) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{10, 20, 25}; jsonOf(t, got) != jsonOf(t, want) {
		t.Fatalf("progress at lines %v, want %v", got, want)
	}
}

// TestRunKeepsPseudonymsAsTheyAre: a decision log names accounts and
// recipients by pseudonyms, "h-" and 22 base64url characters; a replay
// keeps each as it is, so two that differ only in case stay two accounts,
// and a recipient pseudonym is a recipient. Clear accounts still fold.
func TestRunKeepsPseudonymsAsTheyAre(t *testing.T) {
	const ts = `{"ts":"2026-11-29T10:00:00.000Z","type":"check","id":"c",`
	line := func(field, v string) string {
		return ts + `"flow":"otp_send","ip":"192.0.2.1","recipient":"h-RRRRRRRRRRRRRRRRRRRRRR",` + field + `:"` + v + `"}`
	}
	tests := []struct {
		name     string
		accounts []string
		slowed   uint64
	}{
		{"pseudonyms differing in case", []string{"h-AbCdEfGhIjKlMnOpQrStUv", "h-abcdefghijklmnopqrstuv", "h-ABCDEFGHIJKLMNOPQRSTUV"}, 0},
		{"one pseudonym thrice", []string{"h-AbCdEfGhIjKlMnOpQrStUv", "h-AbCdEfGhIjKlMnOpQrStUv", "h-AbCdEfGhIjKlMnOpQrStUv"}, 1},
		{"clear accounts differing in case", []string{"Alice", "alice", "ALICE"}, 1},
	}
	for _, tt := range tests {
		var lines []string
		for _, a := range tt.accounts {
			lines = append(lines, line(`"account"`, a))
		}
		got, err := replay.Run(context.Background(), mustParse(t, oneRule), strings.NewReader(strings.Join(lines, "\n")), replay.Config{
			Malformed: func(e *replay.LineError) { t.Errorf("%s: skipped %v", tt.name, e) },
		})
		if err != nil {
			t.Fatal(err)
		}
		if got.Input.Checks != 3 || got.Rules[0].WouldSlow != tt.slowed {
			t.Errorf("%s: %d checks, %d slowed; want 3, %d", tt.name, got.Input.Checks, got.Rules[0].WouldSlow, tt.slowed)
		}
	}
}
