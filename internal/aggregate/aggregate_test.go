package aggregate

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// t0 is on a bucket boundary for every bucket width the tests use.
var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// clock is a settable clock for one goroutine.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// at sets the clock to t0+d.
func (c *clock) at(d time.Duration) { c.t = t0.Add(d) }

// newAt returns an Aggregate with 1s buckets over window, on a clock at t0.
func newAt(tb testing.TB, window time.Duration) (*Aggregate, *clock) {
	tb.Helper()
	c := &clock{t: t0}
	return New(Config{Now: c.now, Bucket: time.Second, Window: window}), c
}

// add is one Add at t0+at.
type add struct {
	at   time.Duration
	flow string
	n    int64
}

func TestCountWindow(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name  string
		adds  []add
		now   time.Duration
		flows []string
		per   time.Duration
		want  int64
	}{
		{
			name: "nothing recorded",
			now:  time.Minute, flows: []string{"login"}, per: time.Minute, want: 0,
		},
		{
			name:  "failure exactly per ago is out",
			adds:  []add{{0, "login", 1}},
			now:   time.Minute,
			flows: []string{"login"}, per: time.Minute, want: 0,
		},
		{
			name:  "failure just inside is in",
			adds:  []add{{time.Nanosecond, "login", 1}},
			now:   time.Minute,
			flows: []string{"login"}, per: time.Minute, want: 1,
		},
		{
			name:  "failure now is in",
			adds:  []add{{time.Minute, "login", 3}},
			now:   time.Minute,
			flows: []string{"login"}, per: time.Minute, want: 3,
		},
		{
			name:  "current partial bucket counts whole",
			adds:  []add{{59*time.Second + 100*ms, "login", 2}},
			now:   59*time.Second + 200*ms,
			flows: []string{"login"}, per: time.Minute, want: 2,
		},
		{
			name:  "whole buckets inside",
			adds:  []add{{10 * time.Second, "login", 1}, {30 * time.Second, "login", 2}, {50 * time.Second, "login", 4}},
			now:   time.Minute,
			flows: []string{"login"}, per: 40 * time.Second, want: 6,
		},
		{
			name:  "straddling bucket weighted three quarters",
			adds:  []add{{500 * ms, "login", 4}},
			now:   10*time.Second + 250*ms,
			flows: []string{"login"}, per: 10 * time.Second, want: 3,
		},
		{
			name:  "straddling bucket weighted one quarter",
			adds:  []add{{500 * ms, "login", 4}, {5 * time.Second, "login", 1}},
			now:   10*time.Second + 750*ms,
			flows: []string{"login"}, per: 10 * time.Second, want: 2,
		},
		{
			name:  "several flows summed",
			adds:  []add{{time.Second, "login", 2}, {2 * time.Second, "password_reset", 3}, {3 * time.Second, "otp_send", 7}},
			now:   10 * time.Second,
			flows: []string{"login", "password_reset"}, per: time.Minute, want: 5,
		},
		{
			name:  "unknown flow is zero",
			adds:  []add{{time.Second, "login", 2}},
			now:   10 * time.Second,
			flows: []string{"otp_verify"}, per: time.Minute, want: 0,
		},
		{
			name:  "non-positive n ignored",
			adds:  []add{{time.Second, "login", 0}, {time.Second, "login", -5}, {time.Second, "login", 1}},
			now:   10 * time.Second,
			flows: []string{"login"}, per: time.Minute, want: 1,
		},
		{
			name:  "non-positive per is zero",
			adds:  []add{{time.Second, "login", 1}},
			now:   time.Second,
			flows: []string{"login"}, per: 0, want: 0,
		},
		{
			name:  "per longer than window clamped",
			adds:  []add{{time.Second, "login", 5}, {2 * time.Minute, "login", 1}},
			now:   2 * time.Minute,
			flows: []string{"login"}, per: 24 * time.Hour, want: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, c := newAt(t, time.Minute)
			for _, ad := range tt.adds {
				c.at(ad.at)
				a.Add(ad.flow, ad.n)
			}
			c.at(tt.now)
			if got := a.Count(tt.flows, tt.per); got != tt.want {
				t.Errorf("Count(%v, %v) = %d, want %d", tt.flows, tt.per, got, tt.want)
			}
		})
	}
}

func TestCountErrorWithinOneBucket(t *testing.T) {
	// Failures every 100ms for a minute; at every 50ms step the count over
	// 10s is within one bucket's failures (10) of the true count.
	const step = 100 * time.Millisecond
	a, c := newAt(t, time.Minute)
	var times []time.Duration
	for d := step; d <= time.Minute; d += step {
		c.at(d)
		a.Add("login", 1)
		times = append(times, d)
	}
	for now := 10 * time.Second; now <= time.Minute; now += 50 * time.Millisecond {
		c.at(now)
		var want int64
		for _, d := range times {
			if d > now-10*time.Second && d <= now {
				want++
			}
		}
		if got := a.Count([]string{"login"}, 10*time.Second); got < want-10 || got > want+10 {
			t.Errorf("at t0+%v: Count = %d, true %d, want within one bucket (10)", now, got, want)
		}
	}
}

func TestBucketsExpire(t *testing.T) {
	a, c := newAt(t, 10*time.Second)
	c.at(500 * time.Millisecond)
	a.Add("login", 5)

	steps := []struct {
		now  time.Duration
		add  int64
		per  time.Duration
		want int64
	}{
		{now: 10 * time.Second, per: 10 * time.Second, want: 5},
		{now: 11 * time.Second, per: 10 * time.Second, want: 0},
		{now: 11 * time.Second, per: time.Hour, want: 0},
		// Bucket (t0+12s, t0+13s] reuses the ring slot of the first
		// failures; they must not show through.
		{now: 12*time.Second + 500*time.Millisecond, add: 1, per: 10 * time.Second, want: 1},
		// After a long idle the ring is rewritten from scratch.
		{now: 3 * time.Hour, add: 2, per: 10 * time.Second, want: 2},
		{now: 3*time.Hour + 5*time.Second, per: 10 * time.Second, want: 2},
		{now: 3*time.Hour + 10*time.Second, per: 10 * time.Second, want: 0},
	}
	for _, s := range steps {
		c.at(s.now)
		a.Add("login", s.add)
		if got := a.Count([]string{"login"}, s.per); got != s.want {
			t.Errorf("at t0+%v: Count(per %v) = %d, want %d", s.now, s.per, got, s.want)
		}
	}
}

func TestLateFailures(t *testing.T) {
	a, c := newAt(t, 10*time.Second)
	steps := []struct {
		name string
		at   time.Duration // when the failure is recorded
		n    int64
		now  time.Duration // when counted
		per  time.Duration
		want int64
	}{
		{name: "on time", at: 5 * time.Second, n: 1, now: 5 * time.Second, per: 10 * time.Second, want: 1},
		{name: "late within the window counts", at: 3 * time.Second, n: 2, now: 5 * time.Second, per: 10 * time.Second, want: 3},
		{name: "late lands in its own bucket", now: 5 * time.Second, per: time.Second, want: 1},
		{name: "late failure span", now: 5 * time.Second, per: 3 * time.Second, want: 3},
		{name: "moves on", at: 30 * time.Second, n: 4, now: 30 * time.Second, per: 10 * time.Second, want: 4},
		{name: "older than the ring is dropped", at: 10 * time.Second, n: 100, now: 30 * time.Second, per: 10 * time.Second, want: 4},
		{name: "dropped failure leaves other buckets alone", now: 30 * time.Second, per: time.Second, want: 4},
	}
	for _, s := range steps {
		if s.n > 0 {
			c.at(s.at)
			a.Add("login", s.n)
		}
		c.at(s.now)
		if got := a.Count([]string{"login"}, s.per); got != s.want {
			t.Errorf("%s: Count(per %v) = %d, want %d", s.name, s.per, got, s.want)
		}
	}
}

func TestRate(t *testing.T) {
	a, c := newAt(t, time.Minute)
	// 5 failures long ago, 20 in the last 10 seconds.
	c.at(time.Second)
	a.Add("login", 5)
	for i := range 20 {
		c.at(50*time.Second + 200*time.Millisecond + time.Duration(i)*400*time.Millisecond)
		a.Add("login", 1)
	}
	c.at(time.Minute)
	if got, want := a.Rate("login"), 2.0; math.Abs(got-want) > 1e-9 {
		t.Errorf("Rate(login) = %v, want %v", got, want)
	}
	if got, want := a.Rate("otp_send"), 0.0; got != want {
		t.Errorf("Rate(otp_send) = %v, want %v", got, want)
	}

	// A window shorter than 10s averages over the window.
	short, sc := newAt(t, 4*time.Second)
	sc.at(time.Second)
	short.Add("login", 8)
	sc.at(2 * time.Second)
	if got, want := short.Rate("login"), 2.0; math.Abs(got-want) > 1e-9 {
		t.Errorf("Rate(login) over a 4s window = %v, want %v", got, want)
	}
}

// inForceStep calls InForce at t0+at after adding n login failures.
type inForceStep struct {
	at        time.Duration
	n         int64
	wantForce bool
	wantCount int64
}

func runInForce(t *testing.T, a *Aggregate, c *clock, rule string, limit int64, steps []inForceStep) {
	t.Helper()
	for i, s := range steps {
		c.at(s.at)
		a.Add("login", s.n)
		force, count := a.InForce(rule, []string{"login"}, 10*time.Second, limit, 5*time.Second)
		if force != s.wantForce || count != s.wantCount {
			t.Errorf("step %d at t0+%v: InForce = %v, %d; want %v, %d", i, s.at, force, count, s.wantForce, s.wantCount)
		}
	}
}

func TestInForce(t *testing.T) {
	const limit = 3
	tests := []struct {
		name  string
		steps []inForceStep
	}{
		{
			name: "crosses on the limit+1th failure, holds for hysteresis, then clears",
			steps: []inForceStep{
				{at: 500 * time.Millisecond, n: 1, wantCount: 1},
				{at: 1500 * time.Millisecond, n: 2, wantCount: 3},
				{at: 2 * time.Second, wantCount: 3},
				{at: 2500 * time.Millisecond, n: 1, wantForce: true, wantCount: 4},
				{at: 9 * time.Second, wantForce: true, wantCount: 4},
				// The first failure leaves the window: at the limit, not over.
				{at: 11 * time.Second, wantForce: true, wantCount: 3},
				{at: 13 * time.Second, wantForce: true, wantCount: 0},
				{at: 16*time.Second - time.Nanosecond, wantForce: true, wantCount: 0},
				{at: 16 * time.Second, wantForce: false, wantCount: 0},
				{at: 17 * time.Second, wantForce: false, wantCount: 0},
			},
		},
		{
			name: "a rise during hysteresis starts the wait again",
			steps: []inForceStep{
				{at: time.Second, n: 4, wantForce: true, wantCount: 4},
				{at: 11 * time.Second, wantForce: true, wantCount: 0},
				{at: 14 * time.Second, n: 4, wantForce: true, wantCount: 4},
				{at: 24 * time.Second, wantForce: true, wantCount: 0},
				{at: 29*time.Second - time.Nanosecond, wantForce: true, wantCount: 0},
				{at: 29 * time.Second, wantForce: false, wantCount: 0},
			},
		},
		{
			name: "never over the limit never in force",
			steps: []inForceStep{
				{at: time.Second, n: 3, wantCount: 3},
				{at: 5 * time.Second, wantCount: 3},
				{at: 20 * time.Second, n: 3, wantCount: 3},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, c := newAt(t, time.Minute)
			runInForce(t, a, c, "login-global", limit, tt.steps)
		})
	}
}

func TestInForceZeroHysteresis(t *testing.T) {
	a, c := newAt(t, time.Minute)
	c.at(time.Second)
	a.Add("login", 2)
	if force, count := a.InForce("r", []string{"login"}, 10*time.Second, 1, 0); !force || count != 2 {
		t.Errorf("InForce = %v, %d; want true, 2", force, count)
	}
	c.at(11 * time.Second)
	if force, count := a.InForce("r", []string{"login"}, 10*time.Second, 1, 0); force || count != 0 {
		t.Errorf("InForce after the drop = %v, %d; want false, 0", force, count)
	}
}

func TestInForceStatePerRule(t *testing.T) {
	a, c := newAt(t, time.Minute)
	c.at(time.Second)
	a.Add("login", 5)
	if force, _ := a.InForce("strict", []string{"login"}, 10*time.Second, 4, time.Minute); !force {
		t.Fatal("strict not in force at 5 failures, limit 4")
	}
	if force, _ := a.InForce("lax", []string{"login"}, 10*time.Second, 10, time.Minute); force {
		t.Error("lax in force at 5 failures, limit 10")
	}

	c.at(20 * time.Second)
	if force, _ := a.InForce("strict", []string{"login"}, 10*time.Second, 4, time.Minute); !force {
		t.Error("strict left force before its hysteresis")
	}

	// A rule forgotten on reload starts out of force.
	a.Forget([]string{"lax"})
	if force, _ := a.InForce("strict", []string{"login"}, 10*time.Second, 4, time.Minute); force {
		t.Error("strict still in force after Forget dropped it")
	}
	if got, want := len(*a.rules.Load()), 2; got != want {
		t.Errorf("rules kept = %d, want %d", got, want)
	}
	a.Forget(nil)
	if got, want := len(*a.rules.Load()), 0; got != want {
		t.Errorf("rules kept after Forget(nil) = %d, want %d", got, want)
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name       string
		cfg        Config
		wantBucket time.Duration
		wantWindow time.Duration
	}{
		{"defaults", Config{}, time.Second, time.Hour},
		{"negative taken as default", Config{Bucket: -1, Window: -1}, time.Second, time.Hour},
		{"window rounded up to whole buckets", Config{Bucket: time.Second, Window: 2500 * time.Millisecond}, time.Second, 3 * time.Second},
		{"window at least one bucket", Config{Bucket: time.Minute, Window: time.Second}, time.Minute, time.Minute},
		// 1h/65536 rounded up to the nanosecond, and the window rounded up
		// to whole buckets of that width.
		{"bucket widened to bound memory", Config{Bucket: time.Nanosecond, Window: time.Hour}, 54931641, maxBuckets * 54931641},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := New(tt.cfg)
			if got := a.Bucket(); got != tt.wantBucket {
				t.Errorf("Bucket() = %v, want %v", got, tt.wantBucket)
			}
			if got := a.Window(); got != tt.wantWindow {
				t.Errorf("Window() = %v, want %v", got, tt.wantWindow)
			}
			if got := a.size; got > maxBuckets+2 {
				t.Errorf("ring size = %d, want at most %d", got, maxBuckets+2)
			}
			if a.Degraded() {
				t.Error("Degraded() = true, want false for a local aggregate")
			}
		})
	}
}

func TestAddConcurrent(t *testing.T) {
	const (
		goroutines = 50
		perG       = 2000
	)
	// Each read of the clock moves it 1ms, so goroutines race across bucket
	// boundaries and some Adds land late.
	var ns atomic.Int64
	ns.Store(t0.UnixNano())
	now := func() time.Time { return time.Unix(0, ns.Add(int64(time.Millisecond))) }
	a := New(Config{Now: now, Bucket: time.Second, Window: time.Hour})

	flows := []string{"login", "password_reset"}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				a.Add(flows[(g+i)%2], int64(1+i%3))
			}
		})
	}
	// Readers race with the writers.
	for range 4 {
		wg.Go(func() {
			for range 200 {
				a.InForce("login-global", flows, time.Hour, 1, time.Second)
				a.Rate("login")
			}
		})
	}
	wg.Wait()

	var want int64
	for range goroutines {
		for i := range perG {
			want += int64(1 + i%3)
		}
	}
	// The clock advanced about 100s in total, well inside the window.
	if got := a.Count(flows, time.Hour); got != want {
		t.Errorf("Count = %d, want the sum of every Add, %d", got, want)
	}
}

func BenchmarkAdd(b *testing.B) {
	a := New(Config{})
	a.Add("login", 1)
	b.ReportAllocs()
	for b.Loop() {
		a.Add("login", 1)
	}
}

func BenchmarkAddParallel(b *testing.B) {
	a := New(Config{})
	a.Add("login", 1)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a.Add("login", 1)
		}
	})
}

func BenchmarkInForce(b *testing.B) {
	for _, per := range []time.Duration{time.Minute, time.Hour} {
		b.Run(per.String(), func(b *testing.B) {
			a := New(Config{})
			flows := []string{"login", "password_reset"}
			for _, f := range flows {
				a.Add(f, 1)
			}
			b.ReportAllocs()
			for b.Loop() {
				a.InForce("login-global", flows, per, 1000, 30*time.Second)
			}
		})
	}
}
