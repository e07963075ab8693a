package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// More rows of the peer comparison, each round: the floors and a
// credential-stuffing wave.
//
// A floor is the smallest script that does one guardian side's store job
// on the same identities' keys: for the same three limits, per key one GET
// and, when all three fit, one SET … PX of a GCRA theoretical arrival
// time, all-or-nothing; for the built-in login rules, those for their
// three rates and the reads and writes of their familiar list, hard stop
// and distinct count (builtinFloor). Each uses the store's own clock (one
// TIME per call) and is sent from as many connections as the closed-loop
// phases, once one decision per call and once with as many decisions per
// call as the side's group commit put in one in the same round. It runs on
// a Redis of its own; its Redis CPU per decision is what its side's is
// compared with, and envoy's with it.
//
// The stuffing wave is guardian's alone (envoy ratelimit has no reports):
// every check a fresh account from a fresh IPv4 /24, closed-loop, first
// never reported (Redis CPU per check), then each reported a failure
// (Redis CPU per report: what the phase cost over its checks at the
// first's cost per check, per report).

// A floor is the smallest script that does one guardian side's store job.
// Per decision it has keys of its own (appended to ks from the identity i
// and the distinct sub-window w) and arguments (appended to args after the
// floor's fixed ones).
type floor struct {
	// Name names the floor in the table and in JSON.
	Name string
	// Side is the guardian side whose Redis CPU is divided by the floor's.
	Side   peerSide
	script *redis.Script
	fixed  []any
	// step is the distinct sub-window whose number a decision's w is (0:
	// none).
	step time.Duration
	// decision appends one decision's keys and arguments.
	decision func(ks []string, args []any, i string, w int64) ([]string, []any)
}

// window is the number of the distinct sub-window at t, or 0 without one.
func (f *floor) window(t time.Time) int64 {
	if f.step <= 0 {
		return 0
	}
	return t.UnixMicro() / f.step.Microseconds()
}

// floorRates is what both floor scripts share: the store's clock (one TIME
// per call) and GCRA over three keys whose emission interval and burst
// (microseconds, units) are ARGV[1] to ARGV[6].
const floorRates = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- rates reads the three rates at KEYS[k + 1] to KEYS[k + 3]: their new
-- arrival times, and whether all three fit.
local function rates(k)
  local tats, ok = {}, true
  for j = 1, 3 do
    local iv, burst = tonumber(ARGV[2 * j - 1]), tonumber(ARGV[2 * j])
    local tat = tonumber(redis.call('GET', KEYS[k + j]) or '0')
    if tat < now then tat = now end
    tats[j] = tat + iv
    if tats[j] - now > iv * burst then ok = false end
  end
  return tats, ok
end
-- spend writes rates' arrival times tats at KEYS[k + 1] to KEYS[k + 3].
local function spend(k, tats)
  for j = 1, 3 do
    redis.call('SET', KEYS[k + j], string.format('%.0f', tats[j]), 'PX', math.ceil((tats[j] - now) / 1000) + 1)
  end
end
`

// threeFloor is the floor of the same three limits as envoy's: KEYS are
// decisions' three keys in turn, ARGV the limits. It replies 1 or 0 per
// decision.
var threeFloor = floor{
	Name: "three limits",
	Side: sideThree,
	script: redis.NewScript(floorRates + `
local out = {}
for d = 0, #KEYS / 3 - 1 do
  local tats, ok = rates(3 * d)
  if ok then spend(3 * d, tats) end
  out[d + 1] = ok and 1 or 0
end
return out
`),
	// envoyConfig's limits: the account 5 a minute, the address 30 an
	// hour, the account with the address 100 a day.
	fixed: []any{int64(time.Minute/time.Microsecond) / 5, 5, int64(time.Hour/time.Microsecond) / 30, 30, int64(24*time.Hour/time.Microsecond) / 100, 100},
	decision: func(ks []string, args []any, i string, _ int64) ([]string, []any) {
		return append(ks, "three:{acct-"+i+"}:login-account", "three:{ip-"+i+"}:login-ip", "three:{acct-"+i+"}:login-account-ip"), args
	},
}

// builtinFloor is the floor of the built-in login rules for the peer's
// checks (an IPv4 address, no secret, never reported): per decision a GET
// of the account's familiar list; the account's, the /32's and the /48
// rule's rates, all-or-nothing; the hard stop's count, read and, when the
// check spends, written one higher (an unreported check counts as a
// failure); and the /24's distinct accounts: a PFCOUNT of its five
// sub-window HyperLogLogs, named by their window so that no index is
// needed, and a PFADD of the account to the current one (with an expiry
// when the HyperLogLog changed). KEYS per decision: the familiar list, the
// three rates, the hard stop, the five sub-windows, the current first;
// ARGV: the rates, the hard stop's limit and how long its count is kept
// (ms), the distinct limit and a sub-window's life (ms), then each
// decision's account. It replies 1 or 0 per decision.
var builtinFloor = func() floor {
	set := rules.Default()
	rule := func(name string) *rules.Rule {
		r, ok := set.Rule(name)
		if !ok {
			panic("peer floor: no built-in rule " + name)
		}
		return r
	}
	rate := func(name string) []any {
		r := rule(name)
		return []any{r.Interval().Microseconds(), r.Burst}
	}
	distinct := rule("login-ip-distinct-accounts")
	step := distinct.Per / (store.DistinctSlots - 1)
	fixed := slices.Concat(rate("login-account"), rate("login-ip"), rate("login-ip6-48"),
		[]any{rule("login-hard-stop").Limit, (2 * tokens.AttemptTTL).Milliseconds(), distinct.Limit, (store.DistinctSlots * step).Milliseconds()})
	return floor{
		Name: "built-in rules",
		Side: sideGuardian,
		script: redis.NewScript(floorRates + `
local stop, kept, most, life = tonumber(ARGV[7]), ARGV[8], tonumber(ARGV[9]), ARGV[10]
local out = {}
for d = 0, #KEYS / 10 - 1 do
  local k = 10 * d
  redis.call('GET', KEYS[k + 1])
  local tats, ok = rates(k + 1)
  local fails = tonumber(redis.call('GET', KEYS[k + 5]) or '0')
  ok = ok and fails < stop and redis.call('PFCOUNT', unpack(KEYS, k + 6, k + 10)) < most
  if ok then
    spend(k + 1, tats)
    redis.call('SET', KEYS[k + 5], fails + 1, 'PX', kept)
    if redis.call('PFADD', KEYS[k + 6], ARGV[11 + d]) == 1 then
      redis.call('PEXPIRE', KEYS[k + 6], life)
    end
  end
  out[d + 1] = ok and 1 or 0
end
return out
`),
		fixed: fixed,
		step:  step,
		decision: func(ks []string, args []any, i string, w int64) ([]string, []any) {
			acct, ip, net := "builtin:{acct-"+i+"}:", "builtin:{ip-"+i+"}:", "builtin:{net-"+i+"}:login-ip-distinct-accounts:"
			ks = append(ks, acct+"familiar", acct+"login-account", ip+"login-ip", ip+"login-ip6-48", acct+"login-hard-stop")
			for s := range int64(store.DistinctSlots) {
				ks = append(ks, net+strconv.FormatInt(w-s, 10))
			}
			return ks, append(args, "m-"+i)
		},
	}
}()

// floors are the floor scripts each round runs.
var floors = []*floor{&builtinFloor, &threeFloor}

// floorNamed is the floor named name, or nil.
func floorNamed(name string) *floor {
	for _, f := range floors {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// floorPhase is one floor phase: decisions, script calls, seconds and the
// CPU seconds of its Redis.
type floorPhase struct {
	Floor     string  `json:"floor"`
	Group     int     `json:"decisions_per_call"`
	Decisions uint64  `json:"decisions"`
	Calls     uint64  `json:"calls"`
	Seconds   float64 `json:"seconds"`
	RedisCPU  float64 `json:"redis_cpu_seconds"`
	Errors    uint64  `json:"errors"`
}

// runFloor runs the floor script fl closed-loop on rc from conns
// connections for d, group decisions a call, over keys identities.
func runFloor(ctx context.Context, rc *redis.Client, fl *floor, conns, group int, keys uint64, d time.Duration, seed uint64) (floorPhase, error) {
	f := floorPhase{Floor: fl.Name, Group: group}
	if err := fl.script.Load(ctx, rc).Err(); err != nil {
		return f, err
	}
	r0, err := readRedisStats(ctx, rc)
	if err != nil {
		return f, err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for c := range conns {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(c)+1))
			var ks []string
			var args []any
			var decisions, calls, errs uint64
			for now := time.Now(); now.Before(end) && ctx.Err() == nil; now = time.Now() {
				ks, args = ks[:0], append(args[:0], fl.fixed...)
				for range group {
					ks, args = fl.decision(ks, args, strconv.FormatUint(rng.Uint64N(keys), 10), fl.window(now))
				}
				calls++
				if err := fl.script.EvalSha(ctx, rc, ks, args...).Err(); err != nil {
					errs++
					continue
				}
				decisions += uint64(group)
			}
			mu.Lock()
			f.Decisions, f.Calls, f.Errors = f.Decisions+decisions, f.Calls+calls, f.Errors+errs
			mu.Unlock()
		})
	}
	wg.Wait()
	f.Seconds = time.Since(start).Seconds()
	r1, err := readRedisStats(ctx, rc)
	if err != nil {
		return f, err
	}
	f.RedisCPU = r1.cpu - r0.cpu
	return f, nil
}

// stuffingPhase is one stuffing phase of guardian's.
type stuffingPhase struct {
	Checks   uint64  `json:"checks"`
	Reports  uint64  `json:"reports"`
	Seconds  float64 `json:"seconds"`
	Errors   uint64  `json:"errors"`
	Degraded uint64  `json:"degraded"`
	RedisCPU float64 `json:"redis_cpu_seconds"`
}

// runStuffing runs one stuffing phase on guardian's side s, its checks
// reported failures when report is set.
func runStuffing(ctx context.Context, cfg *config, s *peerService, report bool) (stuffingPhase, error) {
	tr := stuffing
	if report {
		tr = stuffingReported
	}
	r0, err := readRedisStats(ctx, s.redis)
	if err != nil {
		return stuffingPhase{}, err
	}
	t, elapsed := s.d.run(load{traffic: tr, conns: cfg.peerConns, duration: cfg.duration})
	r1, err := readRedisStats(ctx, s.redis)
	if err != nil {
		return stuffingPhase{}, err
	}
	return stuffingPhase{Checks: t.checks, Reports: t.reports, Seconds: elapsed.Seconds(), Errors: t.errors, Degraded: t.degraded, RedisCPU: r1.cpu - r0.cpu}, nil
}

// stuff sends one check of a fresh account from a fresh /24 and, for
// stuffingReported, reports it a failure.
func (d *driver) stuff(w *worker, tr traffic) {
	n := d.fresh.Add(1)
	w.body = append(w.body[:0], `{"flow":"login","account":"stuff-`...)
	w.body = strconv.AppendUint(w.body, n, 10)
	w.body = append(w.body, '-')
	w.body = append(w.body, d.peer.tag...)
	w.body = append(w.body, `@example.com","ip":"`...)
	w.body = appendPeerIP(w.body, 1<<20+n)
	w.body = append(w.body, `"}`...)
	sent := time.Now()
	status, resp, err := w.cn.do("POST", "/v1/check", w.body)
	if !d.recordCheck(w, time.Time{}, sent, status, err, http.StatusOK, http.StatusTooManyRequests) {
		return
	}
	w.t.checks++
	if degraded(resp) {
		w.t.degraded++
	}
	id := attemptID(resp)
	if tr != stuffingReported || id == nil {
		return
	}
	w.rbody = reportBody(w.rbody[:0], id, attacker)
	sent = time.Now()
	status, _, err = w.cn.do("POST", "/v1/report", w.rbody)
	if d.record(w, &w.t.report, time.Since(sent), status, err, http.StatusOK) {
		w.t.reports++
	}
}

// extraRound is a round's floor and stuffing phases.
type extraRound struct {
	// Floor is each floor's phases (floorRuns).
	Floor []floorPhase `json:"floor"`
	// Stuffing is checks alone, then checks reported failures.
	Stuffing [2]stuffingPhase `json:"stuffing"`
}

// groupOf is how many decisions guardian's group commit put in one script
// call in the closed-loop phase f, at least 1.
func groupOf(f *peerPhase) int {
	if f.Scripts <= 0 {
		return 1
	}
	return max(1, int(math.Round(float64(f.Decisions)/float64(f.Scripts))))
}

// floorRun is one floor phase of a round: a floor and its decisions per
// call.
type floorRun struct {
	floor *floor
	group int
}

// floorRuns are the floor phases after round r: each floor one decision a
// call, then as many as its guardian side's group commit put in one call
// in its closed-loop phase, when that is more.
func floorRuns(r *peerRound) []floorRun {
	var runs []floorRun
	for _, f := range floors {
		runs = append(runs, floorRun{f, 1})
		if g := groupOf(&r.Sides[f.Side].Closed); g > 1 {
			runs = append(runs, floorRun{f, g})
		}
	}
	return runs
}

// printExtra prints the floor and stuffing rows, round by round.
func printExtra(w io.Writer, r *peerResult) {
	if len(r.Extra) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "round\tfigure\tvalue\tthe guardian it bounds ÷ it (Redis CPU per decision)\tit ÷ envoy\t")
	for i := range r.Extra {
		x, rd := &r.Extra[i], &r.Rounds[i]
		envoy := &rd.Sides[sideEnvoy].Closed
		for _, f := range x.Floor {
			fl := floorNamed(f.Floor)
			if fl == nil {
				continue
			}
			g := &rd.Sides[fl.Side].Closed
			per := ratio(f.RedisCPU*1e6, float64(f.Decisions))
			what := fmt.Sprintf("floor, %s, %d decision(s) a call", fl.Name, f.Group)
			fmt.Fprintf(tw, "%d\t%s: decisions/s\t%s\t\t\t\n", i+1, what, formatFigure(ratio(float64(f.Decisions), f.Seconds)))
			fmt.Fprintf(tw, "%d\t%s: Redis CPU per decision (µs)\t%s\t%s (%s)\t%s\t\n", i+1, what, formatFigure(per), formatFigure(ratio(g.micros(g.RedisCPU), per)), fl.Side, formatFigure(ratio(per, envoy.micros(envoy.RedisCPU))))
		}
		for j, s := range x.Stuffing {
			what := "stuffing, unreported"
			if j == 1 {
				what = "stuffing, each reported a failure"
			}
			fmt.Fprintf(tw, "%d\t%s: checks/s\t%s\t\t\t\n", i+1, what, formatFigure(ratio(float64(s.Checks), s.Seconds)))
			fmt.Fprintf(tw, "%d\t%s: Redis CPU per check (µs)\t%s\t\t\t\n", i+1, what, formatFigure(ratio(s.RedisCPU*1e6, float64(s.Checks))))
			if j == 1 {
				base := ratio(x.Stuffing[0].RedisCPU, float64(x.Stuffing[0].Checks))
				fmt.Fprintf(tw, "%d\t%s: Redis CPU per report (µs)\t%s\t\t\t\n", i+1, what, formatFigure(ratio((s.RedisCPU-base*float64(s.Checks))*1e6, float64(s.Reports))))
			}
			fmt.Fprintf(tw, "%d\t%s: degraded or failed\t%d\t\t\t\n", i+1, what, s.Degraded+s.Errors)
		}
	}
	_ = tw.Flush()
}
