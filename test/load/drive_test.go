package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeGuardian answers like guardian: /healthz, and /v1/check and
// /v1/report behind a bearer token. Accounts starting with "victim-" are
// slowed on every other check; everything else is allowed. It counts what it
// was sent.
type fakeGuardian struct {
	srv *httptest.Server

	mu       sync.Mutex
	conns    int
	outcomes map[string]int
	reported map[string]bool
	checks   int
	// stallAt, when positive, makes the check of that number sleep for
	// stall before answering.
	stallAt int
	stall   time.Duration
	// failEvery, when positive, answers every failEvery-th check with 500.
	failEvery int
}

const fakeToken = "tok"

func newFakeGuardian(t *testing.T) *fakeGuardian {
	t.Helper()
	f := &fakeGuardian{outcomes: map[string]int{}, reported: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, `{"status":"ok"}`)
	})
	mux.HandleFunc("POST /v1/check", f.check)
	mux.HandleFunc("POST /v1/report", f.report)
	f.srv = httptest.NewUnstartedServer(mux)
	f.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.mu.Lock()
			f.conns++
			f.mu.Unlock()
		}
	}
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeGuardian) addr() string { return strings.TrimPrefix(f.srv.URL, "http://") }

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func (f *fakeGuardian) check(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+fakeToken {
		writeJSON(w, http.StatusUnauthorized, `{"error":{"code":"unauthorized","message":"no"}}`)
		return
	}
	var c checkBody
	if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
		writeJSON(w, http.StatusBadRequest, `{"error":{"code":"invalid_json","message":"no"}}`)
		return
	}
	f.mu.Lock()
	f.checks++
	n := f.checks
	stall := n == f.stallAt
	fail := f.failEvery > 0 && n%f.failEvery == 0
	f.mu.Unlock()
	if stall {
		time.Sleep(f.stall)
	}
	if fail {
		writeJSON(w, http.StatusInternalServerError, `{"error":{"code":"internal","message":"x"}}`)
		return
	}
	if strings.HasPrefix(c.Account, "victim-") && n%2 == 0 {
		writeJSON(w, http.StatusTooManyRequests, `{"decision":"slow","rule":"login-account","retry_after_ms":1000,"degraded":false,"limits":[],"shadow":[]}`)
		return
	}
	writeJSON(w, http.StatusOK, fmt.Sprintf(`{"decision":"allow","retry_after_ms":0,"attempt_id":"a%d","degraded":false,"limits":[],"shadow":[]}`, n))
}

func (f *fakeGuardian) report(w http.ResponseWriter, r *http.Request) {
	var rep struct {
		AttemptID string `json:"attempt_id"`
		Outcome   string `json:"outcome"`
	}
	if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
		writeJSON(w, http.StatusBadRequest, `{"error":{"code":"invalid_json","message":"no"}}`)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reported[rep.AttemptID] {
		writeJSON(w, http.StatusConflict, `{"error":{"code":"already_reported","message":"x"}}`)
		return
	}
	f.reported[rep.AttemptID] = true
	f.outcomes[rep.Outcome]++
	writeJSON(w, http.StatusOK, `{"recorded":true}`)
}

func TestConnKeepsOneConnectionAlive(t *testing.T) {
	f := newFakeGuardian(t)
	cn := newConn(f.addr(), fakeToken, 5*time.Second)
	defer cn.close()
	for i := range 50 {
		body := fmt.Appendf(nil, `{"flow":"login","account":"u%d","ip":"10.0.0.1"}`, i)
		status, resp, err := cn.do("POST", "/v1/check", body)
		if err != nil || status != http.StatusOK || decision(resp) != "allow" {
			t.Fatalf("check %d = %d %s %v, want 200 allow", i, status, resp, err)
		}
	}
	if status, _, err := cn.do("GET", "/healthz", nil); err != nil || status != http.StatusOK {
		t.Fatalf("healthz = %d %v, want 200", status, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns != 1 {
		t.Fatalf("51 requests opened %d connections, want 1", f.conns)
	}
}

func TestConnRefusesChunkedAndRedials(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			_, _ = io.WriteString(w, "part")
			w.(http.Flusher).Flush() // no Content-Length: chunked
			return
		}
		writeJSON(w, http.StatusOK, `{"status":"ok"}`)
	}))
	defer srv.Close()
	cn := newConn(strings.TrimPrefix(srv.URL, "http://"), "", 5*time.Second)
	defer cn.close()
	if _, _, err := cn.do("GET", "/", nil); !errors.Is(err, errResponse) {
		t.Fatalf("chunked answer: err = %v, want errResponse", err)
	}
	status, body, err := cn.do("GET", "/", nil)
	if err != nil || status != http.StatusOK || string(body) != `{"status":"ok"}` {
		t.Fatalf("after redial = %d %q %v, want 200 and the body", status, body, err)
	}
}

func testDriver(f *fakeGuardian, m *mix) *driver {
	return &driver{addr: f.addr(), token: fakeToken, mix: m, timeout: 5 * time.Second, seed: 1}
}

func TestAttemptsReportTheirOutcome(t *testing.T) {
	f := newFakeGuardian(t)
	m := &mix{AttackShare: 0.5, AttackAccounts: 3, AttackPrefixes: 2, Tag: "t"}
	tl, _ := testDriver(f, m).run(load{traffic: attempts, conns: 4, duration: time.Minute, limit: 400})
	if tl.checks != 400 || tl.errors != 0 {
		t.Fatalf("checks, errors = %d, %d; want 400, 0 (%s)", tl.checks, tl.errors, tl.firstErr)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// Every allowed check is reported once: attackers' as failures, the
	// others' as successes; slowed checks have nothing to report.
	if got, want := tl.reports, uint64(f.outcomes["success"]+f.outcomes["failure"]); got != want {
		t.Errorf("driver counted %d reports, guardian recorded %d", got, want)
	}
	if got, want := tl.reports, tl.decisions["allow"]; got != want {
		t.Errorf("reports = %d, want one per allowed check (%d)", got, want)
	}
	if f.outcomes["failure"] == 0 || f.outcomes["success"] == 0 || tl.decisions["slow"] == 0 {
		t.Errorf("outcomes %v, decisions %v: want failures, successes and slowed checks", f.outcomes, tl.decisions)
	}
	if tl.check.Count() != tl.checks || tl.report.Count() != tl.reports {
		t.Errorf("histograms hold %d checks and %d reports, want %d and %d", tl.check.Count(), tl.report.Count(), tl.checks, tl.reports)
	}
}

func TestErrorsAreCounted(t *testing.T) {
	f := newFakeGuardian(t)
	f.failEvery = 10
	m := &mix{AttackAccounts: 1, AttackPrefixes: 1, Tag: "t"}
	tl, _ := testDriver(f, m).run(load{traffic: checks, conns: 1, duration: time.Minute, limit: 100})
	if tl.checks != 90 || tl.errors != 10 || !strings.Contains(tl.firstErr, "Internal Server Error") {
		t.Fatalf("checks, errors, first = %d, %d, %q; want 90, 10, a 500", tl.checks, tl.errors, tl.firstErr)
	}
}

func TestOpenModelCountsQueueingBehindAStall(t *testing.T) {
	// One connection, a check due every millisecond, and one check that
	// takes 60ms. Checks due during the stall wait for the connection; in
	// the open model their latency runs from when they were due, so the
	// stall shows in each of them, not only in the one that stalled.
	f := newFakeGuardian(t)
	f.stallAt, f.stall = 20, 60*time.Millisecond
	m := &mix{AttackAccounts: 1, AttackPrefixes: 1, Tag: "t"}
	tl, _ := testDriver(f, m).run(load{traffic: checks, rate: 1000, conns: 1, duration: 200 * time.Millisecond})
	if tl.errors != 0 {
		t.Fatalf("errors = %d (%s)", tl.errors, tl.firstErr)
	}
	var waited uint64
	// Count checks that waited at least 30ms: those due in the first half
	// of the stall. Slower machines only make more of them wait.
	for i, c := range tl.check.counts {
		if lo, _ := bucketBounds(i); time.Duration(lo) >= 30*time.Millisecond {
			waited += c
		}
	}
	if waited < 20 {
		t.Errorf("%d checks recorded at least 30ms, want the ~30 due during the first half of the stall", waited)
	}
	if tl.late < 20 {
		t.Errorf("late = %d, want at least the checks due during the stall", tl.late)
	}
}

func TestHealthzPhase(t *testing.T) {
	f := newFakeGuardian(t)
	tl, _ := testDriver(f, &mix{}).run(load{traffic: healthz, conns: 2, duration: time.Minute, limit: 100})
	if tl.checks != 100 || tl.errors != 0 || len(tl.decisions) != 0 {
		t.Fatalf("checks, errors, decisions = %d, %d, %v; want 100, 0, none", tl.checks, tl.errors, tl.decisions)
	}
}
