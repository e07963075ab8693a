package scenarios_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/server"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/testclock"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// t0 is when every scenario starts.
var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// day is 24 hours of the injected clock.
const day = 24 * time.Hour

// signingKey is the key of every guardian a scenario starts.
var signingKey = func() secret.Key {
	k, err := secret.New([]byte("guardian-scenario-signing-key-0123456789"))
	if err != nil {
		panic(err)
	}
	return k
}()

// guardian is one running instance and the clock it, and its store, read.
type guardian struct {
	clock      *testclock.Clock
	base       string
	client     *http.Client
	checkToken string
	adminToken string
}

// start runs guardian with the built-in rules, or with rulesYAML when it is
// not empty, on a loopback port, stopped when the test ends.
func start(t *testing.T, rulesYAML string) *guardian {
	t.Helper()
	clock := testclock.New(t0)
	cfg := server.Config{
		Addr:       "127.0.0.1:0",
		SigningKey: signingKey,
		Store:      memstore.New(memstore.Config{Now: clock.Now}),
		Now:        clock.Now,
		Logger:     slog.New(slog.DiscardHandler),
	}
	if rulesYAML != "" {
		cfg.RulesPath = filepath.Join(t.TempDir(), "rules.yaml")
		if err := os.WriteFile(cfg.RulesPath, []byte(rulesYAML), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	t.Cleanup(func() {
		client.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	// Service tokens outlive every clock advance a scenario makes.
	svc := tokens.NewService(signingKey)
	issue := func(scope tokens.Scope) string {
		tok, err := svc.Issue(scope, "scenario", 365*day, t0)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	return &guardian{
		clock:      clock,
		base:       "http://" + srv.Addr(),
		client:     client,
		checkToken: issue(tokens.ScopeCheck),
		adminToken: issue(tokens.ScopeAdmin),
	}
}

// builtinRules returns the built-in rules file, for scenarios that add to it.
func builtinRules(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../internal/rules/defaults.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// attempt is a check request as an auth service sends it.
type attempt struct {
	Flow        string `json:"flow"`
	Account     string `json:"account,omitempty"`
	IP          string `json:"ip"`
	Recipient   string `json:"recipient,omitempty"`
	DeviceToken string `json:"device_token,omitempty"`
	// SecretFingerprint is the auth service's keyed hash of the password
	// tried (client.Fingerprint).
	SecretFingerprint string `json:"secret_fingerprint,omitempty"`
	// ChallengePassed says the end user solved a challenge.
	ChallengePassed bool `json:"challenge_passed,omitempty"`
}

// limit is one entry of a check's or a status's limits.
type limit struct {
	Rule      string `json:"rule"`
	Remaining int64  `json:"remaining"`
	ResetMS   int64  `json:"reset_ms"`
}

// decision is the answer to a check.
type decision struct {
	status       int
	header       http.Header
	Decision     string  `json:"decision"`
	Rule         string  `json:"rule"`
	RetryAfterMS int64   `json:"retry_after_ms"`
	AttemptID    string  `json:"attempt_id"`
	Degraded     bool    `json:"degraded"`
	RepeatGuess  bool    `json:"repeat_guess"`
	RepeatCapped bool    `json:"repeat_capped"`
	Trust        string  `json:"trust"`
	Limits       []limit `json:"limits"`
}

func (d decision) String() string {
	return fmt.Sprintf("%d %s by %q retry %dms limits %+v", d.status, d.Decision, d.Rule, d.RetryAfterMS, d.Limits)
}

// remaining is what rule has left after the check, failing if it did not
// apply.
func (d decision) remaining(t *testing.T, rule string) int64 {
	t.Helper()
	for _, l := range d.Limits {
		if l.Rule == rule {
			return l.Remaining
		}
	}
	t.Fatalf("rule %s did not apply: %v", rule, d)
	return 0
}

// status is the answer to GET /v1/accounts/status.
type status struct {
	ConsecutiveFailures int64   `json:"consecutive_failures"`
	Blocked             bool    `json:"blocked"`
	NextAllowedMS       int64   `json:"next_allowed_ms"`
	Limits              []limit `json:"limits"`
	RememberedGuesses   int64   `json:"remembered_guesses"`
	// Networks are the account's familiar networks as checks from there
	// find them.
	Networks []networkStatus `json:"networks"`
}

// networkStatus is one familiar network of an account's status.
type networkStatus struct {
	Network             string `json:"network"`
	ConsecutiveFailures int64  `json:"consecutive_failures"`
	Blocked             bool   `json:"blocked"`
}

// apiError is the contract's error body.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// do sends body as JSON (nil: no body) and decodes the answer into out.
func (g *guardian) do(t *testing.T, method, path, token string, body, out any) (int, http.Header) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, g.base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := g.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("%s %s: %d %q: %v", method, path, resp.StatusCode, raw, err)
	}
	return resp.StatusCode, resp.Header
}

// check asks guardian about a.
func (g *guardian) check(t *testing.T, a attempt) decision {
	t.Helper()
	var d decision
	d.status, d.header = g.do(t, http.MethodPost, "/v1/check", g.checkToken, a, &d)
	if d.status != http.StatusOK && d.status != http.StatusTooManyRequests {
		t.Fatalf("check %+v: status %d", a, d.status)
	}
	return d
}

// checkError sends a check guardian must refuse, and returns the status and
// error.
func (g *guardian) checkError(t *testing.T, a attempt) (int, apiError) {
	t.Helper()
	var e apiError
	code, _ := g.do(t, http.MethodPost, "/v1/check", g.checkToken, a, &e)
	return code, e
}

// report tells guardian how the attempt behind d went, and returns the
// device token a success earned.
func (g *guardian) report(t *testing.T, d decision, outcome string) string {
	t.Helper()
	if d.AttemptID == "" {
		t.Fatalf("reporting a check without attempt id: %v", d)
	}
	var out struct {
		Recorded    bool   `json:"recorded"`
		DeviceToken string `json:"device_token"`
	}
	code, _ := g.do(t, http.MethodPost, "/v1/report", g.checkToken, map[string]string{"attempt_id": d.AttemptID, "outcome": outcome}, &out)
	if code != http.StatusOK || !out.Recorded {
		t.Fatalf("report %s: status %d", outcome, code)
	}
	return out.DeviceToken
}

// fail is one wrong password: the check, and a failure report when it was
// allowed.
func (g *guardian) fail(t *testing.T, a attempt) decision {
	t.Helper()
	d := g.check(t, a)
	if d.AttemptID != "" {
		g.report(t, d, "failure")
	}
	return d
}

// login is the real user logging in: the check must allow, and the success
// earns a device token, which login returns.
func (g *guardian) login(t *testing.T, a attempt) string {
	t.Helper()
	d := g.check(t, a)
	if d.Decision != "allow" {
		t.Fatalf("login %+v: %v, want allow", a, d)
	}
	tok := g.report(t, d, "success")
	if tok == "" {
		t.Fatal("a successful login earned no device token")
	}
	return tok
}

// status reads the account's status.
func (g *guardian) status(t *testing.T, account string) status {
	t.Helper()
	var st status
	code, _ := g.do(t, http.MethodGet, "/v1/accounts/status?account="+url.QueryEscape(account), g.adminToken, nil, &st)
	if code != http.StatusOK {
		t.Fatalf("status: %d", code)
	}
	return st
}

// reset lifts the account's hard stop, as after a verified reset.
func (g *guardian) reset(t *testing.T, account string) {
	t.Helper()
	var out struct {
		Reset bool `json:"reset"`
	}
	if code, _ := g.do(t, http.MethodPost, "/v1/accounts/reset", g.adminToken, map[string]string{"account": account}, &out); code != http.StatusOK || !out.Reset {
		t.Fatalf("reset: %d", code)
	}
}

// Durations of the built-in rules, in the milliseconds guardian answers in.
const (
	minuteMS = int64(time.Minute / time.Millisecond)
	holdMS   = int64(90 * day / time.Millisecond)
)
