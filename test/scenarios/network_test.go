package scenarios_test

import (
	"fmt"
	"testing"
	"time"
)

// Shared networks (contract 8.1): many users behind one IPv4 /24 or IPv6
// /48 (a carrier NAT, an office, a campus). An attacker on another
// address of the owner's network shares the owner's familiar network, but
// not the owner's address or device.

// sharedAccount is the owner's account in the shared-network scenarios.
const sharedAccount = "owner@example.com"

// hammer is an attacker who fails against the account from a, waiting out
// every slow-down, until the clock reaches until or the account is
// blocked for it. It returns how many failures it was allowed, and
// whether it ended blocked.
func hammer(t *testing.T, g *guardian, a attempt, until time.Time) (failures int, blocked bool) {
	t.Helper()
	for g.clock.Now().Before(until) {
		d := g.fail(t, a)
		switch d.Decision {
		case "allow", "challenge":
			failures++
		case "block":
			return failures, true
		case "slow":
			wait := time.Duration(d.RetryAfterMS) * time.Millisecond
			if g.clock.Now().Add(wait).After(until) {
				return failures, false
			}
			g.clock.Advance(wait)
		default:
			t.Fatalf("attacker from %s: %v", a.IP, d)
		}
	}
	return failures, false
}

// ownerIn is the owner trying a, waiting out any slow-down, and reporting
// outcome; it reports false, having reported nothing, when a is blocked.
func ownerIn(t *testing.T, g *guardian, a attempt, outcome string) bool {
	t.Helper()
	for {
		d := g.check(t, a)
		switch d.Decision {
		case "block":
			return false
		case "slow":
			g.clock.Advance(time.Duration(d.RetryAfterMS) * time.Millisecond)
			continue
		}
		g.report(t, d, outcome)
		return true
	}
}

// TestOwnerAtHomeHandsTheNetworkNoGuesses: the owner logs in 14 times a
// day at home for 90 days, on the trusted device and, once a day, from a
// new browser; an attacker on another address of the same /24 guesses as
// fast as guardian lets it. Before this round every owner success at home
// reset the network's count, and the attacker got 1,445 guesses a day.
// Now the owner's successes lift only the failures made from the owner's
// address: the attacker gets exactly 100 in the 90 days, then the account
// is blocked from that network for checks without a device (the owner's
// new browser included, which the docs say), and the device always gets in.
func TestOwnerAtHomeHandsTheNetworkNoGuesses(t *testing.T) {
	g := start(t, "")
	home := attempt{Flow: "login", Account: sharedAccount, IP: "203.0.113.7"}
	tok := g.login(t, home)
	device := home
	device.DeviceToken = tok
	neighbour := attempt{Flow: "login", Account: sharedAccount, IP: "203.0.113.99"}

	const perDay, days = 14, 90
	every := day / perDay
	guesses, browserIn, browserBlocked := 0, 0, 0
	for i := range perDay * days {
		next := t0.Add(time.Duration(i+1) * every)
		n, _ := hammer(t, g, neighbour, next)
		guesses += n
		g.clock.Set(next)
		d := g.check(t, device)
		if d.Decision != "allow" || d.Trust != "device" {
			t.Fatalf("day %d, owner on the device: %v trust %q, want allow", i/perDay, d, d.Trust)
		}
		g.report(t, d, "success")
		if i%perDay != 0 {
			continue
		}
		switch d := g.check(t, home); d.Decision {
		case "allow":
			browserIn++
			g.report(t, d, "success")
		case "block":
			browserBlocked++
		}
	}
	if guesses != 100 {
		t.Errorf("attacker on the owner's /24 got %d guesses in %d days of %d owner logins a day, want 100", guesses, days, perDay)
	}
	if browserIn != 0 || browserBlocked != days {
		t.Errorf("owner's new browser at home: in %d times, blocked %d; want blocked past the network's hard stop", browserIn, browserBlocked)
	}
	st := g.status(t, sharedAccount)
	if st.Blocked || st.ConsecutiveFailures != 0 || len(st.Networks) != 1 ||
		st.Networks[0].ConsecutiveFailures != 100 || !st.Networks[0].Blocked {
		t.Fatalf("status = %+v, want the account open elsewhere and its network at 100, blocked", st)
	}
	t.Logf("attacker on the owner's /24: %d guesses in %d days; owner's new browser in %d times, blocked %d", guesses, days, browserIn, browserBlocked)

	// A verified reset lifts it: the owner at home gets in again.
	g.reset(t, sharedAccount)
	if d := g.check(t, home); d.Decision != "allow" {
		t.Fatalf("owner at home after a reset: %v, want allow", d)
	}
}

// TestOneHundredPerNetwork: attackers elsewhere and on the owner's /24
// guess while the owner logs in at home, now and then mistyping first:
// the owner's successes lift the owner's own failures, never theirs. The
// attacker elsewhere gets 100 and the one on the /24 100 more, each then
// blocked; the owner's device gets in, and the owner's typos were never
// counted against the network.
func TestOneHundredPerNetwork(t *testing.T) {
	g := start(t, "")
	home := attempt{Flow: "login", Account: sharedAccount, IP: "203.0.113.7"}
	tok := g.login(t, home)
	elsewhere := attempt{Flow: "login", Account: sharedAccount, IP: "198.51.100.66"}
	neighbour := attempt{Flow: "login", Account: sharedAccount, IP: "203.0.113.99"}

	total := map[string]int{}
	blocked := map[string]bool{}
	for hour := 0; !blocked["elsewhere"] || !blocked["neighbour"]; hour++ {
		if hour > 48 {
			t.Fatalf("attackers not blocked after two days: %v", total)
		}
		until := g.clock.Now().Add(30 * time.Minute)
		for name, a := range map[string]attempt{"elsewhere": elsewhere, "neighbour": neighbour} {
			n, b := hammer(t, g, a, until)
			total[name] += n
			blocked[name] = blocked[name] || b
		}
		g.clock.Set(until)
		// The owner at home mistypes once and logs in, waiting out a
		// slow-down the neighbour caused, while the network is not
		// blocked yet.
		if ownerIn(t, g, home, "failure") {
			ownerIn(t, g, home, "success")
		}
		g.clock.Advance(30 * time.Minute)
	}
	if total["elsewhere"] != 100 || total["neighbour"] != 100 {
		t.Errorf("guesses: %d from elsewhere, %d from the owner's /24; want 100 each", total["elsewhere"], total["neighbour"])
	}
	if d := g.check(t, attempt{Flow: "login", Account: sharedAccount, IP: "203.0.113.7", DeviceToken: tok}); d.Decision != "allow" {
		t.Errorf("owner on the device: %v, want allow", d)
	}
	st := g.status(t, sharedAccount)
	if !st.Blocked || st.ConsecutiveFailures != 100 || len(st.Networks) != 1 || st.Networks[0].ConsecutiveFailures != 100 {
		t.Errorf("status = %+v, want 100 and blocked elsewhere, 100 on the network", st)
	}
	t.Logf("guesses: %v", total)
}

// TestNetworkStatusNamesThePseudonym: the status names each familiar
// network by its pseudonym, with its own count.
func TestNetworkStatusNamesThePseudonym(t *testing.T) {
	g := start(t, "")
	for i, ip := range []string{"203.0.113.7", "2001:db8:aa:1::7"} {
		g.login(t, attempt{Flow: "login", Account: sharedAccount, IP: ip})
		g.fail(t, attempt{Flow: "login", Account: sharedAccount, IP: fmt.Sprintf("203.0.113.%d", 50+i)})
	}
	st := g.status(t, sharedAccount)
	if len(st.Networks) != 2 {
		t.Fatalf("status = %+v, want two networks", st)
	}
	counts := map[int64]int{}
	for _, n := range st.Networks {
		if len(n.Network) != 24 || n.Network[:2] != "h-" || n.Blocked {
			t.Errorf("network %+v: want an h- pseudonym, not blocked", n)
		}
		counts[n.ConsecutiveFailures]++
	}
	// Both failures came from other addresses of the /24, learned by the
	// first login; the login from the /48 lifted nothing of them.
	if counts[2] != 1 || counts[0] != 1 {
		t.Errorf("network counts %v, want the /24 at 2 and the /48 at 0", counts)
	}
}

// TestMadeUpAccountsChallengeNoDeviceOrPassedChallenge: 21 made-up
// accounts failing from one carrier /24 (or /48) put its checks behind a
// challenge (login-ip-distinct-accounts), but never a check with a valid
// device token, nor a re-check whose end user passed the challenge, which
// would otherwise loop.
func TestMadeUpAccountsChallengeNoDeviceOrPassedChallenge(t *testing.T) {
	for _, net := range []struct {
		name string
		ip   func(i int) string
	}{
		{"ipv4 /24", func(i int) string { return fmt.Sprintf("198.51.100.%d", 1+i) }},
		{"ipv6 /48", func(i int) string { return fmt.Sprintf("2001:db8:c0:%x::1", i) }},
	} {
		t.Run(net.name, func(t *testing.T) {
			g := start(t, "")
			tok := g.login(t, attempt{Flow: "login", Account: sharedAccount, IP: "192.0.2.10"})
			for i := range 21 {
				if d := g.fail(t, attempt{Flow: "login", Account: fmt.Sprintf("made-up-%d@example.com", i), IP: net.ip(i)}); d.Decision != "allow" {
					t.Fatalf("made-up account %d: %v, want allow", i, d)
				}
			}
			d := g.check(t, attempt{Flow: "login", Account: "someone@example.com", IP: net.ip(30)})
			if d.Decision != "challenge" || d.Rule != "login-ip-distinct-accounts" {
				t.Fatalf("untrusted check after 21 made-up accounts: %v, want a challenge", d)
			}
			g.report(t, d, "failure")
			device := attempt{Flow: "login", Account: sharedAccount, IP: net.ip(31), DeviceToken: tok}
			passed := attempt{Flow: "login", Account: "someone@example.com", IP: net.ip(30), ChallengePassed: true}
			for _, a := range []attempt{device, passed} {
				for i := range 3 {
					d := g.check(t, a)
					if d.Decision != "allow" {
						t.Fatalf("check %d with device %t, challenge passed %t: %v, want allow", i, a.DeviceToken != "", a.ChallengePassed, d)
					}
					g.report(t, d, "success")
				}
			}
		})
	}
}

// TestUnreportedMadeUpAccountsAreForgotten: 21 made-up accounts whose
// checks nobody reports put a /24 behind a challenge as failures would
// (login-ip-distinct-accounts), but only for as long as unreported state
// lives, twice --attempt-ttl after the last of them; the same accounts
// reported failures keep it challenged for the rule's day. So a flood that
// nobody reports leaves no network state for longer than it leaves
// counts, and a real failure still counts for 24 hours.
func TestUnreportedMadeUpAccountsAreForgotten(t *testing.T) {
	ip := func(i int) string { return fmt.Sprintf("198.51.100.%d", 1+i) }
	for _, reported := range []bool{false, true} {
		t.Run(fmt.Sprintf("reported %t", reported), func(t *testing.T) {
			g := start(t, "")
			for i := range 21 {
				a := attempt{Flow: "login", Account: fmt.Sprintf("made-up-%d@example.com", i), IP: ip(i)}
				d := g.check(t, a)
				if d.Decision != "allow" {
					t.Fatalf("made-up account %d: %v, want allow", i, d)
				}
				if reported {
					g.report(t, d, "failure")
				}
			}
			probe := func(label string, want string) {
				t.Helper()
				d := g.check(t, attempt{Flow: "login", Account: "someone@example.com", IP: ip(30)})
				if d.Decision != want {
					t.Fatalf("%s: %v, want %s", label, d, want)
				}
			}
			probe("right after", "challenge")
			g.clock.Advance(21 * time.Minute)
			if reported {
				probe("21 minutes later", "challenge")
				g.clock.Advance(23 * time.Hour)
				probe("a day later", "challenge")
				g.clock.Advance(7 * time.Hour)
				probe("past the rule's window", "allow")
				return
			}
			probe("21 minutes later", "allow")
		})
	}
}

// TestPollerSlowsNoOwnerOnTheirDevice: one poller behind a NAT address
// fails 30 times against one account and empties the address's login-ip
// (or, from ten /64s, a carrier /48's login-ip6-48). Ten other owners
// behind that address on their own devices are never slowed (their checks
// still count there), while a check without a device is, and so is a
// passed challenge, which does not bypass address rules.
func TestPollerSlowsNoOwnerOnTheirDevice(t *testing.T) {
	for _, net := range []struct {
		name, rule string
		polls      int
		poller     func(i int) string
		owner      func(i int) string
	}{
		{"nat address", "login-ip", 30, func(int) string { return "198.51.100.1" }, func(int) string { return "198.51.100.1" }},
		{"carrier /48", "login-ip6-48", 300, func(i int) string { return fmt.Sprintf("2001:db8:48:%x::%x", i%10, 1+i) },
			func(i int) string { return fmt.Sprintf("2001:db8:48:ff%02x::1", i) }},
	} {
		t.Run(net.name, func(t *testing.T) {
			g := start(t, "")
			tokens := make([]string, 10)
			for i := range tokens {
				tokens[i] = g.login(t, attempt{Flow: "login", Account: fmt.Sprintf("owner%d@example.com", i), IP: fmt.Sprintf("192.0.2.%d", 10+i)})
			}
			// A device's check counts on the address rule like any other.
			d := g.check(t, attempt{Flow: "login", Account: "owner9@example.com", IP: net.owner(9), DeviceToken: tokens[9]})
			if d.Decision != "allow" || d.remaining(t, net.rule) != int64(net.polls-1) {
				t.Fatalf("owner on their device before the poller: %v, want allow, counted on %s", d, net.rule)
			}
			g.report(t, d, "failure")
			for i := range net.polls {
				// The poller mistypes its own account's password: one
				// account, never challenged for distinct accounts.
				g.fail(t, attempt{Flow: "login", Account: "poller@example.com", IP: net.poller(i)})
				g.clock.Advance(time.Millisecond)
			}
			d = g.check(t, attempt{Flow: "login", Account: "owner0@example.com", IP: net.owner(0)})
			if d.Decision != "slow" || d.Rule != net.rule {
				t.Fatalf("owner without a device behind the poller: %v, want slow by %s", d, net.rule)
			}
			d = g.check(t, attempt{Flow: "login", Account: "owner0@example.com", IP: net.owner(0), ChallengePassed: true})
			if d.Decision != "slow" || d.Rule != net.rule {
				t.Fatalf("passed challenge behind the poller: %v, want slow by %s", d, net.rule)
			}
			for i, tok := range tokens {
				d := g.check(t, attempt{Flow: "login", Account: fmt.Sprintf("owner%d@example.com", i), IP: net.owner(i), DeviceToken: tok})
				if d.Decision != "allow" || d.Trust != "device" {
					t.Fatalf("owner %d on their device behind the poller: %v, want allow", i, d)
				}
				g.report(t, d, "success")
			}
		})
	}
}

// TestOfficeColleaguesChallengeNobody: 40 colleagues log in successfully
// from one office /24 in a morning, some after a typo: distinct accounts
// count failed or never reported checks only, so nobody there is
// challenged. Then 21 made-up accounts failing from the office do put it
// behind a challenge, exactly at the 21st, as do checks never reported (a
// challenge abandoned).
func TestOfficeColleaguesChallengeNobody(t *testing.T) {
	g := start(t, "")
	office := func(i int) string { return fmt.Sprintf("198.51.100.%d", 1+i%200) }
	for i := range 40 {
		a := attempt{Flow: "login", Account: fmt.Sprintf("colleague%d@example.com", i), IP: office(i)}
		if i%3 == 0 {
			if d := g.fail(t, a); d.Decision != "allow" {
				t.Fatalf("colleague %d's typo: %v, want allow", i, d)
			}
		}
		d := g.check(t, a)
		if d.Decision != "allow" {
			t.Fatalf("colleague %d: %v, want allow: nobody challenged", i, d)
		}
		g.report(t, d, "success")
		g.clock.Advance(5 * time.Minute)
	}
	for i := range 25 {
		a := attempt{Flow: "login", Account: fmt.Sprintf("made-up-%d@example.com", i), IP: office(i)}
		d := g.check(t, a)
		want := "allow"
		if i > 20 {
			want = "challenge"
		}
		if d.Decision != want {
			t.Fatalf("made-up account %d from the office: %v, want %s", i, d, want)
		}
		// Half of them abandon the check: never reported, still counted.
		if i%2 == 0 {
			g.report(t, d, "failure")
		}
	}
}

// TestRelearningHomeHandsNoGuesses: the attacker on the owner's /24 runs
// the network to its hard stop; the owner then logs in on the device from
// eight new networks, which pushes home off the account's familiar list
// (it holds 8), and the attacker's checks count outside the familiar
// networks, 100 more; the owner's next login at home on the device learns
// home again, and its bucket is still at 100: the attacker gets no more.
// 200 in all: 100 from outside the familiar networks and 100 from the one
// it shares.
func TestRelearningHomeHandsNoGuesses(t *testing.T) {
	g := start(t, "")
	home := attempt{Flow: "login", Account: sharedAccount, IP: "203.0.113.7"}
	tok := g.login(t, home)
	device := func(ip string) {
		t.Helper()
		d := g.check(t, attempt{Flow: "login", Account: sharedAccount, IP: ip, DeviceToken: tok})
		if d.Decision != "allow" {
			t.Fatalf("owner on the device from %s: %v, want allow", ip, d)
		}
		g.report(t, d, "success")
	}
	neighbour := attempt{Flow: "login", Account: sharedAccount, IP: "203.0.113.99"}
	total := 0
	for round := range 3 {
		n, blocked := hammer(t, g, neighbour, g.clock.Now().Add(day))
		total += n
		if !blocked {
			t.Fatalf("round %d: attacker not blocked after %d guesses", round, n)
		}
		switch round {
		case 0:
			for i := range 8 {
				device(fmt.Sprintf("192.0.%d.1", 10+i))
			}
		case 1:
			device(home.IP)
		}
	}
	if total != 200 {
		t.Errorf("attacker on the owner's /24 got %d guesses, want 200", total)
	}
	st := g.status(t, sharedAccount)
	if !st.Blocked || st.ConsecutiveFailures != 100 {
		t.Errorf("status = %+v, want blocked outside the familiar networks at 100", st)
	}
}

// TestSameAddressIsTheOwner: what a familiar network cannot protect. An
// attacker behind the owner's very address (a carrier NAT's shared IPv4
// address) is, without a device, indistinguishable from the owner: each
// success of the owner from that address without the device lifts the
// attacker's failures too. With the owner logging in that way every 30
// minutes, the attacker there gets what the network's login-account
// bucket refills in a day (5 + 1 a minute: 1,444 of the 1,445 the rule
// allows in a day); with the owner
// on the device instead, the owner's logins lift nothing and the attacker
// gets 100.
func TestSameAddressIsTheOwner(t *testing.T) {
	for _, tt := range []struct {
		name     string
		onDevice bool
		want     func(int) bool
	}{
		{"owner without the device", false, func(n int) bool { return n == 1444 }},
		{"owner on the device", true, func(n int) bool { return n == 100 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := start(t, "")
			home := attempt{Flow: "login", Account: sharedAccount, IP: "100.72.10.20"}
			owner := home
			if tok := g.login(t, home); tt.onDevice {
				owner.DeviceToken = tok
			}
			every := 30 * time.Minute
			guesses := 0
			for i := range int(day / every) {
				next := t0.Add(time.Duration(i+1) * every)
				n, _ := hammer(t, g, home, next)
				guesses += n
				g.clock.Set(next)
				ownerIn(t, g, owner, "success")
			}
			if !tt.want(guesses) {
				t.Errorf("attacker on the owner's address got %d guesses in a day", guesses)
			}
			t.Logf("%s: attacker on the owner's very address got %d guesses in a day of 48 owner logins", tt.name, guesses)
		})
	}
}
