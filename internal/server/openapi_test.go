package server_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/apitest"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/server"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// oasPath is the contract real answers are checked against.
const oasPath = "../../api/openapi.yaml"

// oasContract is api/openapi.yaml with a router over its operations.
type oasContract = apitest.Contract

func loadOASContract(tb testing.TB) *oasContract {
	tb.Helper()
	return apitest.Load(tb, oasPath)
}

// oasServer is a real guardian, called through its handler, with tokens of
// both scopes and one signed with another key.
type oasServer struct {
	h                   http.Handler
	rulesPath           string
	check, admin, alien string
}

// newOASServer builds a guardian with the given rules file contents ("" for
// the built-in rules).
func newOASServer(t *testing.T, rulesYAML string) *oasServer {
	t.Helper()
	key := secret.Generate()
	cfg := server.Config{
		SigningKey: key,
		Addr:       "127.0.0.1:0",
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	s := &oasServer{}
	if rulesYAML != "" {
		s.rulesPath = filepath.Join(t.TempDir(), "rules.yaml")
		oasWriteFile(t, s.rulesPath, rulesYAML)
		cfg.RulesPath = s.rulesPath
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	s.h = srv.Handler()
	issue := func(k secret.Key, scope tokens.Scope) string {
		tok, err := tokens.NewService(k).Issue(scope, "test", time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	s.check = issue(key, tokens.ScopeCheck)
	s.admin = issue(key, tokens.ScopeAdmin)
	s.alien = issue(secret.Generate(), tokens.ScopeAdmin)
	return s
}

func oasWriteFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// oasStep is one request of a scenario and what must come back.
type oasStep struct {
	name   string
	method string
	path   string
	// body is evaluated when the step runs, so it can use what earlier
	// steps returned.
	body   func() string
	bearer func(*oasServer) string
	// wantStatus and wantCode are the status and, for an error, the code.
	wantStatus int
	wantCode   string
	// then checks the answer further, and may keep parts of it for later
	// steps.
	then func(t *testing.T, rec *httptest.ResponseRecorder, body map[string]any)
}

func text(s string) func() string { return func() string { return s } }

func withCheck(s *oasServer) string { return s.check }
func withAdmin(s *oasServer) string { return s.admin }
func withAlien(s *oasServer) string { return s.alien }
func withNone(*oasServer) string    { return "" }

// run plays steps in order against s, checking every answer against the
// contract as well as against the step.
func (s *oasServer) run(t *testing.T, c *oasContract, steps []oasStep) {
	t.Helper()
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			var body string
			if st.body != nil {
				body = st.body()
			}
			req := httptest.NewRequest(st.method, st.path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if tok := st.bearer(s); tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			rec := httptest.NewRecorder()
			s.h.ServeHTTP(rec, req)
			var got map[string]any
			if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
				if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
					t.Fatalf("body %q: %v", rec.Body.Bytes(), err)
				}
			}
			if rec.Code != st.wantStatus {
				t.Errorf("status: got %d, want %d (body %s)", rec.Code, st.wantStatus, rec.Body.Bytes())
			}
			var code string
			if e, ok := got["error"].(map[string]any); ok {
				code, _ = e["code"].(string)
			}
			if code != st.wantCode {
				t.Errorf("code: got %q, want %q (body %s)", code, st.wantCode, rec.Body.Bytes())
			}
			c.CheckAnswer(t, req, rec)
			if st.then != nil {
				st.then(t, rec, got)
			}
		})
	}
}

// field returns body[name] as a string, failing t when it is not one.
func field(t *testing.T, body map[string]any, name string) string {
	t.Helper()
	s, ok := body[name].(string)
	if !ok || s == "" {
		t.Fatalf("%s: got %v, want a non-empty string", name, body[name])
	}
	return s
}

func TestOpenAPIRealAnswersWithDefaultRules(t *testing.T) {
	c := loadOASContract(t)
	s := newOASServer(t, "")
	var attempt, device, denyID string
	login := `{"flow": "login", "account": "alice@example.com", "ip": "203.0.113.7"}`
	otpSend := text(`{"flow": "otp_send", "ip": "198.51.100.1", "recipient": "+1 (555) 010-0001"}`)
	steps := []oasStep{
		{
			name: "check allow", method: "POST", path: "/v1/check", body: text(login), bearer: withCheck,
			wantStatus: 200,
			then: func(t *testing.T, rec *httptest.ResponseRecorder, body map[string]any) {
				attempt = field(t, body, "attempt_id")
				if body["decision"] != "allow" {
					t.Errorf("decision: got %v, want allow", body["decision"])
				}
				for _, h := range []string{"RateLimit-Policy", "RateLimit"} {
					if rec.Header().Get(h) == "" {
						t.Errorf("no %s header on a check that login-account applied to", h)
					}
				}
			},
		},
		{
			name: "report success", method: "POST", path: "/v1/report", bearer: withCheck,
			body:       func() string { return `{"attempt_id": "` + attempt + `", "outcome": "success"}` },
			wantStatus: 200,
			then: func(t *testing.T, _ *httptest.ResponseRecorder, body map[string]any) {
				device = field(t, body, "device_token")
			},
		},
		{
			name: "report twice", method: "POST", path: "/v1/report", bearer: withCheck,
			body:       func() string { return `{"attempt_id": "` + attempt + `", "outcome": "failure"}` },
			wantStatus: 409, wantCode: "already_reported",
		},
		{
			name: "check from a trusted device", method: "POST", path: "/v1/check", bearer: withCheck,
			body: func() string {
				return `{"flow": "login", "account": "alice@example.com", "ip": "203.0.113.7", "device_token": "` + device + `"}`
			},
			wantStatus: 200,
		},
		{
			name: "check with a device token that does not verify", method: "POST", path: "/v1/check", bearer: withCheck,
			body:       text(`{"flow": "login", "account": "alice@example.com", "ip": "203.0.113.7", "device_token": "not.a.token"}`),
			wantStatus: 200,
		},
		{
			name: "check with an admin token", method: "POST", path: "/v1/check", body: text(login), bearer: withAdmin,
			wantStatus: 200,
		},
		{name: "otp send 1", method: "POST", path: "/v1/check", body: otpSend, bearer: withCheck, wantStatus: 200},
		{name: "otp send 2", method: "POST", path: "/v1/check", body: otpSend, bearer: withCheck, wantStatus: 200},
		{name: "otp send 3", method: "POST", path: "/v1/check", body: otpSend, bearer: withCheck, wantStatus: 200},
		{
			name: "otp send 4 is slowed", method: "POST", path: "/v1/check", body: otpSend, bearer: withCheck,
			wantStatus: 429,
			then: func(t *testing.T, rec *httptest.ResponseRecorder, body map[string]any) {
				if body["decision"] != "slow" || body["rule"] != "otp-send-recipient" {
					t.Errorf("decision, rule: got %v, %v; want slow, otp-send-recipient", body["decision"], body["rule"])
				}
				ms, _ := body["retry_after_ms"].(float64)
				want := strconv.FormatInt((int64(ms)+999)/1000, 10)
				if got := rec.Header().Get("Retry-After"); got != want {
					t.Errorf("Retry-After: got %q, want %q (retry_after_ms %v rounded up)", got, want, ms)
				}
			},
		},
		{name: "invalid_json", method: "POST", path: "/v1/check", body: text(`{"flow": "login",`), bearer: withCheck, wantStatus: 400, wantCode: "invalid_json"},
		{name: "invalid_json two values", method: "POST", path: "/v1/check", body: text(login + login), bearer: withCheck, wantStatus: 400, wantCode: "invalid_json"},
		{name: "unknown_field", method: "POST", path: "/v1/check", body: text(`{"flow": "login", "ip": "203.0.113.7", "acount": "a"}`), bearer: withCheck, wantStatus: 400, wantCode: "unknown_field"},
		{name: "missing_field ip", method: "POST", path: "/v1/check", body: text(`{"flow": "login"}`), bearer: withCheck, wantStatus: 400, wantCode: "missing_field"},
		{name: "missing_field recipient", method: "POST", path: "/v1/check", body: text(`{"flow": "otp_send", "ip": "203.0.113.7"}`), bearer: withCheck, wantStatus: 400, wantCode: "missing_field"},
		{name: "invalid_field cost", method: "POST", path: "/v1/check", body: text(`{"flow": "login", "ip": "203.0.113.7", "cost": 1001}`), bearer: withCheck, wantStatus: 400, wantCode: "invalid_field"},
		{name: "invalid_field empty account", method: "POST", path: "/v1/check", body: text(`{"flow": "login", "ip": "203.0.113.7", "account": ""}`), bearer: withCheck, wantStatus: 400, wantCode: "invalid_field"},
		{name: "invalid_field short secret_fingerprint", method: "POST", path: "/v1/check", body: text(`{"flow": "login", "ip": "203.0.113.7", "account": "a", "secret_fingerprint": "too-short"}`), bearer: withCheck, wantStatus: 400, wantCode: "invalid_field"},
		{name: "invalid_field secret_fingerprint not base64url", method: "POST", path: "/v1/check", body: text(`{"flow": "login", "ip": "203.0.113.7", "account": "a", "secret_fingerprint": "aaaaaaaaaaaaaaaa+/=="}`), bearer: withCheck, wantStatus: 400, wantCode: "invalid_field"},
		{name: "unknown_flow", method: "POST", path: "/v1/check", body: text(`{"flow": "signup", "ip": "203.0.113.7"}`), bearer: withCheck, wantStatus: 400, wantCode: "unknown_flow"},
		{name: "invalid_ip", method: "POST", path: "/v1/check", body: text(`{"flow": "login", "ip": "300.1.1.1"}`), bearer: withCheck, wantStatus: 400, wantCode: "invalid_ip"},
		{name: "invalid_recipient", method: "POST", path: "/v1/check", body: text(`{"flow": "otp_send", "ip": "203.0.113.7", "recipient": "12"}`), bearer: withCheck, wantStatus: 400, wantCode: "invalid_recipient"},
		{
			name: "body_too_large", method: "POST", path: "/v1/check", bearer: withCheck,
			body:       text(`{"flow": "login", "ip": "` + strings.Repeat(" ", 64<<10) + `203.0.113.7"}`),
			wantStatus: 413, wantCode: "body_too_large",
		},
		{name: "unauthorized without token", method: "POST", path: "/v1/check", body: text(login), bearer: withNone, wantStatus: 401, wantCode: "unauthorized"},
		{name: "unauthorized with another key", method: "GET", path: "/v1/rules", bearer: withAlien, wantStatus: 401, wantCode: "unauthorized"},
		{name: "forbidden", method: "GET", path: "/v1/rules", bearer: withCheck, wantStatus: 403, wantCode: "forbidden"},
		{name: "invalid_attempt", method: "POST", path: "/v1/report", body: text(`{"attempt_id": "forged", "outcome": "failure"}`), bearer: withCheck, wantStatus: 400, wantCode: "invalid_attempt"},
		{name: "invalid_field outcome", method: "POST", path: "/v1/report", body: text(`{"attempt_id": "forged", "outcome": "maybe"}`), bearer: withCheck, wantStatus: 400, wantCode: "invalid_field"},
		{name: "not_found", method: "GET", path: "/v1/nothing", bearer: withAdmin, wantStatus: 404, wantCode: "not_found"},
		{name: "method_not_allowed", method: "GET", path: "/v1/check", bearer: withCheck, wantStatus: 405, wantCode: "method_not_allowed"},
		{
			name: "rules", method: "GET", path: "/v1/rules", bearer: withAdmin,
			wantStatus: 200,
			then: func(t *testing.T, _ *httptest.ResponseRecorder, body map[string]any) {
				rs, _ := body["rules"].([]any)
				if want := len(rules.Default().Rules); body["source"] != "builtin" || len(rs) != want {
					t.Errorf("got source %v with %d rules, want builtin with %d", body["source"], len(rs), want)
				}
			},
		},
		{name: "reload", method: "POST", path: "/v1/rules/reload", bearer: withAdmin, wantStatus: 200},
		{
			name: "fleet", method: "GET", path: "/v1/fleet", bearer: withAdmin,
			wantStatus: 200,
			then: func(t *testing.T, _ *httptest.ResponseRecorder, body map[string]any) {
				is, _ := body["instances"].([]any)
				if len(is) != 1 || body["partial"] != true || body["rules_consistent"] != true {
					t.Errorf("got %v, want this instance alone, partial, rules consistent", body)
				}
			},
		},
		{
			name: "shadow", method: "GET", path: "/v1/shadow", bearer: withAdmin,
			wantStatus: 200,
			then: func(t *testing.T, _ *httptest.ResponseRecorder, body map[string]any) {
				if rs, ok := body["rules"].([]any); !ok || len(rs) != 0 {
					t.Errorf("rules: got %v, want [] (no built-in rule is in shadow mode)", body["rules"])
				}
			},
		},
		{name: "status", method: "GET", path: "/v1/accounts/status?account=alice@example.com", bearer: withAdmin, wantStatus: 200},
		{name: "status of an unknown account", method: "GET", path: "/v1/accounts/status?account=nobody@example.com", bearer: withAdmin, wantStatus: 200},
		{name: "status without account", method: "GET", path: "/v1/accounts/status", bearer: withAdmin, wantStatus: 400, wantCode: "missing_field"},
		{name: "status of an empty account", method: "GET", path: "/v1/accounts/status?account=", bearer: withAdmin, wantStatus: 400, wantCode: "invalid_field"},
		{name: "reset", method: "POST", path: "/v1/accounts/reset", body: text(`{"account": "alice@example.com"}`), bearer: withAdmin, wantStatus: 200},
		{name: "deny a network", method: "POST", path: "/v1/lists/deny", body: text(`{"network": "198.51.100.0/24", "ttl": "1h", "reason": "stuffing"}`), bearer: withAdmin, wantStatus: 201,
			then: func(t *testing.T, _ *httptest.ResponseRecorder, body map[string]any) { denyID = field(t, body, "id") }},
		{name: "deny an account", method: "POST", path: "/v1/lists/deny", body: text(`{"account": "mallory@example.com", "ttl": "10m"}`), bearer: withAdmin, wantStatus: 201},
		{name: "allow an office", method: "POST", path: "/v1/lists/allow", body: text(`{"network": "203.0.113.0/24", "exempt": ["login-ip"]}`), bearer: withAdmin, wantStatus: 201},
		{name: "allow an account rule", method: "POST", path: "/v1/lists/allow", body: text(`{"network": "203.0.113.0/24", "exempt": ["login-account"]}`), bearer: withAdmin, wantStatus: 400, wantCode: "invalid_field"},
		{name: "check from a denied network", method: "POST", path: "/v1/check", body: text(`{"flow": "login", "account": "bob@example.com", "ip": "198.51.100.9"}`), bearer: withCheck, wantStatus: 429,
			then: func(t *testing.T, _ *httptest.ResponseRecorder, body map[string]any) {
				if ms, _ := body["retry_after_ms"].(float64); body["rule"] != "deny-list" || ms <= 3590000 || ms > 3600000 {
					t.Errorf("answer %v, want deny-list for the hour's remainder", body)
				}
			}},
		{name: "lists", method: "GET", path: "/v1/lists", bearer: withAdmin, wantStatus: 200},
		{name: "healthz", method: "GET", path: "/healthz", bearer: withNone, wantStatus: 200},
		{name: "readyz", method: "GET", path: "/readyz", bearer: withNone, wantStatus: 200},
		{name: "metrics", method: "GET", path: "/metrics", bearer: withNone, wantStatus: 200},
	}
	s.run(t, c, steps)
	s.run(t, c, []oasStep{
		{name: "delete a list entry", method: "DELETE", path: "/v1/lists/" + denyID, bearer: withAdmin, wantStatus: 200},
		{name: "delete it again", method: "DELETE", path: "/v1/lists/" + denyID, bearer: withAdmin, wantStatus: 404, wantCode: "not_found"},
	})
}

// oasRules holds a rule of each type: a blocking hard stop, a shadow rate
// and a global failure rate, each small enough to trip in a few requests.
const oasRules = `version: 1
rules:
  - name: reset-hard-stop
    flows: [password_reset]
    key: account
    type: consecutive_failures
    limit: 2
    action: block
  - name: otp-send-shadow
    flows: [otp_send]
    key: recipient
    type: rate
    limit: 1
    per: 15m
    burst: 1
    mode: shadow
  - name: verify-failures
    flows: [otp_verify]
    key: global
    type: failure_rate
    limit: 1
    per: 1m
    hysteresis: 1m
`

func TestOpenAPIRealAnswersWithRulesFile(t *testing.T) {
	c := loadOASContract(t)
	s := newOASServer(t, oasRules)
	var attempt string
	keep := func(t *testing.T, _ *httptest.ResponseRecorder, body map[string]any) {
		attempt = field(t, body, "attempt_id")
	}
	reportFailure := func() string { return `{"attempt_id": "` + attempt + `", "outcome": "failure"}` }
	reset := text(`{"flow": "password_reset", "account": "bob@example.com", "ip": "203.0.113.9"}`)
	send := text(`{"flow": "otp_send", "ip": "203.0.113.9", "recipient": "bob@example.com"}`)
	verify := text(`{"flow": "otp_verify", "ip": "203.0.113.9", "recipient": "bob@example.com"}`)
	steps := []oasStep{
		{name: "reset check 1", method: "POST", path: "/v1/check", body: reset, bearer: withCheck, wantStatus: 200, then: keep},
		{name: "reset failure 1", method: "POST", path: "/v1/report", body: reportFailure, bearer: withCheck, wantStatus: 200},
		{name: "reset check 2", method: "POST", path: "/v1/check", body: reset, bearer: withCheck, wantStatus: 200, then: keep},
		{name: "reset failure 2", method: "POST", path: "/v1/report", body: reportFailure, bearer: withCheck, wantStatus: 200},
		{
			name: "block", method: "POST", path: "/v1/check", body: reset, bearer: withCheck,
			wantStatus: 429,
			then: func(t *testing.T, rec *httptest.ResponseRecorder, body map[string]any) {
				if body["decision"] != "block" || body["rule"] != "reset-hard-stop" {
					t.Errorf("decision, rule: got %v, %v; want block, reset-hard-stop", body["decision"], body["rule"])
				}
				if got := rec.Header().Get("Retry-After"); got != "" {
					t.Errorf("Retry-After: got %q on block, want none", got)
				}
			},
		},
		{
			name: "status blocked", method: "GET", path: "/v1/accounts/status?account=bob@example.com", bearer: withAdmin,
			wantStatus: 200,
			then: func(t *testing.T, _ *httptest.ResponseRecorder, body map[string]any) {
				if body["blocked"] != true || body["consecutive_failures"] != float64(2) {
					t.Errorf("blocked, consecutive_failures: got %v, %v; want true, 2", body["blocked"], body["consecutive_failures"])
				}
			},
		},
		{name: "reset", method: "POST", path: "/v1/accounts/reset", body: text(`{"account": "bob@example.com"}`), bearer: withAdmin, wantStatus: 200},
		{name: "allowed after reset", method: "POST", path: "/v1/check", body: reset, bearer: withCheck, wantStatus: 200},
		{name: "otp send", method: "POST", path: "/v1/check", body: send, bearer: withCheck, wantStatus: 200},
		{
			name: "otp send over the shadow rule", method: "POST", path: "/v1/check", body: send, bearer: withCheck,
			wantStatus: 200,
			then: func(t *testing.T, _ *httptest.ResponseRecorder, body map[string]any) {
				if sh, _ := body["shadow"].([]any); len(sh) != 1 {
					t.Errorf("shadow: got %v, want otp-send-shadow alone", body["shadow"])
				}
			},
		},
		{
			name: "shadow report", method: "GET", path: "/v1/shadow", bearer: withAdmin,
			wantStatus: 200,
			then: func(t *testing.T, rec *httptest.ResponseRecorder, body map[string]any) {
				if strings.Contains(rec.Body.String(), "bob") {
					t.Errorf("shadow report shows a recipient in clear: %s", rec.Body.Bytes())
				}
				rs, _ := body["rules"].([]any)
				if len(rs) != 1 {
					t.Fatalf("rules: got %v, want otp-send-shadow alone", body["rules"])
				}
				r, _ := rs[0].(map[string]any)
				keys, _ := r["top_keys"].([]any)
				if r["evaluated"] != float64(2) || r["would_slow"] != float64(1) || len(keys) != 1 {
					t.Errorf("got %v, want 2 evaluated, 1 would_slow, 1 top key", r)
				}
			},
		},
		{name: "verify check 1", method: "POST", path: "/v1/check", body: verify, bearer: withCheck, wantStatus: 200, then: keep},
		{name: "verify failure 1", method: "POST", path: "/v1/report", body: reportFailure, bearer: withCheck, wantStatus: 200},
		{name: "verify check 2", method: "POST", path: "/v1/check", body: verify, bearer: withCheck, wantStatus: 200, then: keep},
		{name: "verify failure 2", method: "POST", path: "/v1/report", body: reportFailure, bearer: withCheck, wantStatus: 200},
		{
			name: "challenge", method: "POST", path: "/v1/check", body: verify, bearer: withCheck,
			wantStatus: 200,
			then: func(t *testing.T, _ *httptest.ResponseRecorder, body map[string]any) {
				if body["decision"] != "challenge" || body["rule"] != "verify-failures" {
					t.Errorf("decision, rule: got %v, %v; want challenge, verify-failures", body["decision"], body["rule"])
				}
			},
		},
		{name: "rules of every type", method: "GET", path: "/v1/rules", bearer: withAdmin, wantStatus: 200},
		{
			name: "reload refused", method: "POST", path: "/v1/rules/reload", bearer: withAdmin,
			body: func() string {
				oasWriteFile(t, s.rulesPath, "version: 1\nrules:\n  - name: broken\n    flows: [login]\n    type: rate\n")
				return ""
			},
			wantStatus: 400, wantCode: "invalid_rules",
			then: func(t *testing.T, _ *httptest.ResponseRecorder, body map[string]any) {
				e, _ := body["error"].(map[string]any)
				if msg, _ := e["message"].(string); !strings.Contains(msg, s.rulesPath+":") {
					t.Errorf("message: got %q, want FILE:LINE errors naming %s", msg, s.rulesPath)
				}
			},
		},
		{
			name: "old rules kept", method: "GET", path: "/v1/rules", bearer: withAdmin,
			wantStatus: 200,
			then: func(t *testing.T, _ *httptest.ResponseRecorder, body map[string]any) {
				if rs, _ := body["rules"].([]any); len(rs) != 3 {
					t.Errorf("got %d rules, want the 3 in force before the refused reload", len(rs))
				}
			},
		},
		{
			name: "reload", method: "POST", path: "/v1/rules/reload", bearer: withAdmin,
			body: func() string {
				oasWriteFile(t, s.rulesPath, oasRules)
				return ""
			},
			wantStatus: 200,
		},
	}
	s.run(t, c, steps)
}
