package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
	"github.com/guardian-sec/guardian/internal/store/storetest"
	"github.com/guardian-sec/guardian/internal/testclock"
)

// warmed returns a Store on c configured for the do script's function
// library, which Warm made it call.
func warmed(t *testing.T, c redis.UniversalClient, cfg redisstore.Config) *redisstore.Store {
	t.Helper()
	cfg.Functions = true
	s := redisstore.New(c, cfg)
	if err := s.Warm(context.Background()); err != nil {
		t.Fatalf("Warm: %v", err)
	}
	if on, why := s.Functions(); !on {
		t.Fatalf("after Warm the Store runs the script (%v), want the library", why)
	}
	return s
}

// testConformanceFunctions runs the conformance suite on Stores that call
// the do script's function library.
func testConformanceFunctions(t *testing.T, c redis.UniversalClient) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		flush(t, c)
		return warmed(t, c, redisstore.Config{Now: now})
	})
}

// testFunctions: a warmed Store's check is one FCALL and no script call;
// after Redis loses the library (FUNCTION FLUSH), checks are answered by
// the script, counting on from what the library counted, and the library
// is loaded again, so that checks soon call it again.
func testFunctions(t *testing.T, node *redis.Client) {
	ctx := context.Background()
	clk := testclock.New(t0)
	s := warmed(t, node, redisstore.Config{Now: clk.Now})
	op := rate("guardian:v3:{acct}:login-account", 1, time.Minute, 5)

	before := redistest.CommandStats(t, node)
	checkResults(t, "with the library", do(t, s, op), []store.Result{
		{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Minute},
	})
	ran := redistest.Ran(before, redistest.CommandStats(t, node))
	if ran["fcall"] != 1 || ran["evalsha"] != 0 || ran["eval"] != 0 {
		t.Errorf("a check with the library ran %v, want one FCALL and no script call", ran)
	}

	if err := node.FunctionFlush(ctx).Err(); err != nil {
		t.Fatalf("FUNCTION FLUSH: %v", err)
	}
	checkResults(t, "after FUNCTION FLUSH", do(t, s, op), []store.Result{
		{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute},
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if on, _ := s.Functions(); on {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the library was not loaded again within 10 s of a script call")
		}
		time.Sleep(10 * time.Millisecond)
	}
	before = redistest.CommandStats(t, node)
	checkResults(t, "with the library again", do(t, s, op), []store.Result{
		{Allowed: true, Spent: true, Remaining: 2, ResetAfter: 3 * time.Minute},
	})
	if ran := redistest.Ran(before, redistest.CommandStats(t, node)); ran["fcall"] != 1 || ran["evalsha"] != 0 {
		t.Errorf("a check after the library came back ran %v, want one FCALL", ran)
	}

	// A Store not configured for the library runs the script, warmed or
	// not.
	plain := redisstore.New(node, redisstore.Config{Now: clk.Now})
	if err := plain.Warm(ctx); err != nil {
		t.Fatalf("Warm: %v", err)
	}
	before = redistest.CommandStats(t, node)
	do(t, plain, op)
	if ran := redistest.Ran(before, redistest.CommandStats(t, node)); ran["evalsha"] != 1 || ran["fcall"] != 0 {
		t.Errorf("a check of a Store without Config.Functions ran %v, want one EVALSHA", ran)
	}
	if on, why := plain.Functions(); on || why != nil {
		t.Errorf("a Store without Config.Functions: Functions() = %v, %v; want false, nil", on, why)
	}
}

// testFunctionsAfterRefusedWrites: a Redis that refuses writes at Warm
// (out of memory under noeviction) does not turn the library off: once it
// takes writes again, the Store loads it after a script call. While Redis
// refuses writes, a peek and a denied check on the library's Store answer,
// as on the script's, which meets the refusal only at its first write.
func testFunctionsAfterRefusedWrites(t *testing.T, node *redis.Client) {
	ctx := context.Background()
	op := rate("guardian:v3:{oomfn}:login-account", 1, time.Hour, 1)
	lib := warmed(t, node, redisstore.Config{})
	do(t, lib, op) // the burst of one, spent
	setConfig(t, node, "maxmemory-policy", "noeviction")
	setConfig(t, node, "maxmemory", "1")
	t.Cleanup(func() { setConfig(t, node, "maxmemory", "0") })
	if got := peek(t, lib, op)[0]; got.Allowed {
		t.Errorf("a peek on the library while Redis refuses writes: %+v, want denied", got)
	}
	if got := do(t, lib, op)[0]; got.Allowed || got.Spent {
		t.Errorf("a denied check on the library while Redis refuses writes: %+v, want denied", got)
	}

	if err := node.FunctionFlush(ctx).Err(); err != nil {
		t.Fatalf("FUNCTION FLUSH: %v", err)
	}
	s := redisstore.New(node, redisstore.Config{Functions: true})
	if err := s.Warm(ctx); err != nil {
		t.Fatalf("Warm while Redis refuses writes: %v", err)
	}
	if on, why := s.Functions(); on || why != nil {
		t.Fatalf("after a Warm that Redis refused for memory, Functions() = %v, %v; want false and no refusal", on, why)
	}
	setConfig(t, node, "maxmemory", "0")
	s.ForgetFailedLoad()
	do(t, s, rate("guardian:v3:{oomfn}:other", 1, time.Hour, 1))
	deadline := time.Now().Add(10 * time.Second)
	for on, _ := s.Functions(); !on; on, _ = s.Functions() {
		if time.Now().After(deadline) {
			t.Fatal("the library was not loaded within 10 s of Redis taking writes again")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testFunctionsNotTried: a Store configured for the library that logs in
// as a user of guardian's ACL runs the script and does not try to load
// the library, so that Redis's ACL LOG stays empty.
func testFunctionsNotTried(t *testing.T, srv *redistest.Server, c redis.UniversalClient) {
	ctx := context.Background()
	admin := srv.Client(t)
	if err := admin.Do(ctx, "ACL", "LOG", "RESET").Err(); err != nil {
		t.Fatal(err)
	}
	s := redisstore.New(c, redisstore.Config{Functions: true})
	if err := s.Warm(ctx); err != nil {
		t.Fatalf("Warm as guardian's ACL user: %v", err)
	}
	res := do(t, s, rate("guardian:v3:{nofn}:login-account", 1, time.Minute, 5))
	if !res[0].Spent {
		t.Errorf("a check on the script: %+v, want spent", res[0])
	}
	if on, why := s.Functions(); on || why != nil {
		t.Errorf("an ACL user's Store: Functions() = %v, %v; want false, nil", on, why)
	}
	// A load in the background would reach Redis well within this.
	time.Sleep(200 * time.Millisecond)
	denied, err := admin.Do(ctx, "ACL", "LOG").Slice()
	if err != nil {
		t.Fatal(err)
	}
	if len(denied) > 0 {
		t.Errorf("Redis denied guardian's ACL user %d times: %v", len(denied), denied)
	}
}

// TestFunctionsRefused: a default user without FUNCTION LOAD leaves a
// Store configured for the library on the script, which Functions says,
// and Warm still succeeds.
func TestFunctionsRefused(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "default", "-function").Err(); err != nil {
		t.Fatalf("ACL SETUSER default -function: %v", err)
	}
	s := redisstore.New(admin, redisstore.Config{Functions: true})
	if err := s.Warm(ctx); err != nil {
		t.Fatalf("Warm without FUNCTION LOAD: %v", err)
	}
	if on, why := s.Functions(); on || !redis.IsPermissionError(why) {
		t.Fatalf("Functions() without FUNCTION LOAD = %v, %v; want false and NOPERM", on, why)
	}
	if res := do(t, s, rate("guardian:v3:{nofn}:login-account", 1, time.Minute, 5)); !res[0].Spent {
		t.Errorf("a check on the script: %+v, want spent", res[0])
	}

	// A Store whose library Redis stops letting it call runs the script
	// from then on, its count going on.
	if err := admin.Do(ctx, "ACL", "SETUSER", "default", "+function").Err(); err != nil {
		t.Fatalf("ACL SETUSER default +function: %v", err)
	}
	lib := warmed(t, admin, redisstore.Config{})
	if err := admin.Do(ctx, "ACL", "SETUSER", "default", "-fcall").Err(); err != nil {
		t.Fatalf("ACL SETUSER default -fcall: %v", err)
	}
	if res := do(t, lib, rate("guardian:v3:{nofn}:login-account", 1, time.Minute, 5)); !res[0].Spent || res[0].Remaining != 3 {
		t.Errorf("a check once FCALL is refused: %+v, want spent, 3 left", res[0])
	}
	if on, why := lib.Functions(); on || !redis.IsPermissionError(why) {
		t.Errorf("Functions() once FCALL is refused = %v, %v; want false and NOPERM", on, why)
	}
}

// testFunctionsOnCluster: a Cluster's Stores run the script, and say why.
func testFunctionsOnCluster(t *testing.T, c redis.UniversalClient) {
	s := redisstore.New(c, redisstore.Config{Functions: true})
	if err := s.Warm(context.Background()); err != nil {
		t.Fatalf("Warm: %v", err)
	}
	if on, why := s.Functions(); on || why == nil {
		t.Errorf("a Cluster's Store: Functions() = %v, %v; want false and why", on, why)
	}
}
