package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// result is everything a run measured; --json prints it as is.
type result struct {
	CPUs          int            `json:"cpus"`
	GoVersion     string         `json:"go_version"`
	RedisVersion  string         `json:"redis_version"`
	Guardian      string         `json:"guardian"`
	Rules         string         `json:"rules"`
	Micro         []microBench   `json:"micro_benchmarks,omitempty"`
	Phases        []phaseResult  `json:"phases"`
	Memory        *memoryResult  `json:"memory,omitempty"`
	Proxy         *proxyResult   `json:"proxy,omitempty"`
	Ceiling       *ceilingResult `json:"ceiling,omitempty"`
	Targets       []targetResult `json:"targets"`
	Profiles      string         `json:"profiles,omitempty"`
	ProfiledPhase string         `json:"profiled_phase,omitempty"`
}

// latency is a histogram's summary, in milliseconds.
type latency struct {
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
	Mean float64 `json:"mean_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func summary(h *Histogram) latency {
	return latency{
		P50:  ms(h.Quantile(0.50)),
		P90:  ms(h.Quantile(0.90)),
		P99:  ms(h.Quantile(0.99)),
		P999: ms(h.Quantile(0.999)),
		Max:  ms(h.Max()),
		Mean: ms(h.Mean()),
	}
}

// phaseResult is one phase's figures. In the healthz phase the "checks" are
// /healthz requests.
type phaseResult struct {
	Name       string  `json:"name"`
	Model      string  `json:"model"`
	TargetRate float64 `json:"target_rate,omitempty"`
	Conns      int     `json:"conns"`
	Seconds    float64 `json:"seconds"`
	// RedisSeconds is the time between the two readings of Redis's figures
	// the phase's come from: the phase and the snapshots either side, so a
	// little longer than Seconds. Calls that come with time rather than
	// checks (the global failure rate's flushes) run over this span.
	RedisSeconds float64 `json:"redis_seconds"`

	Checks        uint64            `json:"checks"`
	ChecksPerSec  float64           `json:"checks_per_second"`
	Reports       uint64            `json:"reports"`
	ReportsPerSec float64           `json:"reports_per_second"`
	Errors        uint64            `json:"errors"`
	FirstError    string            `json:"first_error,omitempty"`
	Late          uint64            `json:"late,omitempty"`
	Degraded      uint64            `json:"degraded"`
	Decisions     map[string]uint64 `json:"decisions,omitempty"`
	Latency       latency           `json:"latency"`
	ReportLatency *latency          `json:"report_latency,omitempty"`
	// ServiceLatency, in the open model, runs from when a check was sent
	// rather than when it was due: Latency less the wait for a free
	// connection and the load generator's own lateness.
	ServiceLatency *latency `json:"service_latency,omitempty"`

	// Per check; in phases with reports, what the reports cost is included.
	ScriptCallsPerCheck float64 `json:"redis_script_calls_per_check"`
	// ScriptCallsPerRedisCheck counts the script calls over the checks
	// Redis decided, those the fallback decided left out; a call that timed
	// out but ran still counts, so it can read a little above 1.
	ScriptCallsPerRedisCheck float64 `json:"redis_script_calls_per_redis_decided_check"`
	ScriptMicros             float64 `json:"redis_usec_per_script_call"`
	CommandsPerCheck         float64 `json:"redis_commands_per_check"`
	// Commands counts every command Redis ran during the phase, those the
	// scripts ran included.
	Commands              map[string]int64 `json:"redis_commands"`
	GuardianCPUPer1000    float64          `json:"guardian_cpu_seconds_per_1000_checks"`
	RedisCPUPer1000       float64          `json:"redis_cpu_seconds_per_1000_checks"`
	LoadCPUPer1000        float64          `json:"load_generator_cpu_seconds_per_1000_checks"`
	GuardianAllocsPerCall float64          `json:"guardian_allocs_per_request"`
}

// summarise turns a phase's tally and snapshots into its figures.
func summarise(name string, l load, t tally, elapsed time.Duration, a, b snapshot) phaseResult {
	secs := elapsed.Seconds()
	p := phaseResult{
		Name:         name,
		Model:        "max",
		TargetRate:   l.rate,
		Conns:        l.conns,
		Seconds:      secs,
		RedisSeconds: b.redisAt.Sub(a.redisAt).Seconds(),
		Checks:       t.checks,
		ChecksPerSec: float64(t.checks) / secs,
		Reports:      t.reports,
		Errors:       t.errors,
		FirstError:   t.firstErr,
		Late:         t.late,
		Degraded:     t.degraded,
		Latency:      summary(&t.check),
	}
	if l.rate > 0 {
		p.Model = "open"
	}
	if l.traffic != healthz && l.traffic != storeOnly {
		p.Decisions = t.decisions
	}
	if t.reports > 0 {
		p.ReportsPerSec = float64(t.reports) / secs
		rl := summary(&t.report)
		p.ReportLatency = &rl
	}
	if l.rate > 0 && t.checks > 0 {
		sl := summary(&t.service)
		p.ServiceLatency = &sl
	}
	if n := float64(t.checks); n > 0 {
		p.ScriptCallsPerCheck = float64(scriptCalls(a.redis, b.redis)) / n
		if onRedis := n - float64(t.degraded); onRedis > 0 {
			p.ScriptCallsPerRedisCheck = float64(scriptCalls(a.redis, b.redis)) / onRedis
		}
		p.ScriptMicros = scriptMicros(a.redis, b.redis)
		p.CommandsPerCheck = float64(commandCalls(a.redis, b.redis)) / n
		p.Commands = commandDeltas(a.redis, b.redis)
		p.GuardianCPUPer1000 = (b.guardianCPU - a.guardianCPU) / n * 1000
		p.RedisCPUPer1000 = (b.redis.cpu - a.redis.cpu) / n * 1000
		p.LoadCPUPer1000 = (b.selfCPU - a.selfCPU) / n * 1000
		// The /metrics scrape of the snapshot itself allocates too; over
		// thousands of requests it is noise.
		p.GuardianAllocsPerCall = (b.mallocs - a.mallocs) / float64(t.checks+t.reports)
	}
	return p
}

// degradedShare is the share of a phase's checks the fallback decided.
func (p *phaseResult) degradedShare() float64 {
	if p.Checks == 0 {
		return 0
	}
	return float64(p.Degraded) / float64(p.Checks)
}

// onRedis reports whether Redis, not the fallback, decided the phase's
// checks: under 1% degraded. A Redis round trip that outlasts
// --store-timeout (5ms by default) switches guardian to its local fallback
// for at least 250ms, and then a phase measures the fallback.
func (p *phaseResult) onRedis() bool { return p.degradedShare() < 0.01 }

// fallbackNote says, when it matters, how many checks the fallback decided.
func (p *phaseResult) fallbackNote() string {
	if p.Degraded == 0 {
		return ""
	}
	return fmt.Sprintf("; %.1f%% decided by the fallback", 100*p.degradedShare())
}

// memoryResult is what Redis holds per tracked key.
type memoryResult struct {
	Checks int64  `json:"checks"`
	Errors uint64 `json:"errors"`
	// Degraded counts checks the fallback decided: they added no key to
	// Redis, so the keys added are fewer, and the figure per key stands.
	Degraded uint64  `json:"degraded"`
	Seconds  float64 `json:"seconds"`
	// Keys counts the tracked keys added: one rule's state for one subject,
	// a field of one of guardian's limit hashes.
	Keys int64 `json:"keys_added"`
	// RedisKeys is the DBSIZE delta: the hashes that hold them.
	RedisKeys       int64 `json:"redis_keys_added"`
	UsedMemoryDelta int64 `json:"used_memory_delta_bytes"`
	// BytesPerKey is the used_memory delta over the tracked keys added: the
	// whole cost of a tracked key, its share of its hash, of the hash's
	// expiry entry and of the keyspace's tables included.
	BytesPerKey float64 `json:"bytes_per_key"`
	// Sample is MEMORY USAGE of a sample of hashes over the tracked keys
	// they hold, per rule.
	Sample []keySample `json:"memory_usage_sample"`
}

// ceilingResult compares checks with the bare-HTTP ceiling.
type ceilingResult struct {
	HealthzPerSec float64 `json:"healthz_per_second"`
	ChecksPerSec  float64 `json:"checks_per_second"`
	Ratio         float64 `json:"ratio"`
}

// targetResult is one of the figures issue 9 sets a target for.
type targetResult struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Met  bool   `json:"met"`
}

// phase returns the result of the named phase, or nil.
func (r *result) phase(name string) *phaseResult {
	for i := range r.Phases {
		if r.Phases[i].Name == name {
			return &r.Phases[i]
		}
	}
	return nil
}

// micro returns the named Go benchmark, or nil.
func (r *result) micro(name string) *microBench {
	for i := range r.Micro {
		if r.Micro[i].Name == name {
			return &r.Micro[i]
		}
	}
	return nil
}

// evaluate fills in the ceiling and the targets from the figures measured.
func (r *result) evaluate() {
	h, mx := r.phase("healthz"), r.phase("max")
	if h != nil && mx != nil && h.ChecksPerSec > 0 {
		r.Ceiling = &ceilingResult{HealthzPerSec: h.ChecksPerSec, ChecksPerSec: mx.ChecksPerSec, Ratio: mx.ChecksPerSec / h.ChecksPerSec}
		r.Targets = append(r.Targets, targetResult{
			Name: "max checks/s ÷ healthz/s, with Redis",
			Want: "≥ 0.60",
			Got:  fmt.Sprintf("%.2f (%.0f ÷ %.0f)%s", r.Ceiling.Ratio, mx.ChecksPerSec, h.ChecksPerSec, mx.fallbackNote()),
			Met:  r.Ceiling.Ratio >= 0.60 && mx.Errors == 0 && mx.onRedis(),
		})
	}
	if o := r.phase("open"); o != nil {
		achieved := o.ChecksPerSec >= 0.97*o.TargetRate
		floor := ""
		if s := o.ServiceLatency; s != nil {
			floor = fmt.Sprintf("; from send %.3f ms", s.P99)
		}
		if f := r.phase("open-healthz"); f != nil {
			floor += fmt.Sprintf("; /healthz at the same rate: p99 %.3f ms", f.Latency.P99)
		}
		if f := r.phase("open-store"); f != nil {
			floor += fmt.Sprintf("; the store alone: p99 %.3f ms", f.Latency.P99)
		}
		r.Targets = append(r.Targets, targetResult{
			Name: fmt.Sprintf("p99 of /v1/check at %.0f checks/s, with Redis", o.TargetRate),
			Want: "< 1 ms, rate held, no errors",
			Got:  fmt.Sprintf("%.3f ms at %.0f/s, %d errors%s%s", o.Latency.P99, o.ChecksPerSec, o.Errors, o.fallbackNote(), floor),
			Met:  o.Latency.P99 < 1 && achieved && o.Errors == 0 && o.onRedis(),
		})
	}
	if mx != nil {
		// The global failure rate's periodic flush adds a few calls a
		// second: 1 within half a percent.
		got := fmt.Sprintf("%.3f", mx.ScriptCallsPerCheck)
		if mx.Degraded > 0 {
			got = fmt.Sprintf("%.3f per check Redis decided (%.3f per check%s)", mx.ScriptCallsPerRedisCheck, mx.ScriptCallsPerCheck, mx.fallbackNote())
		}
		r.Targets = append(r.Targets, targetResult{
			Name: "Redis script calls per check",
			Want: "1",
			Got:  got,
			Met:  mx.onRedis() && mx.ScriptCallsPerCheck > 0.995 && mx.ScriptCallsPerCheck < 1.005,
		})
	}
	// BenchmarkCheck: a login check under three rules, allowed and spent
	// every time, so the attempt id is sealed too.
	if b := r.micro("BenchmarkCheck"); b != nil {
		r.Targets = append(r.Targets, targetResult{
			Name: "allocations per check through the engine",
			Want: "≤ 20",
			Got:  fmt.Sprintf("%.0f", b.Allocs),
			Met:  b.Allocs <= 20,
		})
	}
	if b := r.micro("BenchmarkGCRA"); b != nil {
		r.Targets = append(r.Targets, targetResult{
			Name: "allocations in the GCRA arithmetic",
			Want: "0",
			Got:  fmt.Sprintf("%.0f", b.Allocs),
			Met:  b.Allocs == 0,
		})
	}
	if m := r.Memory; m != nil && m.Keys > 0 {
		r.Targets = append(r.Targets, targetResult{
			Name: "Redis memory per tracked key",
			Want: "≤ 120 B",
			Got:  fmt.Sprintf("%.1f B", m.BytesPerKey),
			Met:  m.BytesPerKey <= 120,
		})
	}
}

// printText prints r as tables.
func printText(w io.Writer, r *result) {
	fmt.Fprintf(w, "guardian load benchmark: %d CPUs, %s, Redis %s, guardian %s, %s rules\n\n", r.CPUs, r.GoVersion, r.RedisVersion, r.Guardian, r.Rules)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tmodel\tconns\tchecks/s\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\terrors\tdegraded\treports/s\tscripts/check\tµs/script\tcmds/check\tguardian CPU s/1k\tRedis CPU s/1k\tload CPU s/1k\tallocs/req\t")
	for _, p := range r.Phases {
		model := p.Model
		if p.TargetRate > 0 {
			model = fmt.Sprintf("open %.0f/s", p.TargetRate)
		}
		// Without scripts of its own (healthz), a phase's time per script
		// is the periodic flush of the global failure rate: not a figure.
		perScript := "-"
		if p.ScriptCallsPerCheck >= 0.01 {
			perScript = fmt.Sprintf("%.1f", p.ScriptMicros)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%d\t%d\t%.0f\t%.3f\t%s\t%.2f\t%.3f\t%.3f\t%.3f\t%.1f\t\n",
			p.Name, model, p.Conns, p.ChecksPerSec, p.Latency.P50, p.Latency.P90, p.Latency.P99, p.Latency.P999, p.Latency.Max,
			p.Errors, p.Degraded, p.ReportsPerSec, p.ScriptCallsPerCheck, perScript, p.CommandsPerCheck,
			p.GuardianCPUPer1000, p.RedisCPUPer1000, p.LoadCPUPer1000, p.GuardianAllocsPerCall)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "  (healthz, open-healthz: the checks are /healthz requests; open-store: login batches sent to the store without guardian; open and mix: per-check figures include the reports' cost)")
	for _, p := range r.Phases {
		if p.FirstError != "" {
			fmt.Fprintf(w, "  %s: first error: %s\n", p.Name, p.FirstError)
		}
		if len(p.Decisions) > 0 {
			fmt.Fprintf(w, "  %s decisions: %s", p.Name, decisionsText(p.Decisions))
			if p.ReportLatency != nil {
				fmt.Fprintf(w, "; report p50 %.3f ms, p99 %.3f ms", p.ReportLatency.P50, p.ReportLatency.P99)
			}
			if p.Late > 0 {
				fmt.Fprintf(w, "; %d started over 1 ms late", p.Late)
			}
			fmt.Fprintln(w)
		}
		if s := p.ServiceLatency; s != nil {
			fmt.Fprintf(w, "  %s from send, not from due: p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, p99.9 %.3f ms\n", p.Name, s.P50, s.P90, s.P99, s.P999)
		}
	}
	if c := r.Ceiling; c != nil {
		fmt.Fprintf(w, "\nceiling: %.0f checks/s ÷ %.0f healthz/s = %.2f\n", c.ChecksPerSec, c.HealthzPerSec, c.Ratio)
	}
	if m := r.Memory; m != nil {
		fmt.Fprintf(w, "\nmemory: %d checks of new users in %.1f s (%d errors, %d decided by the fallback) added %d tracked keys in %d Redis hashes and %d bytes: %.1f bytes per tracked key\n",
			m.Checks, m.Seconds, m.Errors, m.Degraded, m.Keys, m.RedisKeys, m.UsedMemoryDelta, m.BytesPerKey)
		for _, s := range m.Sample {
			fmt.Fprintf(w, "  MEMORY USAGE %-24s %6.1f bytes per tracked key (%d keys in %d hashes; without the expiry entry)\n", s.Rule, s.Bytes, s.Keys, s.Hashes)
		}
	}
	if p := r.Proxy; p != nil {
		fmt.Fprintf(w, "\nproxy: GET /login with basic auth, open model %.0f/s, %d connections (a login checked and reported per request)\n", p.Rate, p.Conns)
		for _, run := range []proxyRun{p.Direct, p.Proxied} {
			fmt.Fprintf(w, "  %-22s %6.0f/s  p50 %.3f ms  p99 %.3f ms  p99.9 %.3f ms  %d errors  guardian CPU %.0f µs/req  upstream CPU %.0f µs/req\n",
				run.Target, run.PerSec, run.Latency.P50, run.Latency.P99, run.Latency.P999, run.Errors, run.GuardianCPU, run.UpstreamCPU)
			if run.FirstError != "" {
				fmt.Fprintf(w, "    first error: %s\n", run.FirstError)
			}
		}
		fmt.Fprintf(w, "  added by the gateway: p50 %+.3f ms, p99 %+.3f ms; guardian CPU ÷ upstream CPU per request %.2f\n", p.AddedP50, p.AddedP99, p.CPURatio)
	}
	if len(r.Micro) > 0 {
		fmt.Fprintln(w, "\nGo benchmarks (-benchmem):")
		for _, b := range r.Micro {
			fmt.Fprintf(w, "  %-20s %-30s %10.1f ns/op %8.0f B/op %6.0f allocs/op\n", b.Package, b.Name, b.NsOp, b.BytesOp, b.Allocs)
		}
	}
	if len(r.Targets) > 0 {
		fmt.Fprintln(w, "\ntargets:")
		for _, t := range r.Targets {
			mark := "MET    "
			if !t.Met {
				mark = "NOT MET"
			}
			fmt.Fprintf(w, "  %s  %-58s want %-28s got %s\n", mark, t.Name, t.Want, t.Got)
		}
	}
	if r.Profiles != "" {
		fmt.Fprintf(w, "\nprofiles of the %s phase: %s/cpu.pprof, %s/allocs.pprof (go tool pprof -top FILE)\n", r.ProfiledPhase, r.Profiles, r.Profiles)
	}
}

// decisionsText lists decisions with their counts, most frequent first.
func decisionsText(m map[string]uint64) string {
	type kv struct {
		k string
		v uint64
	}
	var kvs []kv
	for k, v := range m {
		if k == "" {
			k = "none"
		}
		kvs = append(kvs, kv{k, v})
	}
	sort.Slice(kvs, func(i, j int) bool { return kvs[i].v > kvs[j].v || (kvs[i].v == kvs[j].v && kvs[i].k < kvs[j].k) })
	parts := make([]string, len(kvs))
	for i, e := range kvs {
		parts[i] = fmt.Sprintf("%s %d", e.k, e.v)
	}
	return strings.Join(parts, ", ")
}
