package server_test

import (
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/guardian-sec/guardian/internal/failclosed"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/server"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
)

// deadRedis is the address of a loopback port nothing listens on.
func deadRedis(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "redis://" + addr + "/0"
}

// TestSecondReportRefusedOnAFullFallback: with Redis unreachable and the
// fallback's table of 64 keys flooded many times over by random accounts
// whose failures are reported, until it holds little but report marks and
// hard stops, fresh users are still allowed, every hard stop holds, and a
// second report of an attempt is refused with 409 while its mark is there,
// through HTTP.
func TestSecondReportRefusedOnAFullFallback(t *testing.T) {
	client, err := redisstore.Open(deadRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	primary := redisstore.New(client, redisstore.Config{})
	const table = 64
	fc := failclosed.New(failclosed.Config{
		Primary:      primary,
		Probe:        primary.Probe,
		Timeout:      50 * time.Millisecond,
		MaxLocalKeys: table,
		Metrics:      metrics.New(prometheus.NewRegistry()),
	})
	in := startConfig(t, `version: 1
rules:
  - name: hard-stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 2
    on_store_error: local
`, server.Config{Store: fc})
	login := func(account string) map[string]any {
		return map[string]any{"flow": "login", "account": account, "ip": "192.0.2.2"}
	}
	// fail checks account and reports the attempt a failure.
	fail := func(account string) {
		t.Helper()
		r := in.check(t, login(account))
		if r.status != http.StatusOK || r.body["degraded"] != true {
			t.Fatalf("check of %s with Redis unreachable: %d %s, want allowed by the fallback", account, r.status, r.raw)
		}
		if rep := in.report(t, str(r.body["attempt_id"]), "failure"); rep.status != http.StatusOK {
			t.Fatalf("failure report of %s: %d %s", account, rep.status, rep.raw)
		}
	}
	blocked := func(account string) bool {
		t.Helper()
		r := in.check(t, login(account))
		if r.status != http.StatusOK && r.status != http.StatusTooManyRequests {
			t.Fatalf("check of %s: %d %s", account, r.status, r.raw)
		}
		return r.status == http.StatusTooManyRequests
	}

	// Two reported failures each: four hard stops, and their marks.
	const stops = 4
	for i := range stops {
		fail(fmt.Sprintf("stopped-%d", i))
		fail(fmt.Sprintf("stopped-%d", i))
	}
	// Each reported failure of a random account leaves a count and a mark;
	// the marks push the counts out, so the table ends up holding marks
	// and the hard stops alone.
	for i := range 3 * table {
		fail(fmt.Sprintf("flood-%d", i))
	}

	for i := range 8 {
		if account := fmt.Sprintf("fresh-%d", i); blocked(account) {
			t.Errorf("fresh user %s after the flood: slowed, want allowed", account)
		}
	}
	kept := in.check(t, login("kept"))
	if kept.status != http.StatusOK {
		t.Fatalf("fresh user's check after the flood: %d %s, want allowed", kept.status, kept.raw)
	}
	id := str(kept.body["attempt_id"])
	if r := in.report(t, id, "success"); r.status != http.StatusOK || str(r.body["device_token"]) == "" {
		t.Fatalf("first report on a full fallback: %d %s, want recorded", r.status, r.raw)
	}
	for _, outcome := range []string{"success", "failure"} {
		if r := in.report(t, id, outcome); r.status != http.StatusConflict || errorCode(t, r) != "already_reported" {
			t.Fatalf("second report (%s) on a full fallback: %d %s, want 409 already_reported", outcome, r.status, r.raw)
		}
	}
	for i := range stops {
		if account := fmt.Sprintf("stopped-%d", i); !blocked(account) {
			t.Errorf("hard-stopped %s after the flood: allowed, want still blocked", account)
		}
	}
}
