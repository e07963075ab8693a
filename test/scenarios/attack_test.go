package scenarios_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/tokens"
)

// Attacks on shared networks as someone who reads the code would try them
// (contract 8.1 and 8.2), each with the bound that holds.

// TestNeighboursCannotOutrunTheOwnersAddress: an attacker on the owner's
// familiar network, but not at the owner's address, tries to make the
// owner's successes lift its failures: by rotating over 21 addresses, far
// more than the 8 sources a count remembers, so that the owner's own source
// falls off the list; from other /64s of the owner's IPv6 /48; and from
// 6to4 and NAT64 addresses, which count as the IPv4 address they carry (a
// neighbour's here, never the owner's). The owner logs in at home without
// a device every 10 minutes for two days. Each way, the attacker gets
// exactly the network's 100, and the owner's device still gets in.
func TestNeighboursCannotOutrunTheOwnersAddress(t *testing.T) {
	for _, tt := range []struct {
		name, home string
		attacker   func(i int) string
	}{
		{"ipv4 over 21 addresses of the /24", "203.0.113.7", func(i int) string { return fmt.Sprintf("203.0.113.%d", 100+i%21) }},
		{"ipv6 other /64s of the /48", "2001:db8:aa:1::7", func(i int) string { return fmt.Sprintf("2001:db8:aa:%x::1", 2+i%21) }},
		{"6to4 of the /24's other addresses", "203.0.113.7", func(i int) string { return fmt.Sprintf("2002:cb00:71%02x::1", 100+i%21) }},
		{"nat64 of the /24's other addresses", "203.0.113.7", func(i int) string { return fmt.Sprintf("64:ff9b::cb00:71%02x", 100+i%21) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := start(t, "")
			home := attempt{Flow: "login", Account: sharedAccount, IP: tt.home}
			tok := g.login(t, home)
			guesses, sources, blocked := 0, 0, false
			for i := range 2 * 144 {
				next := t0.Add(time.Duration(i+1) * 10 * time.Minute)
				// One address a minute: every 10 minutes the owner's
				// source is far behind the count's 8 most recent.
				for !blocked && g.clock.Now().Before(next) {
					slice := g.clock.Now().Add(time.Minute)
					n, b := hammer(t, g, attempt{Flow: "login", Account: sharedAccount, IP: tt.attacker(sources)}, slice)
					guesses, blocked = guesses+n, b
					sources++
					g.clock.Set(slice)
				}
				g.clock.Set(next)
				ownerIn(t, g, home, "success")
			}
			if guesses != 100 || !blocked {
				t.Errorf("attacker on the owner's network from %d sources got %d guesses in two days, blocked %t; want 100, blocked", sources, guesses, blocked)
			}
			st := g.status(t, sharedAccount)
			if st.Blocked || st.ConsecutiveFailures != 0 || len(st.Networks) != 1 || st.Networks[0].ConsecutiveFailures != 100 || !st.Networks[0].Blocked {
				t.Errorf("status = %+v, want open elsewhere, the network at 100 and blocked", st)
			}
			if d := g.check(t, attempt{Flow: "login", Account: sharedAccount, IP: tt.home, DeviceToken: tok}); d.Decision != "allow" {
				t.Errorf("owner on the device at home: %v, want allow", d)
			}
		})
	}
}

// TestAttackerCannotPushHomeOffTheList: only a success teaches an account
// a network, so an attacker failing from twelve /24s (more than the 8 a
// familiar list holds) neither pushes the owner's home off the list nor
// gets a bucket of its own: its failures all count outside the familiar
// networks, 12 × 5 of the 100, and the owner's browser at home still
// counts in home's own bucket, untouched.
func TestAttackerCannotPushHomeOffTheList(t *testing.T) {
	g := start(t, "")
	home := attempt{Flow: "login", Account: sharedAccount, IP: "203.0.113.7"}
	g.login(t, home)
	for n := range 12 {
		for range 5 {
			if d := g.fail(t, attempt{Flow: "login", Account: sharedAccount, IP: fmt.Sprintf("198.51.%d.1", n)}); d.Decision != "allow" || d.Trust != "none" {
				t.Fatalf("attacker from network %d: %v trust %q, want allow in the shared bucket", n, d, d.Trust)
			}
		}
		// login-account's burst again, for the next network.
		g.clock.Advance(5 * time.Minute)
	}
	st := g.status(t, sharedAccount)
	if st.Blocked || st.ConsecutiveFailures != 60 || len(st.Networks) != 1 || st.Networks[0].ConsecutiveFailures != 0 || st.Networks[0].Blocked {
		t.Fatalf("status = %+v, want 60 outside and home alone on the list at 0", st)
	}
	d := g.check(t, home)
	if d.Decision != "allow" || d.Trust != "network" || d.remaining(t, "login-account") != 4 || d.remaining(t, "login-hard-stop") != 99 {
		t.Fatalf("owner's browser at home: %v trust %q, want allow in home's own bucket, untouched", d, d.Trust)
	}
}

// TestSuccessesMaskNoFailedAccounts: an attacker who owns an account logs
// in with it successfully from a carrier /24 between each of its guesses
// at made-up accounts, and replays each success report: a success takes
// only its own account off the network's distinct count, once, so the
// 22nd made-up account is challenged exactly as without them, and a
// replayed report is refused.
func TestSuccessesMaskNoFailedAccounts(t *testing.T) {
	g := start(t, "")
	ip := func(i int) string { return fmt.Sprintf("198.51.100.%d", 1+i) }
	for i := range 25 {
		d := g.check(t, attempt{Flow: "login", Account: fmt.Sprintf("made-up-%d@example.com", i), IP: ip(i)})
		want := "allow"
		if i > 20 {
			want = "challenge"
		}
		if d.Decision != want {
			t.Fatalf("made-up account %d: %v, want %s", i, d, want)
		}
		if want == "challenge" && d.Rule != "login-ip-distinct-accounts" {
			t.Fatalf("made-up account %d: %v, want the challenge by login-ip-distinct-accounts", i, d)
		}
		g.report(t, d, "failure")
		own := g.check(t, attempt{Flow: "login", Account: "attacker@example.com", IP: ip(i)})
		g.report(t, own, "success")
		var e apiError
		body := map[string]string{"attempt_id": own.AttemptID, "outcome": "success"}
		if code, _ := g.do(t, http.MethodPost, "/v1/report", g.checkToken, body, &e); code != http.StatusConflict {
			t.Fatalf("replayed success report %d: %d %+v, want 409", i, code, e)
		}
	}
}

// TestAnotherAccountsDeviceIsNoDevice: behind a NAT address a poller has
// emptied login-ip. A device token skips address rules only for the
// account it was issued to and only while it lasts: another account's
// token, an expired one, or a forged one on a check is no device, and the
// check is slowed like any other.
func TestAnotherAccountsDeviceIsNoDevice(t *testing.T) {
	g := start(t, "")
	expired := g.login(t, attempt{Flow: "login", Account: "owner0@example.com", IP: "192.0.2.10"})
	g.clock.Advance(tokens.DefaultDeviceTTL + time.Minute)
	tok := g.login(t, attempt{Flow: "login", Account: "owner1@example.com", IP: "192.0.2.11"})
	for range 30 {
		g.fail(t, attempt{Flow: "login", Account: "poller@example.com", IP: "198.51.100.1"})
		g.clock.Advance(time.Millisecond)
	}
	for name, a := range map[string]attempt{
		"owner0 with owner1's token":    {Flow: "login", Account: "owner0@example.com", IP: "198.51.100.1", DeviceToken: tok},
		"owner0 with its expired token": {Flow: "login", Account: "owner0@example.com", IP: "198.51.100.1", DeviceToken: expired},
		"owner0 with a forged token":    {Flow: "login", Account: "owner0@example.com", IP: "198.51.100.1", DeviceToken: tok[:len(tok)-4] + "AAAA"},
	} {
		if d := g.check(t, a); d.Decision != "slow" || d.Rule != "login-ip" || d.Trust != "none" {
			t.Errorf("%s: %v trust %q, want slow by login-ip, no trust", name, d, d.Trust)
		}
	}
	if d := g.check(t, attempt{Flow: "login", Account: "owner1@example.com", IP: "198.51.100.1", DeviceToken: tok}); d.Decision != "allow" || d.Trust != "device" {
		t.Errorf("owner1 on its device: %v trust %q, want allow", d, d.Trust)
	}
}

// TestRepeatsAreTheAccountsOwn: a guess remembered for one account is no
// repeat for another, and one account's free repeats are its own: an auth
// service's constant fingerprint gives each account its 20 a day and
// never another account's. Two minutes between rounds keep the
// constant secret under login-secret-spray; in an hour no free repeat
// comes back, so of each account's 30 guesses the first and the last 9
// count: 10.
func TestRepeatsAreTheAccountsOwn(t *testing.T) {
	g := start(t, "")
	constant := fp("constant")
	free := map[string]int{}
	for i := range 30 {
		for _, acct := range []string{"a@example.com", "b@example.com"} {
			d := g.fail(t, attempt{Flow: "login", Account: acct, IP: fmt.Sprintf("198.18.%d.1", i), SecretFingerprint: constant})
			if d.Decision != "allow" {
				t.Fatalf("guess %d at %s: %v, want allow", i, acct, d)
			}
			if d.RepeatGuess {
				free[acct]++
			}
		}
		g.clock.Advance(2 * time.Minute)
	}
	for _, acct := range []string{"a@example.com", "b@example.com"} {
		if st := g.status(t, acct); free[acct] != 20 || st.ConsecutiveFailures != 10 {
			t.Errorf("%s: %d free repeats, %d consecutive failures; want 20 and 10", acct, free[acct], st.ConsecutiveFailures)
		}
	}
}

// TestDenyEntryHoldsForEverySpelling: a deny entry on an IPv4 /24 blocks
// the network's clients however their address reaches guardian: plain,
// IPv4-mapped, through 6to4, NAT64 or a Teredo server (which carries the
// client's address inverted). Before Teredo counted as IPv4, a client of the
// /24 left the entry through any Teredo server.
func TestDenyEntryHoldsForEverySpelling(t *testing.T) {
	g := start(t, "")
	if code, _ := g.addList(t, "deny", map[string]any{"network": "198.51.100.0/24", "ttl": "1h", "reason": "stuffing"}); code != http.StatusCreated {
		t.Fatalf("deny: %d", code)
	}
	for _, ip := range []string{"198.51.100.1", "::ffff:198.51.100.1", "2002:c633:6401::1", "64:ff9b::c633:6401", "2001:0:4136:e378:8000:63bf:39cc:9bfe"} {
		if d := g.check(t, attempt{Flow: "login", Account: sharedAccount, IP: ip}); d.Decision != "block" || d.Rule != "deny-list" {
			t.Errorf("check from %s: %v, want block by deny-list", ip, d)
		}
	}
	if d := g.check(t, attempt{Flow: "login", Account: sharedAccount, IP: "2001:0:4136:e378:8000:63bf:39cc:9afe"}); d.Decision != "allow" {
		t.Errorf("Teredo client 198.51.101.1: %v, want allow", d)
	}
}
