package engine_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/rules"
)

// trustRules count an account's failures 20 back to back, stop it at 5
// consecutive failures, and learn its /24 and /48 networks.
const trustRules = `version: 1
familiar_networks: {ipv4_prefix: 24, ipv6_prefix: 48, hold: 90d}
rules:
  - name: account
    flows: [login, password_reset]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1h
    burst: 20
  - name: stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 5
`

// report reports d's attempt as outcome and returns the answer.
func (h *harness) report(tb testing.TB, d engine.Decision, outcome engine.Outcome) engine.ReportResult {
	tb.Helper()
	if d.AttemptID == "" {
		tb.Fatalf("no attempt to report: %s (%s)", d.Action, d.Rule)
	}
	res, err := h.eng.Report(context.Background(), d.AttemptID, outcome)
	if err != nil {
		tb.Fatalf("Report: %v", err)
	}
	return res
}

// login is a login check of alice from ip.
func login(ip string) engine.CheckRequest {
	return engine.CheckRequest{Flow: rules.Login, Account: "alice@example.com", IP: ip}
}

// settle makes alice's home network familiar and returns her device token:
// one successful login from home.
func settle(tb testing.TB, h *harness) string {
	tb.Helper()
	d := h.check(tb, login("203.0.113.7"))
	if d.Trust != engine.TrustNone {
		tb.Fatalf("first check's trust = %s, want none", d.Trust)
	}
	return h.report(tb, d, engine.Success).DeviceToken
}

func TestTrustInEveryAnswer(t *testing.T) {
	h := newHarness(t, trustRules)
	tok := settle(t, h)
	withToken := login("198.51.100.1")
	withToken.DeviceToken = tok
	challenged := login("198.51.100.1")
	challenged.ChallengePassed = true
	homeChallenged := login("203.0.113.200")
	homeChallenged.ChallengePassed = true
	tests := []struct {
		name string
		req  engine.CheckRequest
		want engine.Trust
	}{
		{"another address of the home /24", login("203.0.113.200"), engine.TrustNetwork},
		{"another network", login("198.51.100.1"), engine.TrustNone},
		{"a device token, anywhere", withToken, engine.TrustDevice},
		{"a passed challenge elsewhere", challenged, engine.TrustChallenge},
		{"a passed challenge at home", homeChallenged, engine.TrustNetwork},
		{"no account", engine.CheckRequest{Flow: rules.Login, IP: "203.0.113.7"}, engine.TrustNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := h.check(t, tt.req).Trust; got != tt.want {
				t.Fatalf("trust = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestAttackerElsewhereLocksNobodyOut: an attacker drains alice's shared
// bucket and her shared hard stop; alice at home, on her device, and (for
// the rate) after a challenge still gets through.
func TestAttackerElsewhereLocksNobodyOut(t *testing.T) {
	h := newHarness(t, trustRules)
	tok := settle(t, h)
	attacker := login("198.51.100.66")
	for range 5 {
		h.report(t, h.check(t, attacker), engine.Failure)
	}
	if d := h.check(t, attacker); d.Action != rules.Block || d.Rule != "stop" {
		t.Fatalf("attacker after 5 failures = %s (%s), want block by stop", d.Action, d.Rule)
	}
	if d := h.check(t, login("203.0.113.9")); d.Action != rules.Allow || d.Trust != engine.TrustNetwork {
		t.Fatalf("alice at home = %s (%s), trust %s; want allow on her network", d.Action, d.Rule, d.Trust)
	}
	onDevice := login("192.0.2.1")
	onDevice.DeviceToken = tok
	if d := h.check(t, onDevice); d.Action != rules.Allow || d.Trust != engine.TrustDevice {
		t.Fatalf("alice on her device = %s (%s), trust %s; want allow on her device", d.Action, d.Rule, d.Trust)
	}
	// A passed challenge has a rate bucket of its own, but not a hard stop
	// of its own: the shared stop still blocks it.
	challenged := login("192.0.2.1")
	challenged.ChallengePassed = true
	if d := h.check(t, challenged); d.Action != rules.Block || d.Rule != "stop" {
		t.Fatalf("challenged check after the shared stop = %s (%s), want block by stop", d.Action, d.Rule)
	}
}

// TestChallengeBucketHasTheRuleNumbers: passed challenges count in a
// bucket of their own with the rule's own burst, apart from the shared one.
func TestChallengeBucketHasTheRuleNumbers(t *testing.T) {
	h := newHarness(t, `version: 1
rules:
  - name: account
    flows: [login]
    key: account
    type: rate
    limit: 1
    per: 1h
    burst: 3
`)
	shared, challenged := login("198.51.100.1"), login("198.51.100.2")
	challenged.ChallengePassed = true
	for range 3 {
		h.check(t, shared)
	}
	if d := h.check(t, shared); d.Action != rules.Slow {
		t.Fatalf("fourth shared check = %s, want slow", d.Action)
	}
	for i := range 4 {
		d := h.check(t, challenged)
		want := rules.Allow
		if i == 3 {
			want = rules.Slow
		}
		if d.Action != want || d.Trust != engine.TrustChallenge {
			t.Fatalf("challenged check %d = %s, trust %s; want %s, challenge", i, d.Action, d.Trust, want)
		}
	}
}

// TestBucketsExactUnderConcurrency: 50 concurrent checks of an account,
// budget 20, from a familiar network, on a device, and after a passed
// challenge: exactly 20 allowed in each bucket, while the shared bucket
// stays full.
func TestBucketsExactUnderConcurrency(t *testing.T) {
	h := newHarness(t, `version: 1
familiar_networks: {ipv4_prefix: 24, ipv6_prefix: 48, hold: 90d}
rules:
  - name: account
    flows: [login]
    key: account
    type: rate
    limit: 1
    per: 1h
    burst: 20
`)
	tok := settle(t, h)
	onDevice := login("192.0.2.1")
	onDevice.DeviceToken = tok
	challenged := login("192.0.2.1")
	challenged.ChallengePassed = true
	for _, tt := range []struct {
		name string
		req  engine.CheckRequest
		want engine.Trust
	}{
		{"network", login("203.0.113.50"), engine.TrustNetwork},
		{"device", onDevice, engine.TrustDevice},
		{"challenge", challenged, engine.TrustChallenge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := concurrentAllowed(t, h, tt.req, 50, tt.want); got != 20 {
				t.Fatalf("allowed %d of 50, want exactly 20", got)
			}
		})
	}
	// The first check spent one shared unit; nothing since touched it.
	if d := h.check(t, login("198.51.100.1")); d.Limits[0].Remaining != 18 {
		t.Fatalf("shared bucket remaining = %d, want 18", d.Limits[0].Remaining)
	}
}

// concurrentAllowed makes n checks of req at once and returns how many were
// allowed, failing on any answer whose trust is not want.
func concurrentAllowed(tb testing.TB, h *harness, req engine.CheckRequest, n int, want engine.Trust) int {
	tb.Helper()
	var allowed atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := h.eng.Check(context.Background(), req)
			switch {
			case err != nil:
				errs <- err
			case d.Trust != want:
				errs <- fmt.Errorf("trust %s, want %s", d.Trust, want)
			case d.Action == rules.Allow:
				allowed.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	return int(allowed.Load())
}

// TestNetworkForgottenAfterHoldAndOnReset: a familiar network is
// forgotten after its hold, and by an account reset.
func TestNetworkForgottenAfterHoldAndOnReset(t *testing.T) {
	h := newHarness(t, trustRules)
	settle(t, h)
	if d := h.check(t, login("203.0.113.8")); d.Trust != engine.TrustNetwork {
		t.Fatalf("trust = %s, want network", d.Trust)
	}
	if err := h.eng.Reset(context.Background(), "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	if d := h.check(t, login("203.0.113.8")); d.Trust != engine.TrustNone {
		t.Fatalf("trust after a reset = %s, want none", d.Trust)
	}
	settle(t, h)
	h.clock.Advance(90*24*time.Hour + time.Second)
	if d := h.check(t, login("203.0.113.8")); d.Trust != engine.TrustNone {
		t.Fatalf("trust after the hold = %s, want none", d.Trust)
	}
}

// TestFailuresAtHomeEndAtTheNextSuccess: failures counted in the home
// network's hard stop are reset by a success there.
func TestFailuresAtHomeEndAtTheNextSuccess(t *testing.T) {
	h := newHarness(t, trustRules)
	settle(t, h)
	home := login("203.0.113.8")
	for range 4 {
		h.report(t, h.check(t, home), engine.Failure)
	}
	h.report(t, h.check(t, home), engine.Success)
	for i := range 5 {
		d := h.check(t, home)
		if d.Action != rules.Allow {
			t.Fatalf("check %d after the success = %s (%s), want allow", i, d.Action, d.Rule)
		}
		h.report(t, d, engine.Failure)
	}
	if d := h.check(t, home); d.Action != rules.Block {
		t.Fatalf("after 5 more failures at home = %s, want block", d.Action)
	}
}

// TestPasswordResetHasItsOwnBudget: with the built-in rules, an attacker
// who exhausts an account's logins leaves its password reset alone.
func TestPasswordResetHasItsOwnBudget(t *testing.T) {
	h := newHarnessSet(t, rules.Default())
	attacker := login("198.51.100.66")
	for range 5 {
		h.report(t, h.check(t, attacker), engine.Failure)
	}
	if d := h.check(t, attacker); d.Action != rules.Slow || d.Rule != "login-account" {
		t.Fatalf("sixth login = %s (%s), want slow by login-account", d.Action, d.Rule)
	}
	reset := engine.CheckRequest{Flow: rules.PasswordReset, Account: "alice@example.com", IP: "192.0.2.1"}
	for i := range 10 {
		d := h.check(t, reset)
		if d.Action != rules.Allow {
			t.Fatalf("password reset %d = %s (%s), want allow", i, d.Action, d.Rule)
		}
		h.report(t, d, engine.Failure)
	}
	if d := h.check(t, reset); d.Action != rules.Slow || d.Rule != "password-reset-account" {
		t.Fatalf("eleventh failing reset = %s (%s), want slow by password-reset-account", d.Action, d.Rule)
	}
}

// globalRules challenge every untrusted check while more than 10 login
// failures a minute are counted.
const globalRules = `version: 1
familiar_networks: {ipv4_prefix: 24, ipv6_prefix: 48, hold: 90d}
rules:
  - name: account
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1m
    burst: 1000
  - name: global
    flows: [login]
    key: global
    type: failure_rate
    limit: 10
    per: 1m
    action: challenge
`

// TestGlobalRuleCountsAbandonedChallenges: checks never reported count in
// the global failure rate; reported successes do not.
func TestGlobalRuleCountsAbandonedChallenges(t *testing.T) {
	h := newHarness(t, globalRules)
	for i := range 10 {
		h.report(t, h.check(t, engine.CheckRequest{Flow: rules.Login, Account: fmt.Sprint("u", i), IP: "192.0.2.1"}), engine.Success)
	}
	if d := h.check(t, login("192.0.2.1")); d.Action != rules.Allow {
		t.Fatalf("after 10 successes = %s, want allow", d.Action)
	}
	// That check, and ten more, are abandoned.
	for i := range 10 {
		h.check(t, engine.CheckRequest{Flow: rules.Login, Account: fmt.Sprint("v", i), IP: "192.0.2.1"})
	}
	d := h.check(t, login("192.0.2.1"))
	if d.Action != rules.Challenge || d.Rule != "global" {
		t.Fatalf("after 11 abandoned checks = %s (%s), want challenge by global", d.Action, d.Rule)
	}
	// Abandoned too: still in force. A passed challenge is exempt; a
	// familiar network is not.
	passed := login("192.0.2.1")
	passed.ChallengePassed = true
	if d := h.check(t, passed); d.Action != rules.Allow {
		t.Fatalf("a passed challenge = %s (%s), want allow", d.Action, d.Rule)
	}
}

func TestFamiliarNetworkIsNotExemptFromTheGlobalRule(t *testing.T) {
	h := newHarness(t, globalRules)
	settle(t, h)
	for i := range 11 {
		h.check(t, engine.CheckRequest{Flow: rules.Login, Account: fmt.Sprint("v", i), IP: "198.51.100.1"})
	}
	d := h.check(t, login("203.0.113.9"))
	if d.Action != rules.Challenge || d.Trust != engine.TrustNetwork {
		t.Fatalf("at home during the spray = %s, trust %s; want challenge, network", d.Action, d.Trust)
	}
}
