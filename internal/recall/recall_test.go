package recall

import (
	"fmt"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func TestObserve(t *testing.T) {
	m := New(0)
	rate := store.Op{Key: "rate", Cost: 1, Limit: store.Rate{Interval: time.Minute, Burst: 5}}
	stop := store.Op{Key: "stop", Cost: 1, Limit: store.Counter{Max: 100, Hold: time.Hour}}
	fallback := store.Op{Key: "fallback", Cost: 1, Limit: store.Rate{Interval: time.Minute, Burst: 5}}
	m.Observe([]store.Op{rate, stop, fallback}, []store.Result{
		{RetryAfter: 30 * time.Second, ResetAfter: 5 * time.Minute},
		{Count: 100, ResetAfter: time.Hour},
		{RetryAfter: time.Second, Degraded: true},
	}, t0)
	tests := []struct {
		key  string
		at   time.Time
		want Denial
		ok   bool
	}{
		{"rate", t0.Add(29 * time.Second), Denial{Until: t0.Add(30 * time.Second)}, true},
		{"rate", t0.Add(30 * time.Second), Denial{}, false},
		{"stop", t0.Add(59 * time.Minute), Denial{Until: t0.Add(time.Hour), Stop: true}, true},
		{"fallback", t0, Denial{}, false},
		{"unknown", t0, Denial{}, false},
	}
	for _, tt := range tests {
		got, ok := m.Denied(tt.key, tt.at)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Denied(%s, t0+%v) = %+v, %v; want %+v, %v", tt.key, tt.at.Sub(t0), got, ok, tt.want, tt.ok)
		}
	}
	// An answer that allows the key forgets it; Forget does too.
	m.Observe([]store.Op{stop}, []store.Result{{Allowed: true, Count: 1}}, t0)
	if _, ok := m.Denied("stop", t0); ok {
		t.Error("stop still denied after an answer allowed it")
	}
	m.Observe([]store.Op{rate}, []store.Result{{RetryAfter: time.Minute}}, t0)
	m.Forget("rate")
	if _, ok := m.Denied("rate", t0); ok {
		t.Error("rate still denied after Forget")
	}
}

// TestBounded: a memory holds at most about its bound, and forgets slowed
// keys before hard stops.
func TestBounded(t *testing.T) {
	const max = 640
	m := New(max)
	stop := func(i int) string { return fmt.Sprintf("stop-%d", i) }
	for i := range 100 {
		k := stop(i)
		m.Observe([]store.Op{{Key: k, Limit: store.Counter{Max: 1}}}, []store.Result{{Count: 1, ResetAfter: time.Hour}}, t0)
	}
	for i := range 10_000 {
		k := fmt.Sprintf("slow-%d", i)
		m.Observe([]store.Op{{Key: k, Limit: store.Rate{}}}, []store.Result{{RetryAfter: time.Minute}}, t0)
	}
	if n := m.Len(); n > max+shards {
		t.Errorf("Len = %d, want at most %d", n, max+shards)
	}
	kept := 0
	for i := range 100 {
		if d, ok := m.Denied(stop(i), t0); ok && d.Stop {
			kept++
		}
	}
	if kept != 100 {
		t.Errorf("%d of 100 hard stops kept through a flood of slowed keys, want all", kept)
	}
}

// TestStopsFillingTheMemory: when hard stops fill the memory, a flood of
// slowed keys pushes none of them out: a slow is forgotten in favour of a
// stop, never a stop in favour of a slow.
func TestStopsFillingTheMemory(t *testing.T) {
	const max = 64
	m := New(max)
	stop := func(i int) string { return fmt.Sprintf("stop-%d", i) }
	for i := range 2000 {
		m.Observe([]store.Op{{Key: stop(i), Limit: store.Counter{Max: 1}}}, []store.Result{{Count: 1, ResetAfter: time.Hour}}, t0)
	}
	var stops []string
	for i := range 2000 {
		if _, ok := m.Denied(stop(i), t0); ok {
			stops = append(stops, stop(i))
		}
	}
	if len(stops) < max {
		t.Fatalf("%d hard stops remembered after 2,000, want the memory full (%d)", len(stops), max)
	}
	for i := range 10_000 {
		m.Observe([]store.Op{{Key: fmt.Sprintf("slow-%d", i), Limit: store.Rate{}}}, []store.Result{{RetryAfter: time.Minute}}, t0)
	}
	lost := 0
	for _, k := range stops {
		if d, ok := m.Denied(k, t0); !ok || !d.Stop {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d hard stops forgotten for slowed keys", lost, len(stops))
	}
}

// login is a check's batch as the built-in rules make it: the account's
// rate, the address prefix's rate, the account's hard stop.
func login(ip string) []store.Op {
	return []store.Op{
		{Key: "acct:rate", Cost: 1, Limit: store.Rate{Interval: time.Minute, Burst: 5}},
		{Key: ip + ":rate", Cost: 1, Limit: store.Rate{Interval: 20 * time.Second, Burst: 30}},
		{Key: "acct:stop", Cost: 1, Limit: store.Counter{Max: 100, Hold: time.Hour}},
	}
}

// slowedAnswer is the store's answer to login: the account slowed for 40
// seconds (its arrival time 4m40s ahead), the address with 10 units left,
// the hard stop at 7.
func slowedAnswer() []store.Result {
	return []store.Result{
		{RetryAfter: 40 * time.Second, ResetAfter: 4*time.Minute + 40*time.Second},
		{Allowed: true, Remaining: 10, ResetAfter: 400 * time.Second},
		{Allowed: true, Remaining: 93, Count: 7, ResetAfter: time.Hour},
	}
}

func TestAnswer(t *testing.T) {
	m := New(0)
	ops := login("ip1")
	res := make([]store.Result, len(ops))
	m.Observe(ops, slowedAnswer(), t0)
	if m.Answer(ops, res, t0.Add(time.Second)) {
		t.Fatal("answered while not listening")
	}
	m.Listening(true)
	if m.Answer(ops, res, t0.Add(time.Second)) {
		t.Fatal("answered from what was seen before listening began")
	}
	m.ObserveAt(ops, slowedAnswer(), t0, m.Epoch())
	if !m.Answer(ops, res, t0.Add(10*time.Second)) {
		t.Fatal("no answer for a slowed account")
	}
	// Ten seconds on: the wait is ten seconds shorter, the address has
	// refilled by none yet (20 s an interval), the count is as it was.
	want := []store.Result{
		{RetryAfter: 30 * time.Second, ResetAfter: 4*time.Minute + 30*time.Second},
		{Allowed: true, Remaining: 10, ResetAfter: 390 * time.Second},
		{Allowed: true, Remaining: 93, Count: 7, ResetAfter: time.Hour - 10*time.Second},
	}
	for i := range want {
		if res[i] != want[i] {
			t.Errorf("op %d: %+v, want %+v", i, res[i], want[i])
		}
	}
	// At the retry time the store is asked again: the answer never outlasts
	// the store's.
	if m.Answer(ops, res, t0.Add(40*time.Second)) {
		t.Error("answered at the retry time")
	}
	// A cost that fits sooner is the store's to decide; so is a check with
	// a key never seen (another address).
	m.ObserveAt(ops, slowedAnswer(), t0, m.Epoch())
	if m.Answer(login("ip2"), res, t0.Add(time.Second)) {
		t.Error("answered a check with an address never seen")
	}
	// A shadow op that would be spent needs the store.
	shadow := append(login("ip1"), store.Op{Key: "ip1:rate", Role: store.Shadow, Cost: 1, Limit: store.Rate{Interval: time.Second, Burst: 100}})
	shadow[1].Key = "other"
	if m.Answer(shadow, make([]store.Result, len(shadow)), t0.Add(time.Second)) {
		t.Error("answered a check whose shadow op would be spent")
	}
	// A soft op that is slowed denies nothing: no answer.
	soft := login("ip1")
	soft[0].Role = store.Soft
	if m.Answer(soft, res, t0.Add(time.Second)) {
		t.Error("answered a check slowed only by a soft op")
	}
	// A new epoch (a reset heard, a reload) ends every local answer until
	// the store answers again, and the fallback keeps its denials.
	m.Invalidate()
	if m.Answer(ops, res, t0.Add(time.Second)) {
		t.Error("answered after Invalidate")
	}
	if _, ok := m.Denied("acct:rate", t0.Add(time.Second)); !ok {
		t.Error("Invalidate dropped a denial the fallback needs")
	}
	// An answer for a call sent before the epoch moved answers nothing.
	old := m.Epoch()
	m.Invalidate()
	m.ObserveAt(ops, slowedAnswer(), t0, old)
	if m.Answer(ops, res, t0.Add(time.Second)) {
		t.Error("answered from a call sent in an earlier epoch")
	}
	// Not listening any more: no answers.
	m.ObserveAt(ops, slowedAnswer(), t0, m.Epoch())
	m.Listening(false)
	if m.Answer(ops, res, t0.Add(time.Second)) {
		t.Error("answered while not listening")
	}
	// The allowed keys of a denied check are not denials.
	if _, ok := m.Denied("ip1:rate", t0); ok {
		t.Error("an allowed key of a denied check reads as denied")
	}
}
