package main

import (
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

// traffic is what a phase sends.
type traffic uint8

const (
	// healthz is GET /healthz: HTTP and nothing else, the ceiling.
	healthz traffic = iota
	// checks is the mix's checks alone, never reported.
	checks
	// attempts is the mix's checks, each followed by its report when it
	// was allowed or challenged, as an auth service does.
	attempts
	// newUsers is checks of distinct legitimate users, never reported:
	// every check adds the same keys to the store.
	newUsers
	// storeOnly is a new user's login batch sent straight to the store
	// (driver.store), without guardian: the floor of a store round trip.
	storeOnly
	// peerChecks is the peer comparison's decisions (driver.peer), to
	// guardian or to the envoy ratelimit service, never reported.
	peerChecks
	// stuffing is checks of a fresh account from a fresh IPv4 /24 each,
	// never reported; stuffingReported the same, each reported a failure
	// (peerfloor.go).
	stuffing
	stuffingReported
)

// load is one phase's traffic and how it is paced.
type load struct {
	traffic traffic
	// rate, when positive, is the open model: attempts start at fixed
	// intervals of 1/rate whatever the answers, and a check's latency runs
	// from when it was due, so a stall shows in every check it delays.
	// Zero is maximum throughput: each connection sends its next request
	// as soon as the last one is answered.
	rate float64
	// conns is how many keep-alive connections carry the load.
	conns int
	// duration bounds the phase in time, and limit, when positive, in
	// attempts.
	duration time.Duration
	limit    int64
}

// tally is what one connection saw; tallies are merged after a phase.
type tally struct {
	check, report Histogram
	// service is the latency of a check from when it was sent, not from
	// when it was due: what guardian took, without the wait for a free
	// connection or the load generator's own scheduling. Open model only.
	service Histogram
	// checks and reports count answered requests, errors failed ones
	// (transport errors and unexpected statuses).
	checks, reports uint64
	errors          uint64
	decisions       map[string]uint64
	degraded        uint64
	// late counts open-model attempts that started more than a millisecond
	// after they were due, because every connection was busy.
	late uint64
	// firstErr is the first error seen, for the summary.
	firstErr string
}

// merge adds o to t.
func (t *tally) merge(o *tally) {
	t.check.Merge(&o.check)
	t.service.Merge(&o.service)
	t.report.Merge(&o.report)
	t.checks += o.checks
	t.reports += o.reports
	t.errors += o.errors
	t.degraded += o.degraded
	t.late += o.late
	if t.decisions == nil {
		t.decisions = map[string]uint64{}
	}
	for k, v := range o.decisions {
		t.decisions[k] += v
	}
	if t.firstErr == "" {
		t.firstErr = o.firstErr
	}
}

// fail counts a failed request.
func (t *tally) fail(what string) {
	t.errors++
	if t.firstErr == "" {
		t.firstErr = what
	}
}

// driver sends a phase's load to guardian.
type driver struct {
	addr, token string
	mix         *mix
	timeout     time.Duration
	// store is guardian's store on the run's Redis, for storeOnly.
	store store.Store
	// peer is what peerChecks sends.
	peer *peerTraffic
	// fresh numbers the stuffing traffic's accounts and networks.
	fresh atomic.Uint64
	// seed makes the phases' random choices differ from run to run.
	seed uint64
}

// worker is one connection's state.
type worker struct {
	cn    *conn
	rng   *rand.Rand
	body  []byte
	rbody []byte
	t     tally
}

// run sends l and returns the merged tally and how long the load ran.
func (d *driver) run(l load) (tally, time.Duration) {
	ws := make([]*worker, l.conns)
	for i := range ws {
		ws[i] = &worker{
			cn:  newConn(d.addr, d.token, d.timeout),
			rng: rand.New(rand.NewPCG(d.seed, uint64(i)+1)),
			t:   tally{decisions: map[string]uint64{}},
		}
	}
	d.seed++
	var elapsed time.Duration
	if l.rate > 0 {
		elapsed = d.open(l, ws)
	} else {
		elapsed = d.closed(l, ws)
	}
	var all tally
	for _, w := range ws {
		w.cn.close()
		all.merge(&w.t)
	}
	return all, elapsed
}

// closed runs maximum throughput: every worker loops until the phase ends.
func (d *driver) closed(l load, ws []*worker) time.Duration {
	start := time.Now()
	end := start.Add(l.duration)
	var issued atomic.Int64
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			for time.Now().Before(end) {
				if l.limit > 0 && issued.Add(1) > l.limit {
					return
				}
				d.attempt(w, l.traffic, time.Time{})
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// open runs the open model: a scheduler hands out attempts at their due
// times; each carries its due time, from which its check's latency runs.
func (d *driver) open(l load, ws []*worker) time.Duration {
	interval := time.Duration(float64(time.Second) / l.rate)
	n := int64(l.duration / interval)
	if l.limit > 0 {
		n = min(n, l.limit)
	}
	// Each free worker claims the next attempt and sleeps until it is due;
	// when every worker is busy, the next attempt waits, and still counts
	// from when it was due.
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for _, w := range ws {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < n; i = next.Add(1) - 1 {
				at := start.Add(time.Duration(i) * interval)
				sleepUntil(at)
				if time.Since(at) > time.Millisecond {
					w.t.late++
				}
				d.attempt(w, l.traffic, at)
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// sleepUntil sleeps until t in the kernel. The Go runtime's own timers wake
// an idle process only to the millisecond (its poller waits in whole
// milliseconds), which would add up to a millisecond to every open-model
// latency; nanosleep wakes within the kernel's timer slack, tens of
// microseconds. It holds an OS thread while it sleeps, one per connection.
func sleepUntil(t time.Time) {
	for {
		d := time.Until(t)
		if d <= 0 {
			return
		}
		ts := syscall.NsecToTimespec(int64(d))
		_ = syscall.Nanosleep(&ts, nil) // EINTR: sleep again for what is left
	}
}

// attempt sends one request of traffic tr, due at due (open model), or now
// when due is zero.
func (d *driver) attempt(w *worker, tr traffic, due time.Time) {
	sent := time.Now()
	if tr == storeOnly {
		if d.recordCheck(w, due, sent, http.StatusOK, d.storeBatch(w), http.StatusOK) {
			w.t.checks++
		}
		return
	}
	if tr == healthz {
		status, _, err := w.cn.do("GET", "/healthz", nil)
		if d.recordCheck(w, due, sent, status, err, http.StatusOK) {
			w.t.checks++
		}
		return
	}
	if tr == peerChecks {
		d.peerCheck(w, due)
		return
	}
	if tr == stuffing || tr == stuffingReported {
		d.stuff(w, tr)
		return
	}
	var k kind
	if tr == newUsers {
		k, w.body = legit, d.mix.body(legit, w.rng, w.body[:0])
	} else {
		k, w.body = d.mix.next(w.rng, w.body[:0])
	}
	sent = time.Now()
	status, resp, err := w.cn.do("POST", "/v1/check", w.body)
	if !d.recordCheck(w, due, sent, status, err, http.StatusOK, http.StatusTooManyRequests) {
		return
	}
	w.t.checks++
	dec := decision(resp)
	w.t.decisions[dec]++
	if degraded(resp) {
		w.t.degraded++
	}
	if tr != attempts {
		return
	}
	id := attemptID(resp)
	if id == nil {
		if dec == "allow" || dec == "challenge" {
			w.t.fail("check answered " + dec + " without an attempt_id")
		}
		return
	}
	w.rbody = reportBody(w.rbody[:0], id, k)
	sent = time.Now()
	status, _, err = w.cn.do("POST", "/v1/report", w.rbody)
	if d.record(w, &w.t.report, time.Since(sent), status, err, http.StatusOK) {
		w.t.reports++
	}
}

// peerCheck sends one decision of the peer comparison: 200 is allowed, 429
// denied, for either service.
func (d *driver) peerCheck(w *worker, due time.Time) {
	w.body = d.peer.body(d.peer.pick(w.rng), w.body[:0])
	sent := time.Now()
	status, resp, err := w.cn.do("POST", d.peer.path, w.body)
	if !d.recordCheck(w, due, sent, status, err, http.StatusOK, http.StatusTooManyRequests) {
		return
	}
	w.t.checks++
	if status == http.StatusTooManyRequests {
		w.t.decisions["over_limit"]++
	}
	if degraded(resp) {
		w.t.degraded++
	}
}

// recordCheck records a check (or /healthz request) sent at sent: its
// latency from due in the open model, from sent otherwise, and in the open
// model its service time from sent too.
func (d *driver) recordCheck(w *worker, due, sent time.Time, status int, err error, want ...int) bool {
	end := time.Now()
	if due.IsZero() {
		return d.record(w, &w.t.check, end.Sub(sent), status, err, want...)
	}
	if !d.record(w, &w.t.check, end.Sub(due), status, err, want...) {
		return false
	}
	w.t.service.Record(end.Sub(sent))
	return true
}

// record records latency, that of a request that ended with status and
// err, and reports whether it succeeded: no error and one of want.
func (d *driver) record(w *worker, h *Histogram, latency time.Duration, status int, err error, want ...int) bool {
	if err != nil {
		w.t.fail(err.Error())
		return false
	}
	for _, s := range want {
		if status == s {
			h.Record(latency)
			return true
		}
	}
	w.t.fail("unexpected status " + http.StatusText(status))
	return false
}
