package scenarios_test

import (
	"fmt"
	"testing"
	"time"
)

// pollingRules are the built-in login rules with time compressed 60 times
// (a minute is a second), familiar networks on.
const pollingRules = `version: 1
familiar_networks: {ipv4_prefix: 24, ipv6_prefix: 48, hold: 90d}
rules:
  - name: login-account
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1s
    burst: 5
  - name: login-ip
    flows: [login, password_reset]
    key: ip
    type: rate
    count: failures
    limit: 30
    per: 10s
    burst: 30
  - name: login-hard-stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 100
`

// poll is the polling attack: from one IPv4 address, an attacker checks
// the victim's account every 20ms (50 a second) for the whole window,
// reporting every check it is allowed as a failure. Every second, the
// owner logs in, through each way in given. It returns how many of the
// attacker's checks were allowed.
func poll(t *testing.T, g *guardian, window time.Duration, owner func(second int)) (attackerAllowed int) {
	t.Helper()
	const every = 20 * time.Millisecond
	attacker := attempt{Flow: "login", Account: "victim@example.com", IP: "198.51.100.66"}
	for i := 0; time.Duration(i)*every < window; i++ {
		if d := g.fail(t, attacker); d.Decision == "allow" {
			attackerAllowed++
		}
		if i%50 == 25 {
			owner(i / 50)
		}
		g.clock.Advance(every)
	}
	return attackerAllowed
}

// TestPollingLocksNobodyOut: the attacker polls the victim's account so
// that every unit of login-account is taken the moment it refills. The
// owner at home (a familiar network), on their trusted device elsewhere,
// and after a passed challenge on a new network gets through every time,
// for the whole compressed hour; the attacker's polling costs its address
// (a slowed check pays login-ip), so it takes no more than the account's
// own budget.
func TestPollingLocksNobodyOut(t *testing.T) {
	g := start(t, pollingRules)
	home := attempt{Flow: "login", Account: "victim@example.com", IP: "203.0.113.7"}
	tok := g.login(t, home)    // the owner's first login: home and device known
	const window = time.Minute // an hour of the built-in rules
	ways := map[string]int{}
	allowed := poll(t, g, window, func(second int) {
		for _, w := range []struct {
			name  string
			a     attempt
			trust string
		}{
			{"familiar network", attempt{Flow: "login", Account: "victim@example.com", IP: fmt.Sprintf("203.0.113.%d", 10+second%200)}, "network"},
			{"trusted device", attempt{Flow: "login", Account: "victim@example.com", IP: "192.0.2.44", DeviceToken: tok}, "device"},
			{"passed challenge", attempt{Flow: "login", Account: "victim@example.com", IP: fmt.Sprintf("2001:db8:%x::1", second), ChallengePassed: true}, "challenge"},
		} {
			d := g.check(t, w.a)
			if d.Decision != "allow" || d.Trust != w.trust {
				t.Fatalf("second %d, owner by %s: %v trust %q, want allow on %s", second, w.name, d, d.Trust, w.trust)
			}
			g.report(t, d, "success")
			ways[w.name]++
		}
	})
	for name, n := range ways {
		if n != int(window/time.Second) {
			t.Errorf("owner by %s got through %d times, want %d", name, n, int(window/time.Second))
		}
	}
	// 5 back to back and one a second: the attacker's polls buy nothing
	// beyond the account's budget, and the 3,000 of them were slowed.
	if max := 5 + int(window/time.Second); allowed > max {
		t.Errorf("attacker allowed %d times, want at most %d", allowed, max)
	}
	t.Logf("attacker allowed %d of %d polls", allowed, int(window/(20*time.Millisecond)))
}

// TestPollingCostsTheAddress measures what polling costs the poller: once
// login-account is at zero, every slowed poll pays login-ip, so the
// attacker's address runs dry and its polls are slowed by login-ip itself.
// An owner on an untrusted new network, who has none of the ways in
// above, gets through when the account has a unit the poller could not
// take; the test logs how often.
func TestPollingCostsTheAddress(t *testing.T) {
	g := start(t, pollingRules)
	attacker := attempt{Flow: "login", Account: "victim@example.com", IP: "198.51.100.66"}
	for i := range 30 {
		d := g.fail(t, attacker)
		// 5 allowed, then 25 slowed by the account that pay login-ip.
		if got, want := d.remaining(t, "login-ip"), int64(29-i); got != want {
			t.Fatalf("poll %d: login-ip remaining %d, want %d: %v", i, got, want, d)
		}
	}
	owner, got := 0, 0
	poll(t, g, 30*time.Second, func(second int) {
		owner++
		d := g.check(t, attempt{Flow: "login", Account: "victim@example.com", IP: fmt.Sprintf("192.0.2.%d", 100+second)})
		if d.Decision == "allow" {
			got++
			g.report(t, d, "success")
		}
	})
	t.Logf("untrusted owner got through %d of %d tries while polled", got, owner)
}

// TestSpraysThatEmbedOrSpreadAnAddress: the built-in rules slow a spray
// from random /64s of one IPv6 /48 (login-ip6-48, after 300), and count a
// 6to4 or NAT64 address as the IPv4 address it carries (login-ip, after 30).
func TestSpraysThatEmbedOrSpreadAnAddress(t *testing.T) {
	t.Run("ipv6 /48", func(t *testing.T) {
		g := start(t, "")
		allowed := 0
		for i := range 400 {
			d := g.fail(t, attempt{Flow: "login", Account: fmt.Sprintf("u%d@example.com", i), IP: fmt.Sprintf("2001:db8:77:%x:%x::1", i*7919%65536, i)})
			// Past 20 accounts the /48 is challenged as well
			// (login-ip-distinct-accounts): a challenge goes ahead.
			switch {
			case d.AttemptID != "":
				allowed++
			case d.Rule != "login-ip6-48":
				t.Fatalf("check %d: %v, want slow by login-ip6-48", i, d)
			}
		}
		if allowed != 300 {
			t.Fatalf("%d of 400 allowed, want 300", allowed)
		}
	})
	t.Run("6to4 and NAT64", func(t *testing.T) {
		g := start(t, "")
		allowed := 0
		for i := range 60 {
			ip := fmt.Sprintf("2002:c000:0201:%x::%x", i, i+1) // 192.0.2.1, any subnet and host
			switch i % 3 {
			case 1:
				ip = "64:ff9b::c000:201" // NAT64 of 192.0.2.1
			case 2:
				ip = "192.0.2.1"
			}
			d := g.fail(t, attempt{Flow: "login", Account: fmt.Sprintf("u%d@example.com", i), IP: ip})
			switch {
			case d.AttemptID != "":
				allowed++
			case d.Rule != "login-ip":
				t.Fatalf("check %d from %s: %v, want slow by login-ip", i, ip, d)
			}
		}
		if allowed != 30 {
			t.Fatalf("%d of 60 allowed, want login-ip's 30 for the one IPv4 address", allowed)
		}
	})
}

// TestADayFromOne48: the README's promise, about 4,350 guesses a day from
// one source, holds for a /48 sprayed from ever new /64s: 300 back to back,
// then 4,050 a day.
func TestADayFromOne48(t *testing.T) {
	g := start(t, "")
	allowed := 0
	for i := 0; g.clock.Now().Before(t0.Add(day)); i++ {
		d := g.fail(t, attempt{Flow: "login", Account: fmt.Sprintf("u%d@example.com", i), IP: fmt.Sprintf("2001:db8:48:%x::1", i%65536)})
		if d.AttemptID != "" {
			allowed++
		}
		if i >= 400 {
			g.clock.Advance(20 * time.Second)
		}
	}
	// Polled every 20s, a little faster than login-ip6-48's 21.3s refill:
	// 300 + 4,050 × (a day less the first 21.3s).
	if allowed > 4350 || allowed < 4340 {
		t.Fatalf("%d guesses allowed in a day from one /48, want about 4,350 and never more", allowed)
	}
}

// TestLowAndSlowFromOne24: one /24 fails against a new account every half
// hour, under every per-minute limit: past 20 accounts in a day its checks
// are challenged (login-ip-distinct-accounts). One account failing as often
// from another /24 is never challenged for it.
func TestLowAndSlowFromOne24(t *testing.T) {
	g := start(t, "")
	for i := range 30 {
		d := g.fail(t, attempt{Flow: "login", Account: fmt.Sprintf("target%d@example.com", i), IP: fmt.Sprintf("203.0.113.%d", 1+i*7%250)})
		want, rule := "allow", ""
		if i > 20 {
			want, rule = "challenge", "login-ip-distinct-accounts"
		}
		if d.Decision != want || d.Rule != rule {
			t.Fatalf("account %d from the /24: %v, want %s %s", i, d, want, rule)
		}
		one := g.fail(t, attempt{Flow: "login", Account: "typo@example.com", IP: fmt.Sprintf("198.51.100.%d", 1+i)})
		if one.Decision != "allow" {
			t.Fatalf("failure %d of one account from its /24: %v, want allow", i, one)
		}
		g.clock.Advance(30 * time.Minute)
	}
	// A day after the spray's first accounts, the window has let them go.
	g.clock.Advance(day)
	if d := g.check(t, attempt{Flow: "login", Account: "later@example.com", IP: "203.0.113.5"}); d.Decision != "allow" {
		t.Fatalf("a day later: %v, want allow", d)
	}
}
