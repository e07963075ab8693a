package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
)

// peerFixture is two rounds with round figures: guardian does 6,000 and
// 5,000 decisions a second against the envoy service's 4,000, at 40 and
// 60 µs of Redis CPU per decision against 100.
func peerFixture() []peerRound {
	side := func(decisions uint64, svcCPU, redisCPU, p99 float64) peerFigures {
		return peerFigures{
			Closed: peerPhase{Decisions: decisions, Seconds: 10, ServiceCPU: svcCPU, RedisCPU: redisCPU, Commands: int64(decisions) * 7, Scripts: int64(decisions)},
			Open:   peerPhase{Decisions: 20_000, Seconds: 10, P99: p99, P50: 0.5, Denied: 200},
		}
	}
	return []peerRound{
		{Sides: [2]peerFigures{side(60_000, 3.0, 2.4, 3), side(40_000, 8.0, 4.0, 4)}},
		{Sides: [2]peerFigures{side(50_000, 3.0, 3.0, 5), side(40_000, 8.0, 4.0, 4)}},
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
	if !near(closed.Guardian.Lo, 5000) || !near(closed.Guardian.Hi, 6000) || !near(closed.Envoy.Lo, 4000) || !near(closed.Envoy.Hi, 4000) {
		t.Errorf("closed-loop spans = %+v, %+v", closed.Guardian, closed.Envoy)
	}
	if !near(closed.Ratio.Lo, 1.25) || !near(closed.Ratio.Hi, 1.5) || closed.Met != 1 || closed.Rounds != 2 {
		t.Errorf("closed-loop ratio %+v met %d of %d, want 1.25–1.5, met 1 of 2", closed.Ratio, closed.Met, closed.Rounds)
	}

	// 2.4 s and 3.0 s over 60,000 and 50,000 decisions: 40 and 60 µs,
	// against 100 µs: ratios 0.4 and 0.6, the target (≤ 0.5) met once.
	rc := row(t, rows, "Redis CPU per decision")
	if !near(rc.Guardian.Lo, 40) || !near(rc.Guardian.Hi, 60) || !near(rc.Envoy.Lo, 100) {
		t.Errorf("Redis CPU spans = %+v, %+v", rc.Guardian, rc.Envoy)
	}
	if !near(rc.Ratio.Lo, 0.4) || !near(rc.Ratio.Hi, 0.6) || rc.Met != 1 || !rc.AtMost || rc.Target != 0.5 {
		t.Errorf("Redis CPU row = %+v", rc)
	}

	svc := row(t, rows, "service CPU per decision")
	if !near(svc.Ratio.Lo, 50.0/200) || !near(svc.Ratio.Hi, 60.0/200) || svc.Met != 2 {
		t.Errorf("service CPU row = %+v, want ratios 0.25–0.3 met in both rounds", svc)
	}

	p99 := row(t, rows, "open p99")
	if !near(p99.Ratio.Lo, 0.75) || !near(p99.Ratio.Hi, 1.25) || p99.Met != 1 {
		t.Errorf("open p99 row = %+v", p99)
	}

	if calls := row(t, rows, "Redis calls per decision (scripts, or commands)"); !near(calls.Guardian.Lo, 1) {
		t.Errorf("script calls per decision = %+v, want 1", calls.Guardian)
	}
	if d := row(t, rows, "denied share"); !near(d.Guardian.Lo, 200.0/float64(60_000+20_000)) {
		t.Errorf("denied share = %+v", d.Guardian)
	}
	if info := row(t, rows, "open p50"); info.Target != 0 || info.Met != 0 || targetText(&info) != "" {
		t.Errorf("an information row has a target: %+v", info)
	}
}

func TestPeerTargetText(t *testing.T) {
	cases := []struct {
		r    peerRow
		want string
	}{
		{peerRow{Target: 0.5, AtMost: true, Met: 2, Rounds: 2}, "≤ 0.5× — met"},
		{peerRow{Target: 1.5, Met: 1, Rounds: 2}, "≥ 1.5× — met in 1 of 2 rounds"},
		{peerRow{Target: 1, AtMost: true, Met: 0, Rounds: 3}, "≤ 1.0× — not met"},
	}
	for _, c := range cases {
		if got := targetText(&c.r); got != c.want {
			t.Errorf("targetText(%+v) = %q, want %q", c.r, got, c.want)
		}
	}
	// A ratio over zero meets nothing.
	r := peerRow{Target: 0.5, AtMost: true}
	if r.meets(math.NaN()) {
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
	for _, want := range []string{"200,000 distinct identities", "Redis CPU per decision (µs)", "40.0–60.0", "0.400–0.600", "≤ 0.5× — met in 1 of 2 rounds", "5,000–6,000"} {
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

func TestPeerBodies(t *testing.T) {
	g := &peerTraffic{side: sideGuardian, keys: 200_000, tag: "t"}
	e := &peerTraffic{side: sideEnvoy, keys: 200_000, tag: "t"}
	if got, want := string(g.body(70_000, nil)), `{"flow":"login","account":"peer-70000-t@example.com","ip":"11.17.112.7"}`; got != want {
		t.Errorf("guardian body = %s, want %s", got, want)
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
