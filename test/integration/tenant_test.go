package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// tenantRules give each account a budget of 20 unconfirmed checks, a hard
// stop at 3 consecutive failures to log in, and each /24 a budget of 10
// logins, which every tenant spends together.
const tenantRules = `version: 1
rules:
  - name: account
    flows: [login, password_reset]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1h
    burst: 20
  - name: stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 3
  - name: net
    flows: [login]
    key: ip
    ipv4_prefix: 24
    type: rate
    limit: 1
    per: 1h
    burst: 10
`

// tenantTokens are a check and an admin token of one tenant.
type tenantTokens struct{ check, admin string }

// tokensOf mints the tokens of tenant name ("" the default).
func tokensOf(t *testing.T, name string) tenantTokens {
	t.Helper()
	svc := tokens.NewService(signingKey)
	var out tenantTokens
	for _, p := range []struct {
		scope tokens.Scope
		dst   *string
	}{{tokens.ScopeCheck, &out.check}, {tokens.ScopeAdmin, &out.admin}} {
		tok, err := svc.IssueTenant(p.scope, "tenant-test", name, time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		*p.dst = tok
	}
	return out
}

func TestTenantsOnOneRedis(t *testing.T) {
	redis := redistest.Start(t)
	hashKey := secret.Generate()
	fleet := startFleet(t, 2, fleetConfig{redisURL: redis.URL(), rulesYAML: tenantRules, hashKey: hashKey})
	testTenants(t, fleet)

	// The default tenant's account is where it was before tenants, and
	// tenant a's lives under a subject, and so a hash tag, of its own.
	h := keys.NewHasher(hashKey)
	rc := redis.Client(t)
	for _, c := range []struct {
		tenant string
		want   int64
	}{{"", 1}, {"a", 1}} {
		key := keys.StoreKey(h.Tenant(c.tenant).KeySubject(keys.AccountKey("alice@example.com")), "account")
		if n, err := rc.Exists(context.Background(), key).Result(); err != nil || n != c.want {
			t.Errorf("tenant %q: key %s exists %d, %v; want %d", c.tenant, key, n, err, c.want)
		}
	}
}

func TestTenantsOnRedisCluster(t *testing.T) {
	cluster := redistest.StartCluster(t)
	fleet := startFleet(t, 2, fleetConfig{redisURL: strings.Join(cluster.Addrs(), ","), rulesYAML: tenantRules})
	testTenants(t, fleet)
}

// testTenants: through two instances sharing the store, one account name in
// tenants a, b and the default tenant keeps three budgets and three hard
// stops; tenant b's tokens can neither read, reset nor settle tenant a's;
// and a /24 spends one budget whichever tenant its checks name.
func testTenants(t *testing.T, fleet []*instance) {
	t.Helper()
	names := []string{"", "a", "b"}
	toks := make([]tenantTokens, len(names))
	for i, n := range names {
		toks[i] = tokensOf(t, n)
	}
	a, b := toks[1], toks[2]
	alice := func(ip string) map[string]any {
		return map[string]any{"flow": "password_reset", "account": "Alice@Example.com", "ip": ip}
	}

	// 50 concurrent password resets of alice in each tenant: exactly 20
	// allowed in each.
	var wg sync.WaitGroup
	answers := make([][]answer, len(names))
	errs := make(chan error, 150)
	for i := range names {
		answers[i] = make([]answer, 50)
		for j := range 50 {
			wg.Go(func() {
				var err error
				answers[i][j], err = fleet[j%len(fleet)].call("POST", "/v1/check", toks[i].check, alice(fmt.Sprintf("10.%d.%d.1", i, j)))
				if err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, n := range names {
		got := map[int]int{}
		for _, r := range answers[i] {
			if r.degraded() {
				t.Fatalf("tenant %q: the fallback decided: %s", n, r.raw)
			}
			got[r.status]++
		}
		if got[http.StatusOK] != 20 || got[http.StatusTooManyRequests] != 30 {
			t.Errorf("tenant %q: statuses %v, want exactly 20 × 200 and 30 × 429", n, got)
		}
	}

	// Tenant a's bob fails three times and is stopped, on either instance.
	bob := map[string]any{"flow": "login", "account": "bob@example.com", "ip": "203.0.113.7"}
	var last answer
	for i := range 3 {
		in := fleet[i%len(fleet)]
		r := in.must(t, "POST", "/v1/check", a.check, bob)
		if r.status != http.StatusOK {
			t.Fatalf("tenant a, bob's check %d: %d %s", i+1, r.status, r.raw)
		}
		last = r
		if i < 2 {
			if rep := in.must(t, "POST", "/v1/report", a.check, map[string]any{"attempt_id": r.str("attempt_id"), "outcome": "failure"}); rep.status != http.StatusOK {
				t.Fatalf("tenant a's report: %d %s", rep.status, rep.raw)
			}
		}
	}
	// Tenant b cannot settle tenant a's attempt, nor can the default
	// tenant: the contract's error, and the attempt is still a's to report.
	for _, other := range []tenantTokens{b, toks[0]} {
		r := fleet[1].must(t, "POST", "/v1/report", other.check, map[string]any{"attempt_id": last.str("attempt_id"), "outcome": "success"})
		if e, _ := r.body["error"].(map[string]any); r.status != http.StatusBadRequest || e["code"] != "invalid_attempt" {
			t.Errorf("another tenant's report of tenant a's attempt: %d %s, want 400 invalid_attempt", r.status, r.raw)
		}
	}
	if rep := fleet[0].must(t, "POST", "/v1/report", a.check, map[string]any{"attempt_id": last.str("attempt_id"), "outcome": "failure"}); rep.status != http.StatusOK {
		t.Fatalf("tenant a's own third report: %d %s", rep.status, rep.raw)
	}
	if r := fleet[1].must(t, "POST", "/v1/check", a.check, bob); r.status != http.StatusTooManyRequests || r.str("decision") != "block" {
		t.Fatalf("tenant a's bob after 3 failures: %d %s, want block", r.status, r.raw)
	}
	status := func(in *instance, tok string) answer {
		t.Helper()
		r := in.must(t, "GET", "/v1/accounts/status?account=bob@example.com", tok, nil)
		if r.status != http.StatusOK {
			t.Fatalf("status: %d %s", r.status, r.raw)
		}
		return r
	}
	if r := status(fleet[0], a.admin); r.body["blocked"] != true || r.body["consecutive_failures"] != float64(3) {
		t.Errorf("tenant a's status of bob: %s, want blocked at 3", r.raw)
	}
	for _, other := range []tenantTokens{b, toks[0]} {
		if r := status(fleet[1], other.admin); r.body["blocked"] != false || r.body["consecutive_failures"] != float64(0) {
			t.Errorf("another tenant sees tenant a's bob: %s, want zeros", r.raw)
		}
		if r := fleet[1].must(t, "POST", "/v1/accounts/reset", other.admin, map[string]any{"account": "bob@example.com"}); r.status != http.StatusOK {
			t.Fatalf("reset: %d %s", r.status, r.raw)
		}
	}
	if r := status(fleet[0], a.admin); r.body["blocked"] != true {
		t.Errorf("another tenant's reset lifted tenant a's hard stop: %s", r.raw)
	}
	// Tenant b's bob is another account: allowed.
	if r := fleet[0].must(t, "POST", "/v1/check", b.check, bob); r.status != http.StatusOK {
		t.Errorf("tenant b's bob: %d %s, want allowed", r.status, r.raw)
	}
	if r := fleet[1].must(t, "POST", "/v1/accounts/reset", a.admin, map[string]any{"account": "bob@example.com"}); r.status != http.StatusOK {
		t.Fatalf("tenant a's reset: %d %s", r.status, r.raw)
	}
	if r := status(fleet[0], a.admin); r.body["blocked"] != false {
		t.Errorf("tenant a's own reset left bob blocked: %s", r.raw)
	}

	// A spray of new accounts from one /24 across the tenants spends the
	// network's one budget: exactly 10 of 30 allowed.
	allowed := 0
	for i := range 30 {
		body := map[string]any{"flow": "login", "account": fmt.Sprintf("sprayed%d@example.com", i), "ip": fmt.Sprintf("198.51.100.%d", i+1)}
		r := fleet[i%len(fleet)].must(t, "POST", "/v1/check", toks[i%len(toks)].check, body)
		if r.status == http.StatusOK {
			allowed++
		}
	}
	if allowed != 10 {
		t.Errorf("%d of 30 sprayed checks allowed across tenants, want the /24's budget, 10", allowed)
	}
}
