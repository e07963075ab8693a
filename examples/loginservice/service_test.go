package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/guardian-sec/guardian/client"
)

// scriptedGuardian stands in for guardian: it answers every check with one
// scripted decision and records the checks, reports and resets it receives.
type scriptedGuardian struct {
	*httptest.Server
	mu       sync.Mutex
	checks   []map[string]any
	reports  []string
	resets   []string
	status   int
	decision string
}

func newScriptedGuardian(t *testing.T, status int, decision string) *scriptedGuardian {
	t.Helper()
	g := &scriptedGuardian{status: status, decision: decision}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("guardian received a body that is not JSON: %v", err)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/check":
			g.checks = append(g.checks, body)
			if g.status == http.StatusTooManyRequests {
				w.Header().Set("Retry-After", "60")
			}
			w.WriteHeader(g.status)
			_, _ = io.WriteString(w, g.decision)
		case "/v1/report":
			g.reports = append(g.reports, body["attempt_id"].(string)+" "+body["outcome"].(string))
			_, _ = io.WriteString(w, `{"recorded":true,"device_token":"dev-new"}`)
		case "/v1/accounts/reset":
			g.resets = append(g.resets, body["account"].(string))
			_, _ = io.WriteString(w, `{"reset":true}`)
		}
	}))
	t.Cleanup(g.Close)
	return g
}

func (g *scriptedGuardian) seen() (checks []map[string]any, reports, resets []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.checks, g.reports, g.resets
}

const (
	allowJSON     = `{"decision":"allow","attempt_id":"at-1","degraded":false,"limits":[],"shadow":[]}`
	challengeJSON = `{"decision":"challenge","rule":"login-global-failures","attempt_id":"at-1","degraded":false,"limits":[],"shadow":[]}`
	slowJSON      = `{"decision":"slow","rule":"login-account","retry_after_ms":60000,"degraded":false,"limits":[],"shadow":[]}`
	blockJSON     = `{"decision":"block","rule":"login-hard-stop","degraded":false,"limits":[],"shadow":[]}`
	badIPJSON     = `{"error":{"code":"invalid_ip","message":"ip: bad"}}`
	invalidBody   = `{"error":"invalid_credentials","next":"retry"}`
)

// testFingerprintKey is the service's fingerprint key in tests.
var testFingerprintKey = []byte("the login service's test fingerprint key")

func newTestService(t *testing.T, g *scriptedGuardian, policy client.Policy, r client.Responder) *Service {
	t.Helper()
	c, err := client.New(client.Config{BaseURL: g.URL, Tokens: client.StaticToken("check"), OnUnavailable: policy, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(client.Config{BaseURL: g.URL, Tokens: client.StaticToken("admin"), OnUnavailable: client.FailClosed, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	users, err := NewUsers(bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := users.Add("alice", "right", "424242", "reset-alice"); err != nil {
		t.Fatal(err)
	}
	svc, err := New(Config{Guardian: c, Admin: admin, Users: users, Responder: r, FingerprintKey: testFingerprintKey, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func post(svc *Service, path, body string, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.RemoteAddr = "203.0.113.7:50123"
	for _, c := range cookies {
		req.AddCookie(c)
	}
	w := httptest.NewRecorder()
	svc.ServeHTTP(w, req)
	return w
}

func TestLogin(t *testing.T) {
	tests := []struct {
		name           string
		status         int
		decision       string
		policy         client.Policy
		responder      client.Responder
		body           string
		wantStatus     int
		wantBody       string
		wantRetryAfter string
		wantReports    []string
		wantCookie     bool
		// wantRecheck: the challenge was passed, and the attempt checked
		// again with challenge_passed.
		wantRecheck bool
	}{
		{name: "allowed, right password", status: 200, decision: allowJSON, body: `{"username":"alice","password":"right"}`,
			wantStatus: 200, wantBody: `{"logged_in":true}`, wantReports: []string{"at-1 success"}, wantCookie: true},
		{name: "allowed, wrong password", status: 200, decision: allowJSON, body: `{"username":"alice","password":"wrong"}`,
			wantStatus: 401, wantBody: invalidBody, wantReports: []string{"at-1 failure"}},
		{name: "allowed, no such user", status: 200, decision: allowJSON, body: `{"username":"mallory","password":"right"}`,
			wantStatus: 401, wantBody: invalidBody, wantReports: []string{"at-1 failure"}},
		{name: "slowed", status: 429, decision: slowJSON, body: `{"username":"alice","password":"right"}`,
			wantStatus: 429, wantBody: `{"error":"too_many_attempts","next":"wait"}`, wantRetryAfter: "60"},
		{name: "slowed, answered like a wrong password", status: 429, decision: slowJSON, responder: client.Responder{SlowAsInvalid: true},
			body: `{"username":"alice","password":"right"}`, wantStatus: 401, wantBody: invalidBody},
		{name: "blocked, sent to reset", status: 429, decision: blockJSON, body: `{"username":"alice","password":"right"}`,
			wantStatus: 403, wantBody: `{"error":"account_locked","next":"reset"}`},
		{name: "challenged without a second factor", status: 200, decision: challengeJSON, body: `{"username":"alice","password":"right"}`,
			wantStatus: 401, wantBody: `{"error":"second_factor_required","next":"second_factor"}`},
		{name: "challenged with a wrong second factor", status: 200, decision: challengeJSON, body: `{"username":"alice","password":"right","code":"000000"}`,
			wantStatus: 401, wantBody: `{"error":"second_factor_required","next":"second_factor"}`},
		{name: "challenged with the second factor", status: 200, decision: challengeJSON, body: `{"username":"alice","password":"right","code":"424242"}`,
			wantStatus: 200, wantBody: `{"logged_in":true}`, wantReports: []string{"at-1 success"}, wantCookie: true, wantRecheck: true},
		{name: "challenged with the second factor, wrong password", status: 200, decision: challengeJSON, body: `{"username":"alice","password":"wrong","code":"424242"}`,
			wantStatus: 401, wantBody: invalidBody, wantReports: []string{"at-1 failure"}, wantRecheck: true},
		{name: "guardian down, fail closed", status: 503, decision: ``, policy: client.FailClosed, body: `{"username":"alice","password":"right"}`,
			wantStatus: 429, wantBody: `{"error":"too_many_attempts","next":"wait"}`, wantRetryAfter: "1"},
		{name: "guardian down, local limit admits", status: 503, decision: ``, policy: client.Local, body: `{"username":"alice","password":"right"}`,
			wantStatus: 200, wantBody: `{"logged_in":true}`},
		{name: "guardian refuses the check", status: 400, decision: badIPJSON, body: `{"username":"alice","password":"right"}`,
			wantStatus: 500, wantBody: `{"error":"unavailable","next":"retry"}`},
		{name: "no password", status: 200, decision: allowJSON, body: `{"username":"alice"}`,
			wantStatus: 400, wantBody: `{"error":"invalid_request","next":"retry"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newScriptedGuardian(t, tt.status, tt.decision)
			policy := tt.policy
			if policy == 0 {
				policy = client.FailClosed
			}
			svc := newTestService(t, g, policy, tt.responder)
			w := post(svc, "/login", tt.body, &http.Cookie{Name: DeviceCookie, Value: "dev-old"})
			if w.Code != tt.wantStatus || w.Body.String() != tt.wantBody || w.Header().Get("Retry-After") != tt.wantRetryAfter {
				t.Fatalf("POST /login = %d %s Retry-After %q, want %d %s Retry-After %q",
					w.Code, w.Body, w.Header().Get("Retry-After"), tt.wantStatus, tt.wantBody, tt.wantRetryAfter)
			}
			if q := w.Header().Get("RateLimit"); q != "" {
				t.Errorf("RateLimit %q sent to an unauthenticated client", q)
			}
			checks, reports, _ := g.seen()
			if !reflect.DeepEqual(reports, tt.wantReports) {
				t.Errorf("reports = %q, want %q", reports, tt.wantReports)
			}
			if tt.wantStatus != 400 {
				var sent loginRequest
				if err := json.Unmarshal([]byte(tt.body), &sent); err != nil {
					t.Fatal(err)
				}
				check := map[string]any{"flow": "login", "account": sent.Username, "ip": "203.0.113.7", "device_token": "dev-old",
					"secret_fingerprint": client.Fingerprint(testFingerprintKey, []byte(sent.Password))}
				want := []map[string]any{check}
				if tt.wantRecheck {
					again := maps.Clone(check)
					again["challenge_passed"] = true
					want = append(want, again)
				}
				if !reflect.DeepEqual(checks, want) {
					t.Errorf("checks = %v, want %v", checks, want)
				}
			}
			var cookie *http.Cookie
			for _, c := range w.Result().Cookies() {
				if c.Name == DeviceCookie {
					cookie = c
				}
			}
			if (cookie != nil) != tt.wantCookie || cookie != nil && (cookie.Value != "dev-new" || !cookie.HttpOnly || !cookie.Secure || cookie.SameSite != http.SameSiteStrictMode) {
				t.Errorf("device cookie = %+v, want one: %v", cookie, tt.wantCookie)
			}
		})
	}
}

func TestSlowedLoginIsIndistinguishableFromAWrongPassword(t *testing.T) {
	uniform := client.Responder{SlowAsInvalid: true}
	wrong := post(newTestService(t, newScriptedGuardian(t, 200, allowJSON), client.FailClosed, uniform),
		"/login", `{"username":"alice","password":"wrong"}`)
	slowed := post(newTestService(t, newScriptedGuardian(t, 429, slowJSON), client.FailClosed, uniform),
		"/login", `{"username":"alice","password":"wrong"}`)
	if wrong.Code != slowed.Code || wrong.Body.String() != slowed.Body.String() || !reflect.DeepEqual(wrong.Header(), slowed.Header()) {
		t.Fatalf("wrong password: %d %v %s\nslowed: %d %v %s\nwant the same",
			wrong.Code, wrong.Header(), wrong.Body, slowed.Code, slowed.Header(), slowed.Body)
	}
}

func TestReset(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		decision    string
		body        string
		wantStatus  int
		wantBody    string
		wantReports []string
		wantResets  []string
		// wantChecks is how many checks guardian received: two when a
		// challenge was passed.
		wantChecks int
	}{
		{"verified", 200, allowJSON, `{"username":"alice","reset_code":"reset-alice","new_password":"new"}`,
			200, `{"next":"login","reset":true}`, []string{"at-1 success"}, []string{"alice"}, 1},
		{"guessed code", 200, allowJSON, `{"username":"alice","reset_code":"guess","new_password":"new"}`,
			401, `{"error":"invalid_reset_code","next":"reset"}`, []string{"at-1 failure"}, nil, 1},
		{"challenged: the code is the proof", 200, challengeJSON, `{"username":"alice","reset_code":"reset-alice","new_password":"new"}`,
			200, `{"next":"login","reset":true}`, []string{"at-1 success"}, []string{"alice"}, 2},
		{"challenged with a guessed code: nothing changes", 200, challengeJSON, `{"username":"alice","reset_code":"guess","new_password":"new"}`,
			401, `{"error":"invalid_reset_code","next":"reset"}`, nil, nil, 1},
		{"slowed", 429, slowJSON, `{"username":"alice","reset_code":"reset-alice","new_password":"new"}`,
			429, `{"error":"too_many_attempts","next":"wait"}`, nil, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newScriptedGuardian(t, tt.status, tt.decision)
			svc := newTestService(t, g, client.FailClosed, client.Responder{})
			w := post(svc, "/reset", tt.body)
			if w.Code != tt.wantStatus || w.Body.String() != tt.wantBody {
				t.Fatalf("POST /reset = %d %s, want %d %s", w.Code, w.Body, tt.wantStatus, tt.wantBody)
			}
			checks, reports, resets := g.seen()
			if len(checks) != tt.wantChecks || checks[0]["flow"] != "password_reset" || (tt.wantChecks == 2) != (checks[len(checks)-1]["challenge_passed"] == true) {
				t.Errorf("checks = %v, want %d password_reset checks, the second with challenge_passed", checks, tt.wantChecks)
			}
			if !reflect.DeepEqual(reports, tt.wantReports) || !reflect.DeepEqual(resets, tt.wantResets) {
				t.Errorf("reports %q, resets %q; want %q, %q", reports, resets, tt.wantReports, tt.wantResets)
			}
			// The new password works only after a verified reset.
			newWorks := svc.cfg.Users.Verify("alice", "new")
			if newWorks != (tt.wantResets != nil) {
				t.Errorf("new password accepted = %v after %s", newWorks, tt.name)
			}
		})
	}
}
