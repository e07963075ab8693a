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
	for i := range 5000 {
		req := engine.CheckRequest{Flow: rules.Login, Account: fmt.Sprintf("random-%d@example.com", i), IP: fmt.Sprintf("198.51.%d.%d", i/250%250, i%250)}
		h.check(t, req)
	}
	// The flood's checks were never reported: each counts as a failure in
	// the global rate, which challenges every untrusted check for a while.
	// A challenge lets the fresh users go ahead; nothing slows them.
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
