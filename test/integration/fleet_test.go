package integration

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/redistest"
)

// fleetIDs returns the ids GET /v1/fleet lists on in, and its body.
func fleetIDs(t *testing.T, in *instance) ([]string, answer) {
	t.Helper()
	a := in.must(t, "GET", "/v1/fleet", adminToken, nil)
	if a.status != 200 {
		t.Fatalf("GET /v1/fleet: %d %s", a.status, a.raw)
	}
	var ids []string
	is, _ := a.body["instances"].([]any)
	for _, i := range is {
		m, _ := i.(map[string]any)
		ids = append(ids, m["id"].(string))
	}
	return ids, a
}

// waitFor polls cond every 100ms until it holds or within passes; it
// returns how long it took.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start)
}

// TestFleetListsEveryInstance runs three instances on one Redis, C through
// a proxy: all three are listed on each, and C drops out of the list
// within 15 s of losing its store, as a killed instance would.
func TestFleetListsEveryInstance(t *testing.T) {
	redis := redistest.Start(t)
	pc := startProxy(t, redis.Addr())
	ab := startFleet(t, 2, fleetConfig{redisURL: redis.URL(), rulesYAML: budgetRules, fleetSize: 3})
	c := startFleet(t, 1, fleetConfig{redisURL: pc.url(), rulesYAML: budgetRules, fleetSize: 3})[0]
	all := append(ab, c)
	var want []string
	for _, in := range all {
		want = append(want, in.srv.InstanceID())
	}
	slices.Sort(want)
	for _, in := range all {
		waitFor(t, "every instance listed", 5*time.Second, func() bool {
			ids, _ := fleetIDs(t, in)
			return slices.Equal(ids, want)
		})
		_, a := fleetIDs(t, in)
		if a.body["rules_consistent"] != true || a.body["partial"] != nil {
			t.Errorf("fleet on %s: %s, want rules consistent, not partial", in.srv.InstanceID(), a.raw)
		}
		for _, i := range a.body["instances"].([]any) {
			m := i.(map[string]any)
			if m["store"] != "ok" || len(m["rules_hash"].(string)) != 16 {
				t.Errorf("instance %v: want store ok and a rules hash", m)
			}
		}
	}

	pc.setCut(true)
	took := waitFor(t, "C dropped from the fleet", 15*time.Second, func() bool {
		ids, _ := fleetIDs(t, ab[0])
		return !slices.Contains(ids, c.srv.InstanceID()) && len(ids) == 2
	})
	t.Logf("C dropped %v after its store was cut", took.Round(100*time.Millisecond))
	// C, alone with an unreachable store, lists itself, partial.
	ids, a := fleetIDs(t, c)
	if !slices.Equal(ids, []string{c.srv.InstanceID()}) || a.body["partial"] != true {
		t.Errorf("fleet on C with its store cut: %s, want C alone, partial", a.raw)
	}
}

const shadowRules = `version: 1
rules:
  - name: ip-shadow
    flows: [login]
    key: ip
    type: rate
    limit: %d
    per: 1h
    burst: 1
    mode: shadow
`

// shadowRule returns ip-shadow's entry in GET /v1/shadow on in.
func shadowRule(t *testing.T, in *instance) map[string]any {
	t.Helper()
	a := in.must(t, "GET", "/v1/shadow", adminToken, nil)
	rs, _ := a.body["rules"].([]any)
	if a.status != 200 || len(rs) != 1 || a.body["partial"] != nil {
		t.Fatalf("GET /v1/shadow: %d %s, want ip-shadow alone, not partial", a.status, a.raw)
	}
	return rs[0].(map[string]any)
}

func topKeys(r map[string]any) string {
	var out []string
	for _, k := range r["top_keys"].([]any) {
		m := k.(map[string]any)
		out = append(out, fmt.Sprintf("%v", m["hits"]))
	}
	return strings.Join(out, ",")
}

// TestShadowAcrossInstances trips a shadow rule on A and B and reads the
// sum on C: counts, merged top keys, since; then changes the rule's
// definition everywhere and sees its counts start afresh.
func TestShadowAcrossInstances(t *testing.T) {
	redis := redistest.Start(t)
	fleet := startFleet(t, 3, fleetConfig{redisURL: redis.URL(), rulesYAML: fmt.Sprintf(shadowRules, 1)})
	a, b, c := fleet[0], fleet[1], fleet[2]
	check := func(in *instance, ip string) {
		t.Helper()
		if r := in.check(t, map[string]any{"flow": "login", "ip": ip}); r.status != 200 {
			t.Fatalf("check: %d %s (a shadow rule never changes a decision)", r.status, r.raw)
		}
	}
	client := redis.Client(t)
	// 198.51.100.1: one check allowed, then A and B would slow 2 and 3.
	// 198.51.100.2: one allowed, B would slow 1.
	for _, in := range []*instance{a, a, a, b, b, b} {
		check(in, "198.51.100.1")
	}
	check(b, "198.51.100.2")
	check(b, "198.51.100.2")
	took := waitFor(t, "A's and B's checks summed on C", 5*time.Second, func() bool {
		r := shadowRule(t, c)
		return r["evaluated"] == 8.0 && r["would_slow"] == 6.0 && topKeys(r) == "5,1"
	})
	t.Logf("summed on C %v after the checks", took.Round(100*time.Millisecond))
	r := shadowRule(t, c)
	since, err := time.Parse(time.RFC3339, r["since"].(string))
	if err != nil || since.After(time.Now()) || time.Since(since) > time.Minute {
		t.Errorf("since %v (%v): want when the fleet loaded the rule", r["since"], err)
	}
	for _, in := range []*instance{a, b} {
		if got := shadowRule(t, in); fmt.Sprint(got) != fmt.Sprint(r) {
			t.Errorf("shadow on another instance: %v, want %v", got, r)
		}
	}

	// Shadow bookkeeping adds no store call per check: a run of checks
	// costs one script call each, and the tallies' writes stay a few per
	// second whatever the traffic. The checks share one address the rule
	// would slow, so the store's own script writes nothing for them and
	// every HSET is a tally's or a heartbeat's.
	const n = 300
	check(a, "203.0.113.9")
	mid := redistest.CommandStats(t, client)
	runStart := time.Now()
	for i := range n {
		check(fleet[i%3], "203.0.113.9")
		// Spread over several rounds of the loop, so tallies are written.
		time.Sleep(5 * time.Millisecond)
	}
	after := redistest.CommandStats(t, client)
	ran := redistest.Ran(mid, after)
	rounds := int64(time.Since(runStart)/(500*time.Millisecond)) + 2
	// Per instance and round: one shadow write (HSET) and one heartbeat
	// (whose script runs an HSET).
	if limit := 3 * rounds * 2; ran["hset"] > limit {
		t.Errorf("%d checks ran %d HSET in %v, want at most %d (a few per round, none per check)", n, ran["hset"], time.Since(runStart), limit)
	}
	// Per instance and round, two scripts beside the checks: the
	// heartbeat and the read of the lists (one call that answers the
	// version alone when no entry changed).
	if calls := redistest.ScriptCalls(ran); calls > n+3*rounds*2 {
		t.Errorf("%d checks ran %d script calls, want one each and the heartbeats' and list reads'", n, calls)
	}
	t.Logf("%d checks in %v: %v", n, time.Since(runStart).Round(time.Millisecond), ran)

	// A changed definition starts afresh on every instance.
	firstSince := since
	time.Sleep(time.Second) // since is to the second
	if err := os.WriteFile(a.rulesPath, []byte(fmt.Sprintf(shadowRules, 2)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, in := range fleet {
		if r := in.must(t, "POST", "/v1/rules/reload", adminToken, nil); r.status != 200 {
			t.Fatalf("reload: %d %s", r.status, r.raw)
		}
	}
	r = shadowRule(t, c)
	if r["evaluated"] != 0.0 || topKeys(r) != "" {
		t.Errorf("after the change: %v, want no evaluation", r)
	}
	if s, _ := time.Parse(time.RFC3339, r["since"].(string)); !s.After(firstSince) {
		t.Errorf("since %v after the change, want later than %v", r["since"], firstSince)
	}
	check(a, "192.0.2.1")
	waitFor(t, "a check of the new definition on C", 5*time.Second, func() bool {
		return shadowRule(t, c)["evaluated"] == 1.0
	})
}

// TestPromotedRuleAcrossInstances trips a shadow rule on A and B, then
// promotes it on A and later on B: GET /v1/shadow on each keeps the fleet's
// last shadow tallies of the rule, marked promoted_at, and a check after the
// promotion counts in them no more.
func TestPromotedRuleAcrossInstances(t *testing.T) {
	redis := redistest.Start(t)
	fleet := startFleet(t, 2, fleetConfig{redisURL: redis.URL(), rulesYAML: fmt.Sprintf(shadowRules, 1)})
	a, b := fleet[0], fleet[1]
	for _, in := range []*instance{a, a, b, b} {
		if r := in.check(t, map[string]any{"flow": "login", "ip": "198.51.100.1"}); r.status != 200 {
			t.Fatalf("check: %d %s", r.status, r.raw)
		}
	}
	waitFor(t, "A's and B's checks summed on A", 5*time.Second, func() bool {
		r := shadowRule(t, a)
		return r["evaluated"] == 4.0 && r["would_slow"] == 3.0
	})
	promoted := strings.Replace(fmt.Sprintf(shadowRules, 1), "mode: shadow", "mode: enforce", 1)
	if err := os.WriteFile(a.rulesPath, []byte(promoted), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := a.must(t, "POST", "/v1/rules/reload", adminToken, nil); r.status != 200 {
		t.Fatalf("reload on A: %d %s", r.status, r.raw)
	}
	r := shadowRule(t, a)
	at, err := time.Parse(time.RFC3339, fmt.Sprint(r["promoted_at"]))
	if err != nil || time.Since(at) > time.Minute || r["evaluated"] != 4.0 || r["would_slow"] != 3.0 {
		t.Fatalf("A after its promotion: %v, want the fleet's 4 evaluations, 3 would slow, promoted_at now (%v)", r, err)
	}
	// B has not reloaded yet: the rule is in shadow there, and counting.
	if r := shadowRule(t, b); r["promoted_at"] != nil {
		t.Fatalf("B before it reloads: %v, want ip-shadow in shadow", r)
	}
	if r := b.must(t, "POST", "/v1/rules/reload", adminToken, nil); r.status != 200 {
		t.Fatalf("reload on B: %d %s", r.status, r.raw)
	}
	// Enforced now: this check is slowed, and counts in no shadow tally.
	if r := b.check(t, map[string]any{"flow": "login", "ip": "198.51.100.1"}); r.status != 429 {
		t.Fatalf("check after the promotion: %d %s, want 429 by ip-shadow", r.status, r.raw)
	}
	for _, in := range []*instance{a, b} {
		waitFor(t, "the promoted rule's last tallies on every instance", 5*time.Second, func() bool {
			r := shadowRule(t, in)
			return r["promoted_at"] != nil && r["evaluated"] == 4.0 && r["would_slow"] == 3.0
		})
	}
}
