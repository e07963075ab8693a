package integration

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
)

// text returns every record logs kept, one a line.
func (l *logRecorder) text() string {
	recs, _ := l.records()
	return strings.Join(recs, "\n")
}

// tlsOptions are the guardian flags for certs: --redis-ca-file,
// --redis-cert-file and --redis-key-file.
func tlsOptions(certs *redistest.Certs) redisstore.Options {
	return redisstore.Options{CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey}
}

func TestTLSDecidesOnTheStore(t *testing.T) {
	certs := redistest.NewCerts(t)
	redis := redistest.Start(t, redistest.WithTLS(certs, true))
	if !strings.HasPrefix(redis.URL(), "rediss://") {
		t.Fatalf("URL %q, want rediss://", redis.URL())
	}
	fleet := startFleet(t, 1, fleetConfig{redisURL: redis.URL(), rulesYAML: faultRules, redis: tlsOptions(certs)})
	waitShared(t, fleet[0], 10*time.Second)
	for i := range 3 {
		a := fleet[0].check(t, map[string]any{"flow": "login", "ip": "198.51.100.30"})
		if a.status != 200 || a.degraded() || a.remaining("local-budget") != int64(9-i) {
			t.Fatalf("check %d over TLS: %d %s, want allowed from the shared store", i, a.status, a.raw)
		}
	}
	if got := fallbackActive(t, fleet[0]); got != 0 {
		t.Fatalf("guardian_fallback_active = %d over TLS, want 0", got)
	}
	// The spends are in the server's data: guardian spoke to this Redis.
	n, err := redis.Client(t).DBSize(t.Context()).Result()
	if err != nil || n == 0 {
		t.Fatalf("DBSIZE over TLS = %d, %v: guardian's state is not in the TLS Redis", n, err)
	}
}

// TestTLSRefusesWhatDoesNotVerify runs guardian against servers whose
// certificate must not be trusted, and against a plain Redis: each is a
// store failure (the fallback decides, degraded) with a log line that says
// why, never a connection without TLS.
func TestTLSRefusesWhatDoesNotVerify(t *testing.T) {
	certs := redistest.NewCerts(t)
	other := redistest.NewCerts(t) // another CA, same names
	expired := redistest.NewExpiredCerts(t)
	good := redistest.Start(t, redistest.WithTLS(certs, true))
	stale := redistest.Start(t, redistest.WithTLS(expired, false))
	plain := redistest.Start(t)

	tests := []struct {
		name    string
		url     string
		opts    redisstore.Options
		wantLog string
	}{
		{"wrong CA", good.URL(), tlsOptions(other), "certificate signed by unknown authority"},
		{"system roots only", good.URL(), redisstore.Options{CertFile: certs.ClientCert, KeyFile: certs.ClientKey}, "certificate signed by unknown authority"},
		{"expired server certificate", stale.URL(), redisstore.Options{CAFile: expired.CA}, "certificate has expired"},
		{"no client certificate", good.URL(), redisstore.Options{CAFile: certs.CA}, "certificate required"},
		// A plain Redis reads the TLS hello as the start of a command and
		// waits for the rest: the handshake times out.
		{"plain Redis behind rediss://", "rediss://" + plain.Addr() + "/0", redisstore.Options{CAFile: certs.CA}, "deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &logRecorder{}
			fleet := startFleet(t, 1, fleetConfig{redisURL: tt.url, rulesYAML: faultRules, storeTimeout: faultTimeout, redis: tt.opts, logger: slog.New(logs)})
			in := fleet[0]
			for range 5 {
				a := in.check(t, map[string]any{"flow": "login", "ip": "198.51.100.31"})
				if a.status != 200 || !a.degraded() {
					t.Fatalf("check: %d %s, want allowed by the fallback, degraded", a.status, a.raw)
				}
				if a := in.check(t, map[string]any{"flow": "password_reset", "ip": "198.51.100.32"}); a.status != 429 || !a.degraded() {
					t.Fatalf("closed rule: %d %s, want slowed, degraded", a.status, a.raw)
				}
			}
			if got := fallbackActive(t, in); got != 1 {
				t.Fatalf("guardian_fallback_active = %d, want 1", got)
			}
			// The log says why, at start and when the fallback took over.
			deadline := time.Now().Add(2 * time.Second)
			for !strings.Contains(logs.text(), tt.wantLog) || !strings.Contains(logs.text(), "store failing") {
				if time.Now().After(deadline) {
					t.Fatalf("no log line saying %q and \"store failing\":\n%s", tt.wantLog, logs.text())
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	// The plain Redis got no command from guardian: no state, no script.
	if n, err := plain.Client(t).DBSize(t.Context()).Result(); err != nil || n != 0 {
		t.Fatalf("plain Redis DBSIZE = %d, %v: guardian fell back to plain TCP", n, err)
	}
}

// TestTLSCluster runs a fleet on a Redis Cluster that speaks TLS alone
// (clients, replication, the cluster bus): each node is verified against
// the address guardian dials, exactness and the multi-slot compensation
// hold, and a wrong CA is a store failure.
func TestTLSCluster(t *testing.T) {
	certs := redistest.NewCerts(t)
	cl := redistest.StartTLSCluster(t, certs)
	fleet := startFleet(t, 2, fleetConfig{redisURL: cl.URL(), rulesYAML: clusterRules, redis: redisstore.Options{CAFile: certs.CA}})
	// The first rounds dial every node over TLS, which under the race
	// detector can outlast the store deadline: try fresh IPs until a round
	// is decided by the store alone.
	for i := 0; !exactRound(t, fleet, fmt.Sprintf("198.51.100.%d", 70+i), fmt.Sprintf("tls%d-", i)); i++ {
		if i == 20 {
			t.Fatal("the fallback decided checks of 20 rounds on a healthy TLS Cluster")
		}
	}

	other := redistest.NewCerts(t)
	logs := &logRecorder{}
	bad := startFleet(t, 1, fleetConfig{redisURL: cl.URL(), rulesYAML: clusterRules, storeTimeout: faultTimeout,
		redis: redisstore.Options{CAFile: other.CA}, logger: slog.New(logs)})
	if a := bad[0].check(t, map[string]any{"flow": "login", "account": "tls-bad", "ip": "198.51.100.71"}); a.status != 200 || !a.degraded() {
		t.Fatalf("a TLS Cluster behind a wrong CA: %d %s, want the fallback's answer", a.status, a.raw)
	}
	if !strings.Contains(logs.text(), "certificate signed by unknown authority") {
		t.Fatalf("no log line saying why:\n%s", logs.text())
	}
}
