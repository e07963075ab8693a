package integration

import (
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/redistest"
)

// globalRules has only the global login failure rate, so that no per-key
// limit gets in the way: more than 30 failures a minute challenge every
// untrusted check, and the challenge holds 2s after the rate falls.
const globalRules = `version: 1
rules:
  - name: login-global
    flows: [login]
    key: global
    type: failure_rate
    limit: 30
    per: 1m
    hysteresis: 2s
`

// jumpClock is time.Now moved forward by jumps, shared by a fleet.
type jumpClock struct{ offset atomic.Int64 }

func (c *jumpClock) now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

func (c *jumpClock) jump(d time.Duration) { c.offset.Add(int64(d)) }

// loginCheck is a login check of account from a documentation address.
func loginCheck(account string, i int) map[string]any {
	return map[string]any{"flow": "login", "account": account, "ip": fmt.Sprintf("198.51.100.%d", i%250)}
}

// decision returns a's decision, failing on anything but a decided,
// non-degraded 200.
func decision(t *testing.T, a answer) string {
	t.Helper()
	if a.status != 200 || a.degraded() {
		t.Fatalf("check answered %d: %s", a.status, a.raw)
	}
	return a.str("decision")
}

// probe checks body on in and, when the check goes ahead, reports it a
// success there, which takes it back out of the global failure rate (a
// check counts in it from the moment it is made): a probe leaves the count
// as it found it. It returns the check's answer.
func probe(t *testing.T, in *instance, body map[string]any) answer {
	t.Helper()
	return tryAs(t, in, body, "success")
}

// failOn checks on one instance and reports a failure on another; the
// instance the report reaches counts it.
func failOn(t *testing.T, fleet []*instance, i int) {
	t.Helper()
	a := fleet[(i+1)%len(fleet)].check(t, loginCheck(fmt.Sprintf("victim-%d", i), i))
	if d := decision(t, a); d != "allow" {
		t.Fatalf("failure %d: check answered %s before the crossing: %s", i, d, a.raw)
	}
	if r := fleet[i%len(fleet)].report(t, a.str("attempt_id"), "failure"); r.status != 200 {
		t.Fatalf("failure %d: report %d %s", i, r.status, r.raw)
	}
}

// globalRate reads guardian_global_failures_per_second{flow="login"} from
// in's /metrics, or -1 when absent.
func globalRate(t *testing.T, in *instance) float64 {
	t.Helper()
	a := in.must(t, "GET", "/metrics", "", nil)
	for line := range strings.SplitSeq(string(a.raw), "\n") {
		if v, ok := strings.CutPrefix(line, `guardian_global_failures_per_second{flow="login"} `); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("gauge line %q: %v", line, err)
			}
			return f
		}
	}
	return -1
}

// testGlobalChallenge runs the scenario of a failure_rate rule on fleet,
// whose instances all read clock.
func testGlobalChallenge(t *testing.T, fleet []*instance, clock *jumpClock) {
	// A user's own device, trusted from an earlier success.
	first := fleet[0].check(t, loginCheck("alice", 0))
	device := fleet[len(fleet)-1].report(t, first.str("attempt_id"), "success").str("device_token")
	if device == "" {
		t.Fatal("no device token from a success")
	}

	// 30 failures spread round-robin: at the limit, not over it. Every
	// instance's gauge shows the fleet's 30 failures over the last 10s,
	// though no instance saw more than 10 of them.
	for i := range 30 {
		failOn(t, fleet, i)
	}
	deadline := time.Now().Add(2 * time.Second)
	for i, in := range fleet {
		for {
			rate := globalRate(t, in)
			if rate == 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("instance %d: guardian_global_failures_per_second{flow=login} = %v, want 3 (30 over 10s)", i, rate)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for i, in := range fleet {
		if d := decision(t, probe(t, in, loginCheck("bob", 1))); d != "allow" {
			t.Fatalf("instance %d at 30 failures: %s, want allow (the limit is not exceeded)", i, d)
		}
	}

	// The 31st failure: every instance challenges within 1s of it; with
	// three instances none saw more than 11.
	crossing := time.Now()
	failOn(t, fleet, 30)
	reacted := make([]time.Duration, len(fleet))
	for pending := len(fleet); pending > 0; {
		for i, in := range fleet {
			if reacted[i] > 0 {
				continue
			}
			a := probe(t, in, loginCheck("bob", 2))
			switch d := decision(t, a); {
			case d == "challenge" && a.str("rule") == "login-global":
				reacted[i] = time.Since(crossing)
				pending--
			case d != "allow":
				t.Fatalf("instance %d: %s", i, a.raw)
			}
		}
		if time.Since(crossing) > time.Second {
			t.Fatalf("reaction times %v: not every instance challenged within 1s of the crossing", reacted)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("challenge after the crossing, per instance: %v", reacted)

	// A trusted device is never challenged; the same account without it is.
	for i, in := range fleet {
		if d := decision(t, probe(t, in, map[string]any{"flow": "login", "account": "alice", "ip": "198.51.100.77", "device_token": device})); d != "allow" {
			t.Errorf("instance %d: trusted device answered %s, want allow", i, d)
		}
		if d := decision(t, probe(t, in, loginCheck("alice", 78))); d != "challenge" {
			t.Errorf("instance %d: alice without her device answered %s, want challenge", i, d)
		}
	}

	// The failures leave the window; the challenge holds for the 2s of
	// hysteresis from the first check that sees the rate down, then clears
	// on every instance.
	clock.jump(time.Minute + time.Second)
	steps := []struct {
		jump time.Duration
		want string
	}{
		{0, "challenge"},
		{time.Second, "challenge"},
		{1100 * time.Millisecond, "allow"},
	}
	for _, s := range steps {
		clock.jump(s.jump)
		for i, in := range fleet {
			if d := decision(t, probe(t, in, loginCheck("carol", 3))); d != s.want {
				t.Errorf("instance %d, %v after the rate fell: %s, want %s", i, s.jump, d, s.want)
			}
		}
	}
}

func TestGlobalFailureRateAcrossInstances(t *testing.T) {
	redis := redistest.Start(t)
	clock := &jumpClock{}
	fleet := startFleet(t, 3, fleetConfig{redisURL: redis.URL(), rulesYAML: globalRules,
		now: func(int) func() time.Time { return clock.now }})
	testGlobalChallenge(t, fleet, clock)
}

func TestGlobalFailureRateOnTheEmbeddedStore(t *testing.T) {
	clock := &jumpClock{}
	fleet := startFleet(t, 1, fleetConfig{rulesYAML: globalRules,
		now: func(int) func() time.Time { return clock.now }})
	testGlobalChallenge(t, fleet, clock)
}

func TestGlobalFailureRateWithRedisDown(t *testing.T) {
	// Redis stops: each instance counts its own failures times the fleet
	// size. 11 failures on one instance of three estimate 33, over the
	// limit: it challenges; the instance that saw none does not.
	redis := redistest.Start(t)
	fleet := startFleet(t, 3, fleetConfig{redisURL: redis.URL(), rulesYAML: globalRules, storeTimeout: faultTimeout})
	redis.Stop(t)
	for i := range 11 {
		a := fleet[1].check(t, loginCheck(fmt.Sprintf("victim-%d", i), i))
		if a.status != 200 {
			t.Fatalf("check %d with Redis down: %d %s", i, a.status, a.raw)
		}
		if r := fleet[0].report(t, a.str("attempt_id"), "failure"); r.status != 200 {
			t.Fatalf("report %d with Redis down: %d %s", i, r.status, r.raw)
		}
	}
	// The view turns degraded at the aggregate's next tick.
	deadline := time.Now().Add(time.Second)
	for {
		a := fleet[0].check(t, loginCheck("bob", 1))
		if a.str("decision") == "challenge" {
			if !a.degraded() {
				t.Fatalf("a challenge decided on the local estimate says degraded false: %s", a.raw)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance 0 with 11 failures and Redis down: %s, want challenge within 1s (gauge %v)", a.raw, globalRate(t, fleet[0]))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if a := fleet[2].check(t, loginCheck("bob", 2)); a.status != 200 || a.str("decision") != "allow" {
		t.Errorf("instance 2 with no failures and Redis down: %d %s, want allow", a.status, a.raw)
	}
}
