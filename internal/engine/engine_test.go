package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/guardian-sec/guardian/internal/aggregate"
	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/shadow"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/testclock"
	"github.com/guardian-sec/guardian/internal/tokens"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// harness is an engine on the embedded store with one clock for everything.
type harness struct {
	eng     *engine.Engine
	metrics *metrics.Metrics
	clock   *testclock.Clock
	book    *shadow.Book
	agg     *aggregate.Aggregate
	tally   *tally
}

// newHarness is an engine under the rules of rulesYAML; newStore, when
// given, makes its store (see newHarnessSet).
func newHarness(tb testing.TB, rulesYAML string, newStore ...func(now func() time.Time) store.Store) *harness {
	tb.Helper()
	set, err := rules.Parse("test.yaml", []byte(rulesYAML), t0)
	if err != nil {
		tb.Fatal(err)
	}
	return newHarnessSet(tb, set, newStore...)
}

// fullStore makes an embedded store with room for one key, as the fallback
// is once an outage has filled it.
func fullStore(now func() time.Time) store.Store {
	return memstore.New(memstore.Config{Now: now, MaxKeys: 1, Shards: 1})
}

// newHarnessSet is newHarness for a parsed set; newStore, when given, makes
// the engine's store on the harness's clock instead of the default one.
func newHarnessSet(tb testing.TB, set *rules.Set, newStore ...func(now func() time.Time) store.Store) *harness {
	tb.Helper()
	var holder rules.Holder
	holder.Store(set)
	key := mustKey(tb)
	clock := testclock.New(t0)
	book := shadow.NewBook()
	book.Sync(set.ShadowNames())
	agg := aggregate.New(aggregate.Config{Now: clock.Now})
	m := metrics.New(prometheus.NewRegistry())
	var st store.Store = memstore.New(memstore.Config{Now: clock.Now})
	tl := &tally{}
	for _, f := range newStore {
		st = f(clock.Now)
	}
	eng := engine.New(engine.Config{
		Rules:     &holder,
		Store:     st,
		Key:       key,
		Aggregate: agg,
		Shadow:    book,
		Metrics:   m,
		Now:       clock.Now,
		Tally:     tl,
	})
	return &harness{eng: eng, metrics: m, clock: clock, book: book, agg: agg, tally: tl}
}

// mustKey returns the harness's signing key, which also keys its hashes.
func mustKey(tb testing.TB) secret.Key {
	tb.Helper()
	key, err := secret.New([]byte("engine-test-signing-key-0123456789abcdef"))
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

func (h *harness) check(tb testing.TB, req engine.CheckRequest) engine.Decision {
	tb.Helper()
	d, err := h.eng.Check(context.Background(), req)
	if err != nil {
		tb.Fatalf("Check(%+v): %v", req, err)
	}
	return d
}

const severityRules = `version: 1
rules:
  - name: slow-short
    flows: [login]
    key: ip
    type: rate
    limit: 1
    per: 10s
    burst: 1
  - name: slow-long
    flows: [login]
    key: account
    type: rate
    limit: 1
    per: 1m
    burst: 1
  - name: challenge-ip
    flows: [login]
    key: account+ip
    type: rate
    limit: 1
    per: 1h
    burst: 1
    action: challenge
`

func TestDecisionTakesTheMostSevereAndLongestWait(t *testing.T) {
	h := newHarness(t, severityRules)
	req := engine.CheckRequest{Flow: rules.Login, Account: "a", IP: "192.0.2.1"}
	if d := h.check(t, req); d.Action != rules.Allow || d.AttemptID == "" {
		t.Fatalf("first check = %+v, want allow with an attempt id", d)
	}
	d := h.check(t, req)
	if d.Action != rules.Slow || d.Rule != "slow-long" || d.RetryAfter != time.Minute {
		t.Fatalf("second check = %s by %s after %v, want slow by slow-long after 1m", d.Action, d.Rule, d.RetryAfter)
	}
	if d.AttemptID != "" {
		t.Fatal("a slowed check carries an attempt id")
	}
	h.clock.Advance(time.Minute)
	// Both slow rules have recovered; only the challenge rule is exhausted.
	d = h.check(t, req)
	if d.Action != rules.Challenge || d.Rule != "challenge-ip" || d.AttemptID == "" {
		t.Fatalf("after a minute = %+v, want challenge by challenge-ip with an attempt id", d)
	}
	// The challenged check spent on the rules that fit.
	d = h.check(t, req)
	if d.Action != rules.Slow || d.Rule != "slow-long" {
		t.Fatalf("right after the challenge = %s by %s, want slow by slow-long", d.Action, d.Rule)
	}
}

func TestQuotaIsTheMostConstrainingRateRule(t *testing.T) {
	h := newHarness(t, `version: 1
rules:
  - name: wide
    flows: [login]
    key: ip
    type: rate
    limit: 100
    per: 1m
  - name: narrow
    flows: [login]
    key: account
    type: rate
    limit: 2
    per: 1m
`)
	d := h.check(t, engine.CheckRequest{Flow: rules.Login, Account: "a", IP: "192.0.2.1"})
	want := engine.Quota{Rule: "narrow", Burst: 2, Window: time.Minute, Remaining: 1, Reset: 30 * time.Second}
	if d.Quota == nil || *d.Quota != want {
		t.Fatalf("Quota = %+v, want %+v", d.Quota, want)
	}
}

func TestRulesApplyOnlyWithTheirKeyFields(t *testing.T) {
	h := newHarness(t, severityRules)
	d := h.check(t, engine.CheckRequest{Flow: rules.Login, IP: "192.0.2.1"})
	if len(d.Limits) != 1 || d.Limits[0].Rule != "slow-short" {
		t.Fatalf("limits without an account = %+v, want only slow-short", d.Limits)
	}
}

func TestCheckRejectsBadValues(t *testing.T) {
	h := newHarness(t, severityRules)
	tests := []struct {
		name string
		req  engine.CheckRequest
		want error
	}{
		{"bad ip", engine.CheckRequest{Flow: rules.Login, IP: "not-an-ip"}, keys.ErrInvalidIP},
		{"cost too high", engine.CheckRequest{Flow: rules.Login, IP: "192.0.2.1", Cost: 1001}, engine.ErrInvalidField},
		{"negative cost", engine.CheckRequest{Flow: rules.Login, IP: "192.0.2.1", Cost: -1}, engine.ErrInvalidField},
		{"otp_send without recipient", engine.CheckRequest{Flow: rules.OTPSend, IP: "192.0.2.1"}, engine.ErrMissingField},
		{"bad recipient", engine.CheckRequest{Flow: rules.OTPSend, IP: "192.0.2.1", Recipient: "x"}, keys.ErrInvalidRecipient},
		{"control character in account", engine.CheckRequest{Flow: rules.Login, IP: "192.0.2.1", Account: "a\x00b"}, keys.ErrInvalidAccount},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.eng.Check(context.Background(), tt.req)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestReportIsAcceptedOnce(t *testing.T) {
	h := newHarness(t, severityRules)
	d := h.check(t, engine.CheckRequest{Flow: rules.Login, Account: "a", IP: "192.0.2.1"})
	res, err := h.eng.Report(context.Background(), d.AttemptID, engine.Success)
	if err != nil || res.DeviceToken == "" {
		t.Fatalf("first report = %+v, %v; want a device token", res, err)
	}
	if _, err := h.eng.Report(context.Background(), d.AttemptID, engine.Success); !errors.Is(err, engine.ErrAlreadyReported) {
		t.Fatalf("second report err = %v, want ErrAlreadyReported", err)
	}
	h.clock.Advance(tokens.AttemptTTL + time.Second)
	d = h.check(t, engine.CheckRequest{Flow: rules.Login, Account: "b", IP: "192.0.2.2"})
	h.clock.Advance(tokens.AttemptTTL + time.Second)
	if _, err := h.eng.Report(context.Background(), d.AttemptID, engine.Failure); !errors.Is(err, tokens.ErrExpiredAttempt) {
		t.Fatalf("late report err = %v, want ErrExpiredAttempt", err)
	}
}

func TestReportKeepingTheDeviceIssuesNoTokenOnlyForATrustedCheck(t *testing.T) {
	h := newHarness(t, `version: 1
rules:
  - name: account
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1m
    burst: 5
`)
	keep := engine.KeepDevice(context.Background())
	req := engine.CheckRequest{Flow: rules.Login, Account: "a", IP: "192.0.2.1"}
	first, err := h.eng.Report(keep, h.check(t, req).AttemptID, engine.Success)
	if err != nil || first.DeviceToken == "" {
		t.Fatalf("untrusted check kept = %+v, %v; want a device token all the same", first, err)
	}
	req.DeviceToken = first.DeviceToken
	d := h.check(t, req)
	if d.Trust != engine.TrustDevice {
		t.Fatalf("trust = %s, want device", d.Trust)
	}
	if res, err := h.eng.Report(keep, d.AttemptID, engine.Success); err != nil || res.DeviceToken != "" {
		t.Fatalf("trusted check kept = %+v, %v; want no device token", res, err)
	}
	if res, err := h.eng.Report(context.Background(), h.check(t, req).AttemptID, engine.Success); err != nil || res.DeviceToken == "" {
		t.Fatalf("trusted check not kept = %+v, %v; want a device token", res, err)
	}
}

func TestFailureRateChallengesUntrustedChecks(t *testing.T) {
	h := newHarness(t, `version: 1
rules:
  - name: stuffing
    flows: [login]
    key: global
    type: failure_rate
    limit: 3
    per: 1m
    hysteresis: 10s
`)
	req := engine.CheckRequest{Flow: rules.Login, Account: "victim", IP: "192.0.2.1"}
	first := h.check(t, req)
	out, err := h.eng.Report(context.Background(), first.AttemptID, engine.Success)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		d := h.check(t, engine.CheckRequest{Flow: rules.Login, IP: "198.51.100.1", Account: "x" + string(rune('a'+i))})
		if _, err := h.eng.Report(context.Background(), d.AttemptID, engine.Failure); err != nil {
			t.Fatal(err)
		}
	}
	if d := h.check(t, req); d.Action != rules.Challenge || d.Rule != "stuffing" {
		t.Fatalf("untrusted check after 4 failures = %s by %s, want challenge by stuffing", d.Action, d.Rule)
	}
	if got := testutil.ToFloat64(h.metrics.FailureRateInForce.WithLabelValues("stuffing", "enforce")); got != 1 {
		t.Fatalf("guardian_failure_rate_in_force = %v while in force, want 1", got)
	}
	trusted := req
	trusted.DeviceToken = out.DeviceToken
	if d := h.check(t, trusted); d.Action != rules.Allow {
		t.Fatalf("trusted check = %s, want allow", d.Action)
	}
	// The failures leave the window; the challenge holds for the hysteresis,
	// counted from the first check that sees the rate back under the limit.
	h.clock.Advance(time.Minute + time.Second)
	if d := h.check(t, req); d.Action != rules.Challenge {
		t.Fatalf("as the rate falls = %s, want challenge (hysteresis)", d.Action)
	}
	h.clock.Advance(10*time.Second - time.Millisecond)
	if d := h.check(t, req); d.Action != rules.Challenge {
		t.Fatalf("just inside the hysteresis = %s, want challenge", d.Action)
	}
	h.clock.Advance(time.Millisecond)
	if d := h.check(t, req); d.Action != rules.Allow {
		t.Fatalf("after the hysteresis = %s, want allow", d.Action)
	}
	if got := testutil.ToFloat64(h.metrics.FailureRateInForce.WithLabelValues("stuffing", "enforce")); got != 0 {
		t.Fatalf("guardian_failure_rate_in_force = %v after the hysteresis, want 0", got)
	}
	// The incident view heard the rule come into force and leave it, and
	// each challenge decided.
	if got := fmt.Sprint(h.tally.changes()); got != "[stuffing:false stuffing:true stuffing:false]" {
		t.Errorf("failure_rate states heard %s, want off, on, off", got)
	}
	if got := h.tally.decided["challenge/stuffing"]; got != 3 {
		t.Errorf("challenges by stuffing heard %d, want 3", got)
	}
}

// tally is an engine.Tally that records what it hears.
type tally struct {
	mu      sync.Mutex
	decided map[string]int
	tripped map[string]int
	global  []string
}

func (t *tally) Decided(decision rules.Action, rule string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.decided == nil {
		t.decided = map[string]int{}
	}
	t.decided[string(decision)+"/"+rule]++
}

func (t *tally) Tripped(rule string, decision rules.Action, subject string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tripped == nil {
		t.tripped = map[string]int{}
	}
	t.tripped[rule+"/"+string(decision)+"/"+subject]++
}

func (t *tally) Global(rule string, inForce bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := fmt.Sprintf("%s:%v", rule, inForce); len(t.global) == 0 || t.global[len(t.global)-1] != s {
		t.global = append(t.global, s)
	}
}

// changes returns the failure_rate states heard, each change once.
func (t *tally) changes() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.global...)
}

// TestTallyHearsEnforcedDecisions: every decision, and the key of the
// enforced rule that stopped a check, by its subject; never a shadow rule's.
func TestTallyHearsEnforcedDecisions(t *testing.T) {
	h := newHarness(t, `version: 1
rules:
  - {name: acct, flows: [login], key: account, type: rate, limit: 1, per: 1h, burst: 1}
  - {name: watch, flows: [login], key: ip, type: rate, limit: 1, per: 1h, burst: 1, mode: shadow}
`)
	for range 3 {
		h.check(t, engine.CheckRequest{Flow: rules.Login, Account: "mallory", IP: "192.0.2.7"})
	}
	if got := fmt.Sprint(h.tally.decided); got != "map[allow/:1 slow/acct:2]" {
		t.Errorf("decided %s, want 1 allowed, 2 slowed by acct", got)
	}
	subject, _ := keys.NewHasher(mustKey(t)).AccountSubject(nil, "mallory")
	if got := fmt.Sprint(h.tally.tripped); got != "map[acct/slow/"+subject+":2]" {
		t.Errorf("tripped %s, want acct's slows of mallory's subject", got)
	}
}

func TestAccountIPRuleCountsThePair(t *testing.T) {
	h := newHarness(t, `version: 1
rules:
  - name: login-pair
    flows: [login]
    key: account+ip
    type: rate
    limit: 1
    per: 1h
    burst: 2
`)
	tests := []struct {
		name    string
		account string
		ip      string
		want    rules.Action
	}{
		{"first", "alice", "2001:db8:1:2::1", rules.Allow},
		{"same /64", "ALICE", "2001:db8:1:2::ffff", rules.Allow},
		{"pair exhausted", "alice", "2001:db8:1:2::2", rules.Slow},
		{"another /64", "alice", "2001:db8:1:3::1", rules.Allow},
		{"another account", "bob", "2001:db8:1:2::1", rules.Allow},
	}
	for _, tt := range tests {
		d := h.check(t, engine.CheckRequest{Flow: rules.Login, Account: tt.account, IP: tt.ip})
		if d.Action != tt.want {
			t.Fatalf("%s: %s, want %s", tt.name, d.Action, tt.want)
		}
	}
	if d := h.check(t, engine.CheckRequest{Flow: rules.Login, IP: "2001:db8:1:2::1"}); len(d.Limits) != 0 {
		t.Fatalf("without an account: limits %+v, want none", d.Limits)
	}
}

// TestSentCodeSettlesNothing runs a rule that counts sends and verifications
// of one recipient together: a send's success must not reset the failures
// spent verifying, and must not trust the device.
func TestSentCodeSettlesNothing(t *testing.T) {
	h := newHarness(t, `version: 1
rules:
  - name: code-guesses
    flows: [otp_send, otp_verify]
    key: recipient
    type: consecutive_failures
    limit: 5
  - name: code-guesses-rate
    flows: [otp_send, otp_verify]
    key: recipient
    type: rate
    count: failures
    limit: 1
    per: 1h
    burst: 10
`)
	ctx := context.Background()
	verify := engine.CheckRequest{Flow: rules.OTPVerify, IP: "192.0.2.1", Recipient: "+15550100000"}
	send := engine.CheckRequest{Flow: rules.OTPSend, IP: "192.0.2.1", Recipient: "+1 555 010 0000", Account: "alice"}
	report := func(d engine.Decision, o engine.Outcome) engine.ReportResult {
		t.Helper()
		res, err := h.eng.Report(ctx, d.AttemptID, o)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for range 2 {
		report(h.check(t, verify), engine.Failure)
	}
	if res := report(h.check(t, send), engine.Success); res.DeviceToken != "" {
		t.Fatal("a sent code earned a device token")
	}
	report(h.check(t, verify), engine.Failure)
	d := h.check(t, verify)
	// Five checks so far, the send's included: nothing was given back.
	if got := d.Limits[1].Remaining; d.Action != rules.Allow || got != 5 {
		t.Fatalf("fourth verification = %s, code-guesses-rate remaining %d; want allow and 5", d.Action, got)
	}
	report(d, engine.Failure)
	if d := h.check(t, verify); d.Action != rules.Block || d.Rule != "code-guesses" {
		t.Fatalf("after 4 failures and a send = %s by %s, want block by code-guesses", d.Action, d.Rule)
	}
}

func TestVerifiedCodeGivesBackOnlyItsOwn(t *testing.T) {
	h := newHarness(t, `version: 1
rules:
  - name: otp-verify-recipient
    flows: [otp_verify]
    key: recipient
    type: rate
    count: failures
    limit: 5
    per: 15m
    burst: 5
`)
	ctx := context.Background()
	verify := engine.CheckRequest{Flow: rules.OTPVerify, IP: "192.0.2.1", Recipient: "bob@example.org"}
	for range 3 {
		d := h.check(t, verify)
		if _, err := h.eng.Report(ctx, d.AttemptID, engine.Failure); err != nil {
			t.Fatal(err)
		}
	}
	d := h.check(t, verify)
	if _, err := h.eng.Report(ctx, d.AttemptID, engine.Success); err != nil {
		t.Fatal(err)
	}
	if got := h.check(t, verify).Limits[0].Remaining; got != 1 {
		t.Fatalf("remaining after 3 failures, a success and this check = %d, want 1", got)
	}
}

// BenchmarkCheck is one login check through the engine on the embedded store
// with three rules (account rate, IP rate, consecutive failures).
func BenchmarkCheck(b *testing.B) {
	h := newHarness(b, `version: 1
rules:
  - name: login-account
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1000000
    per: 1s
  - name: login-ip
    flows: [login]
    key: ip
    type: rate
    count: failures
    limit: 1000000
    per: 1s
  - name: login-hard-stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 1000000
`)
	req := engine.CheckRequest{Flow: rules.Login, Account: "alice@example.com", IP: "203.0.113.7"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.eng.Check(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckBuiltinRules is one untrusted login check under the
// built-in rules: three store ops and the global failure rate.
func BenchmarkCheckBuiltinRules(b *testing.B) {
	h := newHarnessSet(b, rules.Default())
	benchmarkLogin(b, h, engine.CheckRequest{Flow: rules.Login, Account: "alice@example.com", IP: "203.0.113.7"})
}

// BenchmarkCheckTrustedDevice is BenchmarkCheckBuiltinRules from a trusted
// device: the device token is verified on every check.
func BenchmarkCheckTrustedDevice(b *testing.B) {
	h := newHarnessSet(b, rules.Default())
	d := h.check(b, engine.CheckRequest{Flow: rules.Login, Account: "alice@example.com", IP: "203.0.113.7"})
	res, err := h.eng.Report(context.Background(), d.AttemptID, engine.Success)
	if err != nil {
		b.Fatal(err)
	}
	benchmarkLogin(b, h, engine.CheckRequest{Flow: rules.Login, Account: "alice@example.com", IP: "203.0.113.7", DeviceToken: res.DeviceToken})
}

// benchmarkLogin checks req again and again, each check allowed and
// reported a success.
func benchmarkLogin(b *testing.B, h *harness, req engine.CheckRequest) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		// Keep every bucket full, so each check is allowed and spends.
		h.clock.Advance(time.Hour)
		d, err := h.eng.Check(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if d.Action != rules.Allow {
			b.Fatalf("check %s, want allow: the benchmark measures allowed checks", d.Action)
		}
		// A success resets the hard stop's count, which an hour does not.
		b.StopTimer()
		if _, err := h.eng.Report(ctx, d.AttemptID, engine.Success); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func TestSlowFromAFailureRateNamesAWait(t *testing.T) {
	h := newHarness(t, `version: 1
rules:
  - name: stuffing
    flows: [login]
    key: global
    type: failure_rate
    limit: 1
    per: 1m
    action: slow
`)
	for range 2 {
		d := h.check(t, engine.CheckRequest{Flow: rules.Login, IP: "198.51.100.1", Account: "x"})
		if _, err := h.eng.Report(context.Background(), d.AttemptID, engine.Failure); err != nil {
			t.Fatal(err)
		}
	}
	d := h.check(t, engine.CheckRequest{Flow: rules.Login, IP: "198.51.100.1", Account: "x"})
	if d.Action != rules.Slow || d.RetryAfter != time.Second {
		t.Fatalf("decision = %s after %v, want slow after 1s", d.Action, d.RetryAfter)
	}
}

// TestFullStoreNeverBlocks: when the embedded store (the fallback during a
// Redis outage) is full of hard stops, which it evicts only for another
// hard stop, a new account's consecutive-failure rule is denied as
// exhausted; that must slow the check, never block the account.
func TestFullStoreNeverBlocks(t *testing.T) {
	h := newHarness(t, `version: 1
rules:
  - name: hard-stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 2
`, fullStore)
	for i := range 2 {
		if d := h.check(t, engine.CheckRequest{Flow: rules.Login, Account: "first", IP: "192.0.2.1"}); d.Action != rules.Allow {
			t.Fatalf("first account, check %d = %s, want allow", i, d.Action)
		}
	}
	d := h.check(t, engine.CheckRequest{Flow: rules.Login, Account: "second", IP: "192.0.2.1"})
	if d.Action != rules.Slow || d.RetryAfter <= 0 {
		t.Fatalf("a new account on a full store = %s after %v, want slow with a wait", d.Action, d.RetryAfter)
	}
}

// TestReportOnAFullStoreIsRecorded: when the table that remembers reports
// is full, a report is recorded, not refused as a repeat, and a second
// report of it is refused.
func TestReportOnAFullStoreIsRecorded(t *testing.T) {
	h := newHarness(t, `version: 1
rules:
  - name: per-ip
    flows: [login]
    key: ip
    type: rate
    count: failures
    limit: 1
    per: 1h
    burst: 5
`, fullStore)
	d := h.check(t, engine.CheckRequest{Flow: rules.Login, IP: "192.0.2.1"})
	if _, err := h.eng.Report(context.Background(), d.AttemptID, engine.Success); err != nil {
		t.Fatalf("report on a full store: %v, want it recorded", err)
	}
	if _, err := h.eng.Report(context.Background(), d.AttemptID, engine.Success); !errors.Is(err, engine.ErrAlreadyReported) {
		t.Fatalf("second report on a full store: %v, want ErrAlreadyReported", err)
	}
}
