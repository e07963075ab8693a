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
// fallback's table of 64 keys filled with what it never gives up for an
// unconfirmed key — hard stops and report marks — a first report of an
// attempt is recorded and a second is refused with 409, through HTTP.
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
    limit: 1
    on_store_error: local
`, server.Config{Store: fc})

	kept := in.check(t, map[string]any{"flow": "login", "account": "kept", "ip": "192.0.2.1"})
	if kept.status != http.StatusOK || kept.body["degraded"] != true {
		t.Fatalf("check with Redis unreachable: %d %s, want allowed by the fallback", kept.status, kept.raw)
	}

	// Each failure reported leaves a hard stop (limit 1) and a mark: the
	// table fills with entries an unconfirmed key may not evict, until a new
	// account's check finds no room.
	full := false
	for i := 0; i < 2*table && !full; i++ {
		r := in.check(t, map[string]any{"flow": "login", "account": fmt.Sprintf("flood-%d", i), "ip": "192.0.2.2"})
		switch r.status {
		case http.StatusOK:
			if rep := in.report(t, str(r.body["attempt_id"]), "failure"); rep.status != http.StatusOK {
				t.Fatalf("failure report %d: %d %s", i, rep.status, rep.raw)
			}
		case http.StatusTooManyRequests:
			full = true
		default:
			t.Fatalf("check %d: %d %s", i, r.status, r.raw)
		}
	}
	if !full {
		t.Fatalf("the fallback's table of %d keys never filled", table)
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
}
