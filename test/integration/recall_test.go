package integration

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/redistest"
)

// recallRules: a hard stop at 3 failures, a per-IP wait of 6s after each
// check, and a budget of 5 on password resets, every one decided by the
// local fallback when Redis fails.
const recallRules = `version: 1
rules:
  - name: hard-stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 3
    on_store_error: local
  - name: per-ip
    flows: [login]
    key: ip
    type: rate
    limit: 1
    per: 6s
    burst: 1
    on_store_error: local
  - name: budget
    flows: [password_reset]
    key: ip
    type: rate
    limit: 1
    per: 1h
    burst: 5
    on_store_error: local
`

// recallBudget is the budget rule's burst.
const recallBudget = 5

// fallbackShare is the most checks the fallback of a fleet of n admits on a
// key it never saw denied, over the whole fleet: each instance decides alone
// with the limit divided by the fleet size, at least 1 (docs/operations.md,
// "The fallback's bound").
func fallbackShare(limit, n int) int { return n * max(1, limit/n) }

// TestFallbackStartsFromWhatItSaw: with Redis paused (every call hangs) or
// stopped (every call refused), on one instance and on two sharing the
// Redis, an account each instance saw hard-stopped stays blocked, an IP each
// saw slowed stays slowed until the time it was told and no longer, and 200
// concurrent checks against a budget of 5, across the moment Redis fails,
// allow at most 5 plus the fallback's share; once the instances have seen
// the budget spent, none more.
func TestFallbackStartsFromWhatItSaw(t *testing.T) {
	faults := []struct {
		name  string
		fault func(*testing.T, *redistest.Server)
	}{
		{"paused", func(t *testing.T, r *redistest.Server) { r.Pause(t) }},
		{"stopped", func(t *testing.T, r *redistest.Server) { r.Stop(t) }},
	}
	for _, n := range []int{1, 2} {
		for _, f := range faults {
			t.Run(fmt.Sprintf("%s/%d instances", f.name, n), func(t *testing.T) {
				start := time.Now()
				testFallbackRecall(t, n, f.fault)
				t.Logf("took %v", time.Since(start).Round(time.Millisecond))
			})
		}
	}
}

func testFallbackRecall(t *testing.T, n int, fault func(*testing.T, *redistest.Server)) {
	redis := redistest.Start(t)
	px := startProxy(t, redis.Addr())
	// A deadline a loaded machine meets before the fault, short enough
	// that the fallback takes over well within the IP's wait.
	fleet := startFleet(t, n, fleetConfig{redisURL: px.url(), rulesYAML: recallRules, storeTimeout: 250 * time.Millisecond})
	login := func(account, ip string) map[string]any {
		return map[string]any{"flow": "login", "account": account, "ip": ip}
	}

	// A hard stop, seen by every instance.
	for i := range 3 {
		a := fleet[i%n].check(t, login("stopped", fmt.Sprintf("192.0.2.%d", i)))
		if a.status != 200 {
			t.Fatalf("failure %d: %d %s", i, a.status, a.raw)
		}
		fleet[(i+1)%n].report(t, a.str("attempt_id"), "failure")
	}
	for i, in := range fleet {
		if a := in.check(t, login("stopped", fmt.Sprintf("192.0.2.%d", 10+i))); a.str("decision") != "block" || a.degraded() {
			t.Fatalf("instance %d before the fault: %d %s, want blocked by Redis", i, a.status, a.raw)
		}
	}

	// An IP slowed for 6s, seen by every instance: long enough that a loaded
	// machine still checks it during the outage, before its wait ends.
	if a := fleet[0].check(t, login(fmt.Sprintf("slowed-%d", 0), "198.51.100.7")); a.status != 200 {
		t.Fatalf("first check of the IP: %d %s", a.status, a.raw)
	}
	var slowedUntil time.Time
	for i, in := range fleet {
		a := in.check(t, login(fmt.Sprintf("slowed-%d", i+1), "198.51.100.7"))
		if a.str("decision") != "slow" || a.str("rule") != "per-ip" || a.degraded() {
			t.Fatalf("instance %d before the fault: %d %s, want slowed by per-ip on Redis", i, a.status, a.raw)
		}
		until := time.Now().Add(time.Duration(a.body["retry_after_ms"].(float64)) * time.Millisecond)
		if until.After(slowedUntil) {
			slowedUntil = until
		}
	}

	// One IP's budget spent on Redis, none of it denied yet: nothing to
	// recall.
	for i := range recallBudget {
		if a := fleet[i%n].check(t, map[string]any{"flow": "password_reset", "ip": "203.0.113.8"}); a.status != 200 || a.degraded() {
			t.Fatalf("budget check %d before the fault: %d %s", i, a.status, a.raw)
		}
	}

	// 200 checks at once against another IP's budget, and Redis failing
	// while they are in its hands: Redis is slowed so that the first call
	// (and the group of those that queued behind it) is on the wire when
	// the fault comes. Every check must still be decided, the fallback
	// deciding what Redis did not.
	px.setDelay(100 * time.Millisecond)
	const burst = 200
	var wg sync.WaitGroup
	answers := make([]answer, burst)
	errs := make([]error, burst)
	for i := range burst {
		wg.Go(func() {
			answers[i], errs[i] = fleet[i%n].call("POST", "/v1/check", checkToken, map[string]any{"flow": "password_reset", "ip": "203.0.113.9"})
		})
	}
	time.Sleep(40 * time.Millisecond)
	fault(t, redis)
	wg.Wait()
	allowed, degraded := 0, 0
	for i, a := range answers {
		if errs[i] != nil {
			t.Fatalf("check %d: %v", i, errs[i])
		}
		if a.status != http.StatusOK && a.status != http.StatusTooManyRequests {
			t.Fatalf("check %d: %d %s, want a decision", i, a.status, a.raw)
		}
		if a.status == http.StatusOK {
			allowed++
		}
		if a.degraded() {
			degraded++
		}
	}
	bound := recallBudget + fallbackShare(recallBudget, n)
	t.Logf("%d concurrent checks, budget %d, fleet of %d: %d allowed (at most %d), %d decided by the fallback",
		burst, recallBudget, n, allowed, bound, degraded)
	if allowed > bound {
		t.Errorf("%d of %d checks allowed against a budget of %d, want at most %d + the fallback's share %d", allowed, burst, recallBudget, recallBudget, fallbackShare(recallBudget, n))
	}
	if degraded == 0 {
		t.Fatal("no check was decided by the fallback: Redis failed after the burst was decided")
	}

	for i, in := range fleet {
		a := in.check(t, login(fmt.Sprintf("slowed-%d", 10+i), "198.51.100.7"))
		retry, _ := a.body["retry_after_ms"].(float64)
		if left := time.Until(slowedUntil); left < 100*time.Millisecond {
			t.Fatalf("the fault took until %v before the IP's wait ended: nothing left to test", -left)
		}
		if a.str("decision") != "slow" || !a.degraded() || retry <= 0 || retry > 6000 {
			t.Errorf("instance %d during the outage: slowed IP %d %s, want still slowed, for at most the 6s it was told", i, a.status, a.raw)
		}
		if a := in.check(t, login("stopped", fmt.Sprintf("192.0.2.%d", 20+i))); a.str("decision") != "block" || !a.degraded() {
			t.Errorf("instance %d during the outage: hard-stopped account %d %s, want still blocked", i, a.status, a.raw)
		}
		for j := range 10 {
			if a := in.check(t, map[string]any{"flow": "password_reset", "ip": "203.0.113.9"}); a.status != http.StatusTooManyRequests {
				t.Errorf("instance %d during the outage: budget check %d answered %d %s, want slowed (the budget was seen spent)", i, j, a.status, a.raw)
			}
		}
	}

	// The IP whose budget Redis spent but was never seen denying: the
	// fallback's share, exactly, on top.
	spent := concurrentCount(t, fleet, burst, map[string]any{"flow": "password_reset", "ip": "203.0.113.8"})
	if spent[http.StatusOK] != fallbackShare(recallBudget, n) {
		t.Errorf("budget spent on Redis, then %d checks during the outage: %v, want exactly the fallback's share %d allowed", burst, spent, fallbackShare(recallBudget, n))
	}

	// Past its time the slowed IP starts from the fallback's own limit.
	time.Sleep(time.Until(slowedUntil) + 50*time.Millisecond)
	for i, in := range fleet {
		if a := in.check(t, login(fmt.Sprintf("slowed-%d", 20+i), "198.51.100.7")); a.status != 200 || !a.degraded() {
			t.Errorf("instance %d after the wait it was told: %d %s, want allowed by the fallback", i, a.status, a.raw)
		}
	}
}

// concurrentCount sends n copies of body at once, round-robin over the
// fleet, and counts the statuses; every answer must be a decision by the
// fallback.
func concurrentCount(t *testing.T, fleet []*instance, n int, body map[string]any) map[int]int {
	t.Helper()
	var wg sync.WaitGroup
	answers := make([]answer, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { answers[i], errs[i] = fleet[i%len(fleet)].call("POST", "/v1/check", checkToken, body) })
	}
	wg.Wait()
	got := map[int]int{}
	for i, a := range answers {
		if errs[i] != nil {
			t.Fatalf("check %d: %v", i, errs[i])
		}
		if !a.degraded() {
			t.Fatalf("check %d during the outage not degraded: %d %s", i, a.status, a.raw)
		}
		got[a.status]++
	}
	return got
}
