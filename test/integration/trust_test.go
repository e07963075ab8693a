package integration

import (
	"net/http"
	"strings"
	"testing"

	"github.com/guardian-sec/guardian/internal/redistest"
)

// trustBudgetRules give each bucket of an account a budget of 20, and an
// address rule with room to spare, so that a check spans two subjects (two
// slots on a cluster).
const trustBudgetRules = `version: 1
familiar_networks: {ipv4_prefix: 24, ipv6_prefix: 48, hold: 90d}
rules:
  - name: account
    flows: [login]
    key: account
    type: rate
    limit: 1
    per: 1h
    burst: 20
  - name: per-ip
    flows: [login]
    key: ip
    type: rate
    limit: 1
    per: 1h
    burst: 1000
`

// testTrustBucketsExact: after one success from home, 50 concurrent checks
// from the home network, on the device, and after a passed challenge each
// allow exactly 20, each in its own bucket, while the shared bucket keeps
// what it had.
func testTrustBucketsExact(t *testing.T, fleet []*instance) {
	home := map[string]any{"flow": "login", "account": "alice", "ip": "203.0.113.7"}
	first := fleet[0].check(t, home)
	if first.str("trust") != "none" {
		t.Fatalf("first check: trust %q, want none", first.str("trust"))
	}
	tok := fleet[0].report(t, first.str("attempt_id"), "success").str("device_token")
	for _, tt := range []struct {
		name  string
		body  map[string]any
		trust string
	}{
		{"network", map[string]any{"flow": "login", "account": "alice", "ip": "203.0.113.99"}, "network"},
		{"device", map[string]any{"flow": "login", "account": "alice", "ip": "198.51.100.9", "device_token": tok}, "device"},
		{"challenge", map[string]any{"flow": "login", "account": "alice", "ip": "198.51.100.10", "challenge_passed": true}, "challenge"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := concurrentChecks(t, fleet, 50, func(int) map[string]any { return tt.body })
			if got[http.StatusOK] != 20 || got[http.StatusTooManyRequests] != 30 {
				t.Fatalf("statuses = %v, want exactly 20 × 200 and 30 × 429", got)
			}
			if a := fleet[1%len(fleet)].check(t, tt.body); a.str("trust") != tt.trust || a.status != http.StatusTooManyRequests {
				t.Fatalf("after the burst: status %d, trust %q; want 429, %s", a.status, a.str("trust"), tt.trust)
			}
		})
	}
	shared := fleet[len(fleet)-1].check(t, map[string]any{"flow": "login", "account": "alice", "ip": "192.0.2.1"})
	if r := shared.remaining("account"); r != 18 || shared.str("trust") != "none" {
		t.Fatalf("shared bucket: remaining %d, trust %q; want 18, none", r, shared.str("trust"))
	}
}

func TestTrustBucketsExactOnOneInstance(t *testing.T) {
	redis := redistest.Start(t)
	testTrustBucketsExact(t, startFleet(t, 1, fleetConfig{redisURL: redis.URL(), rulesYAML: trustBudgetRules}))
}

func TestTrustBucketsExactAcrossInstances(t *testing.T) {
	redis := redistest.Start(t)
	testTrustBucketsExact(t, startFleet(t, 2, fleetConfig{redisURL: redis.URL(), rulesYAML: trustBudgetRules}))
}

func TestTrustBucketsExactOnRedisCluster(t *testing.T) {
	cluster := redistest.StartCluster(t)
	testTrustBucketsExact(t, startFleet(t, 3, fleetConfig{redisURL: strings.Join(cluster.Addrs(), ","), rulesYAML: trustBudgetRules}))
}

func TestTrustBucketsExactOnTheEmbeddedStore(t *testing.T) {
	testTrustBucketsExact(t, startFleet(t, 1, fleetConfig{rulesYAML: trustBudgetRules}))
}
