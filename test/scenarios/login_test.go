package scenarios_test

import (
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"
)

// Brute force on one account from one IP: login-account lets 5 failures
// through back to back, then one a minute; login-hard-stop blocks at 100 in
// a row, keeps the count while idle, and only a reset lifts it.
func TestBruteForceOneAccountOneIP(t *testing.T) {
	g := start(t, "")
	const victim = "victim@example.com"
	attacker := attempt{Flow: "login", Account: victim, IP: "203.0.113.7"}

	for i := range 5 {
		d := g.fail(t, attacker)
		if d.Decision != "allow" || d.remaining(t, "login-account") != int64(4-i) {
			t.Fatalf("failure %d: %v, want allow with %d left", i+1, d, 4-i)
		}
	}
	for i := range 3 { // slowed checks spend nothing: the wait stays a minute
		d := g.check(t, attacker)
		if d.status != http.StatusTooManyRequests || d.Decision != "slow" || d.Rule != "login-account" || d.RetryAfterMS != minuteMS {
			t.Fatalf("check %d after the burst: %v, want 429 slow by login-account for 60000ms", 6+i, d)
		}
		if got := d.header.Get("Retry-After"); got != "60" {
			t.Fatalf("Retry-After = %q, want 60", got)
		}
	}
	g.clock.Advance(time.Minute - time.Millisecond)
	if d := g.check(t, attacker); d.Decision != "slow" || d.RetryAfterMS != 1 {
		t.Fatalf("a millisecond early: %v, want slow for 1ms", d)
	}
	g.clock.Advance(time.Millisecond)
	if d := g.fail(t, attacker); d.Decision != "allow" {
		t.Fatalf("a minute later: %v, want allow", d)
	}
	if d := g.check(t, attacker); d.Decision != "slow" || d.RetryAfterMS != minuteMS {
		t.Fatalf("right after: %v, want slow for a minute", d)
	}

	// The patient attacker: one guess a minute up to 100 in a row.
	for n := 7; n <= 100; n++ {
		g.clock.Advance(time.Minute)
		if d := g.fail(t, attacker); d.Decision != "allow" {
			t.Fatalf("failure %d at minute %d: %v, want allow", n, n-5, d)
		}
	}
	want := status{
		ConsecutiveFailures: 100,
		Blocked:             true,
		NextAllowedMS:       minuteMS,
		Limits: []limit{
			{Rule: "login-account", Remaining: 0, ResetMS: 5 * minuteMS},
			{Rule: "password-reset-account", Remaining: 10},
			{Rule: "login-hard-stop", Remaining: 0, ResetMS: holdMS},
		},
		Networks: []networkStatus{},
	}
	if got := g.status(t, victim); !reflect.DeepEqual(got, want) {
		t.Fatalf("status after 100 failures = %+v, want %+v", got, want)
	}
	d := g.check(t, attacker)
	if d.status != http.StatusTooManyRequests || d.Decision != "block" || d.Rule != "login-hard-stop" || d.RetryAfterMS != 0 || d.AttemptID != "" {
		t.Fatalf("101st check: %v, want 429 block by login-hard-stop without retry or attempt id", d)
	}
	if got := d.header.Get("Retry-After"); got != "" {
		t.Fatalf("a block carries Retry-After %q", got)
	}

	// The rate recovers, the hard stop holds: an idle count is kept for
	// the rule's hold (90 days).
	for _, wait := range []time.Duration{time.Hour, 89 * day} {
		g.clock.Advance(wait)
		if d := g.check(t, attacker); d.Decision != "block" || d.Rule != "login-hard-stop" {
			t.Fatalf("%v later: %v, want block by login-hard-stop", wait, d)
		}
	}
	if st := g.status(t, victim); st.ConsecutiveFailures != 100 || !st.Blocked || st.NextAllowedMS != 0 {
		t.Fatalf("status 89 days later = %+v, want 100 failures, blocked, rate recovered", st)
	}

	g.reset(t, victim)
	want = status{Limits: []limit{
		{Rule: "login-account", Remaining: 5, ResetMS: 0},
		{Rule: "password-reset-account", Remaining: 10, ResetMS: 0},
		{Rule: "login-hard-stop", Remaining: 100, ResetMS: 0},
	}, Networks: []networkStatus{}}
	if got := g.status(t, victim); !reflect.DeepEqual(got, want) {
		t.Fatalf("status after reset = %+v, want %+v", got, want)
	}
	if d := g.check(t, attacker); d.Decision != "allow" || d.remaining(t, "login-account") != 4 {
		t.Fatalf("after reset: %v, want allow from a full burst", d)
	}
}

// The same brute force from 1,000 addresses: the account's limits hold
// exactly as from one, and no per-IP limit ever fires.
func TestBruteForceFromAThousandIPs(t *testing.T) {
	g := start(t, "")
	const victim = "victim@example.com"
	next := 0
	guess := func() decision {
		t.Helper()
		a := attempt{Flow: "login", Account: victim, IP: fmt.Sprintf("10.1.%d.%d", next/256%4, next%256)}
		next++
		d := g.fail(t, a)
		if d.Rule == "login-ip" {
			t.Fatalf("attempt %d was decided by login-ip: %v", next, d)
		}
		// An allowed guess spends one of its address's 30, and so does a
		// slowed one, the toll of knocking while slowed.
		if ip := d.remaining(t, "login-ip"); ip != 29 {
			t.Fatalf("attempt %d: login-ip remaining %d after %s: each address is fresh", next, ip, d.Decision)
		}
		return d
	}
	round := func(n int) (allowed int) {
		t.Helper()
		for i := range n {
			d := guess()
			switch {
			case d.Decision == "allow":
				allowed++
			case d.Decision != "slow" || d.Rule != "login-account" || d.RetryAfterMS != minuteMS:
				t.Fatalf("round attempt %d: %v, want allow or slow by login-account for a minute", i, d)
			}
		}
		return allowed
	}

	if got := round(50); got != 5 {
		t.Fatalf("50 addresses at once: %d allowed, want 5", got)
	}
	for m := 1; m <= 94; m++ {
		g.clock.Advance(time.Minute)
		if got := round(10); got != 1 {
			t.Fatalf("minute %d, 10 addresses: %d allowed, want 1", m, got)
		}
	}
	g.clock.Advance(time.Minute)
	if d := guess(); d.Decision != "allow" {
		t.Fatalf("minute 95: %v, want allow (the 100th failure)", d)
	}
	for next < 1000 {
		if d := guess(); d.Decision != "block" || d.Rule != "login-hard-stop" {
			t.Fatalf("address %d after 100 failures: %v, want block by login-hard-stop", next, d)
		}
	}
	if st := g.status(t, victim); st.ConsecutiveFailures != 100 || !st.Blocked {
		t.Fatalf("status = %+v, want 100 failures, blocked", st)
	}
}

// Password spraying: one guess at each of 500 accounts from one IPv6 /64
// (every guess from another address in it). login-ip counts the /64: 30
// failures back to back, then one every 20 seconds; no account limit fires.
func TestPasswordSprayFromOne64(t *testing.T) {
	g := start(t, "")
	sprayed := 0
	spray := func(n int) (allowed int) {
		t.Helper()
		for range n {
			i := sprayed
			sprayed++
			a := attempt{
				Flow:    "login",
				Account: fmt.Sprintf("user%03d@example.com", i),
				IP:      fmt.Sprintf("2001:db8:5:64:%x:%x:%x:%x", i*7919%65536, i*104729%65536, i, 65535-i),
			}
			d := g.fail(t, a)
			if d.Rule == "login-account" || d.Rule == "login-hard-stop" {
				t.Fatalf("account %d: %v, an account limit fired", i, d)
			}
			switch d.Decision {
			case "challenge":
				// Past 20 accounts from the /48 (and so the /64), the
				// checks that go ahead are challenged.
				if d.Rule != "login-ip-distinct-accounts" || i < 21 {
					t.Fatalf("account %d: %v, want a challenge by login-ip-distinct-accounts past 20 accounts", i, d)
				}
				fallthrough
			case "allow":
				allowed++
				if got := d.remaining(t, "login-account"); got != 4 {
					t.Fatalf("account %d: login-account remaining %d, want 4", i, got)
				}
			case "slow":
				if d.Rule != "login-ip" || d.RetryAfterMS != 20_000 || d.remaining(t, "login-account") != 5 {
					t.Fatalf("account %d: %v, want slow by login-ip for 20s, the account untouched", i, d)
				}
			default:
				t.Fatalf("account %d: %v", i, d)
			}
		}
		return allowed
	}
	if got := spray(500); got != 30 {
		t.Fatalf("500 accounts at once: %d allowed, want 30", got)
	}
	g.clock.Advance(20 * time.Second)
	if got := spray(10); got != 1 {
		t.Fatalf("20 seconds later: %d allowed, want 1", got)
	}
	g.clock.Advance(10 * time.Minute)
	if got := spray(100); got != 30 {
		t.Fatalf("10 minutes later: %d allowed, want 30", got)
	}
	// Another /64 is another prefix for login-ip; it is still in the /48
	// that more than 20 accounts failed from, so it is challenged.
	d := g.fail(t, attempt{Flow: "login", Account: "user000@example.com", IP: "2001:db8:5:65::1"})
	if d.Decision != "challenge" || d.Rule != "login-ip-distinct-accounts" || d.remaining(t, "login-ip") != 29 {
		t.Fatalf("from another /64: %v, want a challenge with 29 left", d)
	}
}

// Lockout as a weapon: an attacker fails on purpose against the victim's
// account. The victim's trusted device logs in unaffected throughout; the
// victim on an untrusted device is slowed, never blocked before 100.
func TestLockoutAsAWeapon(t *testing.T) {
	g := start(t, "")
	const victim = "victim@example.com"
	home := "198.51.100.20"
	laptop := g.login(t, attempt{Flow: "login", Account: victim, IP: home})
	// The attacker has an account too, and its device token, which is
	// worth nothing against the victim's account.
	stolen := g.login(t, attempt{Flow: "login", Account: "mallory@example.com", IP: "203.0.113.66"})
	attacker := attempt{Flow: "login", Account: victim, IP: "203.0.113.66", DeviceToken: stolen}
	trusted := attempt{Flow: "login", Account: victim, IP: home, DeviceToken: laptop}
	// A new device on a network the victim never logged in from: home
	// is familiar, and counts in a bucket of its own.
	untrusted := attempt{Flow: "login", Account: victim, IP: "192.0.2.200"}

	trustedLogin := func(when string) {
		t.Helper()
		d := g.check(t, trusted)
		if d.Decision != "allow" || d.remaining(t, "login-account") != 4 || d.remaining(t, "login-hard-stop") != 99 {
			t.Fatalf("%s: trusted device: %v, want allow on its own full bucket", when, d)
		}
		g.report(t, d, "success")
	}
	failures := 0
	attack := func() {
		t.Helper()
		for {
			d := g.fail(t, attacker)
			if d.Decision == "allow" {
				failures++
				return
			}
			if d.Decision != "slow" || d.Rule != "login-account" {
				t.Fatalf("attacker after %d failures: %v, want allow or slow by login-account", failures, d)
			}
			g.clock.Advance(time.Duration(d.RetryAfterMS) * time.Millisecond)
		}
	}

	for failures < 99 {
		attack()
		trustedLogin(fmt.Sprintf("after %d failures", failures))
		if failures < 5 {
			continue // the account's bucket is not empty yet
		}
		d := g.check(t, untrusted)
		if d.Decision != "slow" || d.Rule != "login-account" || d.RetryAfterMS != minuteMS {
			t.Fatalf("untrusted victim after %d failures: %v, want slow by login-account, never block", failures, d)
		}
	}
	// The trusted successes were the device's own: the account's count is
	// the attacker's.
	if st := g.status(t, victim); st.ConsecutiveFailures != 99 || st.Blocked || st.NextAllowedMS != minuteMS {
		t.Fatalf("status after 99 failures = %+v, want 99, not blocked, next in a minute", st)
	}
	// The victim waits out the slow-down on an untrusted device and logs
	// in: the success lifts the victim's own failure alone (the count made
	// from its address) and gives back the victim's own unit: the
	// attacker's 99 stay counted, no fresh guesses and no fresh burst.
	g.clock.Advance(time.Minute)
	d := g.check(t, untrusted)
	if d.Decision != "allow" || d.remaining(t, "login-account") != 0 {
		t.Fatalf("untrusted victim a minute later: %v, want allow", d)
	}
	g.report(t, d, "success")
	st := g.status(t, victim)
	if st.ConsecutiveFailures != 99 || st.Blocked || st.Limits[0].Remaining != 1 {
		t.Fatalf("status after the victim's success = %+v, want the attacker's 99 failures and 1 unit left, not a fresh burst", st)
	}

	// That success made its network familiar: from there the victim has
	// buckets of its own. The attacker's next failure is the 100th: now
	// the untrusted victim on yet another network is blocked, and neither
	// the trusted device nor the familiar network is.
	familiar := untrusted
	untrusted.IP = "198.18.0.1"
	failures = 0
	for failures < 1 {
		attack()
	}
	if d := g.check(t, untrusted); d.Decision != "block" || d.Rule != "login-hard-stop" {
		t.Fatalf("untrusted victim after 100 failures: %v, want block", d)
	}
	if d := g.check(t, familiar); d.Decision != "allow" || d.Trust != "network" {
		t.Fatalf("victim on the familiar network after 100 failures: %v trust %q, want allow on its own bucket", d, d.Trust)
	}
	trustedLogin("at the hard stop")
	g.reset(t, victim)
	if d := g.check(t, untrusted); d.Decision != "allow" {
		t.Fatalf("untrusted victim after reset: %v, want allow", d)
	}
}

// A stolen device token: failures through a trusted device slow, and at
// 100 block, that device alone; the account and its other devices are
// untouched.
func TestFailuresOnATrustedDeviceLockOnlyThatDevice(t *testing.T) {
	g := start(t, "")
	const victim = "victim@example.com"
	phone := g.login(t, attempt{Flow: "login", Account: victim, IP: "198.51.100.20"})
	thief := attempt{Flow: "login", Account: victim, IP: "203.0.113.99", DeviceToken: phone}
	untrusted := attempt{Flow: "login", Account: victim, IP: "198.51.100.21"}

	for i := range 5 {
		if d := g.fail(t, thief); d.Decision != "allow" || d.remaining(t, "login-account") != int64(4-i) {
			t.Fatalf("device failure %d: %v, want allow", i+1, d)
		}
	}
	if d := g.check(t, thief); d.Decision != "slow" || d.Rule != "login-account" || d.RetryAfterMS != minuteMS {
		t.Fatalf("device after 5 failures: %v, want slow for a minute", d)
	}
	d := g.check(t, untrusted)
	if d.Decision != "allow" || d.remaining(t, "login-account") != 4 || d.remaining(t, "login-hard-stop") != 99 {
		t.Fatalf("the account after 5 device failures: %v, want allow on its own full bucket", d)
	}
	g.report(t, d, "success")

	for n := 6; n <= 100; n++ {
		g.clock.Advance(time.Minute)
		if d := g.fail(t, thief); d.Decision != "allow" {
			t.Fatalf("device failure %d: %v, want allow", n, d)
		}
	}
	if d := g.check(t, thief); d.Decision != "block" || d.Rule != "login-hard-stop" {
		t.Fatalf("device after 100 failures: %v, want block", d)
	}
	if st := g.status(t, victim); st.ConsecutiveFailures != 0 || st.Blocked {
		t.Fatalf("account status = %+v, want untouched", st)
	}
	d = g.check(t, untrusted)
	if d.Decision != "allow" || d.remaining(t, "login-account") != 4 {
		t.Fatalf("the account after the device's hard stop: %v, want allow", d)
	}
	g.report(t, d, "success")
	tablet := g.login(t, untrusted)
	if d := g.check(t, attempt{Flow: "login", Account: victim, IP: "198.51.100.22", DeviceToken: tablet}); d.Decision != "allow" {
		t.Fatalf("another device of the account: %v, want allow", d)
	}
}

// Parallel guessing: 200 checks for one account at once, from 200
// addresses, before any report: the account's burst, exactly, goes through.
func TestParallelGuessing(t *testing.T) {
	g := start(t, "")
	const victim = "victim@example.com"
	const callers = 200
	got := make([]decision, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			got[i] = g.check(t, attempt{Flow: "login", Account: victim, IP: fmt.Sprintf("192.0.2.%d", i)})
		})
	}
	wg.Wait()
	allowed := 0
	for i, d := range got {
		switch {
		case d.Decision == "allow" && d.status == http.StatusOK:
			allowed++
		case d.Decision == "slow" && d.Rule == "login-account" && d.status == http.StatusTooManyRequests:
		default:
			t.Fatalf("caller %d: %v, want allow or slow by login-account", i, d)
		}
	}
	if allowed != 5 {
		t.Fatalf("%d of %d concurrent checks allowed, want exactly 5", allowed, callers)
	}
	// Unreported attempts count as failures.
	if st := g.status(t, victim); st.ConsecutiveFailures != 5 || st.Limits[0].Remaining != 0 {
		t.Fatalf("status = %+v, want 5 failures reserved and the bucket empty", st)
	}
}

// The status of an account never seen is the status of an account that
// exists and never failed: the admin API does not enumerate accounts.
func TestStatusDoesNotRevealAccounts(t *testing.T) {
	g := start(t, "")
	g.login(t, attempt{Flow: "login", Account: "alice@example.com", IP: "192.0.2.1"})
	known, unknown := g.status(t, "alice@example.com"), g.status(t, "nobody@example.com")
	want := status{Limits: []limit{
		{Rule: "login-account", Remaining: 5},
		{Rule: "password-reset-account", Remaining: 10},
		{Rule: "login-hard-stop", Remaining: 100},
	}, Networks: []networkStatus{}}
	// The one difference is the network alice succeeded from, which the
	// status lists (contract 8.1): an account that never logged in
	// through guardian looks like one that does not exist.
	if len(known.Networks) != 1 || known.Networks[0].ConsecutiveFailures != 0 || known.Networks[0].Blocked {
		t.Fatalf("known %+v: want its one familiar network, at 0", known)
	}
	known.Networks = []networkStatus{}
	if !reflect.DeepEqual(known, want) || !reflect.DeepEqual(unknown, want) {
		t.Fatalf("known %+v, unknown %+v; want both %+v", known, unknown, want)
	}
}
