package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/logtest"
	"github.com/guardian-sec/guardian/internal/server"
	"github.com/guardian-sec/guardian/internal/tokens"
	"github.com/guardian-sec/guardian/internal/version"
)

// send makes one request with the given headers and returns the answer.
func send(t *testing.T, method, url, token, body string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

const oneCheckRules = `version: 1
rules:
  - name: login-ip-tight
    flows: [login]
    key: ip
    type: rate
    limit: 1
    per: 1h
    burst: 1
`

// TestRequestIDEndToEnd: a caller's X-Request-Id, or one guardian made, is
// on every answer (200, 429, 401, 404), in the log lines about the request,
// and in the decision log with the decision and the rule that decided.
func TestRequestIDEndToEnd(t *testing.T) {
	rulesPath := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, rulesPath, oneCheckRules)
	var logBuf, decisions logtest.Buffer
	srv, err := server.New(server.Config{
		Addr: "127.0.0.1:0", SigningKey: testKey, RulesPath: rulesPath,
		Logger:      slog.New(slog.NewJSONHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug})),
		DecisionLog: &decisions,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + srv.Addr()
	tok := mustToken(t, tokens.NewService(testKey), tokens.ScopeCheck)
	body := `{"flow":"login","ip":"198.51.100.7"}`
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"

	given := send(t, "POST", base+"/v1/check", tok, body, map[string]string{
		"X-Request-Id": "login-svc/42",
		"traceparent":  "00-" + traceID + "-00f067aa0ba902b7-01",
	})
	if given.StatusCode != 200 || given.Header.Get("X-Request-Id") != "login-svc/42" {
		t.Fatalf("check with an id: %d, X-Request-Id %q; want 200 and the id echoed", given.StatusCode, given.Header.Get("X-Request-Id"))
	}
	made := send(t, "POST", base+"/v1/check", tok, body, nil)
	madeID := made.Header.Get("X-Request-Id")
	if made.StatusCode != 429 || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(madeID) {
		t.Fatalf("check without an id: %d, X-Request-Id %q; want 429 and a fresh id", made.StatusCode, madeID)
	}
	bad := send(t, "POST", base+"/v1/check", tok, body, map[string]string{"X-Request-Id": "has a space"})
	if id := bad.Header.Get("X-Request-Id"); id == "has a space" || len(id) != 32 {
		t.Errorf("an id that is not visible ASCII was echoed as %q, want a fresh one", id)
	}
	long := send(t, "POST", base+"/v1/check", tok, body, map[string]string{"X-Request-Id": strings.Repeat("x", 129)})
	if id := long.Header.Get("X-Request-Id"); len(id) != 32 {
		t.Errorf("an id of 129 characters was answered with %q, want a fresh one", id)
	}
	for _, r := range []*http.Response{
		send(t, "POST", base+"/v1/check", "", body, map[string]string{"X-Request-Id": "no-token"}),
		send(t, "GET", base+"/nowhere", "", "", map[string]string{"X-Request-Id": "lost"}),
		send(t, "GET", base+"/healthz", "", "", map[string]string{"X-Request-Id": "probe"}),
	} {
		if got, want := r.Header.Get("X-Request-Id"), r.Request.Header.Get("X-Request-Id"); got != want {
			t.Errorf("%s %s (%d): X-Request-Id %q, want %q", r.Request.Method, r.Request.URL.Path, r.StatusCode, got, want)
		}
	}

	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	// The log: the request lines carry the ids, and the caller's trace.
	logged := map[string]map[string]any{}
	for _, l := range logtest.JSONLines(t, logBuf.String()) {
		if l["msg"] == "request" {
			logged[str(l["request_id"])] = l
		}
	}
	for _, id := range []string{"login-svc/42", madeID, "no-token", "lost"} {
		if logged[id] == nil {
			t.Errorf("no log line about request %q in\n%s", id, logBuf.String())
		}
	}
	if l := logged["login-svc/42"]; l != nil && (l["trace_id"] != traceID || num(l["status"]) != 200) {
		t.Errorf("log line of the traced request = %v, want trace_id %s and status 200", l, traceID)
	}
	if l := logged[madeID]; l != nil && num(l["status"]) != 429 {
		t.Errorf("log line of the slowed request = %v, want status 429", l)
	}

	// The decision log: each check with its request id, decision and rule.
	byID := map[string]map[string]any{}
	for _, l := range logtest.JSONLines(t, decisions.String()) {
		byID[str(l["request_id"])] = l
	}
	if l := byID["login-svc/42"]; l == nil || l["decision"] != "allow" || l["rule"] != nil {
		t.Errorf("decision log line of the allowed check = %v, want decision allow and no rule", l)
	}
	if l := byID[madeID]; l == nil || l["decision"] != "slow" || l["rule"] != "login-ip-tight" {
		t.Errorf("decision log line of the slowed check = %v, want decision slow by login-ip-tight", l)
	}
}

// series returns the value of the series of metric name whose labels
// include every one of labels, from Prometheus text; -1 when absent.
func series(text, name string, labels ...string) float64 {
	re := regexp.MustCompile(`(?m)^` + name + `\{([^}]*)\} (\S+)$`)
next:
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		for i := 0; i+1 < len(labels); i += 2 {
			if !strings.Contains(m[1], labels[i]+`="`+labels[i+1]+`"`) {
				continue next
			}
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		return v
	}
	return -1
}

// TestHTTPMetrics: requests are counted by route template and status, 401s
// included, unknown paths as "other"; build_info names the binary; a token
// that expires within a day is counted on every use and logged once.
func TestHTTPMetrics(t *testing.T) {
	var logBuf logtest.Buffer
	srv := serve(t, server.Config{Addr: "127.0.0.1:0", SigningKey: testKey,
		Logger: slog.New(slog.NewJSONHandler(&logBuf, nil))})
	base := "http://" + srv.Addr()
	svc := tokens.NewService(testKey)
	// A 720h token warns in its last 72 hours (a tenth of its life), and
	// raises nothing when it is used as soon as it is minted.
	expiring, err := svc.Issue(tokens.ScopeCheck, "login-svc", 720*time.Hour, time.Now().Add(-649*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	lasting, err := svc.Issue(tokens.ScopeAdmin, "ops", 720*time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	body := `{"flow":"login","ip":"198.51.100.7"}`
	for range 3 {
		send(t, "POST", base+"/v1/check", "", body, nil)
	}
	send(t, "POST", base+"/v1/report", "not-a-token", `{}`, nil)
	send(t, "GET", base+"/v1/rules", "", "", nil)
	send(t, "GET", base+"/v1/rules", lasting, "", nil)
	send(t, "GET", base+"/no/such/path", "", "", nil)
	send(t, "GET", base+"/v1/accounts/alice", "", "", nil)
	for range 4 {
		send(t, "POST", base+"/v1/check", expiring, body, nil)
	}

	r, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(r.Body)
	r.Body.Close()
	text := string(raw)
	const m = "guardian_http_requests_total"
	for _, tt := range []struct {
		route, code string
		want        float64
	}{
		{"/v1/check", "401", 3},
		{"/v1/report", "401", 1},
		{"/v1/rules", "401", 1},
		{"/v1/rules", "200", 1},
		{"/v1/check", "200", 4},
		{"other", "404", 2},
	} {
		if got := series(text, m, "route", tt.route, "code", tt.code); got != tt.want {
			t.Errorf(`%s{route=%q,code=%q} = %v, want %v`, m, tt.route, tt.code, got, tt.want)
		}
	}
	v := version.Get()
	if got := series(text, "guardian_build_info", "version", v.Version, "revision", v.Revision, "goversion", v.GoVersion); got != 1 {
		t.Errorf("guardian_build_info{version=%q,revision=%q,goversion=%q} = %v, want 1", v.Version, v.Revision, v.GoVersion, got)
	}
	if got := series(text, "guardian_expiring_token_requests_total", "scope", "check"); got != 4 {
		t.Errorf(`guardian_expiring_token_requests_total{scope="check"} = %v, want 4`, got)
	}
	if got := series(text, "guardian_expiring_token_requests_total", "scope", "admin"); got != -1 {
		t.Errorf("a 720h token used at once was counted as expiring: %v", got)
	}
	warned := 0
	for _, l := range logtest.JSONLines(t, logBuf.String()) {
		if strings.HasPrefix(str(l["msg"]), "service token expires soon") {
			warned++
			if l["subject"] != "login-svc" || l["scope"] != "check" || l["request_id"] == nil {
				t.Errorf("expiry warning %v, want subject, scope and request_id", l)
			}
		}
	}
	if warned != 1 {
		t.Errorf("%d expiry warnings for 4 uses within a minute, want 1", warned)
	}
}
