package integration

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	guardianclient "github.com/guardian-sec/guardian/client"
	"github.com/guardian-sec/guardian/internal/redistest"
)

const budgetRules = `version: 1
rules:
  - name: budget
    flows: [login]
    key: ip
    type: rate
    limit: 1
    per: 1h
    burst: 20
`

// concurrentChecks sends n checks at once spread round-robin over the fleet
// and counts the statuses; every answer must come from the shared store.
func concurrentChecks(t *testing.T, fleet []*instance, n int, body func(i int) map[string]any) map[int]int {
	t.Helper()
	got := map[int]int{}
	for i, a := range sendAtOnce(t, fleet, n, body) {
		if a.degraded() {
			t.Fatalf("check %d was decided by the fallback: %s", i, a.raw)
		}
		got[a.status]++
	}
	return got
}

// sendAtOnce sends n checks at once spread round-robin over the fleet and
// returns the answers; a transport error fails the test.
func sendAtOnce(t *testing.T, fleet []*instance, n int, body func(i int) map[string]any) []answer {
	t.Helper()
	var wg sync.WaitGroup
	answers := make([]answer, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			answers[i], errs[i] = fleet[i%len(fleet)].call("POST", "/v1/check", checkToken, body(i))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
	}
	return answers
}

func TestExactAcrossInstancesOnOneRedis(t *testing.T) {
	redis := redistest.Start(t)
	fleet := startFleet(t, 3, fleetConfig{redisURL: redis.URL(), rulesYAML: budgetRules})
	got := concurrentChecks(t, fleet, 50, func(i int) map[string]any {
		return map[string]any{"flow": "login", "account": fmt.Sprintf("u%d", i), "ip": "198.51.100.1"}
	})
	if got[http.StatusOK] != 20 || got[http.StatusTooManyRequests] != 30 {
		t.Fatalf("statuses = %v, want exactly 20 × 200 and 30 × 429", got)
	}
}

func TestExactAcrossInstancesOnRedisCluster(t *testing.T) {
	cluster := redistest.StartCluster(t)
	// Account and IP hash to different slots: the batch spans nodes.
	fleet := startFleet(t, 3, fleetConfig{redisURL: strings.Join(cluster.Addrs(), ","), rulesYAML: clusterRules})
	if !exactRound(t, fleet, "198.51.100.2", "c") {
		t.Fatal("the fallback decided a check with the Cluster up")
	}
}

func TestLoginProtectionsAcrossInstances(t *testing.T) {
	redis := redistest.Start(t)
	fleet := startFleet(t, 3, fleetConfig{redisURL: redis.URL(), rulesYAML: `version: 1
rules:
  - name: per-account
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1h
    burst: 3
  - name: per-ip
    flows: [login]
    key: ip
    type: rate
    limit: 1
    per: 1h
    burst: 2
  - name: hard-stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 5
`})
	a, b, c := fleet[0], fleet[1], fleet[2]

	t.Run("denied checks spend nothing", func(t *testing.T) {
		req := map[string]any{"flow": "login", "account": "deny", "ip": "192.0.2.50"}
		a.check(t, req)
		b.check(t, req)
		for range 3 {
			if got := c.check(t, req); got.status != 429 || got.str("rule") != "per-ip" {
				t.Fatalf("third check from the IP: %d %s", got.status, got.raw)
			}
		}
		if got := a.check(t, map[string]any{"flow": "login", "account": "deny", "ip": "192.0.2.51"}).remaining("per-account"); got != 0 {
			t.Fatalf("per-account remaining = %d, want 0 (3 - 2 spent - this one)", got)
		}
	})

	t.Run("success gives back, failures stay", func(t *testing.T) {
		for i := range 6 {
			in := fleet[i%3]
			got := in.check(t, map[string]any{"flow": "login", "account": "good", "ip": fmt.Sprintf("192.0.2.%d", 60+i)})
			if got.status != 200 {
				t.Fatalf("check %d: %d %s", i, got.status, got.raw)
			}
			fleet[(i+1)%3].report(t, got.str("attempt_id"), "success")
		}
		if got := b.check(t, map[string]any{"flow": "login", "account": "good", "ip": "192.0.2.70"}).remaining("per-account"); got != 2 {
			t.Fatalf("remaining after 6 successes = %d, want 2", got)
		}
	})

	t.Run("attempt id once only across instances", func(t *testing.T) {
		got := a.check(t, map[string]any{"flow": "login", "account": "once", "ip": "192.0.2.80"})
		if r := b.report(t, got.str("attempt_id"), "failure"); r.status != 200 {
			t.Fatalf("first report on b: %d %s", r.status, r.raw)
		}
		if r := c.report(t, got.str("attempt_id"), "success"); r.status != http.StatusConflict {
			t.Fatalf("replayed report on c: %d %s, want 409", r.status, r.raw)
		}
	})

	t.Run("hard stop and reset", func(t *testing.T) {
		for i := range 5 {
			got := fleet[i%3].check(t, map[string]any{"flow": "login", "account": "stop", "ip": fmt.Sprintf("192.0.2.%d", 100+i)})
			if got.status == 200 {
				fleet[(i+2)%3].report(t, got.str("attempt_id"), "failure")
			}
		}
		// per-account (burst 3) slowed two of the five; the hard stop
		// counts only attempts that were let through.
		st := a.must(t, "GET", "/v1/accounts/status?account=stop", adminToken, nil)
		if n, _ := st.body["consecutive_failures"].(float64); n != 3 {
			t.Fatalf("status = %s, want 3 consecutive failures", st.raw)
		}
		if r := b.must(t, "POST", "/v1/accounts/reset", adminToken, map[string]any{"account": "stop"}); r.status != 200 {
			t.Fatalf("reset: %d %s", r.status, r.raw)
		}
		st = c.must(t, "GET", "/v1/accounts/status?account=stop", adminToken, nil)
		if n, _ := st.body["consecutive_failures"].(float64); n != 0 || st.body["blocked"] != false {
			t.Fatalf("status after reset = %s, want zeros", st.raw)
		}
	})

	t.Run("trusted device on another instance", func(t *testing.T) {
		got := a.check(t, map[string]any{"flow": "login", "account": "trusty", "ip": "192.0.2.120"})
		device := b.report(t, got.str("attempt_id"), "success").str("device_token")
		if device == "" {
			t.Fatal("no device token")
		}
		for i := range 3 {
			r := c.check(t, map[string]any{"flow": "login", "account": "trusty", "ip": fmt.Sprintf("192.0.2.%d", 130+i)})
			a.report(t, r.str("attempt_id"), "failure")
		}
		if r := a.check(t, map[string]any{"flow": "login", "account": "trusty", "ip": "192.0.2.140"}); r.status != 429 {
			t.Fatalf("untrusted check after 3 failures: %d, want 429", r.status)
		}
		r := b.check(t, map[string]any{"flow": "login", "account": "trusty", "ip": "192.0.2.141", "device_token": device})
		if r.status != 200 || r.remaining("per-account") != 2 {
			t.Fatalf("trusted device: %d %s, want 200 with its own bucket", r.status, r.raw)
		}
	})
}

// TestNoPersonalDataInRedis: no account, address, recipient or secret
// fingerprint reaches Redis, guardian's log or its decision log; of a
// fingerprint, not even 9 characters in a row.
func TestNoPersonalDataInRedis(t *testing.T) {
	redis := redistest.Start(t)
	dir := t.TempDir()
	logs, decisions := createFile(t, filepath.Join(dir, "log")), createFile(t, filepath.Join(dir, "decisions"))
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	fleet := startFleet(t, 1, fleetConfig{redisURL: redis.URL(), logger: logger, decisionLog: decisions})
	in := fleet[0]
	const (
		account = "Pii.Person@Example.COM"
		ip      = "2001:db8:dead:beef::77"
		phone   = "+1 (555) 012-3456"
	)
	fpKey := []byte("the auth service's own fingerprint key")
	wrong := guardianclient.Fingerprint(fpKey, []byte("Winter2026!"))
	right := guardianclient.Fingerprint(fpKey, []byte("correct horse battery staple"))
	r := in.check(t, map[string]any{"flow": "login", "account": account, "ip": ip, "secret_fingerprint": wrong})
	in.report(t, r.str("attempt_id"), "failure")
	r = in.check(t, map[string]any{"flow": "login", "account": account, "ip": ip, "secret_fingerprint": wrong})
	if r.body["repeat_guess"] != true {
		t.Fatalf("second try of one wrong password: %s, want repeat_guess", r.raw)
	}
	in.report(t, r.str("attempt_id"), "failure")
	// A guess left unreported stays remembered in Redis.
	in.check(t, map[string]any{"flow": "login", "account": "another.person@example.com", "ip": ip, "secret_fingerprint": wrong})
	r = in.check(t, map[string]any{"flow": "login", "account": account, "ip": ip, "secret_fingerprint": right})
	in.report(t, r.str("attempt_id"), "success")
	in.check(t, map[string]any{"flow": "otp_send", "recipient": phone, "ip": "203.0.113.77"})
	in.check(t, map[string]any{"flow": "otp_verify", "recipient": "pii.person@example.com", "ip": "203.0.113.77"})
	// A refused fingerprint is not echoed either.
	if bad := in.check(t, map[string]any{"flow": "login", "account": account, "ip": ip, "secret_fingerprint": wrong + "!"}); bad.status != 400 {
		t.Fatalf("a fingerprint with '!': %d, want 400", bad.status)
	}

	forbidden := []string{"pii", "person", "example", "2001:db8", "dead:beef", "203.0.113", "5550123456", "+1555"}
	// No piece of a fingerprint longer than 8 characters.
	for _, fp := range []string{wrong, right} {
		for i := 0; i+9 <= len(fp); i++ {
			forbidden = append(forbidden, strings.ToLower(fp[i:i+9]))
		}
	}
	ctx := context.Background()
	rc := redis.Client(t)
	keys, err := rc.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 4 {
		t.Fatalf("only %d keys in Redis after the checks: %v", len(keys), keys)
	}
	for _, k := range keys {
		v, err := rc.Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range forbidden {
			if strings.Contains(strings.ToLower(k), f) || strings.Contains(strings.ToLower(v), f) {
				t.Errorf("key %q (value %q) contains %q", k, v, f)
			}
		}
		if ttl := rc.PTTL(ctx, k).Val(); ttl <= 0 {
			t.Errorf("key %q has no expiry (PTTL %v)", k, ttl)
		}
	}
	// The decision log is written every second: wait for the checks'
	// lines (replay needs none of the fingerprint).
	read := func(f *os.File) string {
		b, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(read(decisions), "\n") < 7 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := strings.Count(read(decisions), "\n"); n < 7 {
		t.Fatalf("%d decision log lines, want the 7 checks' at least", n)
	}
	for name, out := range map[string]string{"log": read(logs), "decision log": read(decisions)} {
		low := strings.ToLower(out)
		for _, f := range forbidden[8:] {
			if strings.Contains(low, f) {
				t.Errorf("the %s holds %q, a piece of a fingerprint:\n%s", name, f, out)
			}
		}
	}
}

// createFile creates the file at path, closed when t ends: a writer each
// write of which is whole, whatever goroutine makes it.
func createFile(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func TestSkewedInstancesAgree(t *testing.T) {
	redis := redistest.Start(t)
	skew := []time.Duration{0, 5 * time.Second}
	fleet := startFleet(t, 2, fleetConfig{redisURL: redis.URL(), rulesYAML: `version: 1
rules:
  - name: per-account
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1m
    burst: 4
`, now: func(i int) func() time.Time {
		return func() time.Time { return time.Now().Add(skew[i]) }
	}})
	// Spent alternately on both clocks, the bucket is one: four fit, and
	// the remaining counts step down by one whichever instance answers.
	for i := range 4 {
		r := fleet[i%2].check(t, map[string]any{"flow": "login", "account": "skew", "ip": "192.0.2.9"})
		if r.status != 200 || r.remaining("per-account") != int64(3-i) {
			t.Fatalf("check %d on instance %d: %d remaining %d, want 200 and %d", i, i%2, r.status, r.remaining("per-account"), 3-i)
		}
		// An attempt id issued on one clock reports on the other.
		if rep := fleet[(i+1)%2].report(t, r.str("attempt_id"), "failure"); rep.status != 200 {
			t.Fatalf("report across clocks: %d %s", rep.status, rep.raw)
		}
	}
	r := fleet[1].check(t, map[string]any{"flow": "login", "account": "skew", "ip": "192.0.2.9"})
	retry, _ := r.body["retry_after_ms"].(float64)
	if r.status != 429 || retry < 55000 || retry > 60000 {
		t.Fatalf("fifth check on the skewed instance: %d retry %v, want 429 after about 60s (the store's clock, not the instance's)", r.status, retry)
	}
}

// TestOnceUnderClockSkew: instance 0's clock runs 50s ahead of instance 1's.
// An attempt issued and reported on instance 0 is out of time there a
// moment later (--attempt-ttl 1s here), while instance 1 still takes it as
// issued 49s in its future, and valid until then: a second success report
// on instance 1 is refused, right away and after the id expired on the
// issuing clock, because the mark outlives the id on every clock.
func TestOnceUnderClockSkew(t *testing.T) {
	redis := redistest.Start(t)
	skew := []time.Duration{50 * time.Second, 0}
	const attemptTTL = time.Second
	fleet := startFleet(t, 2, fleetConfig{redisURL: redis.URL(), attemptTTL: attemptTTL, now: func(i int) func() time.Time {
		return func() time.Time { return time.Now().Add(skew[i]) }
	}})
	a := fleet[0].check(t, map[string]any{"flow": "login", "account": "once-skewed", "ip": "192.0.2.90"})
	id := a.str("attempt_id")
	if r := fleet[0].report(t, id, "success"); r.status != http.StatusOK || r.str("device_token") == "" {
		t.Fatalf("first report: %d %s", r.status, r.raw)
	}
	if r := fleet[1].report(t, id, "success"); r.status != http.StatusConflict {
		t.Fatalf("second report on the other clock: %d %s, want 409", r.status, r.raw)
	}
	time.Sleep(attemptTTL + 200*time.Millisecond)
	if r := fleet[0].report(t, id, "success"); r.status != http.StatusBadRequest {
		t.Fatalf("report on the issuing clock after the id's time: %d %s, want 400 expired", r.status, r.raw)
	}
	if r := fleet[1].report(t, id, "success"); r.status != http.StatusConflict {
		t.Fatalf("second report on the clock 50s behind, after the id's time on the issuing clock: %d %s, want 409", r.status, r.raw)
	}
}
