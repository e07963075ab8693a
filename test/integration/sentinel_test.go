package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
)

// sentinelRules are faultRules and a ledger: a rate rule that refills one
// unit an hour, so each allowed check of it takes one unit for good and its
// remaining count tells how many spends the store holds.
const sentinelRules = faultRules + `  - name: ledger
    flows: [otp_send]
    key: ip
    type: rate
    limit: 1
    per: 1h
    burst: 8000
    on_store_error: closed
`

// failoverWithin is how soon after a Sentinel announces the new master
// (+switch-master) guardian must decide on it again, with
// guardian_fallback_active back to 0. Measured alone it takes 0.05–0.6 s
// (docs/operations.md); the bound leaves room for a whole test run on two
// cores, where the recovery probe's calls meet the other tests' load (it
// took over 3 s once so).
const failoverWithin = 10 * time.Second

// ledger spends one unit of the ledger rule after another from one
// goroutine and remembers, for each spend the shared store acknowledged,
// the remaining count it answered.
type ledger struct {
	in   *instance
	stop chan struct{}
	done chan struct{}

	mu    sync.Mutex
	acked []ledgerSpend
	errs  []error
}

type ledgerSpend struct {
	at        time.Time
	remaining int64
}

const ledgerIP = "203.0.113.77"

func startLedger(in *instance) *ledger {
	l := &ledger{in: in, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			select {
			case <-l.stop:
				return
			default:
			}
			a, err := in.call("POST", "/v1/check", checkToken, map[string]any{"flow": "otp_send", "ip": ledgerIP, "recipient": "+15555550100"})
			l.mu.Lock()
			switch {
			case err != nil:
				l.errs = append(l.errs, err)
			case a.status != 200 && a.status != 429:
				l.errs = append(l.errs, fmt.Errorf("ledger check answered %d: %s", a.status, a.raw))
			case a.status == 200 && !a.degraded():
				l.acked = append(l.acked, ledgerSpend{at: time.Now(), remaining: a.remaining("ledger")})
			}
			l.mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return l
}

// finish stops the ledger and returns the spends acknowledged before
// failed, and the first acknowledged after it.
func (l *ledger) finish(t *testing.T, failed time.Time) (before []ledgerSpend, after ledgerSpend) {
	t.Helper()
	close(l.stop)
	<-l.done
	for _, err := range l.errs {
		t.Fatal(err)
	}
	for _, s := range l.acked {
		if s.at.Before(failed) {
			before = append(before, s)
		} else if after.at.IsZero() {
			after = s
		}
	}
	if len(before) == 0 || after.at.IsZero() {
		t.Fatalf("ledger: %d spends before the failure, one after: %v", len(before), !after.at.IsZero())
	}
	return before, after
}

// lost returns how many spends the store acknowledged before failed and no
// longer holds after the failover: each is a unit a limit admits again. It
// is negative when the store holds spends it never acknowledged (made, but
// answered past the store deadline).
func lost(before []ledgerSpend, after ledgerSpend) int64 {
	last := before[len(before)-1]
	// Without loss, the first spend after the failover leaves one less.
	return after.remaining - (last.remaining - 1)
}

// waitSharedAfter waits until in answers from the shared store with
// guardian_fallback_active 0, and returns how long after since that was.
func waitSharedAfter(t *testing.T, in *instance, since time.Time, within time.Duration) time.Duration {
	t.Helper()
	for {
		a := in.check(t, map[string]any{"flow": "otp_verify", "ip": "192.0.2.251"})
		if a.status >= 500 {
			t.Fatalf("check answered %d: %s", a.status, a.raw)
		}
		if !a.degraded() && fallbackActive(t, in) == 0 {
			return time.Since(since)
		}
		if time.Since(since) > within {
			t.Fatalf("still degraded %v after +switch-master (last answer %s)", within, a.raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSentinelFailover fails the master of a Sentinel setup three ways
// under a steady load of checks through two guardian instances: guardian
// answers every check (no 5xx), the fallback decides meanwhile (degraded),
// and within 10 s of +switch-master guardian decides on the promoted replica
// with guardian_fallback_active 0. Each case logs what the failover lost:
// spends the old master acknowledged that the new one does not hold.
//
// The cases run in parallel but the TLS one, each on a setup of its own:
// about 50 s in all, most of it starting containers and waiting for
// Sentinel to decide.
func TestSentinelFailover(t *testing.T) {
	kill := func(tb testing.TB, _ *redistest.Sentinel, m *redistest.Node) { m.Kill(tb) }
	tests := []struct {
		name string
		fail func(testing.TB, *redistest.Sentinel, *redistest.Node)
		tls  bool
	}{
		{"kill", kill, false},
		// Clients, replication and the Sentinels over TLS; guardian
		// verifies every node by the address it dials.
		{"kill_over_tls", kill, true},
		{"pause", func(tb testing.TB, _ *redistest.Sentinel, m *redistest.Node) { m.Pause(tb) }, false},
		{"network_cut", func(tb testing.TB, _ *redistest.Sentinel, m *redistest.Node) { m.Disconnect(tb) }, false},
		// A switchover: the master is demoted to a replica while guardian
		// holds connections to it, which answer READONLY.
		{"switchover", func(tb testing.TB, s *redistest.Sentinel, _ *redistest.Node) { s.Failover(tb) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The TLS case runs alone, before the others: with four other
			// setups starting on a shared machine its first TLS
			// connections missed the store deadline for longer than the
			// test waits.
			if !tt.tls {
				t.Parallel()
			}
			var sn *redistest.Sentinel
			var files redisstore.Options
			if tt.tls {
				sn = redistest.StartTLSSentinel(t)
				files.CAFile = sn.Certs().CA
			} else {
				sn = redistest.StartSentinel(t)
			}
			switched := sn.WatchSwitch(t)
			fleet := startFleet(t, 2, fleetConfig{redisURL: sn.URL(), rulesYAML: sentinelRules, storeTimeout: failoverTimeout, redis: files})
			// Generous: five setups start at once on a shared machine, and
			// over TLS each first connection is two handshakes.
			for _, in := range fleet {
				waitShared(t, in, 15*time.Second)
			}
			load := startLoad(fleet, 4)
			led := startLedger(fleet[0])
			time.Sleep(500 * time.Millisecond)

			master := sn.Master(t)
			failed := time.Now()
			tt.fail(t, sn, master)
			var at time.Time
			select {
			case at = <-switched:
			case <-time.After(20 * time.Second):
				t.Fatal("no +switch-master within 20s")
			}
			within := failoverWithin
			if tt.tls && raceEnabled {
				// Each new connection is two TLS handshakes, which the race
				// detector slows past the recovery probe's deadline.
				within = 15 * time.Second
			}
			for i, in := range fleet {
				took := waitSharedAfter(t, in, at, within)
				t.Logf("instance %d on the new master %v after +switch-master", i, took.Round(time.Millisecond))
			}
			if got := sn.Master(t); got == master {
				t.Fatalf("the Sentinels still name %s master", master.Addr())
			}
			time.Sleep(300 * time.Millisecond)
			samples := load.finish()
			assertAllDecided(t, samples)
			before, after := led.finish(t, failed)
			degraded := 0
			for _, s := range samples {
				if s.degraded && s.at.After(failed) {
					degraded++
				}
			}
			if tt.name != "switchover" && degraded == 0 {
				t.Fatal("no degraded answer while the master was gone: who decided?")
			}
			n := lost(before, after)
			if n < 0 {
				// Spends the old master made and replicated whose answer
				// came too late: the fallback answered those checks.
				t.Logf("the new master holds %d spends the old one never acknowledged", -n)
				n = 0
			}
			t.Logf("failed over %v after the failure; %d checks, %d degraded; %d acknowledged spends lost (of %d)",
				at.Sub(failed).Round(time.Millisecond), len(samples), degraded, n, len(before))
		})
	}
}

// TestReadOnlyIsAFailoverInProgress turns guardian's one Redis into a
// replica under load, the way a failover demotes a master: every READONLY
// reply is decided by the fallback (no 5xx), and once the node is a master
// again guardian is back on it within 3 s, never stuck on the error.
func TestReadOnlyIsAFailoverInProgress(t *testing.T) {
	node := redistest.Start(t)
	other := redistest.Start(t)
	fleet := startFleet(t, 1, fleetConfig{redisURL: node.URL(), rulesYAML: faultRules, storeTimeout: faultTimeout})
	in := fleet[0]
	waitShared(t, in, 5*time.Second)
	load := startLoad(fleet, 2)
	time.Sleep(200 * time.Millisecond)

	admin := node.Client(t)
	ctx := context.Background()
	// The other container's address on the default bridge, as the node
	// sees it.
	ip, err := other.Container().ContainerIP(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "REPLICAOF", ip, "6379").Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	a := in.check(t, map[string]any{"flow": "login", "ip": "198.51.100.60"})
	if a.status != 200 || !a.degraded() {
		t.Fatalf("check against a replica: %d %s, want the fallback's answer", a.status, a.raw)
	}
	if got := fallbackActive(t, in); got != 1 {
		t.Fatalf("guardian_fallback_active = %d against a replica, want 1", got)
	}
	// The client retries a READONLY reply until the store deadline, so
	// guardian logs a timeout; the server counts what it answered.
	stats, err := admin.Info(ctx, "errorstats").Result()
	if err != nil || !strings.Contains(stats, "errorstat_READONLY:count=") {
		t.Fatalf("the node answered no READONLY (%v):\n%s", err, stats)
	}
	if err := admin.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	took := waitSharedAfter(t, in, promoted, failoverWithin)
	assertAllDecided(t, load.finish())
	t.Logf("back on the store %v after the node became a master again", took.Round(time.Millisecond))
}
