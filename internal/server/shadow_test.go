package server_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/server"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/testclock"
)

// promotionRules has rule watch in shadow mode beside a loose enforced rule;
// promote turns watch to enforce and changes nothing else.
const promotionRules = `version: 1
rules:
  - name: loose
    flows: [login]
    key: account
    type: rate
    limit: 100
    per: 1m
  - name: watch
    flows: [login]
    key: ip
    type: rate
    limit: 1
    per: 1h
    burst: 3
    mode: shadow
`

func promote(yaml string) string { return strings.Replace(yaml, "mode: shadow", "mode: enforce", 1) }

// shadowList returns the rules and decisions of a check's shadow list.
func shadowList(r response) []string {
	var out []string
	items, _ := r.body["shadow"].([]any)
	for _, it := range items {
		m, _ := it.(map[string]any)
		out = append(out, str(m["rule"])+":"+str(m["decision"]))
	}
	return out
}

// shadowReport returns GET /v1/shadow by rule.
func shadowReport(t *testing.T, in *instance) map[string]map[string]any {
	t.Helper()
	r := in.do(t, http.MethodGet, "/v1/shadow", in.adminToken, nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/shadow: %d %s", r.status, r.raw)
	}
	out := map[string]map[string]any{}
	rs, _ := r.body["rules"].([]any)
	for _, x := range rs {
		m, _ := x.(map[string]any)
		out[str(m["rule"])] = m
	}
	return out
}

// TestPromotionKeepsTheShadowState promotes a shadow rule that has been
// counting: the store key of a rule does not depend on its mode, so the
// first check after the reload is decided by the bucket the shadow rule
// already spent, not by a full one.
func TestPromotionKeepsTheShadowState(t *testing.T) {
	in := start(t, promotionRules)
	req := map[string]any{"flow": "login", "account": "mallory", "ip": "203.0.113.50"}
	for i := range 3 {
		r := in.check(t, req)
		if r.status != http.StatusOK || len(shadowList(r)) != 0 {
			t.Fatalf("check %d: status %d shadow %v, want 200 and an empty list", i, r.status, shadowList(r))
		}
	}
	r := in.check(t, req)
	if got := shadowList(r); r.status != http.StatusOK || len(got) != 1 || got[0] != "watch:slow" {
		t.Fatalf("fourth check: status %d shadow %v; want 200 (shadow never decides) and watch:slow", r.status, got)
	}
	rep := shadowReport(t, in)["watch"]
	if num(rep["evaluated"]) != 4 || num(rep["would_slow"]) != 1 {
		t.Fatalf("GET /v1/shadow watch = %v, want 4 evaluated, 1 would slow", rep)
	}
	keys, _ := rep["top_keys"].([]any)
	if len(keys) != 1 || strings.Contains(fmt.Sprint(keys), "203.0.113") {
		t.Fatalf("top keys %v, want one hashed key", keys)
	}

	writeFile(t, in.rulesPath, promote(promotionRules))
	if r := in.do(t, http.MethodPost, "/v1/rules/reload", in.adminToken, nil); r.status != http.StatusOK {
		t.Fatalf("reload: %d %s", r.status, r.raw)
	}
	r = in.check(t, req)
	if r.status != http.StatusTooManyRequests || str(r.body["rule"]) != "watch" || len(shadowList(r)) != 0 {
		t.Fatalf("first check after promotion: status %d body %s; want 429 by watch, its bucket spent while in shadow", r.status, r.raw)
	}
	if got := num(r.body["retry_after_ms"]); got < 59*60*1000 {
		t.Fatalf("retry_after_ms = %d, want about an hour: the shadow spends count", got)
	}
	// Another address has its own full bucket: the rule limits, it does not
	// wall everybody off.
	other := in.check(t, map[string]any{"flow": "login", "account": "mallory", "ip": "203.0.113.51"})
	if other.status != http.StatusOK {
		t.Fatalf("another address: status %d, want 200", other.status)
	}
	// GET /v1/shadow keeps watch's last shadow tallies, marked promoted.
	rep = shadowReport(t, in)["watch"]
	if num(rep["evaluated"]) != 4 || num(rep["would_slow"]) != 1 || str(rep["promoted_at"]) == "" {
		t.Fatalf("GET /v1/shadow watch after its promotion = %v, want its 4 evaluations, 1 would slow, and promoted_at", rep)
	}
}

// TestPromotedTalliesLastADay promotes a shadow rule on a test clock: GET
// /v1/shadow shows its last tallies with promoted_at through later reloads,
// for 24 hours after the promotion, and never counts on.
func TestPromotedTalliesLastADay(t *testing.T) {
	clock := testclock.New(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	in := startConfig(t, promotionRules, server.Config{Now: clock.Now, Store: memstore.New(memstore.Config{Now: clock.Now})})
	req := map[string]any{"flow": "login", "account": "mallory", "ip": "203.0.113.50"}
	for range 5 {
		in.check(t, req)
	}
	clock.Advance(time.Hour)
	promotedAt := clock.Now()
	writeFile(t, in.rulesPath, promote(promotionRules))
	if r := in.do(t, http.MethodPost, "/v1/rules/reload", in.adminToken, nil); r.status != http.StatusOK {
		t.Fatalf("reload: %d %s", r.status, r.raw)
	}
	for range 3 {
		in.check(t, req)
	}
	want := func(when string, listed bool) {
		t.Helper()
		rep, ok := shadowReport(t, in)["watch"]
		if ok != listed {
			t.Fatalf("%s: watch listed %v (%v), want %v", when, ok, rep, listed)
		}
		if listed && (num(rep["evaluated"]) != 5 || num(rep["would_slow"]) != 2 || str(rep["promoted_at"]) != promotedAt.Format(time.RFC3339)) {
			t.Fatalf("%s: watch = %v, want 5 evaluated, 2 would slow, promoted_at %s", when, rep, promotedAt.Format(time.RFC3339))
		}
	}
	want("after the promotion", true)
	// A later reload that changes the promoted rule keeps the tallies.
	clock.Advance(12 * time.Hour)
	writeFile(t, in.rulesPath, strings.Replace(promote(promotionRules), "burst: 3", "burst: 4", 1))
	if r := in.do(t, http.MethodPost, "/v1/rules/reload", in.adminToken, nil); r.status != http.StatusOK {
		t.Fatalf("reload: %d %s", r.status, r.raw)
	}
	clock.Set(promotedAt.Add(24*time.Hour - time.Second))
	want("a second short of 24 hours", true)
	clock.Set(promotedAt.Add(24 * time.Hour))
	want("24 hours on", false)
}

// TestShadowReportCountsWhatTheChecksSaid sends random traffic through the
// HTTP API and checks that GET /v1/shadow and the shadow trip metric equal
// a tally of the checks' own shadow lists, evaluations counted from the
// rules independently.
func TestShadowReportCountsWhatTheChecksSaid(t *testing.T) {
	const yaml = `version: 1
rules:
  - name: acct
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1h
    burst: 4
  - name: s-ip
    flows: [login, otp_send]
    key: ip
    ipv4_prefix: 24
    type: rate
    limit: 1
    per: 1h
    burst: 5
    mode: shadow
  - name: s-pair
    flows: [login]
    key: account+ip
    type: rate
    limit: 1
    per: 1h
    burst: 2
    action: challenge
    mode: shadow
  - name: s-recipient
    flows: [otp_send]
    key: recipient
    type: rate
    limit: 1
    per: 1h
    burst: 1
    action: block
    mode: shadow
  - name: s-stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 3
    mode: shadow
`
	in := start(t, yaml)
	rng := rand.New(rand.NewPCG(3, 5))
	accounts := []string{"", "ann", "ANN", "ben", "cat"}
	ips := []string{"192.0.2.1", "192.0.2.200", "198.51.100.3", "2001:db8::1", "2001:db8:0:1::1"}
	recipients := []string{"+15550100000", "+15550100001", "x@example.com"}

	type tally struct{ evaluated, slow, block, challenge int64 }
	want := map[string]*tally{"s-ip": {}, "s-pair": {}, "s-recipient": {}, "s-stop": {}}
	var pending []string
	for range 300 {
		if len(pending) > 0 && rng.IntN(3) == 0 {
			outcome := "failure"
			if rng.IntN(4) == 0 {
				outcome = "success"
			}
			if r := in.report(t, pending[0], outcome); r.status != http.StatusOK {
				t.Fatalf("report: %d %s", r.status, r.raw)
			}
			pending = pending[1:]
			continue
		}
		flow := []string{"login", "login", "otp_send"}[rng.IntN(3)]
		account, ip := accounts[rng.IntN(len(accounts))], ips[rng.IntN(len(ips))]
		req := map[string]any{"flow": flow, "ip": ip}
		if account != "" {
			req["account"] = account
		}
		if flow == "otp_send" {
			req["recipient"] = recipients[rng.IntN(len(recipients))]
		}
		r := in.check(t, req)
		if r.status != http.StatusOK && r.status != http.StatusTooManyRequests {
			t.Fatalf("check %v: %d %s", req, r.status, r.raw)
		}
		if id := str(r.body["attempt_id"]); id != "" {
			pending = append(pending, id)
		}
		// Which shadow rules apply, from the rules file above.
		want["s-ip"].evaluated++
		if flow == "login" && account != "" {
			want["s-pair"].evaluated++
			want["s-stop"].evaluated++
		}
		if flow == "otp_send" {
			want["s-recipient"].evaluated++
		}
		for _, s := range shadowList(r) {
			rule, action, _ := strings.Cut(s, ":")
			switch action {
			case "slow":
				want[rule].slow++
			case "block":
				want[rule].block++
			case "challenge":
				want[rule].challenge++
			}
		}
	}

	got := shadowReport(t, in)
	metrics := in.do(t, http.MethodGet, "/metrics", "", nil)
	for rule, w := range want {
		g := got[rule]
		if num(g["evaluated"]) != w.evaluated || num(g["would_slow"]) != w.slow || num(g["would_block"]) != w.block || num(g["would_challenge"]) != w.challenge {
			t.Errorf("%s: GET /v1/shadow %v; the checks said %+v", rule, g, *w)
		}
		if w.slow+w.block+w.challenge == 0 {
			t.Errorf("%s never tripped: the traffic proves nothing about it", rule)
		}
		for action, n := range map[string]int64{"slow": w.slow, "block": w.block, "challenge": w.challenge} {
			if got := metricValue(string(metrics.raw), rule, action); got != n {
				t.Errorf(`guardian_rule_trips_total{rule=%q,mode="shadow",action=%q} = %d, want %d`, rule, action, got, n)
			}
		}
	}
}

// metricValue reads guardian_rule_trips_total for a shadow rule and action
// from Prometheus text; an absent series is 0.
func metricValue(text, rule, action string) int64 {
	re := regexp.MustCompile(`(?m)^guardian_rule_trips_total\{([^}]*)\} (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		labels := m[1]
		if strings.Contains(labels, `rule="`+rule+`"`) && strings.Contains(labels, `mode="shadow"`) && strings.Contains(labels, `action="`+action+`"`) {
			v, _ := strconv.ParseFloat(m[2], 64)
			return int64(v)
		}
	}
	return 0
}
