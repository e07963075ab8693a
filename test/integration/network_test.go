package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/guardian-sec/guardian/internal/redistest"
)

// Shared networks (contract 8.1) on every store a fleet runs on.

// sharedNetworkRules hold an account to 20 consecutive failures under
// familiar networks, with rate rules far out of the way, so that the hard
// stop alone decides.
const sharedNetworkRules = `version: 1
familiar_networks: {ipv4_prefix: 24, ipv6_prefix: 48, hold: 90d}
rules:
  - name: account
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1s
    burst: 1000
  - name: hard-stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 20
`

// sharedNetwork runs the shared-network cases on fleet.
func sharedNetwork(t *testing.T, fleet []*instance) {
	t.Run("owner_hands_the_network_no_guesses", func(t *testing.T) { testNoMultiplier(t, fleet) })
	t.Run("concurrent_neighbours", func(t *testing.T) { testConcurrentNeighbours(t, fleet) })
}

// tryAs checks body on instance in and, when the check goes ahead,
// reports outcome there; it returns the check's answer.
func tryAs(t *testing.T, in *instance, body map[string]any, outcome string) answer {
	t.Helper()
	a := in.check(t, body)
	if id := a.str("attempt_id"); id != "" {
		in.report(t, id, outcome)
	}
	return a
}

// failAs is tryAs reporting a failure.
func failAs(t *testing.T, in *instance, body map[string]any) answer {
	t.Helper()
	return tryAs(t, in, body, "failure")
}

// status reads account's status on in.
func status(t *testing.T, in *instance, account string) answer {
	t.Helper()
	return in.must(t, "GET", "/v1/accounts/status?account="+account, adminToken, nil)
}

// networkCount returns the consecutive failures and block of the only
// familiar network of a status.
func networkCount(t *testing.T, st answer) (int64, bool) {
	t.Helper()
	ns, _ := st.body["networks"].([]any)
	if len(ns) != 1 {
		t.Fatalf("status %s: want one familiar network", st.raw)
	}
	n, _ := ns[0].(map[string]any)
	c, _ := n["consecutive_failures"].(float64)
	b, _ := n["blocked"].(bool)
	return int64(c), b
}

// neighbour is the attacker's i-th address on the owner's /24, 203.0.113.7:
// one of 50 others, written in turn as IPv4, 6to4, NAT64 and Teredo, each
// counting as the IPv4 address it carries, never the owner's.
func neighbour(i int) string {
	host := 100 + i%50
	switch i % 4 {
	case 1:
		return fmt.Sprintf("2002:cb00:71%02x::1", host)
	case 2:
		return fmt.Sprintf("64:ff9b::cb00:71%02x", host)
	case 3:
		return fmt.Sprintf("2001:0:4136:e378:8000:63bf:34ff:8e%02x", 0xff^host)
	}
	return fmt.Sprintf("203.0.113.%d", host)
}

// testNoMultiplier: an attacker on other addresses of the owner's /24
// (neighbour) fails while the owner at home logs in after every three of its guesses,
// mistyping first now and then: the owner's successes lift only the
// owner's own failures, so the attacker gets exactly 20 (the hard stop),
// then the network is blocked for checks without a device; the device
// gets in. An attacker elsewhere gets exactly 20 more.
func testNoMultiplier(t *testing.T, fleet []*instance) {
	const account = "shared-owner"
	on := func(i int) *instance { return fleet[i%len(fleet)] }
	home := map[string]any{"flow": "login", "account": account, "ip": "203.0.113.7"}
	first := on(0).check(t, home)
	tok := on(0).report(t, first.str("attempt_id"), "success").str("device_token")
	guesses := 0
	for i := 0; ; i++ {
		a := failAs(t, on(i), map[string]any{"flow": "login", "account": account, "ip": neighbour(i)})
		if a.str("decision") == "block" {
			break
		}
		guesses++
		if guesses > 20 {
			t.Fatalf("attacker on the /24 allowed %d guesses, want 20", guesses)
		}
		if i%3 != 2 {
			continue
		}
		if i%2 == 0 {
			failAs(t, on(i+1), home)
		}
		tryAs(t, on(i+1), home, "success")
	}
	if guesses != 20 {
		t.Fatalf("attacker on the /24 got %d guesses, want 20", guesses)
	}
	if n, blocked := networkCount(t, status(t, on(1), account)); n != 20 || !blocked {
		t.Fatalf("network at %d, blocked %v; want 20, blocked", n, blocked)
	}
	if a := on(1).check(t, home); a.str("decision") != "block" {
		t.Fatalf("owner at home without the device: %s, want block", a.raw)
	}
	if a := on(2).check(t, map[string]any{"flow": "login", "account": account, "ip": "203.0.113.7", "device_token": tok}); a.str("decision") != "allow" {
		t.Fatalf("owner on the device: %s, want allow", a.raw)
	}
	elsewhere := 0
	for i := 0; elsewhere <= 20; i++ {
		if failAs(t, on(i), map[string]any{"flow": "login", "account": account, "ip": fmt.Sprintf("198.51.%d.1", i)}).str("decision") == "block" {
			break
		}
		elsewhere++
	}
	if elsewhere != 20 {
		t.Fatalf("attacker elsewhere got %d guesses, want 20", elsewhere)
	}
}

// testConcurrentNeighbours: 50 checks at once from other addresses of the
// owner's /24 allow exactly 20; the owner's success at home then lifts
// none of them.
func testConcurrentNeighbours(t *testing.T, fleet []*instance) {
	const account = "shared-owner-2"
	home := map[string]any{"flow": "login", "account": account, "ip": "203.0.113.7"}
	first := fleet[0].check(t, home)
	fleet[0].report(t, first.str("attempt_id"), "success")
	got := concurrentChecks(t, fleet, 50, func(i int) map[string]any {
		return map[string]any{"flow": "login", "account": account, "ip": fmt.Sprintf("203.0.113.%d", 100+i)}
	})
	if got[http.StatusOK] != 20 || got[http.StatusTooManyRequests] != 30 {
		t.Fatalf("statuses = %v, want exactly 20 × 200 and 30 × 429", got)
	}
	if n, blocked := networkCount(t, status(t, fleet[0], account)); n != 20 || !blocked {
		t.Fatalf("network at %d, blocked %v; want 20 (never reported), blocked", n, blocked)
	}
}

func TestSharedNetworkOnTheEmbeddedStore(t *testing.T) {
	sharedNetwork(t, startFleet(t, 1, fleetConfig{rulesYAML: sharedNetworkRules}))
}

func TestSharedNetworkAcrossInstances(t *testing.T) {
	redis := redistest.Start(t)
	sharedNetwork(t, startFleet(t, 2, fleetConfig{redisURL: redis.URL(), rulesYAML: sharedNetworkRules}))
}

func TestSharedNetworkOnRedisCluster(t *testing.T) {
	cluster := redistest.StartCluster(t)
	sharedNetwork(t, startFleet(t, 3, fleetConfig{redisURL: strings.Join(cluster.Addrs(), ","), rulesYAML: sharedNetworkRules}))
}

// testOffice: under the built-in rules, 40 colleagues logging in from one
// office /24 challenge nobody; 25 made-up accounts failing from it put its
// untrusted checks behind a challenge, but never a check with a valid
// device token or a passed challenge; one poller emptying a NAT address's
// login-ip slows no owner on their own device behind it.
func testOffice(t *testing.T, fleet []*instance) {
	on := func(i int) *instance { return fleet[i%len(fleet)] }
	var tok string
	for i := range 40 {
		a := on(i).check(t, map[string]any{"flow": "login", "account": fmt.Sprintf("colleague%d", i), "ip": fmt.Sprintf("198.51.100.%d", 1+i)})
		if a.str("decision") != "allow" {
			t.Fatalf("colleague %d: %s, want allow", i, a.raw)
		}
		tok = on(i).report(t, a.str("attempt_id"), "success").str("device_token")
	}
	// 40 successful accounts and 20 failing ones leave the estimate
	// |seen ∪ succeeded| − |succeeded| within one of 20 (Redis's
	// HyperLogLog): 25 made-up accounts are past the limit whatever it
	// rounds to.
	for i := range 25 {
		a := failAs(t, on(i), map[string]any{"flow": "login", "account": fmt.Sprintf("made-up-%d", i), "ip": fmt.Sprintf("198.51.100.%d", 100+i)})
		if i < 19 && a.str("decision") != "allow" {
			t.Fatalf("made-up account %d: %s, want allow", i, a.raw)
		}
	}
	if a := on(0).check(t, map[string]any{"flow": "login", "account": "colleague0", "ip": "198.51.100.200"}); a.str("decision") != "challenge" {
		t.Fatalf("untrusted check after 25 made-up accounts: %s, want challenge", a.raw)
	}
	for name, body := range map[string]map[string]any{
		"device":           {"flow": "login", "account": "colleague39", "ip": "198.51.100.201", "device_token": tok},
		"passed challenge": {"flow": "login", "account": "colleague1", "ip": "198.51.100.202", "challenge_passed": true},
	} {
		if a := on(1).check(t, body); a.str("decision") != "allow" {
			t.Fatalf("%s after 21 made-up accounts: %s, want allow", name, a.raw)
		}
	}
	for i := range 30 {
		failAs(t, on(i), map[string]any{"flow": "login", "account": "poller", "ip": "192.0.2.77"})
	}
	if a := on(0).check(t, map[string]any{"flow": "login", "account": "colleague2", "ip": "192.0.2.77"}); a.str("decision") != "slow" || a.str("rule") != "login-ip" {
		t.Fatalf("owner without a device behind the poller: %s, want slow by login-ip", a.raw)
	}
	if a := on(1).check(t, map[string]any{"flow": "login", "account": "colleague39", "ip": "192.0.2.77", "device_token": tok}); a.str("decision") != "allow" {
		t.Fatalf("owner on their device behind the poller: %s, want allow", a.raw)
	}
}

func TestOfficeAcrossInstances(t *testing.T) {
	redis := redistest.Start(t)
	testOffice(t, startFleet(t, 2, fleetConfig{redisURL: redis.URL()}))
}

func TestOfficeOnRedisCluster(t *testing.T) {
	cluster := redistest.StartCluster(t)
	testOffice(t, startFleet(t, 3, fleetConfig{redisURL: strings.Join(cluster.Addrs(), ",")}))
}
