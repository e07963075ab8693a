package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/guardian-sec/guardian/internal/audit"
	"github.com/guardian-sec/guardian/internal/engine"
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
// their own: every path api/openapi.yaml tags admin or console answers 404
// on the main handler and is served on the admin one; every other path is
// served on the main handler, and on the admin one only /healthz is.
func TestAdminApart(t *testing.T) {
	c := loadContract(t)
	api := newTestAPI(t, &fakeDecider{set: rules.Default(), decision: engine.Decision{Action: rules.Allow, AttemptID: "a"}}, func(cfg *Config) { cfg.AdminApart = true })
	admin := api.AdminHandler()
	if admin == nil {
		t.Fatal("no admin handler")
	}
	serveOn := func(h http.Handler, method, path string) int {
		req := httptest.NewRequest(method, strings.NewReplacer("{", "", "}", "").Replace(path), strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+api.admin)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusNotFound && !strings.Contains(rec.Body.String(), "no such path") {
			// A handler's own 404 (no list entry has the id): served.
			return http.StatusOK
		}
		return rec.Code
	}
	n := 0
	for _, route := range specRoutes(c.doc) {
		method, path, _ := strings.Cut(route, " ")
		op := c.doc.Paths.Value(path).GetOperation(method)
		apart := slices.Contains(op.Tags, "admin") || slices.Contains(op.Tags, "console")
		main, adm := serveOn(api, method, path), serveOn(admin, method, path)
		switch {
		case apart && (main != http.StatusNotFound || adm == http.StatusNotFound):
			t.Errorf("%s: main %d, admin %d; want 404 on the main listener alone", route, main, adm)
		case !apart && main == http.StatusNotFound:
			t.Errorf("%s: main %d; want it served", route, main)
		case !apart && path != "/healthz" && adm != http.StatusNotFound:
			t.Errorf("%s: admin %d; want 404", route, adm)
		case path == "/healthz" && adm != http.StatusOK:
			t.Errorf("%s on the admin listener: %d, want 200", route, adm)
		}
		if apart {
			n++
		}
	}
	if n < 10 {
		t.Errorf("only %d admin and console routes in the spec", n)
	}
	if newTestAPI(t, &fakeDecider{set: rules.Default()}, nil).AdminHandler() != nil {
		t.Error("an admin handler without AdminApart")
	}
}
