package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/redistest"
)

// TestFloodOfSlowedAccountBarelyTouchesRedis: a flood against one account
// from a few addresses, nine checks in ten of the traffic, is answered from
// what Redis last said about its keys until their retry time: at most one
// store call in ten of its checks, with every other check (distinct users)
// still one store call each and allowed. A reset on another instance lifts
// the remembered slow on this one.
func TestFloodOfSlowedAccountBarelyTouchesRedis(t *testing.T) {
	srv := redistest.Start(t)
	plain := srv.Client(t)
	fleet := startFleet(t, 2, fleetConfig{redisURL: srv.URL()})
	a, b := fleet[0], fleet[1]
	victim := func(i int) map[string]any {
		return map[string]any{"flow": "login", "account": "victim@example.com", "ip": fmt.Sprintf("198.51.%d.%d", 100+i%2, 7+i%4)}
	}
	// Five checks use up the account's burst (built-in login-account: 5,
	// then one a minute); the sixth is slowed. A slowed check still pays
	// its toll on the address rules, so each address's first checks go to
	// Redis until login-ip (a burst of 30) slows the address too: from
	// then on the flood's checks cost Redis nothing to answer.
	start := redistest.CommandStats(t, plain)
	for i := range 4 * 31 {
		b.check(t, victim(i))
	}
	drain := redistest.Ran(start, redistest.CommandStats(t, plain))
	t.Logf("slowing the account and its 4 addresses: %d checks, %d script calls", 4*31, redistest.ScriptCalls(drain))

	before := redistest.CommandStats(t, plain)
	const checks = 1000
	flood, users, slowed := 0, 0, 0
	for i := range checks {
		if i%10 == 9 {
			users++
			got := b.check(t, map[string]any{"flow": "login", "account": fmt.Sprintf("user-%d@example.com", i), "ip": fmt.Sprintf("10.1.%d.%d", i/250, i%250)})
			if got.status != 200 {
				t.Fatalf("a new user's check during the flood: %d %s", got.status, got.raw)
			}
			continue
		}
		flood++
		got := b.check(t, victim(i))
		if got.status == 429 && got.str("decision") == "slow" && got.str("rule") == "login-account" {
			slowed++
		}
		if got.degraded() {
			t.Fatalf("flood check %d degraded: %s", i, got.raw)
		}
	}
	ran := redistest.Ran(before, redistest.CommandStats(t, plain))
	scripts := redistest.ScriptCalls(ran)
	if slowed != flood {
		t.Errorf("%d of %d flood checks slowed by login-account, want all", slowed, flood)
	}
	floodCalls := scripts - int64(users)
	t.Logf("%d checks (%d flood, %d new users): %d script calls, %d for the flood (%.3f per flood check)",
		checks, flood, users, scripts, floodCalls, float64(floodCalls)/float64(flood))
	if floodCalls < 0 || float64(floodCalls) > 0.1*float64(flood) {
		t.Errorf("the flood took %d store calls for %d checks, want at most one in ten", floodCalls, flood)
	}

	// The flood's checks paid their toll on login-ip: its addresses are
	// slowed by it now, which a reset of the account leaves alone. The
	// checks after a reset come from addresses of their own.
	elsewhere := func(i int) map[string]any {
		return map[string]any{"flow": "login", "account": "victim@example.com", "ip": fmt.Sprintf("203.0.113.%d", 10+i)}
	}
	// A reset on a lifts the slow b remembers: b hears it and asks Redis.
	if r := a.must(t, "POST", "/v1/accounts/reset", adminToken, map[string]any{"account": "victim@example.com"}); r.status != 200 {
		t.Fatalf("reset on a: %d %s", r.status, r.raw)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := b.check(t, elsewhere(0))
		if got.status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b still answers %d %s five seconds after a reset on a", got.status, got.raw)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// And a reset on b itself lifts its own memory at once.
	for i := range 6 {
		b.check(t, elsewhere(1+i))
	}
	if got := b.check(t, elsewhere(7)); got.status != 429 || got.str("rule") != "login-account" {
		t.Fatalf("not slowed again by login-account: %d %s", got.status, got.raw)
	}
	if r := b.must(t, "POST", "/v1/accounts/reset", adminToken, map[string]any{"account": "victim@example.com"}); r.status != 200 {
		t.Fatalf("reset on b: %d %s", r.status, r.raw)
	}
	if got := b.check(t, elsewhere(7)); got.status != 200 {
		t.Fatalf("check on b right after its own reset: %d %s", got.status, got.raw)
	}
}
