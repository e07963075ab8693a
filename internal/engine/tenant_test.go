package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/testclock"
)

// tenantRules give each account a budget of 20 unconfirmed checks, a hard
// stop at 3 consecutive failures to log in, and each /24 a budget of 10
// logins, what a spray across tenants spends together.
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

// in returns a context of the tenant name ("" the default).
func in(name string) context.Context { return keys.WithTenant(context.Background(), name) }

// checkIn is a check in the tenant of ctx.
func (h *harness) checkIn(tb testing.TB, ctx context.Context, req engine.CheckRequest) engine.Decision {
	tb.Helper()
	d, err := h.eng.Check(ctx, req)
	if err != nil {
		tb.Fatalf("Check(%+v) in %q: %v", req, keys.TenantOf(ctx), err)
	}
	return d
}

// TestTenantsHaveTheirOwnBudgets: one account name in two tenants and the
// default tenant is three accounts, each with its whole budget, spent
// concurrently by password resets: 50 callers each, exactly 20 allowed in
// each.
func TestTenantsHaveTheirOwnBudgets(t *testing.T) {
	h := newHarness(t, tenantRules)
	tenants := []string{"", "a", "b"}
	var allowed [3]atomic.Int64
	var wg sync.WaitGroup
	for i, name := range tenants {
		for j := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := engine.CheckRequest{Flow: rules.PasswordReset, Account: "Alice@example.com", IP: fmt.Sprintf("10.%d.%d.1", i, j)}
				d, err := h.eng.Check(in(name), req)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Action == rules.Allow {
					allowed[i].Add(1)
				}
			}()
		}
	}
	wg.Wait()
	for i, name := range tenants {
		if got := allowed[i].Load(); got != 20 {
			t.Errorf("tenant %q: %d of 50 allowed, want exactly the budget, 20", name, got)
		}
	}
}

// TestTenantsHaveTheirOwnHardStops: tenant a's account reaches its hard
// stop on exactly its third failure; the same name in tenant b sees
// nothing of it, resets nothing of it, and has its own three.
func TestTenantsHaveTheirOwnHardStops(t *testing.T) {
	h := newHarness(t, tenantRules)
	ctx := context.Background()
	a, b := in("a"), in("b")
	alice := engine.CheckRequest{Flow: rules.Login, Account: "alice@example.com", IP: "203.0.113.7"}
	for i := range 3 {
		d := h.checkIn(t, a, alice)
		if d.Action != rules.Allow {
			t.Fatalf("tenant a, check %d: %s (%s), want allow", i+1, d.Action, d.Rule)
		}
		if _, err := h.eng.Report(a, d.AttemptID, engine.Failure); err != nil {
			t.Fatal(err)
		}
	}
	if d := h.checkIn(t, a, alice); d.Action != rules.Block || d.Rule != "stop" {
		t.Fatalf("tenant a after 3 failures: %s (%s), want block by stop", d.Action, d.Rule)
	}
	status := func(ctx context.Context) engine.AccountStatus {
		t.Helper()
		st, err := h.eng.Status(ctx, "alice@example.com")
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := status(a); !st.Blocked || st.ConsecutiveFailures != 3 {
		t.Errorf("tenant a's status = %+v, want blocked at 3", st)
	}
	for _, other := range []context.Context{b, ctx} {
		if st := status(other); st.Blocked || st.ConsecutiveFailures != 0 {
			t.Errorf("tenant %q sees tenant a's account: %+v, want zeros", keys.TenantOf(other), st)
		}
	}
	// A reset in tenant b or the default tenant leaves a's hard stop.
	for _, other := range []context.Context{b, ctx} {
		if err := h.eng.Reset(other, "alice@example.com"); err != nil {
			t.Fatal(err)
		}
	}
	if st := status(a); !st.Blocked {
		t.Errorf("tenant a's account unblocked by another tenant's reset: %+v", st)
	}
	// Tenant b's alice has three failures of her own before her stop.
	for i := range 3 {
		d := h.checkIn(t, b, alice)
		if d.Action != rules.Allow {
			t.Fatalf("tenant b, check %d: %s (%s), want allow", i+1, d.Action, d.Rule)
		}
		if _, err := h.eng.Report(b, d.AttemptID, engine.Failure); err != nil {
			t.Fatal(err)
		}
	}
	if d := h.checkIn(t, b, alice); d.Action != rules.Block {
		t.Fatalf("tenant b after 3 failures: %s, want block", d.Action)
	}
	if err := h.eng.Reset(a, "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	if st := status(a); st.Blocked || st.ConsecutiveFailures != 0 {
		t.Errorf("tenant a after its reset: %+v, want zeros", st)
	}
	if st := status(b); !st.Blocked {
		t.Errorf("tenant a's reset lifted tenant b's hard stop: %+v", st)
	}
}

// TestReportOfAnotherTenantsAttempt: an attempt of tenant a is refused to
// a report of tenant b or of the default tenant, which settles nothing and
// does not use it up; tenant a's own report then settles it.
func TestReportOfAnotherTenantsAttempt(t *testing.T) {
	h := newHarness(t, tenantRules)
	a := in("a")
	d := h.checkIn(t, a, engine.CheckRequest{Flow: rules.Login, Account: "alice@example.com", IP: "203.0.113.7"})
	for _, other := range []context.Context{in("b"), context.Background()} {
		if _, err := h.eng.Report(other, d.AttemptID, engine.Success); !errors.Is(err, engine.ErrOtherTenant) {
			t.Errorf("report in tenant %q of tenant a's attempt: %v, want ErrOtherTenant", keys.TenantOf(other), err)
		}
	}
	if st, err := h.eng.Status(a, "alice@example.com"); err != nil || st.Limits[0].Remaining != 19 {
		t.Errorf("tenant a's account after refused reports: %+v, %v; want 19 of 20 left, nothing given back", st, err)
	}
	res, err := h.eng.Report(a, d.AttemptID, engine.Success)
	if err != nil {
		t.Fatalf("tenant a's own report: %v", err)
	}
	if st, err := h.eng.Status(a, "alice@example.com"); err != nil || st.Limits[0].Remaining != 20 {
		t.Errorf("tenant a's account after its success: %+v, %v; want 20 of 20", st, err)
	}
	// The device token is tenant a's alice's: in tenant b the same name on
	// it is an untrusted check.
	withToken := engine.CheckRequest{Flow: rules.Login, Account: "alice@example.com", IP: "198.51.100.1", DeviceToken: res.DeviceToken}
	if got := h.checkIn(t, a, withToken).Trust; got != engine.TrustDevice {
		t.Errorf("tenant a's device token in tenant a: trust %s, want device", got)
	}
	if got := h.checkIn(t, in("b"), withToken).Trust; got != engine.TrustNone {
		t.Errorf("tenant a's device token in tenant b: trust %s, want none", got)
	}
}

// TestTenantsShareAddresses: a spray of many accounts across tenants from
// one /24 spends one budget: exactly 10 of 30 checks are allowed, whatever
// tenant each names.
func TestTenantsShareAddresses(t *testing.T) {
	h := newHarness(t, tenantRules)
	allowed := 0
	for i := range 30 {
		tenant := []string{"", "a", "b"}[i%3]
		req := engine.CheckRequest{Flow: rules.Login, Account: fmt.Sprintf("user%d@example.com", i), IP: fmt.Sprintf("198.51.100.%d", i+1)}
		if d := h.checkIn(t, in(tenant), req); d.Action == rules.Allow {
			allowed++
		} else if d.Rule != "net" {
			t.Errorf("check %d in %q: %s by %s, want only net to limit", i, tenant, d.Action, d.Rule)
		}
	}
	if allowed != 10 {
		t.Errorf("%d of 30 sprayed checks allowed across tenants, want the /24's budget, 10", allowed)
	}
}

// secretRules challenge a guess tried 3 times, whatever the account.
const secretRules = `version: 1
rules:
  - name: sprayed
    flows: [login]
    key: secret
    type: rate
    limit: 1
    per: 1h
    burst: 3
    action: challenge
`

// TestTenantsHaveTheirOwnGuesses: a secret sprayed in tenant a is
// challenged there on its fourth try, and is a fresh guess in tenant b and
// in the default tenant.
func TestTenantsHaveTheirOwnGuesses(t *testing.T) {
	h := newHarness(t, secretRules)
	try := func(ctx context.Context, i int) rules.Action {
		t.Helper()
		return h.checkIn(t, ctx, engine.CheckRequest{Flow: rules.Login, Account: fmt.Sprintf("user%d", i), IP: "203.0.113.7", SecretFingerprint: fingerprint("spring")}).Action
	}
	for i := range 3 {
		if got := try(in("a"), i); got != rules.Allow {
			t.Fatalf("tenant a, try %d: %s, want allow", i+1, got)
		}
	}
	if got := try(in("a"), 3); got != rules.Challenge {
		t.Errorf("tenant a, try 4: %s, want challenge", got)
	}
	for _, other := range []context.Context{in("b"), context.Background()} {
		if got := try(other, 4); got != rules.Allow {
			t.Errorf("tenant %q, first try of the secret tenant a sprayed: %s, want allow", keys.TenantOf(other), got)
		}
	}
}

// TestSharedKindsAreTheRulesKeys: the kinds every tenant shares are the
// names of the rules' keys ip and global, which Identifiers.Key gives
// their keys.
func TestSharedKindsAreTheRulesKeys(t *testing.T) {
	if string(rules.KeyIP) != keys.KindIP || string(rules.KeyGlobal) != keys.KindGlobal {
		t.Errorf("keys shares kinds %q and %q, the rules name them %q and %q", keys.KindIP, keys.KindGlobal, rules.KeyIP, rules.KeyGlobal)
	}
}

// TestTenantDecisionsMetric: a tenant's check counts under its name when
// TenantMetrics lists it, as _other otherwise, and a default-tenant check
// not at all.
func TestTenantDecisionsMetric(t *testing.T) {
	set, err := rules.Parse("test.yaml", []byte(tenantRules), t0)
	if err != nil {
		t.Fatal(err)
	}
	var holder rules.Holder
	holder.Store(set)
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	key, err := secret.New([]byte("engine-test-signing-key-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	clock := testclock.New(t0)
	eng := engine.New(engine.Config{Rules: &holder, Store: memstore.New(memstore.Config{Now: clock.Now}), Key: key, Metrics: m, Now: clock.Now, TenantMetrics: []string{"shop"}})
	for _, name := range []string{"shop", "shop", "bank", "club", ""} {
		if _, err := eng.Check(in(name), engine.CheckRequest{Flow: rules.Login, Account: "alice", IP: "192.0.2.1"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		tenant string
		want   float64
	}{{"shop", 2}, {metrics.OtherTenants, 2}} {
		if got := testutil.ToFloat64(m.TenantDecisions.WithLabelValues(c.tenant, "allow")); got != c.want {
			t.Errorf("tenant %q: %v allowed, want %v", c.tenant, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.TenantDecisions); n != 2 {
		t.Errorf("%d series of guardian_tenant_decisions_total, want 2 (shop and _other)", n)
	}
}
