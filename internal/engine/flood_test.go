package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/memstore"
)

// TestFloodOfRandomAccounts: an embedded store of 500 keys filled many
// times over by checks of random accounts, under the built-in rules, still
// allows a fresh user and keeps an account's hard stop.
func TestFloodOfRandomAccounts(t *testing.T) {
	h, victim := floodHarness(t)
	for i := range 5000 {
		h.check(t, floodCheck(i))
	}
	afterFlood(t, h, victim, true)
}

// TestFloodOfReportedAttempts: a flood of random accounts whose every
// attempt is also reported leaves a once-marker per attempt, which a full
// store keeps before anything else but hard stops; the marks must not fill
// it so that fresh users are refused, nor push out a hard stop. (The flood
// reports successes: failures leave the same marks, and would also trip
// the global failure rate, which challenges everyone by design.)
func TestFloodOfReportedAttempts(t *testing.T) {
	h, victim := floodHarness(t)
	reported := 0
	for i := range 5000 {
		d := h.check(t, floodCheck(i))
		if d.AttemptID == "" {
			continue
		}
		if _, err := h.eng.Report(context.Background(), d.AttemptID, engine.Success); err != nil {
			t.Fatal(err)
		}
		reported++
	}
	if reported < 1000 {
		t.Fatalf("%d attempts of the flood reported, want the store filled with marks", reported)
	}
	afterFlood(t, h, victim, false)
}

// floodHarness returns an engine on an embedded store of 500 keys, under
// the built-in rules, and the check of an account it hard-stopped.
func floodHarness(t *testing.T) (*harness, engine.CheckRequest) {
	t.Helper()
	small := func(now func() time.Time) store.Store {
		return memstore.New(memstore.Config{Now: now, MaxKeys: 500, Shards: 4})
	}
	h := newHarnessSet(t, rules.Default(), small)
	victim := engine.CheckRequest{Flow: rules.Login, Account: "victim@example.com", IP: "192.0.2.1"}
	for i := range 100 {
		d := h.check(t, victim)
		if d.AttemptID == "" {
			t.Fatalf("victim check %d = %s, want an attempt", i, d.Action)
		}
		if _, err := h.eng.Report(context.Background(), d.AttemptID, engine.Failure); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(time.Minute) // under login-account's refill
	}
	if d := h.check(t, victim); d.Action != rules.Block {
		t.Fatalf("victim after 100 failures = %s, want block", d.Action)
	}
	return h, victim
}

// floodCheck is the i-th check of a flood: a random account from one of
// 62,500 addresses.
func floodCheck(i int) engine.CheckRequest {
	return engine.CheckRequest{Flow: rules.Login, Account: fmt.Sprintf("random-%d@example.com", i), IP: fmt.Sprintf("198.51.%d.%d", i/250%250, i%250)}
}

// afterFlood checks that fresh users are allowed and the victim still
// blocked. unreported says the flood's checks were never reported: each
// then counts as a failure in the global rate, which challenges every
// untrusted check for a while; a challenge lets the fresh users go ahead,
// nothing slows them, and once the rate is back under its limit for the
// rule's hysteresis they are allowed.
func afterFlood(t *testing.T, h *harness, victim engine.CheckRequest, unreported bool) {
	t.Helper()
	if unreported {
		for i := range 10 {
			d := h.check(t, engine.CheckRequest{Flow: rules.Login, Account: fmt.Sprintf("fresh-%d@example.com", i), IP: "203.0.113.9"})
			if d.Action != rules.Challenge || d.Rule != "login-global-failures" {
				t.Errorf("fresh user %d right after the flood = %s (%s), want challenge by login-global-failures", i, d.Action, d.Rule)
			}
		}
		// The global rule's minute passes; the first check to see the rate
		// back under the limit starts its hysteresis.
		h.clock.Advance(time.Minute)
		h.check(t, engine.CheckRequest{Flow: rules.Login, Account: "calm@example.com", IP: "192.0.2.9"})
		h.clock.Advance(globalRule(t).Hysteresis)
	}
	for i := 10; i < 30; i++ {
		// Each from a network of its own: more than 20 accounts from one
		// /24 in a day would be challenged (login-ip-distinct-accounts).
		d := h.check(t, engine.CheckRequest{Flow: rules.Login, Account: fmt.Sprintf("fresh-%d@example.com", i), IP: fmt.Sprintf("203.0.%d.9", i)})
		if d.Action != rules.Allow {
			t.Errorf("fresh user %d after the flood = %s (%s), want allow", i, d.Action, d.Rule)
		}
	}
	if d := h.check(t, victim); d.Action != rules.Block {
		t.Errorf("victim after the flood = %s, want still blocked", d.Action)
	}
}

// globalRule is the built-in global failure-rate rule.
func globalRule(tb testing.TB) *rules.Rule {
	tb.Helper()
	r, ok := rules.Default().Rule("login-global-failures")
	if !ok {
		tb.Fatal("no built-in login-global-failures")
	}
	return r
}
