package aggregate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"
)

// fakeShared is a Shared in memory with the semantics of redisagg's script:
// per-instance totals raised, never lowered, and fleet totals grown by the
// difference. It can be made to fail, before or after applying a batch.
type fakeShared struct {
	mu    sync.Mutex
	fleet map[Bucket]int64
	by    map[Bucket]map[string]int64
	// fail, when set, is returned without applying anything.
	fail error
	// lost, when set, is returned after applying the batch: a reply lost
	// after the store ran the call.
	lost error
	// short drops the last total of each reply.
	short bool
	calls []Batch
}

func newFakeShared() *fakeShared {
	return &fakeShared{fleet: map[Bucket]int64{}, by: map[Bucket]map[string]int64{}}
}

func (f *fakeShared) Sync(_ context.Context, b *Batch) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, Batch{Sets: append([]Total(nil), b.Sets...), Reads: append([]Bucket(nil), b.Reads...)})
	if f.fail != nil {
		return f.fail
	}
	for _, t := range b.Sets {
		if f.by[t.Bucket] == nil {
			f.by[t.Bucket] = map[string]int64{}
		}
		if old := f.by[t.Bucket][b.Instance]; t.N > old {
			f.by[t.Bucket][b.Instance] = t.N
			f.fleet[t.Bucket] += t.N - old
		}
	}
	b.Totals = b.Totals[:0]
	for _, r := range b.Reads {
		b.Totals = append(b.Totals, f.fleet[r])
	}
	if f.short && len(b.Totals) > 0 {
		b.Totals = b.Totals[:len(b.Totals)-1]
	}
	return f.lost
}

func (f *fakeShared) set(fail, lost error, short bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail, f.lost, f.short = fail, lost, short
}

// total returns the fleet total of bucket index of login.
func (f *fakeShared) total(index int64) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fleet[Bucket{"login", index}]
}

// sum returns the fleet total of every bucket.
func (f *fakeShared) sum() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n int64
	for _, v := range f.fleet {
		n += v
	}
	return n
}

// takeCalls returns the batches received since the last take.
func (f *fakeShared) takeCalls() []Batch {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

var (
	errDown = errors.New("store down")
	quiet   = slog.New(slog.NewTextHandler(io.Discard, nil))
)

// fleetOf returns n Aggregates with 1s buckets over a minute on one fake
// store, each on its own clock at t0.
func fleetOf(tb testing.TB, n int) ([]*Aggregate, []*clock, *fakeShared) {
	tb.Helper()
	sh := newFakeShared()
	aggs := make([]*Aggregate, n)
	clocks := make([]*clock, n)
	for i := range n {
		clocks[i] = &clock{t: t0}
		aggs[i] = New(Config{Now: clocks[i].now, Bucket: time.Second, Window: time.Minute,
			Shared: sh, FleetSize: n, Logger: quiet})
	}
	return aggs, clocks, sh
}

// fleetStep moves every instance's clock to t0+at, adds add failures of
// login on instance on, then runs its sync, and checks every instance's
// count of login over 10s.
type fleetStep struct {
	at   time.Duration
	on   int
	add  int64
	sync string // "", "flush" or "refresh"
	want [3]int64
}

func runFleet(t *testing.T, aggs []*Aggregate, clocks []*clock, steps []fleetStep) {
	t.Helper()
	for i, s := range steps {
		for _, c := range clocks {
			c.at(s.at)
		}
		a := aggs[s.on]
		a.Add("login", s.add)
		var err error
		switch s.sync {
		case "flush":
			err = a.Flush(context.Background())
		case "refresh":
			err = a.Refresh(context.Background())
		}
		if err != nil {
			t.Fatalf("step %d: %s on %d: %v", i, s.sync, s.on, err)
		}
		var got [3]int64
		for j, a := range aggs {
			got[j] = a.Count([]string{"login"}, 10*time.Second)
		}
		if got != s.want {
			t.Errorf("step %d at t0+%v (%s on %d): counts %v, want %v", i, s.at, s.sync, s.on, got, s.want)
		}
	}
}

func TestFleetCountsEachFailureOnce(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name  string
		steps []fleetStep
	}{
		{
			name: "own failures at once, others after a flush and a refresh",
			steps: []fleetStep{
				{at: 1100 * ms, on: 0, add: 2, want: [3]int64{2, 0, 0}},
				{at: 1200 * ms, on: 1, add: 3, want: [3]int64{2, 3, 0}},
				// A flush sends; it reads nothing.
				{at: 1300 * ms, on: 0, sync: "flush", want: [3]int64{2, 3, 0}},
				{at: 1400 * ms, on: 2, sync: "refresh", want: [3]int64{2, 3, 2}},
				// B's refresh sends its own and reads A's: 3 + 2, not 3 + 5.
				{at: 1500 * ms, on: 1, sync: "refresh", want: [3]int64{2, 5, 2}},
				{at: 1600 * ms, on: 0, sync: "refresh", want: [3]int64{5, 5, 2}},
				{at: 1700 * ms, on: 2, sync: "refresh", want: [3]int64{5, 5, 5}},
				// Refreshing again changes nothing.
				{at: 1800 * ms, on: 0, sync: "refresh", want: [3]int64{5, 5, 5}},
				{at: 1900 * ms, on: 1, sync: "refresh", want: [3]int64{5, 5, 5}},
			},
		},
		{
			name: "failures after a refresh count locally until the next one",
			steps: []fleetStep{
				{at: 1100 * ms, on: 0, add: 4, sync: "refresh", want: [3]int64{4, 0, 0}},
				{at: 1200 * ms, on: 1, sync: "refresh", want: [3]int64{4, 4, 0}},
				{at: 2500 * ms, on: 0, add: 1, want: [3]int64{5, 4, 0}},
				{at: 2600 * ms, on: 0, add: 1, sync: "flush", want: [3]int64{6, 4, 0}},
				{at: 2700 * ms, on: 1, add: 1, sync: "refresh", want: [3]int64{6, 7, 0}},
				{at: 2800 * ms, on: 0, sync: "refresh", want: [3]int64{7, 7, 0}},
				{at: 2900 * ms, on: 2, sync: "refresh", want: [3]int64{7, 7, 7}},
			},
		},
		{
			name: "the fleet's failures leave the window on every instance",
			steps: []fleetStep{
				{at: 1000 * ms, on: 0, add: 3, sync: "refresh", want: [3]int64{3, 0, 0}},
				{at: 5000 * ms, on: 1, add: 2, sync: "refresh", want: [3]int64{3, 5, 0}},
				{at: 5100 * ms, on: 0, sync: "refresh", want: [3]int64{5, 5, 0}},
				{at: 5200 * ms, on: 2, sync: "refresh", want: [3]int64{5, 5, 5}},
				// (1s, 11s]: the first three were in (0, 1s].
				{at: 11000 * ms, want: [3]int64{2, 2, 2}},
				{at: 15000 * ms, want: [3]int64{0, 0, 0}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			aggs, clocks, _ := fleetOf(t, 3)
			runFleet(t, aggs, clocks, tt.steps)
		})
	}
}

func TestFleetInForceOnEveryInstance(t *testing.T) {
	// limit 30 a minute: 31 failures round-robin, 11 at most on one
	// instance, put every instance in force once each has refreshed.
	aggs, clocks, _ := fleetOf(t, 3)
	setAll := func(d time.Duration) {
		for _, c := range clocks {
			c.at(d)
		}
	}
	inForce := func(i int) (bool, int64) {
		return aggs[i].InForce("login-global", []string{"login"}, time.Minute, 30, 2*time.Second)
	}
	for i := range 31 {
		setAll(time.Second + time.Duration(i)*100*time.Millisecond)
		aggs[i%3].Add("login", 1)
	}
	for i := range 3 {
		if force, count := inForce(i); force || count > 11 {
			t.Fatalf("instance %d before any sync: InForce = %v, %d; want false, its own failures", i, force, count)
		}
	}
	setAll(5 * time.Second)
	for i := range 3 {
		if err := aggs[i].Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if err := aggs[i].Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		if force, count := inForce(i); !force || count != 31 {
			t.Errorf("instance %d after a refresh: InForce = %v, %d; want true, 31", i, force, count)
		}
	}
	// The failures leave the window at t0+1m+4.1s; the rule holds 2s more
	// from the first check that sees it below the limit.
	steps := []struct {
		at   time.Duration
		want bool
	}{
		{65 * time.Second, true},
		{67*time.Second - time.Nanosecond, true},
		{67 * time.Second, false},
	}
	for _, s := range steps {
		setAll(s.at)
		for i := range 3 {
			if force, _ := inForce(i); force != s.want {
				t.Errorf("instance %d at t0+%v: in force %v, want %v", i, s.at, force, s.want)
			}
		}
	}
}

func TestFleetLateFlushLandsInItsBucket(t *testing.T) {
	aggs, clocks, sh := fleetOf(t, 2)
	a, b := aggs[0], aggs[1]
	b.Watch("login", 10*time.Second)
	// Reported just before the boundary of (t0, t0+1s], flushed after it.
	clocks[0].at(950 * time.Millisecond)
	a.Add("login", 3)
	clocks[0].at(1050 * time.Millisecond)
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := t0.Unix() // the bucket (t0, t0+1s]
	if got, want := [2]int64{sh.total(first), sh.total(first + 1)}, [2]int64{3, 0}; got != want {
		t.Fatalf("fleet totals of buckets ending t0+1s and t0+2s = %v, want %v", got, want)
	}
	clocks[1].at(1100 * time.Millisecond)
	if err := b.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	counts := []struct {
		at   time.Duration
		per  time.Duration
		want int64
	}{
		{1000 * time.Millisecond, time.Second, 3},            // (t0, t0+1s]: its bucket
		{1100 * time.Millisecond, 100 * time.Millisecond, 0}, // after it
		{10 * time.Second, 10 * time.Second, 3},
		{11 * time.Second, 10 * time.Second, 0}, // expired with its bucket
	}
	for _, c := range counts {
		clocks[1].at(c.at)
		if got := b.Count([]string{"login"}, c.per); got != c.want {
			t.Errorf("B at t0+%v: Count(per %v) = %d, want %d", c.at, c.per, got, c.want)
		}
	}
}

func TestFleetDegradedAndRecovery(t *testing.T) {
	aggs, clocks, sh := fleetOf(t, 3)
	a, b := aggs[0], aggs[1]
	ctx := context.Background()
	at := func(d time.Duration) {
		for _, c := range clocks {
			c.at(d)
		}
	}
	count := func(x *Aggregate) int64 { return x.Count([]string{"login"}, 10*time.Second) }

	at(time.Second)
	a.Add("login", 2)
	b.Add("login", 1)
	for _, x := range aggs {
		if err := x.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	at(2300 * time.Millisecond)
	for _, x := range aggs {
		if err := x.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := [2]int64{count(a), count(b)}; got != [2]int64{3, 3} {
		t.Fatalf("counts before the outage = %v, want [3 3]", got)
	}

	// The outage starts in the bucket of the last good refresh: what came
	// after the refresh counts whole, not weighted as part of a bucket.
	sh.set(errDown, nil, false)
	at(2600 * time.Millisecond)
	a.Add("login", 4) // in (t0+2s, t0+3s]
	err := a.Refresh(ctx)
	if !errors.Is(err, errDown) {
		t.Fatalf("Refresh with the store down: %v, want %v", err, errDown)
	}
	if !a.Degraded() {
		t.Fatal("Degraded() = false after a failed refresh")
	}
	if b.Degraded() {
		t.Fatal("B degraded before any of its syncs failed")
	}
	// Up to the last good refresh (t0+2.3s) as read: 3. Since: A's 4, and as
	// many again for each of the two other instances.
	if got, want := count(a), int64(3+4+2*4); got != want {
		t.Errorf("A's degraded count = %d, want %d", got, want)
	}
	if got, want := count(b), int64(3); got != want {
		t.Errorf("B's count = %d, want %d (it has not seen A's new failures)", got, want)
	}

	// The store answers again: A's failures of the outage are flushed late,
	// into their own bucket, and the estimate ends.
	sh.set(nil, nil, false)
	at(4 * time.Second)
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if a.Degraded() {
		t.Error("Degraded() = true after a good refresh")
	}
	if got, want := sh.total(t0.Unix()+2), int64(4); got != want {
		t.Errorf("fleet total of (t0+2s, t0+3s] = %d, want %d", got, want)
	}
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := [2]int64{count(a), count(b)}; got != [2]int64{7, 7} {
		t.Errorf("counts after recovery = %v, want [7 7]", got)
	}
}

func TestFleetNeverDegradedBeforeItsFirstRefresh(t *testing.T) {
	aggs, clocks, sh := fleetOf(t, 4)
	a := aggs[0]
	sh.set(errDown, nil, false)
	clocks[0].at(time.Second)
	a.Add("login", 2)
	if err := a.Flush(context.Background()); err == nil {
		t.Fatal("Flush with the store down: nil error")
	}
	// No refresh ever succeeded: the whole window is an estimate.
	if got, want := a.Count([]string{"login"}, 10*time.Second), int64(4*2); got != want {
		t.Errorf("degraded count = %d, want %d (local × fleet size)", got, want)
	}
}

func TestFleetSetAppliedTwiceCountsOnce(t *testing.T) {
	aggs, clocks, sh := fleetOf(t, 2)
	a, b := aggs[0], aggs[1]
	b.Watch("login", 10*time.Second)
	ctx := context.Background()
	clocks[0].at(1500 * time.Millisecond)
	clocks[1].at(1500 * time.Millisecond)
	a.Add("login", 5)
	// The store applies the flush but the answer is lost: A sends it again
	// with what came since.
	sh.set(nil, errDown, false)
	if err := a.Flush(ctx); err == nil {
		t.Fatal("Flush with a lost answer: nil error")
	}
	sh.set(nil, nil, false)
	a.Add("login", 1)
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := sh.total(t0.Unix()+1), int64(6); got != want {
		t.Errorf("fleet total = %d, want %d", got, want)
	}
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for i, x := range aggs {
		if got, want := x.Count([]string{"login"}, 10*time.Second), int64(6); got != want {
			t.Errorf("instance %d: Count = %d, want %d", i, got, want)
		}
	}
}

func TestFleetBadTotals(t *testing.T) {
	aggs, _, sh := fleetOf(t, 2)
	aggs[0].Watch("login", time.Minute)
	sh.set(nil, nil, true)
	err := aggs[0].Refresh(context.Background())
	if !errors.Is(err, ErrBadTotals) {
		t.Fatalf("Refresh with a short answer: %v, want ErrBadTotals", err)
	}
	if !aggs[0].Degraded() {
		t.Error("Degraded() = false after a short answer")
	}
}

func TestFleetCallsAreTrafficIndependent(t *testing.T) {
	tests := []struct {
		name      string
		failures  int // spread over the 100ms before the flush
		wantCalls int
		wantSets  int
	}{
		{"nothing to send makes no call", 0, 0, 0},
		{"one failure is one set", 1, 1, 1},
		{"ten thousand failures are one set", 10000, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			aggs, clocks, sh := fleetOf(t, 1)
			a := aggs[0]
			for i := range tt.failures {
				clocks[0].at(time.Second + time.Duration(i+1)*(100*time.Millisecond)/time.Duration(tt.failures+1))
				a.Add("login", 1)
			}
			clocks[0].at(1100 * time.Millisecond)
			if err := a.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			calls := sh.takeCalls()
			sets := 0
			for _, c := range calls {
				sets += len(c.Sets)
				if len(c.Reads) != 0 {
					t.Errorf("a flush read %d buckets", len(c.Reads))
				}
			}
			if len(calls) != tt.wantCalls || sets != tt.wantSets {
				t.Errorf("calls, sets = %d, %d; want %d, %d", len(calls), sets, tt.wantCalls, tt.wantSets)
			}
			if err := a.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if c := sh.takeCalls(); len(c) != 0 {
				t.Errorf("a second flush with nothing new made %d calls", len(c))
			}
		})
	}
}

func TestFleetRefreshReadsTheLongestWindow(t *testing.T) {
	tests := []struct {
		name  string
		watch map[string]time.Duration
		// A count over per of login before the refresh.
		per  time.Duration
		want map[string]int // buckets read per flow
	}{
		// The window's buckets, the one before its edge and the one after
		// now. A flow only added to is read over Rate's 10s.
		{"nothing to read", nil, 0, map[string]int{}},
		{"rate span by default", map[string]time.Duration{"login": 0}, 0, map[string]int{"login": 13, "login~given-back": 13}},
		{"a count's per", nil, 30 * time.Second, map[string]int{"login": 33, "login~given-back": 33}},
		{"watched flows", map[string]time.Duration{"login": time.Minute, "otp_verify": 20 * time.Second}, 0,
			map[string]int{"login": 63, "login~given-back": 63, "otp_verify": 23, "otp_verify~given-back": 23}},
		{"clamped to the window", map[string]time.Duration{"login": time.Hour}, 0, map[string]int{"login": 63, "login~given-back": 63}},
		{"never shrinks", map[string]time.Duration{"login": time.Minute}, 5 * time.Second, map[string]int{"login": 63, "login~given-back": 63}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			aggs, clocks, sh := fleetOf(t, 1)
			a := aggs[0]
			clocks[0].at(90*time.Second + 500*time.Millisecond)
			for f, per := range tt.watch {
				a.Watch(f, per)
			}
			if tt.per > 0 {
				a.Count([]string{"login"}, tt.per)
			}
			if err := a.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			calls := sh.takeCalls()
			if len(calls) != 1 {
				t.Fatalf("%d calls, want 1", len(calls))
			}
			got := map[string]int{}
			for _, r := range calls[0].Reads {
				got[r.Flow]++
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("buckets read = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStartFlushesRefreshesAndCloses(t *testing.T) {
	before := runtime.NumGoroutine()
	sh := newFakeShared()
	var mu sync.Mutex
	observed := map[string]float64{}
	newAgg := func() *Aggregate {
		return New(Config{Bucket: time.Second, Window: time.Minute, Shared: sh, Logger: quiet,
			FlushEvery: 5 * time.Millisecond, RefreshEvery: 10 * time.Millisecond,
			Observe: func(flow string, perSecond float64) {
				mu.Lock()
				observed[flow] = perSecond
				mu.Unlock()
			}})
	}
	a, b := newAgg(), newAgg()
	a.Start()
	a.Start() // a second Start does nothing
	b.Start()
	a.Add("login", 20)
	// B sees A's failures within a few ticks, and so does the gauge.
	deadline := time.Now().Add(5 * time.Second)
	for b.Count([]string{"login"}, 10*time.Second) != 20 {
		if time.Now().After(deadline) {
			t.Fatalf("B's count = %d after 5s, want 20", b.Count([]string{"login"}, 10*time.Second))
		}
		time.Sleep(time.Millisecond)
	}
	for {
		mu.Lock()
		got := observed["login"]
		mu.Unlock()
		if got == 2 { // 20 failures over 10s
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("observed login rate = %v, want 2", got)
		}
		time.Sleep(time.Millisecond)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// What is added just before Close is flushed by it.
	a.Add("login", 3)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if total := sh.sum(); total != 23 {
		t.Errorf("fleet total after Close = %d, want 23", total)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if after := settle(before); after > before {
		t.Errorf("goroutines: %d before Start, %d after Close", before, after)
	}
}

func TestStartWithoutSharedObserves(t *testing.T) {
	before := runtime.NumGoroutine()
	got := make(chan float64, 1)
	a := New(Config{RefreshEvery: 5 * time.Millisecond, Observe: func(flow string, perSecond float64) {
		if flow == "login" {
			select {
			case got <- perSecond:
			default:
			}
		}
	}})
	a.Add("login", 30)
	a.Start()
	select {
	case r := <-got:
		if r != 3 {
			t.Errorf("observed rate %v, want 3", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Observe not called within 5s")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if a.Degraded() {
		t.Error("Degraded() = true without a Shared store")
	}
	if after := settle(before); after > before {
		t.Errorf("goroutines: %d before Start, %d after Close", before, after)
	}
}

// settle waits up to a second for the goroutine count to fall to want, and
// returns it.
func settle(want int) int {
	deadline := time.Now().Add(time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func BenchmarkInForceFleet(b *testing.B) {
	for _, degraded := range []bool{false, true} {
		b.Run(fmt.Sprintf("degraded=%v", degraded), func(b *testing.B) {
			sh := newFakeShared()
			a := New(Config{Shared: sh, FleetSize: 3, Logger: quiet})
			flows := []string{"login", "password_reset"}
			for _, f := range flows {
				a.Add(f, 1)
			}
			if err := a.Refresh(context.Background()); err != nil {
				b.Fatal(err)
			}
			if degraded {
				sh.set(errDown, nil, false)
				_ = a.Refresh(context.Background())
			}
			b.ReportAllocs()
			for b.Loop() {
				a.InForce("login-global", flows, time.Minute, 1000, 30*time.Second)
			}
		})
	}
}
