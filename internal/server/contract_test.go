package server_test

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/guardian-sec/guardian/internal/tokens"
)

const budgetRules = `version: 1
rules:
  - name: budget
    flows: [login]
    key: ip
    type: rate
    limit: 1
    per: 1h
    burst: 20
`

func TestConcurrentChecksAllowExactlyTheBudget(t *testing.T) {
	in := start(t, budgetRules)
	const callers = 50
	var wg sync.WaitGroup
	statuses := make([]int, callers)
	for i := range callers {
		wg.Go(func() {
			statuses[i] = in.check(t, map[string]any{"flow": "login", "account": fmt.Sprintf("user%d", i), "ip": "198.51.100.9"}).status
		})
	}
	wg.Wait()
	got := map[int]int{}
	for _, s := range statuses {
		got[s]++
	}
	if got[http.StatusOK] != 20 || got[http.StatusTooManyRequests] != 30 {
		t.Fatalf("statuses = %v, want exactly 20 × 200 and 30 × 429", got)
	}
}

func TestDeniedCheckSpendsNothing(t *testing.T) {
	in := start(t, `version: 1
rules:
  - name: per-ip
    flows: [login]
    key: ip
    type: rate
    limit: 1
    per: 1h
    burst: 2
  - name: per-account
    flows: [login]
    key: account
    type: rate
    limit: 1
    per: 1h
    burst: 10
`)
	req := map[string]any{"flow": "login", "account": "carol", "ip": "192.0.2.10"}
	for i := range 2 {
		if r := in.check(t, req); r.status != http.StatusOK {
			t.Fatalf("check %d: status %d, want 200", i, r.status)
		}
	}
	for i := range 5 {
		r := in.check(t, req)
		if r.status != http.StatusTooManyRequests || str(r.body["rule"]) != "per-ip" {
			t.Fatalf("denied check %d: status %d rule %v, want 429 by per-ip", i, r.status, r.body["rule"])
		}
		// A denied check reports the account rule where it stands: 8 left.
		if got := num(limit(t, r, "per-account")["remaining"]); got != 8 {
			t.Fatalf("denied check %d: per-account remaining = %d, want 8", i, got)
		}
	}
	r := in.check(t, map[string]any{"flow": "login", "account": "carol", "ip": "192.0.2.11"})
	if got := num(limit(t, r, "per-account")["remaining"]); r.status != http.StatusOK || got != 7 {
		t.Fatalf("from another IP: status %d, per-account remaining %d; want 200 and 7 (the denied checks spent nothing)", r.status, got)
	}
}

func TestFailuresOnlyCountAgainstTheAccount(t *testing.T) {
	in := start(t, "")
	req := map[string]any{"flow": "login", "account": "dave@example.com", "ip": "203.0.113.20"}
	for i := range 20 {
		r := in.check(t, req)
		if r.status != http.StatusOK {
			t.Fatalf("legitimate check %d: status %d body %s", i, r.status, r.raw)
		}
		if got := in.report(t, str(r.body["attempt_id"]), "success"); got.status != http.StatusOK {
			t.Fatalf("report %d: status %d body %s", i, got.status, got.raw)
		}
	}
	for i := range 5 {
		r := in.check(t, req)
		if r.status != http.StatusOK {
			t.Fatalf("failing check %d: status %d, want 200 within the burst", i, r.status)
		}
		if got := num(limit(t, r, "login-account")["remaining"]); got != int64(4-i) {
			t.Fatalf("failing check %d: remaining %d, want %d", i, got, 4-i)
		}
		in.report(t, str(r.body["attempt_id"]), "failure")
	}
	r := in.check(t, req)
	if r.status != http.StatusTooManyRequests || r.body["decision"] != "slow" || r.body["rule"] != "login-account" {
		t.Fatalf("sixth failing check: status %d body %s, want 429 slow by login-account", r.status, r.raw)
	}
	if got := num(r.body["retry_after_ms"]); got < 59000 || got > 60000 {
		t.Fatalf("retry_after_ms = %d, want about 60000", got)
	}
	if _, ok := r.body["attempt_id"]; ok {
		t.Fatal("a slowed check carries an attempt_id")
	}
	if got := r.header.Get("Retry-After"); got != "60" {
		t.Fatalf("Retry-After = %q, want 60", got)
	}
	if got, want := r.header.Get("RateLimit-Policy"), `"login-account";q=5;w=300`; got != want {
		t.Fatalf("RateLimit-Policy = %q, want %q", got, want)
	}
	if got, want := r.header.Get("RateLimit"), `"login-account";r=0;t=300`; got != want {
		t.Fatalf("RateLimit = %q, want %q", got, want)
	}
}

func TestUnreportedAttemptCountsAsFailure(t *testing.T) {
	in := start(t, "")
	req := map[string]any{"flow": "login", "account": "erin", "ip": "203.0.113.21"}
	for range 5 {
		if r := in.check(t, req); r.status != http.StatusOK {
			t.Fatalf("status %d", r.status)
		}
	}
	if r := in.check(t, req); r.status != http.StatusTooManyRequests {
		t.Fatalf("sixth unreported check: status %d, want 429", r.status)
	}
}

func TestSuccessGivesBackOnlyItsOwnReservation(t *testing.T) {
	in := start(t, "")
	req := map[string]any{"flow": "login", "account": "frank", "ip": "203.0.113.22"}
	for range 4 {
		in.report(t, str(in.check(t, req).body["attempt_id"]), "failure")
	}
	r := in.check(t, req)
	in.report(t, str(r.body["attempt_id"]), "success")
	// Four failures stay spent on the shared bucket: one unit of the burst
	// is left, which a check from another network takes.
	elsewhere := map[string]any{"flow": "login", "account": "frank", "ip": "198.51.100.22"}
	r = in.check(t, elsewhere)
	if got := num(limit(t, r, "login-account")["remaining"]); got != 0 || r.body["trust"] != "none" {
		t.Fatalf("remaining after 4 failures and a success = %d, trust %v; want 0, none", got, r.body["trust"])
	}
	// The success made its /24 familiar: a check from there counts on the
	// network's own bucket, full.
	r = in.check(t, map[string]any{"flow": "login", "account": "frank", "ip": "203.0.113.99"})
	if got := num(limit(t, r, "login-account")["remaining"]); got != 4 || r.body["trust"] != "network" {
		t.Fatalf("from the familiar network: remaining %d, trust %v; want 4, network", got, r.body["trust"])
	}
}

func TestKeysAreNormalised(t *testing.T) {
	in := start(t, "")
	t.Run("account case and space", func(t *testing.T) {
		for i, acct := range []string{"Grace@Example.COM", " grace@example.com", "GRACE@EXAMPLE.COM "} {
			r := in.check(t, map[string]any{"flow": "login", "account": acct, "ip": fmt.Sprintf("198.51.100.%d", 30+i)})
			if got := num(limit(t, r, "login-account")["remaining"]); got != int64(4-i) {
				t.Fatalf("%q: remaining %d, want %d (one shared bucket)", acct, got, 4-i)
			}
		}
	})
	t.Run("IPv6 /64 and mapped IPv4", func(t *testing.T) {
		ips := []string{"2001:db8:1:2::1", "2001:db8:1:2:ffff::9", "2001:db8:1:2:aaaa:bbbb:cccc:dddd"}
		for i, ip := range ips {
			r := in.check(t, map[string]any{"flow": "login", "account": fmt.Sprintf("v6-%d", i), "ip": ip})
			if got := num(limit(t, r, "login-ip")["remaining"]); got != int64(29-i) {
				t.Fatalf("%s: login-ip remaining %d, want %d (one /64)", ip, got, 29-i)
			}
		}
		r := in.check(t, map[string]any{"flow": "login", "account": "v6-other", "ip": "2001:db8:1:3::1"})
		if got := num(limit(t, r, "login-ip")["remaining"]); got != 29 {
			t.Fatalf("another /64: remaining %d, want 29", got)
		}
		in.check(t, map[string]any{"flow": "login", "account": "v4-a", "ip": "203.0.113.99"})
		r = in.check(t, map[string]any{"flow": "login", "account": "v4-b", "ip": "::ffff:203.0.113.99"})
		if got := num(limit(t, r, "login-ip")["remaining"]); got != 28 {
			t.Fatalf("mapped IPv4: remaining %d, want 28 (same address)", got)
		}
	})
	t.Run("phone formats", func(t *testing.T) {
		formats := []string{"+1 (555) 010-0000", "1.555.010.0000", "+15550100000"}
		for i, phone := range formats {
			r := in.check(t, map[string]any{"flow": "otp_send", "recipient": phone, "ip": fmt.Sprintf("198.51.100.%d", 60+i)})
			if r.status != http.StatusOK {
				t.Fatalf("%q: status %d", phone, r.status)
			}
		}
		r := in.check(t, map[string]any{"flow": "otp_send", "recipient": "+1-555-010-0000", "ip": "198.51.100.70"})
		if r.status != http.StatusTooManyRequests || r.body["rule"] != "otp-send-recipient" {
			t.Fatalf("fourth send in a new format: status %d body %s, want 429 by otp-send-recipient", r.status, r.raw)
		}
	})
}

func TestAuthentication(t *testing.T) {
	in := start(t, "")
	svc := tokens.NewService(testKey)
	expired, err := svc.Issue(tokens.ScopeAdmin, "old", time.Minute, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := tokens.NewService(mustKey(t, "another-signing-key-0123456789abcdef")).Issue(tokens.ScopeAdmin, "x", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	hs512, err := jwt.NewWithClaims(jwt.SigningMethodHS512, jwt.MapClaims{"scope": "admin", "exp": time.Now().Add(time.Hour).Unix(), "iss": "guardian"}).SignedString([]byte("whatever-key"))
	if err != nil {
		t.Fatal(err)
	}
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"scope": "admin", "exp": time.Now().Add(time.Hour).Unix(), "iss": "guardian"}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	checkBody := map[string]any{"flow": "login", "ip": "192.0.2.1"}
	tests := []struct {
		name       string
		method     string
		path       string
		token      string
		body       any
		wantStatus int
		wantCode   string
	}{
		{"no token", "POST", "/v1/check", "", checkBody, 401, "unauthorized"},
		{"garbage", "POST", "/v1/check", "not-a-jwt", checkBody, 401, "unauthorized"},
		{"expired", "GET", "/v1/rules", expired, nil, 401, "unauthorized"},
		{"other key", "GET", "/v1/rules", otherKey, nil, 401, "unauthorized"},
		{"alg HS512", "GET", "/v1/rules", hs512, nil, 401, "unauthorized"},
		{"alg none", "GET", "/v1/rules", none, nil, 401, "unauthorized"},
		{"check scope on admin", "GET", "/v1/rules", in.checkToken, nil, 403, "forbidden"},
		{"check scope on reset", "POST", "/v1/accounts/reset", in.checkToken, map[string]any{"account": "x"}, 403, "forbidden"},
		{"admin scope on check", "POST", "/v1/check", in.adminToken, checkBody, 200, ""},
		{"check scope on check", "POST", "/v1/check", in.checkToken, checkBody, 200, ""},
		{"healthz without token", "GET", "/healthz", "", nil, 200, ""},
		{"readyz without token", "GET", "/readyz", "", nil, 200, ""},
		{"metrics without token", "GET", "/metrics", "", nil, 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := in.do(t, tt.method, tt.path, tt.token, tt.body)
			if r.status != tt.wantStatus {
				t.Fatalf("status %d, want %d (body %s)", r.status, tt.wantStatus, r.raw)
			}
			if tt.wantCode != "" {
				if got := errorCode(t, r); got != tt.wantCode {
					t.Fatalf("code %q, want %q", got, tt.wantCode)
				}
			}
		})
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	in := start(t, "")
	huge := `{"flow":"login","ip":"192.0.2.1","account":"` + strings.Repeat("a", 70<<10) + `"}`
	tests := []struct {
		name       string
		body       any
		wantStatus int
		wantCode   string
	}{
		{"malformed JSON", `{"flow": "login",`, 400, "invalid_json"},
		{"not an object", `["login"]`, 400, "invalid_json"},
		{"empty body", ``, 400, "invalid_json"},
		{"two values", `{"flow":"login","ip":"192.0.2.1"} {}`, 400, "invalid_json"},
		{"unknown field", `{"flow":"login","ip":"192.0.2.1","acount":"x"}`, 400, "unknown_field"},
		{"wrong type", `{"flow":"login","ip":"192.0.2.1","cost":"1"}`, 400, "invalid_field"},
		{"fractional cost", `{"flow":"login","ip":"192.0.2.1","cost":1.5}`, 400, "invalid_field"},
		{"missing flow", `{"ip":"192.0.2.1"}`, 400, "missing_field"},
		{"missing ip", `{"flow":"login"}`, 400, "missing_field"},
		{"unknown flow", `{"flow":"signup","ip":"192.0.2.1"}`, 400, "unknown_flow"},
		{"invalid ip", `{"flow":"login","ip":"300.1.1.1"}`, 400, "invalid_ip"},
		{"ip with zone", `{"flow":"login","ip":"fe80::1%eth0"}`, 400, "invalid_ip"},
		{"bad phone", `{"flow":"otp_send","ip":"192.0.2.1","recipient":"12ab"}`, 400, "invalid_recipient"},
		{"otp_send without recipient", `{"flow":"otp_send","ip":"192.0.2.1"}`, 400, "missing_field"},
		{"cost zero", `{"flow":"login","ip":"192.0.2.1","cost":0}`, 400, "invalid_field"},
		{"cost 1001", `{"flow":"login","ip":"192.0.2.1","cost":1001}`, 400, "invalid_field"},
		{"empty account", `{"flow":"login","ip":"192.0.2.1","account":""}`, 400, "invalid_field"},
		{"long account", `{"flow":"login","ip":"192.0.2.1","account":"` + strings.Repeat("b", 5000) + `"}`, 400, "invalid_field"},
		{"body over 64 KiB", huge, 413, "body_too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := in.check(t, tt.body)
			if r.status != tt.wantStatus {
				t.Fatalf("status %d, want %d (body %s)", r.status, tt.wantStatus, r.raw)
			}
			if got := errorCode(t, r); got != tt.wantCode {
				t.Fatalf("code %q, want %q (body %s)", got, tt.wantCode, r.raw)
			}
		})
	}
	// None of it spent anything: the IP every bad request named is untouched.
	r := in.check(t, map[string]any{"flow": "login", "account": "after", "ip": "192.0.2.1"})
	if got := num(limit(t, r, "login-ip")["remaining"]); got != 29 {
		t.Fatalf("login-ip remaining after bad requests = %d, want 29", got)
	}
	if r := in.do(t, "GET", "/healthz", "", nil); r.status != 200 {
		t.Fatalf("service down after bad input: %d", r.status)
	}
}

func TestReportOnceOnly(t *testing.T) {
	in := start(t, "")
	r := in.check(t, map[string]any{"flow": "login", "account": "heidi", "ip": "203.0.113.40"})
	id := str(r.body["attempt_id"])
	first := in.report(t, id, "success")
	if first.status != http.StatusOK || first.body["recorded"] != true || str(first.body["device_token"]) == "" {
		t.Fatalf("first report: %d %s, want 200 recorded with a device token", first.status, first.raw)
	}
	second := in.report(t, id, "failure")
	if second.status != http.StatusConflict || errorCode(t, second) != "already_reported" {
		t.Fatalf("second report: %d %s, want 409 already_reported", second.status, second.raw)
	}
	forged := in.report(t, id[:len(id)-2]+"AA", "success")
	if forged.status != http.StatusBadRequest || errorCode(t, forged) != "invalid_attempt" {
		t.Fatalf("forged report: %d %s, want 400 invalid_attempt", forged.status, forged.raw)
	}
	bad := in.report(t, id, "maybe")
	if bad.status != http.StatusBadRequest || errorCode(t, bad) != "invalid_field" {
		t.Fatalf("bad outcome: %d %s, want 400 invalid_field", bad.status, bad.raw)
	}
}

func TestReloadKeepsOldRulesWhenInvalid(t *testing.T) {
	in := start(t, budgetRules)
	writeFile(t, in.rulesPath, strings.Replace(budgetRules, "burst: 20", "burst: 3", 1))
	r := in.do(t, "POST", "/v1/rules/reload", in.adminToken, nil)
	if r.status != http.StatusOK {
		t.Fatalf("reload: %d %s", r.status, r.raw)
	}
	rs, _ := r.body["rules"].([]any)
	if len(rs) != 1 || num(rs[0].(map[string]any)["burst"]) != 3 {
		t.Fatalf("reloaded rules = %s, want budget with burst 3", r.raw)
	}
	writeFile(t, in.rulesPath, "version: 1\nrules:\n  - name: Bad Name\n    flows: [login]\n")
	r = in.do(t, "POST", "/v1/rules/reload", in.adminToken, nil)
	if r.status != http.StatusBadRequest || errorCode(t, r) != "invalid_rules" {
		t.Fatalf("invalid reload: %d %s, want 400 invalid_rules", r.status, r.raw)
	}
	msg := str(r.body["error"].(map[string]any)["message"])
	if !strings.Contains(msg, "rules.yaml:3:") {
		t.Fatalf("invalid reload message %q does not name the file and line", msg)
	}
	if err := os.Remove(in.rulesPath); err != nil {
		t.Fatal(err)
	}
	r = in.do(t, "POST", "/v1/rules/reload", in.adminToken, nil)
	if r.status != http.StatusBadRequest || errorCode(t, r) != "invalid_rules" {
		t.Fatalf("reload of a removed file: %d %s, want 400 invalid_rules", r.status, r.raw)
	}
	r = in.do(t, "GET", "/v1/rules", in.adminToken, nil)
	rs, _ = r.body["rules"].([]any)
	if len(rs) != 1 || num(rs[0].(map[string]any)["burst"]) != 3 || r.body["source"] != in.rulesPath {
		t.Fatalf("rules after refused reload = %s, want the previous set", r.raw)
	}
}

func TestAccountStatusAndReset(t *testing.T) {
	in := start(t, `version: 1
rules:
  - name: hard-stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 3
  - name: per-account
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1h
    burst: 10
`)
	status := func() response {
		return in.do(t, "GET", "/v1/accounts/status?account=ivan", in.adminToken, nil)
	}
	if r := status(); r.status != 200 || num(r.body["consecutive_failures"]) != 0 || r.body["blocked"] != false {
		t.Fatalf("status of an unknown account: %d %s, want zeros", r.status, r.raw)
	}
	req := map[string]any{"flow": "login", "account": "ivan", "ip": "203.0.113.50"}
	for range 3 {
		in.report(t, str(in.check(t, req).body["attempt_id"]), "failure")
	}
	r := in.check(t, req)
	if r.status != http.StatusTooManyRequests || r.body["decision"] != "block" || r.body["rule"] != "hard-stop" {
		t.Fatalf("after 3 failures: %d %s, want block by hard-stop", r.status, r.raw)
	}
	if r.header.Get("Retry-After") != "" || num(r.body["retry_after_ms"]) != 0 {
		t.Fatalf("block carries a retry: %v %s", r.header, r.raw)
	}
	if r := status(); num(r.body["consecutive_failures"]) != 3 || r.body["blocked"] != true {
		t.Fatalf("status at the hard stop: %s", r.raw)
	}
	if r := in.do(t, "POST", "/v1/accounts/reset", in.adminToken, map[string]any{"account": " IVAN "}); r.status != 200 || r.body["reset"] != true {
		t.Fatalf("reset: %d %s", r.status, r.raw)
	}
	if r := status(); num(r.body["consecutive_failures"]) != 0 || r.body["blocked"] != false {
		t.Fatalf("status after reset: %s", r.raw)
	}
	if r := in.check(t, req); r.status != http.StatusOK {
		t.Fatalf("check after reset: %d %s", r.status, r.raw)
	}
	if r := in.do(t, "GET", "/v1/accounts/status", in.adminToken, nil); r.status != 400 || errorCode(t, r) != "missing_field" {
		t.Fatalf("status without account: %d %s", r.status, r.raw)
	}
}

func TestUnknownPathsAndMethods(t *testing.T) {
	in := start(t, "")
	if r := in.do(t, "GET", "/v1/nothing", in.adminToken, nil); r.status != 404 || errorCode(t, r) != "not_found" {
		t.Fatalf("unknown path: %d %s", r.status, r.raw)
	}
	if r := in.do(t, "GET", "/v1/check", in.checkToken, nil); r.status != 405 || errorCode(t, r) != "method_not_allowed" {
		t.Fatalf("wrong method: %d %s", r.status, r.raw)
	}
}
