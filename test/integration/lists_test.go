package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/redistest"
)

// listWithin is how soon every instance must apply a list change.
const listWithin = 2 * time.Second

// TestListsAcrossTheFleet adds a deny entry and an allow entry on one
// instance of two sharing Redis: the instance that took each call applies
// it at once, the other within 2 s; an instance started afterwards (a
// restart) applies both before its first check; while Redis is paused
// every instance keeps applying them, and a change is refused with 503; a
// delete on one instance lifts the entry on the other within 2 s.
func TestListsAcrossTheFleet(t *testing.T) {
	redis := redistest.Start(t)
	cfg := fleetConfig{redisURL: redis.URL(), storeTimeout: 200 * time.Millisecond}
	fleet := startFleet(t, 2, cfg)
	a, b := fleet[0], fleet[1]
	attacker := map[string]any{"flow": "login", "account": "victim@example.com", "ip": "198.51.100.77"}
	colleague := func(i int) map[string]any {
		return map[string]any{"flow": "login", "account": "colleague-" + string(rune('a'+i%26)) + "@example.com", "ip": "203.0.113.9"}
	}
	denied := func(in *instance) bool {
		t.Helper()
		r := in.check(t, attacker)
		return r.status == 429 && r.str("decision") == "block" && r.str("rule") == "deny-list"
	}
	// exempt reports whether a check from the office skips login-ip.
	exempt := func(in *instance, i int) bool {
		t.Helper()
		r := in.check(t, colleague(i))
		for _, l := range r.body["limits"].([]any) {
			if l.(map[string]any)["rule"] == "login-ip" {
				return false
			}
		}
		return true
	}
	within := func(what string, since time.Time, ok func() bool) time.Duration {
		t.Helper()
		for !ok() {
			if time.Since(since) > listWithin {
				t.Fatalf("%s not within %v", what, listWithin)
			}
			time.Sleep(10 * time.Millisecond)
		}
		return time.Since(since)
	}
	if denied(a) || denied(b) || exempt(a, 0) || exempt(b, 0) {
		t.Fatal("the lists apply before any entry")
	}

	start := time.Now()
	deny := a.must(t, "POST", "/v1/lists/deny", adminToken, map[string]any{"network": "198.51.100.0/24", "ttl": "1h", "reason": "stuffing"})
	if deny.status != 201 || deny.str("id") == "" {
		t.Fatalf("deny: %d %s", deny.status, deny.raw)
	}
	if !denied(a) {
		t.Error("the instance that took the deny entry does not apply it at once")
	}
	t.Logf("deny entry on a applied on b after %v", within("the deny entry on b", start, func() bool { return denied(b) }))
	start = time.Now()
	allow := b.must(t, "POST", "/v1/lists/allow", adminToken, map[string]any{"network": "203.0.113.0/24", "exempt": []string{"login-ip"}, "reason": "office"})
	if allow.status != 201 {
		t.Fatalf("allow: %d %s", allow.status, allow.raw)
	}
	if !exempt(b, 1) {
		t.Error("the instance that took the allow entry does not apply it at once")
	}
	t.Logf("allow entry on b applied on a after %v", within("the allow entry on a", start, func() bool { return exempt(a, 2) }))

	// A guardian started now, as after a restart, applies both at once.
	restarted := startFleet(t, 1, cfg)[0]
	if !denied(restarted) || !exempt(restarted, 3) {
		t.Error("a restarted instance does not apply the entries kept in the store")
	}
	lists := restarted.must(t, "GET", "/v1/lists", adminToken, nil)
	if !strings.Contains(string(lists.raw), `"network":"198.51.100.0/24"`) || !strings.Contains(string(lists.raw), `"network":"203.0.113.0/24"`) {
		t.Errorf("GET /v1/lists on the restarted instance: %s", lists.raw)
	}

	// Redis goes away: every instance keeps the entries it read.
	redis.Pause(t)
	paused := true
	defer func() {
		if paused {
			redis.Unpause(t)
		}
	}()
	time.Sleep(time.Second) // a round or two of reads fail
	for i, in := range []*instance{a, b, restarted} {
		if !denied(in) {
			t.Errorf("instance %d forgets the deny entry while the store is away", i)
		}
		if !exempt(in, 4+i) {
			t.Errorf("instance %d forgets the allow entry while the store is away", i)
		}
	}
	if r := a.must(t, "DELETE", "/v1/lists/"+deny.str("id"), adminToken, nil); r.status != 503 || !strings.Contains(string(r.raw), `"store_unavailable"`) {
		t.Errorf("delete while the store is away: %d %s, want 503 store_unavailable", r.status, r.raw)
	}
	if !denied(a) {
		t.Error("a delete the store did not take lifted the entry")
	}
	redis.Unpause(t)
	paused = false

	start = time.Now()
	if r := b.must(t, "DELETE", "/v1/lists/"+deny.str("id"), adminToken, nil); r.status != 200 {
		t.Fatalf("delete: %d %s", r.status, r.raw)
	}
	t.Logf("delete on b lifted the entry on a after %v", within("the delete on a", start, func() bool { return !denied(a) }))
}
