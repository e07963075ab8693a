package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	// The run starts guardian as a copy of its own binary; under go test
	// that binary is this test binary, which must then serve guardian.
	if len(os.Args) > 1 && os.Args[1] == childCommand {
		os.Exit(serveChild(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == upstreamCommand {
		os.Exit(serveUpstream())
	}
	os.Exit(m.Run())
}

// TestBenchEndToEnd runs every phase, briefly, against a real redis-server
// and guardian, and checks that the figures are those of what was sent.
// Like guardian's other Redis tests it needs redis-server installed, and
// fails without it.
func TestBenchEndToEnd(t *testing.T) {
	prof := t.TempDir()
	cfg := &config{
		duration:     500 * time.Millisecond,
		warmup:       100 * time.Millisecond,
		rate:         200,
		proxyRate:    200,
		conns:        2,
		openConns:    8,
		phases:       allPhases,
		memoryChecks: 300,
		redisBin:     "redis-server",
		// Long enough that no check goes to the fallback, even under the
		// race detector on a busy machine: the figures must be Redis's.
		storeTimeout: time.Second,
		timeout:      10 * time.Second,
		pprofDir:     prof,
		pprofPhase:   "max",
		mix:          &mix{AttackShare: 0.1, OTPShare: 0.05, AttackAccounts: 5, AttackPrefixes: 2},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := bench(ctx, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Phases) != 6 || res.Memory == nil {
		t.Fatalf("got %d phases and memory %v, want healthz, max, open-healthz, open-store, open, mix and memory", len(res.Phases), res.Memory)
	}
	// The store's floor: at most one script call per batch, straight to
	// Redis (batches that meet a call in flight share the next one), and
	// guardian's timed calls (timedCalls) beside them.
	if f := res.phase("open-store"); f.Checks != 100 || f.ScriptCallsPerCheck <= 0 ||
		f.ScriptCallsPerCheck > 1+timedCalls(f)/float64(f.Checks) || len(f.Decisions) != 0 {
		t.Errorf("open-store: %d batches, %.3f script calls each, decisions %v; want 100, one, none from guardian", f.Checks, f.ScriptCallsPerCheck, f.Decisions)
	}
	// The latency floor runs at the open phase's rate, /healthz only.
	if f := res.phase("open-healthz"); f.TargetRate != 200 || f.Checks != 100 || f.ScriptCallsPerCheck > 0.5 {
		t.Errorf("open-healthz: rate %v, %d requests, %.3f script calls each; want 200/s, 100 requests, no scripts", f.TargetRate, f.Checks, f.ScriptCallsPerCheck)
	}
	// In the open model a check's time from send is part of its time from
	// due, never more.
	for _, name := range []string{"open-healthz", "open-store", "open"} {
		p := res.phase(name)
		if s := p.ServiceLatency; s == nil || s.P50 <= 0 || s.Max > p.Latency.Max {
			t.Errorf("%s: latency from send %+v, from due %+v; want one within the other", name, s, p.Latency)
		}
	}
	if res.phase("max").ServiceLatency != nil {
		t.Error("max: a latency from send in a closed loop, where it is the latency")
	}
	for _, p := range res.Phases {
		if p.Checks == 0 || p.Errors != 0 || p.Degraded != 0 {
			t.Errorf("%s: %d checks, %d errors (%s), %d degraded; want checks, no error, none degraded", p.Name, p.Checks, p.Errors, p.FirstError, p.Degraded)
		}
	}
	mx := res.phase("max")
	t.Logf("max: %d checks in %.3f s, Redis read %.3f s apart, %.3f script calls per check", mx.Checks, mx.Seconds, mx.RedisSeconds, mx.ScriptCallsPerCheck)
	// Checks only: at most one script call each, fewer where checks that
	// meet a call in flight share the next one, and the timed calls.
	if mx.ScriptCallsPerCheck <= 0 || mx.RedisSeconds < mx.Seconds ||
		mx.ScriptCallsPerCheck > 1+timedCalls(mx)/float64(mx.Checks) {
		t.Errorf("max: %.3f script calls per check, %d checks in %.3f s (Redis read %.3f s apart), want at most 1 and 20 a second of the instance's timed work",
			mx.ScriptCallsPerCheck, mx.Checks, mx.Seconds, mx.RedisSeconds)
	}
	if mx.GuardianCPUPer1000 <= 0 || mx.GuardianAllocsPerCall <= 0 {
		t.Errorf("max: guardian CPU %v s/1k, %v allocs per request; want both measured", mx.GuardianCPUPer1000, mx.GuardianAllocsPerCall)
	}
	// The open model sends exactly duration × rate checks, each reported
	// when it was allowed: a report adds script calls.
	if o := res.phase("open"); o.Checks != 100 || o.Reports == 0 || o.ScriptCallsPerCheck <= 1 {
		t.Errorf("open: %d checks, %d reports, %.3f script calls per check; want 100 checks, reports, more than one call each", o.Checks, o.Reports, o.ScriptCallsPerCheck)
	}
	// Every new user's check adds its account's rate and hard-stop keys,
	// its address's two rate keys (login-ip, login-ip6-48), and its /24's
	// distinct-accounts index and sub-window: random addresses in 10/8
	// share a /24 now and then, two keys fewer each time.
	m := res.Memory
	if m.Checks != 300 || m.Keys < 6*300-20 || m.Keys > 6*300+5 || m.BytesPerKey < 20 || m.BytesPerKey > 1000 {
		t.Errorf("memory: %d checks added %d keys at %.1f bytes each; want 300 checks, about 1,800 keys", m.Checks, m.Keys, m.BytesPerKey)
	}
	// Besides, the global failure rate, which counts every check as it is
	// made, keeps a few keys of its own.
	if m.RedisKeys <= 0 || m.RedisKeys > m.Keys+4 || len(m.Sample) == 0 {
		t.Errorf("memory: %d Redis keys for %d tracked keys, sample %v; want at most one key per tracked key (and the global rate's few), and a sample", m.RedisKeys, m.Keys, m.Sample)
	}
	for _, f := range []string{"cpu.pprof", "allocs.pprof"} {
		if fi, err := os.Stat(filepath.Join(prof, f)); err != nil || fi.Size() == 0 {
			t.Errorf("profile %s: %v, want a profile", f, err)
		}
	}
	// The proxy phase: duration × rate logins each way, all allowed and
	// answered 200, guardian's CPU spent on the proxied ones only.
	if p := res.Proxy; p == nil {
		t.Error("no proxy phase")
	} else {
		for _, run := range []proxyRun{p.Direct, p.Proxied} {
			if run.Requests != 100 || run.Errors != 0 || run.Latency.P50 <= 0 {
				t.Errorf("proxy, %s: %d requests, %d errors (%s), p50 %v ms; want 100, none", run.Target, run.Requests, run.Errors, run.FirstError, run.Latency.P50)
			}
		}
		if p.Proxied.GuardianCPU <= 0 || p.Proxied.UpstreamCPU <= 0 || p.CPURatio <= 0 {
			t.Errorf("proxy: guardian CPU %v µs, upstream CPU %v µs per request; want both measured", p.Proxied.GuardianCPU, p.Proxied.UpstreamCPU)
		}
	}
	if len(res.Targets) == 0 || res.Ceiling == nil {
		t.Errorf("targets %v, ceiling %v: want both evaluated", res.Targets, res.Ceiling)
	}
}

// timedCalls is the most script calls a guardian makes in phase p that
// come with time rather than checks, over the span between the two
// readings of Redis's figures: the global failure rate's, at most one every
// 100ms, and the beat's (heartbeat, shadow tallies, revoked tokens,
// incidents, lists), each at most one every 500ms; at most 20 a second
// whatever the rate, and each of those six loops one tick more at the
// span's edges.
func timedCalls(p *phaseResult) float64 {
	return 20*p.RedisSeconds + 6
}
