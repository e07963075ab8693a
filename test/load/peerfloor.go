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
)

// Two more rows of the peer comparison, each round: the floor and a
// credential-stuffing wave.
//
// The floor is the smallest script that does guardian's job for the same
// three limits: per key one GET and, when all three fit, one SET … PX of a
// GCRA theoretical arrival time, all-or-nothing, against the store's own
// clock (one TIME per call), on the same identities' keys, sent from as
// many connections as the closed-loop phases, once one decision per call
// and once with as many decisions per call as guardian's group commit put
// in one in the same round. It runs on a Redis of its own; its Redis CPU
// per decision is what guardian's is compared with.
//
// The stuffing wave is guardian's alone (envoy ratelimit has no reports):
// every check a fresh account from a fresh IPv4 /24, closed-loop, first
// never reported (Redis CPU per check), then each reported a failure
// (Redis CPU per report: what the phase cost over its checks at the
// first's cost per check, per report).

// floorScript is the minimal three-key GCRA script. KEYS are decisions'
// three keys in turn; ARGV the three limits' emission interval and burst
// (microseconds, units). It replies 1 or 0 per decision.
var floorScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local out = {}
for d = 0, #KEYS / 3 - 1 do
  local tats, ok = {}, 1
  for j = 1, 3 do
    local iv, burst = tonumber(ARGV[2 * j - 1]), tonumber(ARGV[2 * j])
    local tat = tonumber(redis.call('GET', KEYS[3 * d + j]) or '0')
    if tat < now then tat = now end
    tats[j] = tat + iv
    if tats[j] - now > iv * burst then ok = 0 end
  end
  if ok == 1 then
    for j = 1, 3 do
      redis.call('SET', KEYS[3 * d + j], string.format('%.0f', tats[j]), 'PX', math.ceil((tats[j] - now) / 1000) + 1)
    end
  end
  out[d + 1] = ok
end
return out
`)

// floorLimits are the script's three limits, envoyConfig's: the account 5
// a minute, the address 30 an hour, the account with the address 100 a
// day.
var floorLimits = []any{int64(time.Minute/time.Microsecond) / 5, 5, int64(time.Hour/time.Microsecond) / 30, 30, int64(24*time.Hour/time.Microsecond) / 100, 100}

// floorPhase is one floor phase: decisions, script calls, seconds and the
// CPU seconds of its Redis.
type floorPhase struct {
	Group     int     `json:"decisions_per_call"`
	Decisions uint64  `json:"decisions"`
	Calls     uint64  `json:"calls"`
	Seconds   float64 `json:"seconds"`
	RedisCPU  float64 `json:"redis_cpu_seconds"`
	Errors    uint64  `json:"errors"`
}

// runFloor runs the floor script closed-loop on rc from conns connections
// for d, group decisions a call, over keys identities.
func runFloor(ctx context.Context, rc *redis.Client, conns, group int, keys uint64, d time.Duration, seed uint64) (floorPhase, error) {
	f := floorPhase{Group: group}
	if err := floorScript.Load(ctx, rc).Err(); err != nil {
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
			ks := make([]string, 0, 3*group)
			var decisions, calls, errs uint64
			for time.Now().Before(end) && ctx.Err() == nil {
				ks = ks[:0]
				for range group {
					i := strconv.FormatUint(rng.Uint64N(keys), 10)
					ks = append(ks, "floor:{acct-"+i+"}:login-account", "floor:{ip-"+i+"}:login-ip", "floor:{acct-"+i+"}:login-account-ip")
				}
				calls++
				if err := floorScript.EvalSha(ctx, rc, ks, floorLimits...).Err(); err != nil {
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
	// Floor is one decision a call, then each of the two guardians'
	// decisions per call (floorGroups).
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

// floorGroups are the decisions per call the floor script runs with after
// round r: one, then each guardian's grouping in its closed-loop phase,
// each once.
func floorGroups(r *peerRound) []int {
	groups := []int{1}
	for _, s := range []peerSide{sideGuardian, sideThree} {
		if g := groupOf(&r.Sides[s].Closed); !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	return groups
}

// printExtra prints the floor and stuffing rows, round by round.
func printExtra(w io.Writer, r *peerResult) {
	if len(r.Extra) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "round\tfigure\tvalue\tguardian ÷ it (Redis CPU per decision)\tguardian, three limits ÷ it\t")
	for i := range r.Extra {
		x, rd := &r.Extra[i], &r.Rounds[i]
		g, g3 := &rd.Sides[sideGuardian].Closed, &rd.Sides[sideThree].Closed
		gcpu, g3cpu := g.micros(g.RedisCPU), g3.micros(g3.RedisCPU)
		for _, f := range x.Floor {
			per := ratio(f.RedisCPU*1e6, float64(f.Decisions))
			fmt.Fprintf(tw, "%d\tfloor script, %d decision(s) a call: decisions/s\t%s\t\t\t\n", i+1, f.Group, formatFigure(ratio(float64(f.Decisions), f.Seconds)))
			fmt.Fprintf(tw, "%d\tfloor script, %d decision(s) a call: Redis CPU per decision (µs)\t%s\t%s\t%s\t\n", i+1, f.Group, formatFigure(per), formatFigure(ratio(gcpu, per)), formatFigure(ratio(g3cpu, per)))
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
