package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/rules"
)

// peerFixture is two rounds with round figures: guardian does 6,000 and
// 5,000 decisions a second against the envoy service's 4,000, at 40 and
// 60 µs of Redis CPU per decision against 100; under three limits it does
// 8,000 a second at 30 µs, then 4,000 at 60.
func peerFixture() []peerRound {
	side := func(decisions uint64, svcCPU, redisCPU, p99 float64) peerFigures {
		return peerFigures{
			Closed: peerPhase{Decisions: decisions, Seconds: 10, ServiceCPU: svcCPU, RedisCPU: redisCPU, Commands: int64(decisions) * 7, Scripts: int64(decisions)},
			Open:   peerPhase{Decisions: 20_000, Seconds: 10, P99: p99, P50: 0.5, Denied: 200},
		}
	}
	return []peerRound{
		{Sides: [peerSides]peerFigures{sideGuardian: side(60_000, 3.0, 2.4, 3), sideEnvoy: side(40_000, 8.0, 4.0, 4), sideThree: side(80_000, 3.0, 2.4, 2)}},
		{Sides: [peerSides]peerFigures{sideGuardian: side(50_000, 3.0, 3.0, 5), sideEnvoy: side(40_000, 8.0, 4.0, 4), sideThree: side(40_000, 3.0, 2.4, 2)}},
	}
}

func row(t *testing.T, rows []peerRow, name string) peerRow {
	t.Helper()
	for _, r := range rows {
		if r.Figure == name {
			return r
		}
	}
	t.Fatalf("no row %q", name)
	return peerRow{}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestPeerTableRatiosAndTargets(t *testing.T) {
	rows := peerTable(peerFixture())

	closed := row(t, rows, "closed-loop decisions/s")
	if g := closed.Guardian; !near(g.Value.Lo, 5000) || !near(g.Value.Hi, 6000) || !near(closed.Envoy.Lo, 4000) || !near(closed.Envoy.Hi, 4000) {
		t.Errorf("closed-loop spans = %+v, %+v", g.Value, closed.Envoy)
	}
	if g := closed.Guardian; !near(g.Ratio.Lo, 1.25) || !near(g.Ratio.Hi, 1.5) || g.Met != 1 || closed.Rounds != 2 {
		t.Errorf("closed-loop ratio %+v met %d of %d, want 1.25–1.5, met 1 of 2", g.Ratio, g.Met, closed.Rounds)
	}
	if th := closed.Three; !near(th.Ratio.Lo, 1) || !near(th.Ratio.Hi, 2) || th.Target != 0 || th.Met != 0 {
		t.Errorf("closed-loop three limits = %+v, want ratios 1–2 and no target", th)
	}

	// 2.4 s and 3.0 s over 60,000 and 50,000 decisions: 40 and 60 µs,
	// against 100 µs: ratios 0.4 and 0.6, the built-in rules' target (≤
	// 1.0) met in both rounds; three limits, 2.4 s over 80,000 and 40,000:
	// 30 and 60 µs, its target (≤ 0.5) met once.
	rc := row(t, rows, "Redis CPU per decision")
	if g := rc.Guardian; !near(g.Value.Lo, 40) || !near(g.Value.Hi, 60) || !near(rc.Envoy.Lo, 100) {
		t.Errorf("Redis CPU spans = %+v, %+v", g.Value, rc.Envoy)
	}
	if g := rc.Guardian; !near(g.Ratio.Lo, 0.4) || !near(g.Ratio.Hi, 0.6) || g.Met != 2 || !rc.AtMost || g.Target != 1 {
		t.Errorf("Redis CPU row = %+v", rc)
	}
	if th := rc.Three; !near(th.Value.Lo, 30) || !near(th.Value.Hi, 60) || !near(th.Ratio.Lo, 0.3) || !near(th.Ratio.Hi, 0.6) || th.Target != 0.5 || th.Met != 1 {
		t.Errorf("Redis CPU, three limits = %+v, want 30–60 µs, ratios 0.3–0.6, ≤ 0.5 met once", th)
	}

	svc := row(t, rows, "service CPU per decision")
	if g := svc.Guardian; !near(g.Ratio.Lo, 50.0/200) || !near(g.Ratio.Hi, 60.0/200) || g.Met != 2 {
		t.Errorf("service CPU row = %+v, want ratios 0.25–0.3 met in both rounds", svc)
	}

	p99 := row(t, rows, "open p99")
	if g := p99.Guardian; !near(g.Ratio.Lo, 0.75) || !near(g.Ratio.Hi, 1.25) || g.Met != 1 {
		t.Errorf("open p99 row = %+v", p99)
	}

	if calls := row(t, rows, "Redis calls per decision (scripts, or commands)"); !near(calls.Guardian.Value.Lo, 1) {
		t.Errorf("script calls per decision = %+v, want 1", calls.Guardian)
	}
	if d := row(t, rows, "denied share"); !near(d.Guardian.Value.Lo, 200.0/float64(60_000+20_000)) {
		t.Errorf("denied share = %+v", d.Guardian)
	}
	if info := row(t, rows, "open p50"); info.Guardian.Target != 0 || info.Guardian.Met != 0 || targetText(&info, &info.Guardian) != "" {
		t.Errorf("an information row has a target: %+v", info)
	}
}

// TestFloorRuns: each floor runs one decision a call, then its guardian
// side's grouping, when that is more than one.
func TestFloorRuns(t *testing.T) {
	r := peerFixture()[0]
	r.Sides[sideGuardian].Closed.Scripts = int64(r.Sides[sideGuardian].Closed.Decisions / 7)
	r.Sides[sideThree].Closed.Scripts = int64(r.Sides[sideThree].Closed.Decisions)
	var got []string
	for _, run := range floorRuns(&r) {
		got = append(got, fmt.Sprintf("%s %d", run.floor.Name, run.group))
	}
	if want := []string{"built-in rules 1", "built-in rules 7", "three limits 1"}; !slices.Equal(got, want) {
		t.Errorf("floorRuns with the built-in side at 7 a call and three limits at 1 = %q, want %q", got, want)
	}
}

func TestPeerTargetText(t *testing.T) {
	cases := []struct {
		r    peerRow
		want string
	}{
		{peerRow{Three: versus{Target: 0.5, Met: 2}, AtMost: true, Rounds: 2}, "≤ 0.5× — met"},
		{peerRow{Three: versus{Target: 1.5, Met: 1}, Rounds: 2}, "≥ 1.5× — met in 1 of 2 rounds"},
		{peerRow{Three: versus{Target: 1, Met: 0}, AtMost: true, Rounds: 3}, "≤ 1.0× — not met"},
	}
	for _, c := range cases {
		if got := targetText(&c.r, &c.r.Three); got != c.want {
			t.Errorf("targetText(%+v) = %q, want %q", c.r, got, c.want)
		}
	}
	// A ratio over zero meets nothing.
	if meets(math.NaN(), 0.5, true) {
		t.Error("NaN meets a target")
	}
}

func TestFormatFigure(t *testing.T) {
	cases := map[float64]string{5047: "5,047", 1234567: "1,234,567", 161: "161", 22.94: "22.9", 1.964: "1.96", 0.4123: "0.412", 0: "0.00"}
	for v, want := range cases {
		if got := formatFigure(v); got != want {
			t.Errorf("formatFigure(%v) = %q, want %q", v, got, want)
		}
	}
	if got := formatFigure(math.NaN()); got != "—" {
		t.Errorf("formatFigure(NaN) = %q", got)
	}
	if got := formatSpan(span{5047, 6015}); got != "5,047–6,015" {
		t.Errorf("formatSpan = %q", got)
	}
	if got := formatSpan(span{2.801, 2.799}); got != "2.80" {
		t.Errorf("formatSpan of one value = %q", got)
	}
}

func TestPeerOutput(t *testing.T) {
	res := &peerResult{Binary: "/x/ratelimit", RedisVersion: "7.0.15", Keys: 200_000, Conns: 16, Rate: 2000, Seconds: 10, Rounds: peerFixture()}
	res.Rows = peerTable(res.Rounds)
	var b bytes.Buffer
	printPeer(&b, res)
	out := b.String()
	for _, want := range []string{"200,000 distinct identities", "Redis CPU per decision (µs)", "40.0–60.0", "0.400–0.600", "≤ 1.0× — met", "5,000–6,000",
		"guardian, three limits", "30.0–60.0", "0.300–0.600", "≤ 0.5× — met in 1 of 2 rounds"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// The rows with no ratio (a figure that is zero on both sides) still
	// encode as JSON.
	j, err := json.Marshal(res)
	if err != nil {
		t.Fatalf("json: %v", err)
	}
	if !strings.Contains(string(j), `"ratio":{"lo":null,"hi":null}`) {
		t.Errorf("a ratio over zero is not null in %s", j)
	}
}

// TestPeerJSONHasThreeLimits: --json carries the three-limit side's rounds
// and its figures, ratios and target in every row.
func TestPeerJSONHasThreeLimits(t *testing.T) {
	res := &peerResult{Rounds: peerFixture()}
	res.Rows = peerTable(res.Rounds)
	j, err := json.Marshal(res)
	if err != nil {
		t.Fatalf("json: %v", err)
	}
	var got struct {
		Rounds []struct {
			Sides []struct {
				Closed struct{ Decisions uint64 } `json:"closed"`
			} `json:"sides"`
		} `json:"rounds"`
		Table []struct {
			Figure string `json:"figure"`
			Three  *struct {
				Value, Ratio struct{ Lo, Hi float64 }
				Target       float64 `json:"target"`
				Met          int     `json:"rounds_met"`
			} `json:"guardian_three_limits"`
		} `json:"table"`
	}
	if err := json.Unmarshal(j, &got); err != nil {
		t.Fatalf("json: %v", err)
	}
	if len(got.Rounds) != 2 || len(got.Rounds[0].Sides) != int(peerSides) || got.Rounds[0].Sides[sideThree].Closed.Decisions != 80_000 {
		t.Errorf("rounds = %+v, want two of %d sides, the three-limit side's first 80,000 decisions", got.Rounds, peerSides)
	}
	if len(got.Table) != len(peerFigureList) {
		t.Fatalf("%d rows, want %d", len(got.Table), len(peerFigureList))
	}
	for _, r := range got.Table {
		if r.Three == nil {
			t.Errorf("row %q has no guardian_three_limits", r.Figure)
			continue
		}
		if r.Figure == "Redis CPU per decision" {
			if th := r.Three; !near(th.Value.Lo, 30) || !near(th.Value.Hi, 60) || !near(th.Ratio.Lo, 0.3) || !near(th.Ratio.Hi, 0.6) || th.Target != 0.5 || th.Met != 1 {
				t.Errorf("Redis CPU, three limits = %+v, want 30–60 µs, ratios 0.3–0.6, ≤ 0.5 met once", *th)
			}
		}
	}
}

// TestPrintExtraRatios: each floor row gives its guardian side's Redis
// CPU per decision ÷ the floor's, and the floor's ÷ envoy's, round by
// round.
func TestPrintExtraRatios(t *testing.T) {
	// Round 1: guardian 40 µs, three limits 30, envoy 100; the floors 2 s
	// over 100,000 decisions, 20 µs: 2.00 and 1.50, each 0.200 of envoy's.
	res := &peerResult{Rounds: peerFixture()[:1], Extra: []extraRound{{
		Floor: []floorPhase{
			{Floor: builtinFloor.Name, Group: 7, Decisions: 100_000, Calls: 100_000 / 7, Seconds: 10, RedisCPU: 2},
			{Floor: threeFloor.Name, Group: 7, Decisions: 100_000, Calls: 100_000 / 7, Seconds: 10, RedisCPU: 2},
		},
	}}}
	var b bytes.Buffer
	printExtra(&b, res)
	for name, want := range map[string]string{
		"floor, built-in rules, 7 decision(s) a call: Redis CPU per decision (µs)": "20.0 2.00 (guardian) 0.200",
		"floor, three limits, 7 decision(s) a call: Redis CPU per decision (µs)":   "20.0 1.50 (guardian, three limits) 0.200",
	} {
		var got string
		for _, line := range strings.Split(b.String(), "\n") {
			if _, rest, ok := strings.Cut(line, name); ok {
				got = strings.Join(strings.Fields(rest), " ")
			}
		}
		if got != want {
			t.Errorf("%s: value and ratios = %q, want %q:\n%s", name, got, want, &b)
		}
	}
}

func TestPeerBodies(t *testing.T) {
	e := &peerTraffic{side: sideEnvoy, keys: 200_000, tag: "t"}
	for _, side := range []peerSide{sideGuardian, sideThree} {
		g := &peerTraffic{side: side, keys: 200_000, tag: "t"}
		if got, want := string(g.body(70_000, nil)), `{"flow":"login","account":"peer-70000-t@example.com","ip":"11.17.112.7"}`; got != want {
			t.Errorf("%s body = %s, want %s", side, got, want)
		}
	}
	var req struct {
		Domain      string `json:"domain"`
		Descriptors []struct {
			Entries []struct{ Key, Value string } `json:"entries"`
		} `json:"descriptors"`
	}
	if err := json.Unmarshal(e.body(70_000, nil), &req); err != nil {
		t.Fatalf("envoy body: %v", err)
	}
	if req.Domain != envoyDomain || len(req.Descriptors) != 3 || len(req.Descriptors[2].Entries) != 2 ||
		req.Descriptors[0].Entries[0].Value != "peer-70000-t@example.com" || req.Descriptors[1].Entries[0].Value != "11.17.112.7" {
		t.Errorf("envoy body = %+v", req)
	}
}

func TestPeerNeedsBinary(t *testing.T) {
	t.Setenv("ENVOY_RATELIMIT_BIN", "")
	if _, err := parseFlags([]string{"--peer"}, io.Discard); !errors.Is(err, errNoPeer) {
		t.Errorf("--peer without a binary: %v, want errNoPeer", err)
	}
	var stderr bytes.Buffer
	if code := run([]string{"--peer"}, io.Discard, &stderr); code == 0 || !strings.Contains(stderr.String(), "ENVOY_RATELIMIT_BIN") {
		t.Errorf("run --peer without a binary: exit %d, %q", code, stderr.String())
	}
	t.Setenv("ENVOY_RATELIMIT_BIN", "/somewhere/ratelimit")
	c, err := parseFlags([]string{"--peer"}, io.Discard)
	if err != nil || c.peerBin != "/somewhere/ratelimit" {
		t.Errorf("--peer with ENVOY_RATELIMIT_BIN: %q, %v", c.peerBin, err)
	}
	if c, _ := parseFlags(nil, io.Discard); c.peerBin != "" {
		t.Errorf("without --peer the peer binary is %q", c.peerBin)
	}
}

// TestThreeLimitRules: the three-limit side's rules are a valid rules
// file of exactly envoyConfig's three limits, every attempt counting.
func TestThreeLimitRules(t *testing.T) {
	set, err := rules.Parse("three-limits.yaml", []byte(threeLimitRules), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		key          rules.Key
		limit, burst int64
		per          time.Duration
	}{
		"peer-account":    {rules.KeyAccount, 5, 5, time.Minute},
		"peer-ip":         {rules.KeyIP, 30, 30, time.Hour},
		"peer-account-ip": {rules.KeyAccountIP, 100, 100, 24 * time.Hour},
	}
	if len(set.Rules) != len(want) {
		t.Fatalf("%d rules, want %d", len(set.Rules), len(want))
	}
	for _, r := range set.Rules {
		w, ok := want[r.Name]
		if !ok || r.Key != w.key || r.Limit != w.limit || r.Burst != w.burst || r.Per != w.per || r.Count != rules.Attempts || r.Type != rules.Rate {
			t.Errorf("rule %+v, want %+v counting attempts", r, w)
		}
	}
}
