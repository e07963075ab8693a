package integration

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/server"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
)

// aclRules exercise every kind of store call: rate limits, a hard stop, a
// global failure rate (the aggregate), reports and a reset (and the test
// revokes a token).
const aclRules = `version: 1
rules:
  - name: login-account
    flows: [login]
    key: account
    type: rate
    limit: 5
    per: 1m
  - name: login-hard-stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 3
    action: block
  - name: login-global
    flows: [login]
    key: global
    type: failure_rate
    limit: 1000
    per: 1m
`

// TestACLUserRunsGuardian runs a fleet as the Redis user of
// deploy/redis/guardian.acl, logging in with --redis-password-file: every
// call it makes is allowed (Redis's ACL LOG stays empty) and decided on the
// shared store.
func TestACLUserRunsGuardian(t *testing.T) {
	redis := redistest.Start(t)
	redis.AddUser(t, "guardian", "acl-test-password", redistest.GuardianACL(t))
	pwFile := filepath.Join(t.TempDir(), "redis-password")
	if err := os.WriteFile(pwFile, []byte("acl-test-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	admin := redis.Client(t)
	if err := admin.Do(context.Background(), "ACL", "LOG", "RESET").Err(); err != nil {
		t.Fatal(err)
	}
	fleet := startFleet(t, 2, fleetConfig{
		redisURL:  "redis://guardian@" + redis.Addr() + "/0",
		rulesYAML: aclRules,
		redis:     redisstore.Options{PasswordFile: pwFile},
	})
	for i := range 3 {
		a := fleet[i%2].check(t, map[string]any{"flow": "login", "account": "acl-user", "ip": "198.51.100.40"})
		if a.status != 200 || a.degraded() {
			t.Fatalf("check %d as the ACL user: %d %s", i, a.status, a.raw)
		}
		if r := fleet[(i+1)%2].report(t, a.str("attempt_id"), "failure"); r.status != 200 {
			t.Fatalf("report %d: %d %s", i, r.status, r.raw)
		}
	}
	if a := fleet[0].check(t, map[string]any{"flow": "login", "account": "acl-user", "ip": "198.51.100.41"}); a.str("decision") != "block" || a.degraded() {
		t.Fatalf("after 3 failures: %d %s, want block from the shared store", a.status, a.raw)
	}
	if a := fleet[1].must(t, "POST", "/v1/accounts/reset", adminToken, map[string]any{"account": "acl-user"}); a.status != 200 {
		t.Fatalf("reset: %d %s", a.status, a.raw)
	}
	if a := fleet[0].must(t, "POST", "/v1/tokens/revoke", adminToken, map[string]any{"jti": "acl-test-jti"}); a.status != 200 {
		t.Fatalf("revoke: %d %s", a.status, a.raw)
	}
	// Let the aggregate flush its failures to the store.
	time.Sleep(1500 * time.Millisecond)
	for i, in := range fleet {
		if got := fallbackActive(t, in); got != 0 {
			t.Fatalf("instance %d: guardian_fallback_active = %d as the ACL user", i, got)
		}
	}
	denied, err := admin.Do(context.Background(), "ACL", "LOG").Slice()
	if err != nil {
		t.Fatal(err)
	}
	if len(denied) > 0 {
		t.Fatalf("Redis denied guardian's user %d times: %v", len(denied), denied)
	}
	n, err := admin.DBSize(context.Background()).Result()
	if err != nil || n == 0 {
		t.Fatalf("DBSIZE %d, %v: nothing reached the store", n, err)
	}
}

// TestACLMissingCommandStopsStart: a user without a command guardian needs,
// or a wrong password, is an error at start that names it, not a fleet
// running on its fallback.
func TestACLMissingCommandStopsStart(t *testing.T) {
	redis := redistest.Start(t)
	rules := slices.DeleteFunc(redistest.GuardianACL(t), func(r string) bool { return r == "+set" })
	redis.AddUser(t, "lacking", "pw", rules)
	for _, tt := range []struct{ url, want string }{
		{"redis://lacking:pw@" + redis.Addr() + "/0", "can't run this command"},
		{"redis://lacking:wrong@" + redis.Addr() + "/0", "WRONGPASS"},
	} {
		_, err := server.New(server.Config{Addr: "127.0.0.1:0", RedisURL: tt.url, SigningKey: signingKey})
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "docs/operations.md") {
			t.Fatalf("server.New as %s: %v, want an error saying %q and pointing at the ACL", tt.url, err, tt.want)
		}
		t.Logf("at start: %v", err)
	}
}
