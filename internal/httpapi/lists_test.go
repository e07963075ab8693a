package httpapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/guardian-sec/guardian/internal/audit"
	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// listsAPI is a test API whose audit lines go to the returned buffer and
// whose admin actions count on the returned metrics.
func listsAPI(t testing.TB) (*testAPI, *bytes.Buffer, *metrics.Metrics) {
	t.Helper()
	var logs bytes.Buffer
	m := metrics.New(prometheus.NewRegistry())
	api := newTestAPI(t, &fakeDecider{set: rules.Default(), decision: engine.Decision{Action: rules.Allow}}, func(cfg *Config) {
		cfg.Audit = audit.New(audit.Config{Key: secret.Generate(), Metrics: m, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	})
	return api, &logs, m
}

func TestListsLifecycle(t *testing.T) {
	c := loadContract(t)
	api, logs, m := listsAPI(t)
	send := func(method, path, body string, wantStatus int, wantCode string) map[string]any {
		t.Helper()
		req, rec := api.do(method, path, body, api.admin)
		if rec.Code != wantStatus || errorCode(rec.Body.Bytes()) != wantCode {
			t.Fatalf("%s %s %s = %d %s, want %d %q", method, path, body, rec.Code, rec.Body.Bytes(), wantStatus, wantCode)
		}
		c.checkAnswer(t, req, rec)
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	deny := send("POST", "/v1/lists/deny", `{"network": "198.51.100.0/24", "ttl": "1h", "reason": "stuffing"}`, 201, "")
	acct := send("POST", "/v1/lists/deny", `{"account": "Alice@Example.com", "ttl": "30m"}`, 201, "")
	allow := send("POST", "/v1/lists/allow", `{"network": "203.0.113.0/24", "exempt": ["login-ip", "login-ip-distinct-accounts"], "reason": "office"}`, 201, "")
	if allow["expires_at"] != nil || deny["expires_at"] == nil {
		t.Errorf("expires_at: deny %v, allow %v; want a time and null", deny["expires_at"], allow["expires_at"])
	}
	got := send("GET", "/v1/lists", "", 200, "")
	body, _ := json.Marshal(got)
	for _, want := range []string{`"network":"198.51.100.0/24"`, `"network":"203.0.113.0/24"`, `"subject":"test"`, `"source":"api"`, `"reason":"stuffing"`, `"account":"h-`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("GET /v1/lists lacks %s: %s", want, body)
		}
	}
	if strings.Contains(strings.ToLower(string(body)), "alice") {
		t.Errorf("GET /v1/lists shows the account: %s", body)
	}
	send("DELETE", "/v1/lists/"+acct["id"].(string), "", 200, "")
	send("DELETE", "/v1/lists/"+acct["id"].(string), "", 404, "not_found")
	send("POST", "/v1/lists/allow", `{"network": "203.0.113.0/24", "exempt": ["login-account"]}`, 400, "invalid_field")
	send("POST", "/v1/lists/allow", `{"network": "203.0.113.0/24", "exempt": ["login-hard-stop"]}`, 400, "invalid_field")
	send("POST", "/v1/lists/allow", `{"network": "203.0.113.0/24", "exempt": ["no-such-rule"]}`, 400, "invalid_field")
	send("POST", "/v1/lists/allow", `{"network": "203.0.113.0/24"}`, 400, "missing_field")
	send("POST", "/v1/lists/deny", `{"network": "198.51.100.0/24"}`, 400, "missing_field")
	send("POST", "/v1/lists/deny", `{"network": "198.51.100.1/24", "ttl": "1h"}`, 400, "invalid_field")
	send("POST", "/v1/lists/deny", `{"network": "", "ttl": "1h"}`, 400, "invalid_field")
	send("POST", "/v1/lists/deny", `{"network": "198.51.100.0/24", "ttl": "1h", "exempt": ["login-ip"]}`, 400, "unknown_field")
	send("POST", "/v1/lists/deny", `{"account": 7, "ttl": "1h"}`, 400, "invalid_field")

	if got := testutil.ToFloat64(m.AdminActions.WithLabelValues(audit.ActionListAdd, audit.ResultOK)); got != 3 {
		t.Errorf("list_add ok = %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.AdminActions.WithLabelValues(audit.ActionListAdd, audit.ResultError)); got != 9 {
		t.Errorf("list_add error = %v, want 9", got)
	}
	if got := testutil.ToFloat64(m.AdminActions.WithLabelValues(audit.ActionListDelete, audit.ResultOK)); got != 1 {
		t.Errorf("list_delete ok = %v, want 1", got)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 14 {
		t.Fatalf("%d audit lines, want 14:\n%s", len(lines), logs.String())
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first["action"] != "list_add" || first["list"] != "deny" || first["network"] != "198.51.100.0/24" || first["id"] != deny["id"] || first["subject"] != "test" {
		t.Errorf("first audit line = %v", first)
	}
	if strings.Contains(strings.ToLower(logs.String()), "alice") {
		t.Errorf("an audit line names the account:\n%s", logs.String())
	}
}

// FuzzListRequest sends any body to both list endpoints: the answer is a
// 201 or a 4xx in the contract's error shape, never a 500.
func FuzzListRequest(f *testing.F) {
	for _, s := range []string{
		`{"network": "198.51.100.0/24", "ttl": "1h", "reason": "x"}`,
		`{"account": "alice@example.com", "ttl": "30m"}`,
		`{"network": "203.0.113.0/24", "exempt": ["login-ip"], "ttl": "720h"}`,
		`{"network": "::ffff:1.2.3.4/128", "exempt": [], "ttl": "0s"}`,
		`{"network": "1.2.3.4", "account": "a", "exempt": null, "ttl": "99999999999h"}`,
		`{"network": ["x"], "exempt": "login-ip"}`,
		`{"exempt": ["login-ip", "login-ip", 7]}`,
		`[]`, `null`, ``, `{"ttl": "1d2h3m", "reason": "\u0000"}`,
	} {
		f.Add(s)
	}
	api, _, _ := listsAPI(f)
	f.Fuzz(func(t *testing.T, body string) {
		for _, path := range []string{"/v1/lists/deny", "/v1/lists/allow"} {
			_, rec := api.do("POST", path, body, api.admin)
			switch {
			case rec.Code == http.StatusCreated:
			case rec.Code >= 400 && rec.Code < 500 && errorCode(rec.Body.Bytes()) != "":
			default:
				t.Fatalf("POST %s %q = %d %s", path, body, rec.Code, rec.Body.Bytes())
			}
		}
	})
}

// TestListsOfATenant: a tenant's token makes and sees account entries of
// its own tenant, and is refused network entries (403), which apply to
// every tenant.
func TestListsOfATenant(t *testing.T) {
	c := loadContract(t)
	api, _, _ := listsAPI(t)
	tok, err := api.cfg.Tokens.IssueTenant(tokens.ScopeAdmin, "acme-ops", "acme", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		method, path, body, bearer string
		wantStatus                 int
		wantCode                   string
	}{
		{"POST", "/v1/lists/deny", `{"network": "198.51.100.0/24", "ttl": "1h"}`, tok, 403, "forbidden"},
		{"POST", "/v1/lists/allow", `{"network": "203.0.113.0/24", "exempt": ["login-ip"]}`, tok, 403, "forbidden"},
		{"POST", "/v1/lists/deny", `{"account": "victim", "ttl": "1h"}`, tok, 201, ""},
		{"POST", "/v1/lists/deny", `{"network": "192.0.2.0/24", "ttl": "1h"}`, api.admin, 201, ""},
	} {
		req, rec := api.do(tt.method, tt.path, tt.body, tt.bearer)
		if rec.Code != tt.wantStatus || errorCode(rec.Body.Bytes()) != tt.wantCode {
			t.Errorf("%s %s %s = %d %s, want %d %q", tt.method, tt.path, tt.body, rec.Code, rec.Body.Bytes(), tt.wantStatus, tt.wantCode)
		}
		c.checkAnswer(t, req, rec)
	}
	count := func(bearer string) int {
		t.Helper()
		_, rec := api.do("GET", "/v1/lists", "", bearer)
		var out struct{ Deny []any }
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		return len(out.Deny)
	}
	if got, want := count(tok), 2; got != want {
		t.Errorf("the tenant sees %d deny entries, want %d: its account's and the network's", got, want)
	}
	if got, want := count(api.admin), 1; got != want {
		t.Errorf("the default tenant sees %d deny entries, want %d: the network's", got, want)
	}
}
