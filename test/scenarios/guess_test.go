package scenarios_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/client"
)

// fingerprintKey is the auth service's own key for secret fingerprints,
// which guardian never sees.
var fingerprintKey = []byte("the login service's fingerprint key")

// fp is the fingerprint of the password tried.
func fp(password string) string { return client.Fingerprint(fingerprintKey, []byte(password)) }

// Password spraying from a botnet: one common password tried once at each
// of 500 accounts, each from an address of its own on a /24 of its own (so
// that login-ip-distinct-accounts sees one account a network), 10 a minute
// for 50 minutes. Every per-account and per-address limit stays fresh; the
// built-in login-secret-spray counts the one fingerprint across accounts:
// 10 failures back to back, then one a minute, and every other try must
// pass a challenge: exactly 10 + 49 tries go unchallenged. Real users
// logging in meanwhile, with passwords of their own, right or mistyped,
// are never challenged.
func TestOneGuessSprayedAcrossAccounts(t *testing.T) {
	g := start(t, "")
	sprayed := fp("Winter2026!")
	unchallenged, challenged := 0, 0
	for i := range 500 {
		if i > 0 && i%10 == 0 {
			g.clock.Advance(time.Minute)
		}
		a := attempt{
			Flow: "login", Account: fmt.Sprintf("user%d@example.com", i),
			IP: fmt.Sprintf("10.%d.%d.3", i/250, i%250), SecretFingerprint: sprayed,
		}
		d := g.check(t, a)
		switch {
		case d.Decision == "allow":
			unchallenged++
		case d.Decision == "challenge" && d.Rule == "login-secret-spray":
			challenged++
		default:
			t.Fatalf("spray %d: %v, want allow or challenge by login-secret-spray", i, d)
		}
		if d.RepeatGuess || d.remaining(t, "login-account") != 4 || d.remaining(t, "login-ip") != 29 {
			t.Fatalf("spray %d: %v: every account and address is fresh, and no guess is a repeat", i, d)
		}
		// The challenge is never solved: the password is never verified,
		// and the attempt is reported a failure either way.
		g.report(t, d, "failure")

		if i%10 == 5 {
			user := fmt.Sprintf("real%d@example.com", i)
			ip := fmt.Sprintf("172.16.%d.9", i%250)
			mistyped := g.fail(t, attempt{Flow: "login", Account: user, IP: ip, SecretFingerprint: fp("my own passw0rd " + user)})
			right := g.check(t, attempt{Flow: "login", Account: user, IP: ip, SecretFingerprint: fp("my own password " + user)})
			for _, d := range []decision{mistyped, right} {
				if d.Decision != "allow" || d.remaining(t, "login-secret-spray") != 9 {
					t.Fatalf("real user %s during the spray: %v, want allow with a fingerprint of its own", user, d)
				}
			}
			g.report(t, right, "success")
		}
	}
	if unchallenged != 10+49 || challenged != 500-59 {
		t.Fatalf("%d unchallenged, %d challenged; want 59 (10 + 49 minutes × 1) and 441", unchallenged, challenged)
	}
}

// A phone holding a stale password retries it hourly all day: the account
// spends one failure on it, never slows, and its hard-stop count stays at 1
// (until that one failure is held no longer, hold × 1/100); the user then
// logs in with the right password. (24 repeats a day are within the 20 free
// a day and the one more every 72 minutes, TestConstantFingerprint.) An
// attacker trying distinct passwords on another account is slowed at the
// sixth, as ever.
func TestStalePasswordCostsOnce(t *testing.T) {
	g := start(t, "")
	const owner = "owner@example.com"
	phone := attempt{Flow: "login", Account: owner, IP: "198.51.100.7", SecretFingerprint: fp("last year's password")}
	for i := range 24 {
		d := g.fail(t, phone)
		// The one unit the first try spent is back a minute later.
		account := int64(5)
		if i == 0 {
			account = 4
		}
		if d.Decision != "allow" || d.RepeatGuess != (i > 0) || d.remaining(t, "login-account") != account || d.remaining(t, "login-hard-stop") < 99 {
			t.Fatalf("stale retry %d: %v repeat %v, want allow with %d left on login-account, 99 or 100 on the hard stop", i, d, d.RepeatGuess, account)
		}
		g.clock.Advance(time.Hour)
	}
	if st := g.status(t, owner); st.ConsecutiveFailures > 1 || st.RememberedGuesses != 1 || st.NextAllowedMS != 0 {
		t.Fatalf("status after a day of stale retries: %+v", st)
	}
	g.login(t, attempt{Flow: "login", Account: owner, IP: "198.51.100.7", SecretFingerprint: fp("this year's password")})
	if st := g.status(t, owner); st.RememberedGuesses != 0 {
		t.Fatalf("after the success: %d remembered guesses, want 0", st.RememberedGuesses)
	}

	for i := range 6 {
		d := g.fail(t, attempt{Flow: "login", Account: "target@example.com", IP: "203.0.113.9", SecretFingerprint: fp(fmt.Sprintf("guess %d", i))})
		if want := "allow"; i == 5 {
			if d.Decision != "slow" || d.Rule != "login-account" {
				t.Fatalf("sixth distinct guess: %v, want slow by login-account", d)
			}
		} else if d.Decision != want {
			t.Fatalf("distinct guess %d: %v, want allow", i+1, d)
		}
	}
}

// TestConstantFingerprint: an auth service with a bug sends one constant
// secret_fingerprint, so that every guess looks like a repeat. Before the
// cap, 300 guesses from 300 /24s all went ahead and the account's
// consecutive failures stayed at 1. Now a repeat is free 20 times a day (and
// once more every 72 minutes): past that each guess counts like any
// failure, the answer says so (repeat_capped), and the hard stop ends the
// attacker as it would without fingerprints.
func TestConstantFingerprint(t *testing.T) {
	g := start(t, "")
	const victim = "victim@example.com"
	free, capped, allowed := 0, 0, 0
	for i := range 300 {
		d := g.fail(t, attempt{Flow: "login", Account: victim, IP: fmt.Sprintf("198.%d.%d.1", 18+i/250, i%250), SecretFingerprint: fp("constant")})
		if d.Decision == "block" {
			break
		}
		allowed++
		if d.RepeatGuess {
			free++
		}
		if d.RepeatCapped {
			capped++
		}
		g.clock.Advance(time.Minute)
	}
	if free != 21 || capped != 99 || allowed != 121 {
		t.Errorf("%d guesses went ahead, %d of them free repeats and %d capped; want 121, 21 and 99", allowed, free, capped)
	}
	if st := g.status(t, victim); !st.Blocked || st.ConsecutiveFailures != 100 {
		t.Errorf("status = %+v, want the hard stop", st)
	}
}
