package server_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/tokens"
)

// tenantStop stops an account at its second consecutive failure.
const tenantStop = `version: 1
rules:
  - name: stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 2
`

// TestTenantTokens: on the embedded store, a tenant's admin token reads and
// resets its own tenant's account only, its check token settles its own
// checks only, and it cannot make the calls that change every tenant's
// protection (a reload, a revocation): 403 in the contract's shape.
func TestTenantTokens(t *testing.T) {
	in := start(t, tenantStop)
	svc := tokens.NewService(testKey)
	mint := func(scope tokens.Scope, tenant string) string {
		t.Helper()
		tok, err := svc.IssueTenant(scope, "test", tenant, time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	aCheck, aAdmin, bCheck, bAdmin := mint(tokens.ScopeCheck, "a"), mint(tokens.ScopeAdmin, "a"), mint(tokens.ScopeCheck, "b"), mint(tokens.ScopeAdmin, "b")
	login := map[string]any{"flow": "login", "account": "carol@example.com", "ip": "192.0.2.9"}
	for range 2 {
		r := in.do(t, http.MethodPost, "/v1/check", aCheck, login)
		if r.status != http.StatusOK {
			t.Fatalf("tenant a's check: %d %s", r.status, r.raw)
		}
		// Tenant b's report of it is refused, and settles nothing.
		if bad := in.do(t, http.MethodPost, "/v1/report", bCheck, map[string]string{"attempt_id": str(r.body["attempt_id"]), "outcome": "success"}); bad.status != http.StatusBadRequest || errorCode(t, bad) != "invalid_attempt" {
			t.Fatalf("tenant b's report of tenant a's attempt: %d %s, want 400 invalid_attempt", bad.status, bad.raw)
		}
		if ok := in.do(t, http.MethodPost, "/v1/report", aCheck, map[string]string{"attempt_id": str(r.body["attempt_id"]), "outcome": "failure"}); ok.status != http.StatusOK {
			t.Fatalf("tenant a's report: %d %s", ok.status, ok.raw)
		}
	}
	statusOf := func(tok string) map[string]any {
		t.Helper()
		r := in.do(t, http.MethodGet, "/v1/accounts/status?account=carol@example.com", tok, nil)
		if r.status != http.StatusOK {
			t.Fatalf("status: %d %s", r.status, r.raw)
		}
		return r.body
	}
	if st := statusOf(aAdmin); st["blocked"] != true || num(st["consecutive_failures"]) != 2 {
		t.Errorf("tenant a's carol: %v, want blocked at 2", st)
	}
	for _, tok := range []string{bAdmin, in.adminToken} {
		if st := statusOf(tok); st["blocked"] != false || num(st["consecutive_failures"]) != 0 {
			t.Errorf("another tenant sees tenant a's carol: %v, want zeros", st)
		}
		if r := in.do(t, http.MethodPost, "/v1/accounts/reset", tok, map[string]string{"account": "carol@example.com"}); r.status != http.StatusOK {
			t.Fatalf("reset: %d %s", r.status, r.raw)
		}
	}
	if st := statusOf(aAdmin); st["blocked"] != true {
		t.Errorf("another tenant's reset lifted tenant a's hard stop: %v", st)
	}
	if r := in.do(t, http.MethodPost, "/v1/check", aCheck, login); r.status != http.StatusTooManyRequests || str(r.body["decision"]) != "block" {
		t.Errorf("tenant a's carol after other tenants' resets: %d %s, want block", r.status, r.raw)
	}

	cl, err := svc.Verify(aCheck, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		body any
	}{
		{"/v1/rules/reload", nil},
		{"/v1/tokens/revoke", map[string]string{"jti": cl.ID}},
	} {
		r := in.do(t, http.MethodPost, c.path, aAdmin, c.body)
		if r.status != http.StatusForbidden || errorCode(t, r) != "forbidden" {
			t.Errorf("tenant a's admin token on %s: %d %s, want 403 forbidden", c.path, r.status, r.raw)
		}
	}
	// The revocation was not made: tenant a's check token still works.
	if r := in.do(t, http.MethodPost, "/v1/check", aCheck, map[string]any{"flow": "login", "ip": "192.0.2.10"}); r.status != http.StatusOK {
		t.Errorf("tenant a's check token after a refused revocation: %d %s", r.status, r.raw)
	}
	if r := in.do(t, http.MethodPost, "/v1/rules/reload", in.adminToken, nil); r.status != http.StatusOK {
		t.Errorf("the default tenant's admin token reloads: %d %s", r.status, r.raw)
	}
}
