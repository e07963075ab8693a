package main

import (
	"strings"
	"testing"
)

// targets evaluates r and returns its targets by name.
func targets(r *result) map[string]targetResult {
	r.evaluate()
	out := map[string]targetResult{}
	for _, t := range r.Targets {
		out[t.Name] = t
	}
	return out
}

func TestTargetsOnRedis(t *testing.T) {
	r := &result{
		Phases: []phaseResult{
			{Name: "healthz", ChecksPerSec: 10_000, Checks: 100_000},
			{Name: "max", ChecksPerSec: 6_500, Checks: 65_000, ScriptCallsPerCheck: 1.002},
			{Name: "open-healthz", TargetRate: 2000, ChecksPerSec: 2000, Checks: 20_000, Latency: latency{P99: 0.3}},
			{Name: "open", TargetRate: 2000, ChecksPerSec: 1990, Checks: 19_900, Latency: latency{P99: 0.8}},
		},
		Micro: []microBench{
			{Name: "BenchmarkCheck", Allocs: 8},
			{Name: "BenchmarkGCRA", Allocs: 0},
		},
		Memory: &memoryResult{Keys: 150_000, BytesPerKey: 119.5},
	}
	got := targets(r)
	if len(got) != 6 {
		t.Fatalf("got %d targets, want 6: %+v", len(got), r.Targets)
	}
	for name, tr := range got {
		if !tr.Met {
			t.Errorf("target %q not met (got %s), want met", name, tr.Got)
		}
	}
	if p99 := got["p99 of /v1/check at 2000 checks/s, with Redis"]; !strings.Contains(p99.Got, "/healthz at the same rate: p99 0.300 ms") {
		t.Errorf("p99 target says %q, want the /healthz floor at the same rate", p99.Got)
	}
	if r.Ceiling == nil || r.Ceiling.Ratio != 0.65 {
		t.Errorf("ceiling = %+v, want ratio 0.65", r.Ceiling)
	}
}

func TestTargetsRefuseFallbackFigures(t *testing.T) {
	// The same figures, but 5% of the checks decided by the fallback: they
	// are not figures of guardian on Redis.
	r := &result{
		Phases: []phaseResult{
			{Name: "healthz", ChecksPerSec: 10_000, Checks: 100_000},
			{Name: "max", ChecksPerSec: 6_500, Checks: 65_000, Degraded: 3_250, ScriptCallsPerCheck: 1.0, ScriptCallsPerRedisCheck: 1.05},
			{Name: "open", TargetRate: 2000, ChecksPerSec: 1990, Checks: 19_900, Degraded: 995, Latency: latency{P99: 0.8}},
		},
	}
	for name, tr := range targets(r) {
		if tr.Met {
			t.Errorf("target %q met with 5%% of checks on the fallback, want not met", name)
		}
		if !strings.Contains(tr.Got, "5.0% decided by the fallback") {
			t.Errorf("target %q says %q, want it to name the fallback share", name, tr.Got)
		}
	}
}

func TestTargetsNeedTheRateHeldAndNoErrors(t *testing.T) {
	for _, o := range []phaseResult{
		{Name: "open", TargetRate: 2000, ChecksPerSec: 1500, Checks: 15_000, Latency: latency{P99: 0.5}},
		{Name: "open", TargetRate: 2000, ChecksPerSec: 2000, Checks: 20_000, Errors: 1, Latency: latency{P99: 0.5}},
		{Name: "open", TargetRate: 2000, ChecksPerSec: 2000, Checks: 20_000, Latency: latency{P99: 1.0}},
	} {
		r := &result{Phases: []phaseResult{o}}
		for name, tr := range targets(r) {
			if tr.Met {
				t.Errorf("%+v: target %q met, want not met", o, name)
			}
		}
	}
}

func TestPrintText(t *testing.T) {
	r := &result{
		CPUs: 2, GoVersion: "go1.26", RedisVersion: "7.0.15", Guardian: "source tree", Rules: "built-in",
		Phases: []phaseResult{
			{Name: "healthz", Model: "max", Conns: 8, ChecksPerSec: 20_000, Checks: 200_000, ScriptMicros: 400},
			{Name: "max", Model: "max", Conns: 8, ChecksPerSec: 7_000, Checks: 70_000, ScriptCallsPerCheck: 1, ScriptMicros: 41.5,
				Decisions: map[string]uint64{"allow": 63_000, "slow": 7_000}},
		},
		Memory: &memoryResult{Checks: 50_000, Keys: 150_000, RedisKeys: 12_288, UsedMemoryDelta: 28_500_000, BytesPerKey: 190,
			Sample: []keySample{{Rule: "login-account", Hashes: 20, Keys: 200, Bytes: 104}}},
	}
	r.evaluate()
	var b strings.Builder
	printText(&b, r)
	out := b.String()
	for _, want := range []string{
		"Redis 7.0.15",
		"ceiling: 7000 checks/s ÷ 20000 healthz/s = 0.35",
		"max decisions: allow 63000, slow 7000",
		"150000 tracked keys in 12288 Redis hashes and 28500000 bytes: 190.0 bytes per tracked key",
		"MEMORY USAGE login-account",
		"NOT MET  max checks/s ÷ healthz/s",
		"MET      Redis script calls per check",
		"NOT MET  Redis memory per tracked key",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// healthz runs no script of its own: no time per script is shown.
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "healthz") && strings.Contains(line, "400.0") {
			t.Errorf("healthz row shows a time per script: %s", line)
		}
	}
}
