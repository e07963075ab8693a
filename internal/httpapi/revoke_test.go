package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/guardian-sec/guardian/internal/audit"
	"github.com/guardian-sec/guardian/internal/logtest"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// TestRevokeRefusesTheToken revokes an admin token that has been used (its
// verification cached) with another: it is refused from the next call on,
// the other token is not, and the call is audited and counted.
func TestRevokeRefusesTheToken(t *testing.T) {
	var logs logtest.Buffer
	m := metrics.New(prometheus.NewRegistry())
	api := newTestAPI(t, &fakeDecider{set: rules.Default()}, func(cfg *Config) {
		cfg.Audit = audit.New(audit.Config{Key: secret.Generate(), Metrics: m, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	})
	victim, err := api.cfg.Tokens.Issue(tokens.ScopeAdmin, "leaked", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	claims, err := api.cfg.Tokens.Verify(victim, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, rec := api.do("GET", "/v1/rules", "", victim); rec.Code != http.StatusOK {
		t.Fatalf("the token before its revocation: %d", rec.Code)
	}
	exp := claims.ExpiresAt.UTC().Format(time.RFC3339)
	_, rec := api.do("POST", "/v1/tokens/revoke", `{"jti": "`+claims.ID+`", "expires_at": "`+exp+`"}`, api.admin)
	if rec.Code != http.StatusOK {
		t.Fatalf("revoke: %d %s", rec.Code, rec.Body.Bytes())
	}
	var body struct {
		Revoked bool   `json:"revoked"`
		JTI     string `json:"jti"`
		Until   string `json:"until"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || !body.Revoked || body.JTI != claims.ID || body.Until != exp {
		t.Fatalf("revoke answered %s, want the jti revoked until the token's expiry %s", rec.Body.Bytes(), exp)
	}
	_, rec = api.do("GET", "/v1/rules", "", victim)
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "revoked") {
		t.Errorf("the revoked token: %d %s, want 401 revoked", rec.Code, rec.Body.Bytes())
	}
	if _, rec := api.do("GET", "/v1/rules", "", api.admin); rec.Code != http.StatusOK {
		t.Errorf("another token after the revocation: %d", rec.Code)
	}
	if got := testutil.ToFloat64(m.AdminActions.WithLabelValues(audit.ActionRevoke, audit.ResultOK)); got != 1 {
		t.Errorf("guardian_admin_actions_total{action=revoke,result=ok} = %v, want 1", got)
	}
	lines := logtest.JSONLines(t, logs.String())
	if len(lines) != 1 || lines[0]["audit"] != true || lines[0]["action"] != "revoke" || lines[0]["subject"] != "test" || lines[0]["jti"] != claims.ID || lines[0]["result"] != "ok" {
		t.Errorf("audit lines %v, want one revoke line with the subject and the jti", lines)
	}

	// Without an expiry, the revocation outlives any token guardian mints.
	before := time.Now()
	_, rec = api.do("POST", "/v1/tokens/revoke", `{"jti": "no-expiry-given"}`, api.admin)
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	until, err := time.Parse(time.RFC3339, body.Until)
	if err != nil || until.Before(before.Add(tokens.MaxTTL).Truncate(time.Second)) {
		t.Errorf("until %s without an expiry, want %v from now", body.Until, tokens.MaxTTL)
	}
	// An expiry later than that is kept that long, no longer.
	far := before.Add(10 * tokens.MaxTTL).UTC().Format(time.RFC3339)
	_, rec = api.do("POST", "/v1/tokens/revoke", `{"jti": "far", "expires_at": "`+far+`"}`, api.admin)
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if until, _ := time.Parse(time.RFC3339, body.Until); until.After(time.Now().Add(tokens.MaxTTL)) {
		t.Errorf("until %s for an expiry ten years out, want at most %v from now", body.Until, tokens.MaxTTL)
	}
}

// TestAdminApart serves the admin API and the console on a handler of
// their own: the main one answers 404 for them and keeps the decision API
// and the operations paths; the admin one serves them and /healthz, and
// not the decision API.
func TestAdminApart(t *testing.T) {
	api := newTestAPI(t, &fakeDecider{set: rules.Default()}, func(cfg *Config) { cfg.AdminApart = true })
	admin := api.AdminHandler()
	if admin == nil {
		t.Fatal("no admin handler")
	}
	serveOn := func(h http.Handler, method, path, body, token string) int {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	check := `{"flow": "login", "ip": "203.0.113.7"}`
	for _, tt := range []struct {
		method, path, body string
		main, apart        int
	}{
		{"POST", "/v1/check", check, 200, 404},
		{"GET", "/healthz", "", 200, 200},
		{"GET", "/readyz", "", 200, 404},
		{"GET", "/metrics", "", 200, 404},
		{"GET", "/v1/rules", "", 404, 200},
		{"GET", "/v1/fleet", "", 404, 200},
		{"POST", "/v1/accounts/reset", `{"account": "alice"}`, 404, 200},
		{"POST", "/v1/tokens/revoke", `{"jti": "abc"}`, 404, 200},
		{"GET", "/console", "", 404, 200},
		{"GET", "/console/console.js", "", 404, 200},
	} {
		if got := serveOn(api, tt.method, tt.path, tt.body, api.admin); got != tt.main {
			t.Errorf("main: %s %s = %d, want %d", tt.method, tt.path, got, tt.main)
		}
		if got := serveOn(admin, tt.method, tt.path, tt.body, api.admin); got != tt.apart {
			t.Errorf("admin: %s %s = %d, want %d", tt.method, tt.path, got, tt.apart)
		}
	}
	if newTestAPI(t, &fakeDecider{set: rules.Default()}, nil).AdminHandler() != nil {
		t.Error("an admin handler without AdminApart")
	}
}
