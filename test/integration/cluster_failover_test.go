package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/redistest"
)

// clusterRules: a budget of 20 per IP, an account limit that the checks a
// budget denies must get back (the IP and the account live in different
// slots), and an open rule for waitSharedAfter.
const clusterRules = budgetRules + `  - name: per-account
    flows: [login]
    key: account
    type: rate
    limit: 1
    per: 1h
    burst: 1000
  - name: open-rule
    flows: [otp_verify]
    key: ip
    type: rate
    limit: 1000
    per: 1s
    on_store_error: open
`

// clusterStable is how soon after the Cluster is stable again exactness
// must hold.
const clusterStable = 5 * time.Second

// failoverTimeout is the store deadline of the Sentinel and Cluster
// failover tests' fleets. A dead master is seen by its refused connections
// and a paused one by this deadline; it has to let a round of 50 checks sent
// at once, and the recovery probe on a fresh connection, through on a small
// machine under the race detector, which 50 ms does not always do (a
// machine loaded enough then fails the test for its load, not the
// failover's).
const failoverTimeout = 250 * time.Millisecond

// exactRound sends 50 concurrent checks of accounts prefix0…49 from ip. A
// round the shared store decided in full (ok) must allow exactly 20, and
// the 30 denied must have given back what they spent on their accounts
// (the multi-slot compensation). A round in which the fallback decided a
// check is not ok: the caller tries again on a fresh IP.
func exactRound(t *testing.T, fleet []*instance, ip, prefix string) (ok bool) {
	t.Helper()
	got := map[int]int{}
	for i, a := range sendAtOnce(t, fleet, 50, func(i int) map[string]any {
		return map[string]any{"flow": "login", "account": fmt.Sprintf("%s%d", prefix, i), "ip": ip}
	}) {
		if a.degraded() {
			t.Logf("round on %s: check %d decided by the fallback: %s", ip, i, a.raw)
			return false
		}
		got[a.status]++
	}
	if got[http.StatusOK] != 20 || got[http.StatusTooManyRequests] != 30 {
		t.Fatalf("statuses = %v, want exactly 20 × 200 and 30 × 429", got)
	}
	for i := range 50 {
		a := sharedCheck(t, fleet[i%len(fleet)], map[string]any{"flow": "login", "account": fmt.Sprintf("%s%d", prefix, i), "ip": fmt.Sprintf("203.0.113.%d", i)})
		if r := a.remaining("per-account"); r != 999 && r != 998 {
			t.Fatalf("account %s%d: remaining %d, want 999 (denied) or 998 (allowed)", prefix, i, r)
		}
	}
	return true
}

// sharedCheck sends body until the shared store answers it, for at most
// 5 s: an answer of the fallback spends nothing in the store, so trying
// again reads the same state.
func sharedCheck(t *testing.T, in *instance, body map[string]any) answer {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		a := in.check(t, body)
		if !a.degraded() {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fallback answered for 5 s: %s", a.raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// budgetHashes returns the hashes of the budget rule that node holds.
func budgetHashes(t *testing.T, node string) map[string]bool {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: node})
	defer func() { _ = c.Close() }()
	keys, err := c.Keys(context.Background(), "*budget*").Result()
	if err != nil {
		t.Fatalf("KEYS on %s: %v", node, err)
	}
	out := map[string]bool{}
	for _, k := range keys {
		out[k] = true
	}
	return out
}

// freshIPs numbers the IPs exactOn uses, so that none is used twice.
var freshIPs atomic.Int64

// exactOn runs exact rounds on fresh IPs until one the store decided in
// full has its budget on node, so that exactness is shown on that node, and
// returns that IP. It fails if that takes past deadline.
func exactOn(t *testing.T, fleet []*instance, node, tag string, deadline time.Time) string {
	t.Helper()
	for i := 0; ; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("no exact round with its budget on %s by the deadline", node)
		}
		n := freshIPs.Add(1)
		ip := fmt.Sprintf("198.18.%d.%d", n/250, n%250+1)
		before := budgetHashes(t, node)
		if !exactRound(t, fleet, ip, fmt.Sprintf("%s-%d-", tag, i)) {
			continue
		}
		for k := range budgetHashes(t, node) {
			if !before[k] {
				return ip
			}
		}
	}
}

// TestClusterMasterFailover kills a master of a Cluster with a replica
// each under load: no 5xx, the fallback decides while the slot has no
// master, guardian is back on the store with guardian_fallback_active 0,
// and within 5 s of a stable Cluster exactness holds on the promoted
// replica, compensation included. About 15 s.
func TestClusterMasterFailover(t *testing.T) {
	cl := redistest.StartReplicatedCluster(t)
	fleet := startFleet(t, 2, fleetConfig{redisURL: strings.Join(cl.Addrs(), ","), rulesYAML: clusterRules, storeTimeout: failoverTimeout})
	for _, in := range fleet {
		waitShared(t, in, 5*time.Second)
	}
	load := startLoad(fleet, 4)
	time.Sleep(500 * time.Millisecond)

	victim := cl.Masters(t, cl.Addrs()[0])[0]
	failed := time.Now()
	cl.Kill(t, victim)
	var alive string
	for _, a := range cl.Addrs() {
		if a != victim {
			alive = a
			break
		}
	}
	stable := cl.WaitStable(t, 20*time.Second, victim)
	var promoted string
	for _, m := range cl.Masters(t, alive) {
		if m == victim {
			t.Fatalf("the Cluster still names %s master", victim)
		}
		promoted = m
	}
	for i, in := range fleet {
		took := waitSharedAfter(t, in, stable, clusterStable)
		t.Logf("instance %d on the store %v after the Cluster was stable", i, took.Round(time.Millisecond))
	}
	samples := load.finish()
	assertAllDecided(t, samples)
	degraded := 0
	for _, s := range samples {
		if s.degraded && s.at.After(failed) {
			degraded++
		}
	}
	if degraded == 0 {
		t.Fatal("no degraded answer while a slot had no master: who decided?")
	}
	// Exactness, on every master, the promoted one above all.
	for _, m := range cl.Masters(t, alive) {
		exactOn(t, fleet, m, "f"+strings.ReplaceAll(m, ":", "-"), stable.Add(clusterStable))
	}
	t.Logf("cluster stable %v after the kill; %d checks, %d degraded; %s promoted; exact again within %v of stable",
		stable.Sub(failed).Round(time.Millisecond), len(samples), degraded, promoted, time.Since(stable).Round(time.Millisecond))
}

// TestClusterSlotMigration moves the slot of a spent budget to another
// master under load, the way resharding does (MIGRATING/IMPORTING, then
// MIGRATE a few keys at a time): no 5xx and nothing decided by the
// fallback for long, the spent budget moves with its slot (still 0 of 50
// allowed, the accounts given back), and a fresh budget on the new master
// is exact. About 10 s.
func TestClusterSlotMigration(t *testing.T) {
	cl := redistest.StartCluster(t)
	fleet := startFleet(t, 2, fleetConfig{redisURL: strings.Join(cl.Addrs(), ","), rulesYAML: clusterRules})
	masters := cl.Masters(t, cl.Addrs()[0])
	// A budget on the first master, spent.
	ip := exactOn(t, fleet, masters[0], "m", time.Now().Add(time.Minute))
	var hash string
	for k := range budgetHashes(t, masters[0]) {
		hash = k
	}
	first := redis.NewClient(&redis.Options{Addr: masters[0]})
	defer func() { _ = first.Close() }()
	n, err := first.ClusterKeySlot(context.Background(), hash).Result()
	if err != nil {
		t.Fatal(err)
	}
	slot := int(n)
	if cl.MasterOf(t, masters[0], slot) != masters[0] {
		t.Fatalf("slot %d of %s is not on %s", slot, hash, masters[0])
	}

	load := startLoad(fleet, 4)
	// While the slot moves, checks of the spent IP keep coming: ASK and
	// TRYAGAIN meet them halfway.
	stop := make(chan struct{})
	spentErrs := make(chan error, 1)
	go func() {
		defer close(spentErrs)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			a, err := fleet[i%2].call("POST", "/v1/check", checkToken, map[string]any{"flow": "login", "account": fmt.Sprintf("mv%d", i), "ip": ip})
			if err == nil && a.status != 429 {
				err = fmt.Errorf("a check of the spent IP during the move answered %d: %s", a.status, a.raw)
			}
			if err != nil {
				spentErrs <- err
				return
			}
		}
	}()
	cl.MigrateSlot(t, slot, masters[1], 100*time.Millisecond)
	stable := cl.WaitStable(t, 10*time.Second)
	close(stop)
	if err := <-spentErrs; err != nil {
		t.Fatal(err)
	}
	assertAllDecided(t, load.finish())
	if !budgetHashes(t, masters[1])[hash] {
		t.Fatalf("%s did not move to %s", hash, masters[1])
	}
	// The spent budget moved with its slot: nothing allowed; the denied
	// checks gave their accounts back.
	got := concurrentChecks(t, fleet, 50, func(i int) map[string]any {
		return map[string]any{"flow": "login", "account": fmt.Sprintf("after%d", i), "ip": ip}
	})
	if got[http.StatusTooManyRequests] != 50 {
		t.Fatalf("spent budget after the move: %v, want 50 × 429", got)
	}
	for i := range 50 {
		a := fleet[i%2].check(t, map[string]any{"flow": "login", "account": fmt.Sprintf("after%d", i), "ip": fmt.Sprintf("203.0.113.%d", i)})
		if r := a.remaining("per-account"); r != 999 {
			t.Fatalf("account after%d: remaining %d, want 999: a denied check kept its spend", i, r)
		}
	}
	exactOn(t, fleet, masters[1], "n", stable.Add(clusterStable))
	t.Logf("slot %d moved under load; exact again %v after the Cluster was stable", slot, time.Since(stable).Round(time.Millisecond))
}
