package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/redistest"
)

// logRecorder is a slog.Handler that keeps every record at Warn and above,
// so a test can tell what an instance logged.
type logRecorder struct {
	mu   sync.Mutex
	recs []string
	errs int
}

func (l *logRecorder) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, b.String())
	if r.Level >= slog.LevelError {
		l.errs++
	}
	return nil
}

func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }

func (l *logRecorder) WithGroup(string) slog.Handler { return l }

// records returns what was logged, and how many records were errors.
func (l *logRecorder) records() ([]string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.recs...), l.errs
}

// TestDroppedConnectionsAreNotStoreFailures: 300 checks whose callers go
// away mid-request — half reset the TCP connection (SO_LINGER 0), half
// cancel the request — on a healthy Redis whose replies a proxy holds back
// 20ms, with more checks in flight than guardian has Redis connections, so
// that callers go away while their check waits for a connection, while its
// call is on the wire and after it: the fallback never turns on, nothing is
// decided by it, no store error is counted, and nothing is logged as an
// error (a 500 is).
func TestDroppedConnectionsAreNotStoreFailures(t *testing.T) {
	redis := redistest.Start(t)
	px := startProxy(t, redis.Addr())
	logs := &logRecorder{}
	in := startFleet(t, 1, fleetConfig{redisURL: px.url(), storeTimeout: time.Second, logger: slog.New(logs)})[0]
	if a := in.check(t, map[string]any{"flow": "login", "account": "warm", "ip": "192.0.2.1"}); a.status != 200 || a.degraded() {
		t.Fatalf("warm-up check: %d %s", a.status, a.raw)
	}
	decisionsBefore, _ := metric(t, in, "guardian_decisions_total")
	errorsBefore, _ := metric(t, in, "guardian_store_errors_total")

	px.setDelay(20 * time.Millisecond)
	// 10 connections per core: more callers than that wait for one.
	const workers, each = 3 * 10 * 2, 300 / (3 * 10 * 2)
	var wg sync.WaitGroup
	var answered atomic.Int64
	for w := range workers {
		wg.Go(func() {
			for j := range each {
				i := w*each + j
				body, _ := json.Marshal(map[string]any{"flow": "login", "account": fmt.Sprintf("gone-%d", i), "ip": fmt.Sprintf("10.1.%d.%d", i/250, i%250)})
				// Gone 1 to 40ms after sending: before, during and after
				// the store call.
				after := time.Duration(1+i%40) * time.Millisecond
				var err error
				if i%2 == 0 {
					err = resetMidRequest(in, body, after)
				} else {
					err = cancelMidRequest(in, body, after)
				}
				switch {
				case errors.Is(err, errAnswered):
					answered.Add(1)
				case err != nil:
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	px.setDelay(0)

	// A handler finishes a store call its caller left after it was sent
	// (one left before is not sent, store.WithCaller); wait for the last.
	deadline := time.Now().Add(5 * time.Second)
	decided := -1.0
	for {
		time.Sleep(100 * time.Millisecond)
		n, _ := metric(t, in, "guardian_decisions_total")
		if n-decisionsBefore == decided || time.Now().After(deadline) {
			break
		}
		decided = n - decisionsBefore
	}
	t.Logf("%d checks dropped (%d answered before their caller went away), %v decided", workers*each, answered.Load(), decided)
	if answered.Load() > workers*each/2 {
		t.Errorf("%d of %d checks were answered before their caller went away: the test did not test", answered.Load(), workers*each)
	}
	if got := fallbackActive(t, in); got != 0 {
		t.Errorf("guardian_fallback_active = %d after dropped connections, want 0", got)
	}
	if n, _ := metric(t, in, "guardian_store_errors_total"); n != errorsBefore {
		t.Errorf("guardian_store_errors_total went from %v to %v: a caller that goes away is not a store error", errorsBefore, n)
	}
	if n, _ := metric(t, in, "guardian_fallback_decisions_total"); n != 0 {
		t.Errorf("guardian_fallback_decisions_total = %v, want 0: nothing may be decided by the fallback", n)
	}
	recs, errs := logs.records()
	for _, r := range recs {
		if strings.Contains(r, "fallback") || strings.Contains(r, "request failed") {
			t.Errorf("logged: %s", r)
		}
	}
	if errs > 0 {
		t.Errorf("%d error records logged, want none: %q", errs, recs)
	}
	if a := in.check(t, map[string]any{"flow": "login", "account": "after", "ip": "192.0.2.2"}); a.status != 200 || a.degraded() {
		t.Fatalf("check after the drops: %d %s, want allowed by Redis", a.status, a.raw)
	}
}

// errAnswered reports a check answered before its caller went away.
var errAnswered = errors.New("answered before the caller went away")

// rawCheck is the HTTP request of a check with body, as it goes on the wire.
func rawCheck(body []byte) string {
	return "POST /v1/check HTTP/1.1\r\nHost: guardian\r\nContent-Type: application/json\r\n" +
		"Authorization: Bearer " + checkToken + "\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + string(body)
}

// resetMidRequest sends a check on a connection of its own and resets the
// connection (SO_LINGER 0: an RST, not a FIN) after the given time, or
// reports errAnswered if guardian answered first.
func resetMidRequest(in *instance, body []byte, after time.Duration) error {
	conn, err := net.Dial("tcp", strings.TrimPrefix(in.base, "http://"))
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(rawCheck(body))); err != nil {
		return err
	}
	if err := conn.SetReadDeadline(time.Now().Add(after)); err != nil {
		return err
	}
	var b [1]byte
	_, readErr := conn.Read(b[:])
	if err := conn.(*net.TCPConn).SetLinger(0); err != nil {
		return err
	}
	if readErr == nil {
		return errAnswered
	}
	return nil
}

// cancelMidRequest sends a check and cancels it after the given time (the
// client closes the connection), or reports errAnswered if guardian
// answered first.
func cancelMidRequest(in *instance, body []byte, after time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), after)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", in.base+"/v1/check", strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+checkToken)
	resp, err := client.Do(req)
	if err == nil {
		resp.Body.Close()
		return errAnswered
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
