package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/redistest"
)

// faultRules has one rule of each on_store_error, each on its own flow so a
// check exercises exactly one of them.
const faultRules = `version: 1
rules:
  - name: local-budget
    flows: [login]
    key: ip
    type: rate
    limit: 1
    per: 1h
    burst: 10
    on_store_error: local
  - name: closed-rule
    flows: [password_reset]
    key: ip
    type: rate
    limit: 1000
    per: 1s
    on_store_error: closed
  - name: open-rule
    flows: [otp_verify]
    key: ip
    type: rate
    limit: 1000
    per: 1s
    on_store_error: open
`

// faultTimeout is the store deadline of the fault tests: short enough that a
// stalled Redis is noticed at once, long enough for a loaded CI machine.
const faultTimeout = 50 * time.Millisecond

// sample is one answer of the background load.
type sample struct {
	at       time.Time
	latency  time.Duration
	status   int
	degraded bool
	err      error
}

// loadGen sends checks to a fleet from a few goroutines until stopped.
type loadGen struct {
	mu      sync.Mutex
	samples []sample
	stop    chan struct{}
	wg      sync.WaitGroup
	seq     atomic.Int64
}

// startLoad keeps workers checks in flight, spread over the fleet and over
// many IPs so that the local budget does not deny them.
func startLoad(fleet []*instance, workers int) *loadGen {
	g := &loadGen{stop: make(chan struct{})}
	for w := range workers {
		g.wg.Go(func() {
			for {
				select {
				case <-g.stop:
					return
				default:
				}
				n := g.seq.Add(1)
				body := map[string]any{"flow": "login", "ip": fmt.Sprintf("10.%d.%d.%d", w, (n/250)%250, n%250)}
				start := time.Now()
				a, err := fleet[int(n)%len(fleet)].call("POST", "/v1/check", checkToken, body)
				s := sample{at: start, latency: time.Since(start), status: a.status, degraded: a.degraded(), err: err}
				g.mu.Lock()
				g.samples = append(g.samples, s)
				g.mu.Unlock()
			}
		})
	}
	return g
}

// finish stops the load and returns every sample.
func (g *loadGen) finish() []sample {
	close(g.stop)
	g.wg.Wait()
	return g.samples
}

// snapshot returns the samples so far.
func (g *loadGen) snapshot() []sample {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.samples)
}

// assertAllDecided fails on any transport error, 5xx, or status other than
// a decision.
func assertAllDecided(t *testing.T, samples []sample) {
	t.Helper()
	if len(samples) == 0 {
		t.Fatal("the load sent nothing")
	}
	for _, s := range samples {
		if s.err != nil {
			t.Fatalf("a check failed at the transport: %v", s.err)
		}
		if s.status != 200 && s.status != 429 {
			t.Fatalf("a check answered %d: every check must be decided", s.status)
		}
	}
}

// firstDegradedAfter returns how long after t the first degraded answer was
// sent, or -1.
func firstDegradedAfter(samples []sample, t time.Time) time.Duration {
	for _, s := range samples {
		if s.degraded && !s.at.Before(t) {
			return s.at.Add(s.latency).Sub(t)
		}
	}
	return -1
}

// waitShared waits until in answers from the shared store again and reports
// fallback_active 0, and returns how long that took.
func waitShared(t *testing.T, in *instance, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		a := in.check(t, map[string]any{"flow": "otp_verify", "ip": "192.0.2.250"})
		if !a.degraded() && fallbackActive(t, in) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("still degraded %v after the store came back (last answer %s)", within, a.raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fallbackActive reads guardian_fallback_active from in's /metrics.
func fallbackActive(t *testing.T, in *instance) int {
	t.Helper()
	v, found := metric(t, in, "guardian_fallback_active")
	if !found {
		t.Fatal("no guardian_fallback_active in /metrics")
	}
	return int(v)
}

// metric is the sum of every series of the metric name in in's /metrics,
// and whether there was one: a vector none of whose series was ever set is
// absent, which reads as 0.
func metric(t *testing.T, in *instance, name string) (float64, bool) {
	t.Helper()
	resp, err := client.Get(in.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sum, found := 0.0, false
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (!strings.HasPrefix(rest, " ") && !strings.HasPrefix(rest, "{")) {
			continue
		}
		v, err := strconv.ParseFloat(rest[strings.LastIndexByte(rest, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		sum, found = sum+v, true
	}
	return sum, found
}

func readyz(t *testing.T, in *instance) string {
	t.Helper()
	a := in.must(t, "GET", "/readyz", "", nil)
	s, _ := a.body["store"].(string)
	return s
}

func TestStoreDiesUnderLoad(t *testing.T) {
	redis := redistest.Start(t)
	fleet := startFleet(t, 2, fleetConfig{redisURL: redis.URL(), rulesYAML: faultRules, storeTimeout: faultTimeout})
	load := startLoad(fleet, 4)
	time.Sleep(300 * time.Millisecond)
	for _, s := range load.snapshot() {
		if s.degraded {
			t.Fatal("degraded answers while Redis was up")
		}
	}

	killed := time.Now()
	redis.Stop(t)
	time.Sleep(500 * time.Millisecond)

	// Each on_store_error does what it says, on every instance.
	for i, in := range fleet {
		allowed := 0
		for range 30 {
			a := in.check(t, map[string]any{"flow": "login", "ip": "198.51.100.200"})
			if !a.degraded() {
				t.Fatalf("instance %d: answer not degraded with Redis down: %s", i, a.raw)
			}
			if a.status == 200 {
				allowed++
			}
		}
		// A budget of 10 shared by a fleet of 2: at most 5 each.
		if allowed != 5 {
			t.Fatalf("instance %d: local rule admitted %d of 30, want 10 / fleet size 2 = 5", i, allowed)
		}
		t.Logf("instance %d: local rule (budget 10, fleet 2) admitted %d checks during the outage", i, allowed)
		a := in.check(t, map[string]any{"flow": "password_reset", "ip": "198.51.100.201"})
		if a.status != 429 || a.str("decision") != "slow" || a.str("rule") != "closed-rule" || a.body["retry_after_ms"] != 1000.0 || !a.degraded() {
			t.Fatalf("instance %d: closed rule answered %d %s, want slow 1000ms by closed-rule, degraded", i, a.status, a.raw)
		}
		a = in.check(t, map[string]any{"flow": "otp_verify", "ip": "198.51.100.202"})
		if a.status != 200 || a.str("decision") != "allow" || !a.degraded() {
			t.Fatalf("instance %d: open rule answered %d %s, want allow, degraded", i, a.status, a.raw)
		}
		if got := fallbackActive(t, in); got != 1 {
			t.Fatalf("instance %d: guardian_fallback_active = %d, want 1", i, got)
		}
		if got := readyz(t, in); got != "degraded" {
			t.Fatalf("instance %d: /readyz store = %q, want degraded", i, got)
		}
		if a := in.must(t, "GET", "/healthz", "", nil); a.status != 200 {
			t.Fatalf("instance %d: /healthz = %d with Redis down", i, a.status)
		}
	}
	samples := load.finish()
	assertAllDecided(t, samples)
	t.Logf("first degraded answer %v after Redis stopped", firstDegradedAfter(samples, killed))

	redis.Start(t)
	// The container came back on a new port; a new fleet on its address
	// shows the shared store in use again.
	back := startFleet(t, 1, fleetConfig{redisURL: redis.URL(), rulesYAML: faultRules, storeTimeout: faultTimeout})
	if a := back[0].check(t, map[string]any{"flow": "login", "ip": "198.51.100.203"}); a.degraded() || a.status != 200 {
		t.Fatalf("after Redis restarted: %d %s", a.status, a.raw)
	}
}

func TestStorePausedUnderLoad(t *testing.T) {
	redis := redistest.Start(t)
	fleet := startFleet(t, 2, fleetConfig{redisURL: redis.URL(), rulesYAML: faultRules, storeTimeout: faultTimeout})
	load := startLoad(fleet, 4)
	time.Sleep(300 * time.Millisecond)
	paused := time.Now()
	redis.Pause(t)
	time.Sleep(2 * time.Second)
	during := load.snapshot()
	redis.Unpause(t)
	for i, in := range fleet {
		took := waitShared(t, in, 2*time.Second)
		t.Logf("instance %d back on the shared store %v after unpause", i, took)
	}
	samples := load.finish()
	assertAllDecided(t, samples)

	var lat []time.Duration
	for _, s := range during {
		if s.at.After(paused) {
			lat = append(lat, s.latency)
		}
	}
	if len(lat) == 0 {
		t.Fatal("no checks answered while Redis was paused")
	}
	slices.Sort(lat)
	p99, worst := lat[len(lat)*99/100], lat[len(lat)-1]
	t.Logf("while paused: %d checks, p99 %v, max %v (store timeout %v); first degraded answer %v after the pause",
		len(lat), p99, worst, faultTimeout, firstDegradedAfter(samples, paused))
	// Not a benchmark: a bound that only a check waiting on the stalled
	// store would break.
	if worst > 20*faultTimeout {
		t.Fatalf("a check took %v while Redis was paused: something waited on the stalled store", worst)
	}
}

func TestStoreRestartReloadsScripts(t *testing.T) {
	redis := redistest.Start(t)
	px := startProxy(t, redis.Addr())
	fleet := startFleet(t, 2, fleetConfig{redisURL: px.url(), rulesYAML: faultRules, storeTimeout: faultTimeout})
	load := startLoad(fleet, 4)
	time.Sleep(300 * time.Millisecond)
	redis.Restart(t)
	px.setTarget(redis.Addr())
	for _, in := range fleet {
		waitShared(t, in, 5*time.Second)
	}
	// State was lost and the script cache with it: checks still spend on
	// the shared store.
	for i := range 3 {
		a := fleet[i%2].check(t, map[string]any{"flow": "login", "ip": "198.51.100.210"})
		if a.degraded() || a.status != 200 || a.remaining("local-budget") != int64(9-i) {
			t.Fatalf("check %d after restart: %d %s", i, a.status, a.raw)
		}
	}
	assertAllDecided(t, load.finish())
}

func TestNetworkCutBehavesLikeDeath(t *testing.T) {
	redis := redistest.Start(t)
	px := startProxy(t, redis.Addr())
	fleet := startFleet(t, 1, fleetConfig{redisURL: px.url(), rulesYAML: faultRules, storeTimeout: faultTimeout})
	in := fleet[0]
	load := startLoad(fleet, 2)
	time.Sleep(200 * time.Millisecond)
	px.setCut(true)
	time.Sleep(300 * time.Millisecond)
	a := in.check(t, map[string]any{"flow": "password_reset", "ip": "198.51.100.220"})
	if a.status != 429 || a.str("rule") != "closed-rule" || !a.degraded() {
		t.Fatalf("closed rule with the network cut: %d %s", a.status, a.raw)
	}
	allowed := 0
	for range 20 {
		if in.check(t, map[string]any{"flow": "login", "ip": "198.51.100.221"}).status == 200 {
			allowed++
		}
	}
	if allowed != 10 {
		t.Fatalf("local rule admitted %d of 20 with the network cut, want its budget 10 (fleet of 1)", allowed)
	}
	px.setCut(false)
	waitShared(t, in, 2*time.Second)
	assertAllDecided(t, load.finish())
}

func TestFlappingStoreLeaksNothing(t *testing.T) {
	redis := redistest.Start(t)
	fleet := startFleet(t, 2, fleetConfig{redisURL: redis.URL(), rulesYAML: faultRules, storeTimeout: faultTimeout})
	// Warm up so that pools and servers have their goroutines.
	assertAllDecided(t, startLoad(fleet, 4).finishAfter(300*time.Millisecond))
	settle()
	before := runtime.NumGoroutine()

	load := startLoad(fleet, 4)
	end := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) {
		redis.Pause(t)
		time.Sleep(250 * time.Millisecond)
		redis.Unpause(t)
		time.Sleep(250 * time.Millisecond)
	}
	samples := load.finish()
	assertAllDecided(t, samples)
	for _, in := range fleet {
		waitShared(t, in, 2*time.Second)
	}
	client.CloseIdleConnections()
	settle()
	after := runtime.NumGoroutine()
	t.Logf("flapping: %d checks, goroutines %d before, %d after", len(samples), before, after)
	if after > before+10 {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Fatalf("goroutines grew from %d to %d:\n%s", before, after, buf[:n])
	}
	clients, err := redis.Client(t).ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(clients, "\n"); n > 2*2*20 {
		t.Fatalf("%d Redis connections after flapping: connections leak", n)
	}
}

// finishAfter lets the load run for d, then stops it.
func (g *loadGen) finishAfter(d time.Duration) []sample {
	time.Sleep(d)
	return g.finish()
}

// settle gives finished goroutines time to exit.
func settle() {
	for range 10 {
		runtime.GC()
		time.Sleep(100 * time.Millisecond)
	}
}

func TestHardStopSurvivesRedisRestartWithAOF(t *testing.T) {
	redis := redistest.Start(t, redistest.WithAOF())
	px := startProxy(t, redis.Addr())
	fleet := startFleet(t, 1, fleetConfig{redisURL: px.url(), rulesYAML: `version: 1
rules:
  - name: hard-stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 3
`})
	in := fleet[0]
	for i := range 3 {
		a := in.check(t, map[string]any{"flow": "login", "account": "durable", "ip": fmt.Sprintf("192.0.2.%d", i)})
		in.report(t, a.str("attempt_id"), "failure")
	}
	if a := in.check(t, map[string]any{"flow": "login", "account": "durable", "ip": "192.0.2.9"}); a.str("decision") != "block" {
		t.Fatalf("before restart: %s, want block", a.raw)
	}
	// appendfsync everysec: give the AOF its second.
	time.Sleep(1500 * time.Millisecond)
	redis.Restart(t)
	px.setTarget(redis.Addr())
	waitReady := time.Now().Add(5 * time.Second)
	for {
		a := in.check(t, map[string]any{"flow": "login", "account": "durable", "ip": "192.0.2.10"})
		if !a.degraded() {
			if a.str("decision") != "block" || a.status != http.StatusTooManyRequests {
				t.Fatalf("after restart: %d %s, want still blocked", a.status, a.raw)
			}
			break
		}
		if time.Now().After(waitReady) {
			t.Fatal("never answered from Redis after the restart")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
