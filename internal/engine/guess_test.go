package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
)

// guessRules limit an account to 3 failures back to back, an account+ip
// pair to 3, an address to 100 and one guess across accounts to 10, with
// the hard stop at 100.
const guessRules = `version: 1
rules:
  - name: login-account
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1m
    burst: 3
  - name: login-pair
    flows: [login]
    key: account+ip
    type: rate
    count: failures
    limit: 1
    per: 1m
    burst: 3
  - name: login-ip
    flows: [login]
    key: ip
    type: rate
    count: failures
    limit: 100
    per: 1h
    burst: 100
  - name: login-secret
    flows: [login]
    key: secret
    type: rate
    count: failures
    limit: 10
    per: 10m
    burst: 10
    action: challenge
  - name: login-hard-stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 100
`

// storeFactory makes the store of an engine under test on its clock.
type storeFactory func(now func() time.Time) store.Store

// guessStores are the stores the repeat-guess tests run on: the embedded
// store, a real Redis and a real Redis Cluster, on which an account's
// memory and its account+ip pairs live in different slots.
func guessStores(t *testing.T) map[string]storeFactory {
	t.Helper()
	return map[string]storeFactory{
		"memstore": func(now func() time.Time) store.Store { return memstore.New(memstore.Config{Now: now}) },
		"redis":    redisFactory(t, redistest.Start(t).Client(t)),
		"cluster":  redisFactory(t, redistest.StartCluster(t).Client(t)),
	}
}

// redisFactory makes stores on c, each on an emptied database.
func redisFactory(t *testing.T, c redis.UniversalClient) storeFactory {
	return func(now func() time.Time) store.Store {
		flushAll(t, c)
		return redisstore.New(c, redisstore.Config{Now: now})
	}
}

func flushAll(t *testing.T, c redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return n.FlushDB(ctx).Err() })
	} else {
		err = c.FlushDB(ctx).Err()
	}
	if err != nil {
		t.Fatalf("flush: %v", err)
	}
}

// fingerprint returns a valid secret_fingerprint standing for guess n.
func fingerprint(n string) string {
	return "fp-" + strings.Repeat(n, 40/len(n))
}

// guess checks alice's login from ip with the fingerprint of g, and
// reports it as outcome when it was allowed or challenged and outcome is
// set.
func (h *harness) guess(t *testing.T, ip, g string, outcome engine.Outcome) engine.Decision {
	t.Helper()
	d := h.check(t, engine.CheckRequest{Flow: rules.Login, Account: "alice", IP: ip, SecretFingerprint: fingerprint(g)})
	if d.AttemptID != "" && outcome != "" {
		if _, err := h.eng.Report(context.Background(), d.AttemptID, outcome); err != nil {
			t.Fatalf("Report: %v", err)
		}
	}
	return d
}

// status returns alice's status.
func (h *harness) status(t *testing.T) engine.AccountStatus {
	t.Helper()
	st, err := h.eng.Status(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// limit returns the remaining units of rule in d.
func limit(t *testing.T, d engine.Decision, rule string) int64 {
	t.Helper()
	for _, l := range d.Limits {
		if l.Rule == rule {
			return l.Remaining
		}
	}
	t.Fatalf("no limit %s in %+v", rule, d.Limits)
	return 0
}

const guessIP = "203.0.113.7"

func TestRepeatGuesses(t *testing.T) {
	for name, newStore := range guessStores(t) {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				name  string
				rules string
				run   func(*testing.T, *harness)
			}{
				{"six_repeats_never_slow", guessRules, testSixRepeatsNeverSlow},
				{"four_distinct_slow_at_the_fourth", guessRules, testFourDistinctSlow},
				{"unreported_is_remembered", guessRules, testUnreportedIsRemembered},
				{"reported_kept_a_day_unreported_twice_the_attempt_ttl", guessRules, testGuessHolds},
				{"success_forgets", guessRules, testSuccessForgets},
				{"reset_forgets", guessRules, testResetForgets},
				// On a Cluster, concurrent tries spend the pair in its own
				// slot before the repeats among them give it back: a
				// burst below the callers would deny some of them.
				{"repeats_free_in_every_bucket", "familiar_networks: {ipv4_prefix: 24, ipv6_prefix: 48, hold: 90d}\n" + guessRules, testRepeatsFreeInEveryBucket},
				{"concurrent_first_tries_spend_once", strings.Replace(guessRules, "burst: 3\n  - name: login-ip", "burst: 100\n  - name: login-ip", 1), testConcurrentFirstTries},
			} {
				t.Run(tc.name, func(t *testing.T) {
					tc.run(t, newHarness(t, tc.rules, newStore))
				})
			}
		})
	}
}

// testSixRepeatsNeverSlow: six failed tries of one wrong password spend the
// account, its pair and its hard-stop count once, and the address and the
// guess across accounts every time.
func testSixRepeatsNeverSlow(t *testing.T, h *harness) {
	for i := range 6 {
		d := h.guess(t, guessIP, "a", engine.Failure)
		if d.Action != rules.Allow || d.RepeatGuess != (i > 0) {
			t.Fatalf("try %d: %s, repeat %v; want allow, repeat %v", i+1, d.Action, d.RepeatGuess, i > 0)
		}
		if got := limit(t, d, "login-account"); got != 2 {
			t.Errorf("try %d: login-account remaining %d, want 2", i+1, got)
		}
		if got := limit(t, d, "login-pair"); got != 2 {
			t.Errorf("try %d: login-pair remaining %d, want 2", i+1, got)
		}
		if got := limit(t, d, "login-hard-stop"); got != 99 {
			t.Errorf("try %d: login-hard-stop remaining %d, want 99", i+1, got)
		}
		if got, want := limit(t, d, "login-ip"), int64(99-i); got != want {
			t.Errorf("try %d: login-ip remaining %d, want %d: a repeat still counts on the address", i+1, got, want)
		}
		if got, want := limit(t, d, "login-secret"), int64(9-i); got != want {
			t.Errorf("try %d: login-secret remaining %d, want %d", i+1, got, want)
		}
	}
	if st := h.status(t); st.ConsecutiveFailures != 1 || st.RememberedGuesses != 1 {
		t.Errorf("status %+v, want 1 consecutive failure and 1 remembered guess", st)
	}
}

// testRepeatsFreeInEveryBucket: under familiar networks, a repeated guess
// spends nothing on the account's rules whichever bucket the check counts
// in, its home network's, its device's or the challenged one, while the
// address still counts it.
func testRepeatsFreeInEveryBucket(t *testing.T, h *harness) {
	home := engine.CheckRequest{Flow: rules.Login, Account: "alice", IP: "203.0.113.7"}
	tok := h.report(t, h.check(t, home), engine.Success).DeviceToken
	network := home
	network.IP = "203.0.113.200"
	device := engine.CheckRequest{Flow: rules.Login, Account: "alice", IP: "198.51.100.1", DeviceToken: tok}
	challenged := engine.CheckRequest{Flow: rules.Login, Account: "alice", IP: "198.51.100.2", ChallengePassed: true}
	for _, tc := range []struct {
		name  string
		req   engine.CheckRequest
		guess string
		trust engine.Trust
	}{
		{"familiar network", network, "a", engine.TrustNetwork},
		{"trusted device", device, "b", engine.TrustDevice},
		{"passed challenge", challenged, "c", engine.TrustChallenge},
	} {
		tc.req.SecretFingerprint = fingerprint(tc.guess)
		for i := range 4 {
			d := h.check(t, tc.req)
			if d.Action != rules.Allow || d.Trust != tc.trust || d.RepeatGuess != (i > 0) {
				t.Fatalf("%s, try %d: %s, trust %s, repeat %v; want allow, %s, repeat %v", tc.name, i+1, d.Action, d.Trust, d.RepeatGuess, tc.trust, i > 0)
			}
			if got := limit(t, d, "login-account"); got != 2 {
				t.Errorf("%s, try %d: login-account remaining %d, want 2: one spend for the first try alone", tc.name, i+1, got)
			}
			if got := limit(t, d, "login-pair"); got != 2 {
				t.Errorf("%s, try %d: login-pair remaining %d, want 2", tc.name, i+1, got)
			}
			if got := limit(t, d, "login-hard-stop"); got != 99 {
				t.Errorf("%s, try %d: login-hard-stop remaining %d, want 99", tc.name, i+1, got)
			}
			h.report(t, d, engine.Failure)
		}
	}
	if st := h.status(t); st.RememberedGuesses != 3 {
		t.Errorf("status %+v, want 3 remembered guesses", st)
	}
}

// testFourDistinctSlow: three distinct wrong passwords spend the burst of
// 3; the fourth is slowed and not remembered; a repeat of the first on the
// slowed account is slowed too.
func testFourDistinctSlow(t *testing.T, h *harness) {
	for i, g := range []string{"a", "b", "c"} {
		if d := h.guess(t, guessIP, g, engine.Failure); d.Action != rules.Allow || d.RepeatGuess {
			t.Fatalf("guess %d: %s, repeat %v; want allow, new", i+1, d.Action, d.RepeatGuess)
		}
	}
	d := h.guess(t, guessIP, "d", engine.Failure)
	if d.Action != rules.Slow || d.Rule != "login-account" || d.RepeatGuess {
		t.Fatalf("fourth guess: %s by %q, repeat %v; want slow by login-account, new", d.Action, d.Rule, d.RepeatGuess)
	}
	d = h.guess(t, guessIP, "a", engine.Failure)
	if d.Action != rules.Slow || !d.RepeatGuess {
		t.Fatalf("repeat on a slowed account: %s, repeat %v; want slow, repeat", d.Action, d.RepeatGuess)
	}
	if st := h.status(t); st.RememberedGuesses != 3 || st.ConsecutiveFailures != 3 {
		t.Errorf("status %+v, want 3 remembered guesses and 3 consecutive failures", st)
	}
	// Once the account has room again, the guess the slowed check never
	// tried costs as a new one.
	h.clock.Advance(time.Minute)
	if d := h.guess(t, guessIP, "d", ""); d.Action != rules.Allow || d.RepeatGuess || limit(t, d, "login-account") != 0 {
		t.Fatalf("fourth guess a minute on: %s, repeat %v, %+v; want allow, new, the account's unit spent", d.Action, d.RepeatGuess, d.Limits)
	}
}

// testUnreportedIsRemembered: a check never reported is a failed guess.
func testUnreportedIsRemembered(t *testing.T, h *harness) {
	h.guess(t, guessIP, "a", "")
	if d := h.guess(t, guessIP, "a", ""); !d.RepeatGuess || limit(t, d, "login-account") != 2 {
		t.Fatalf("second try of an unreported guess: repeat %v, %+v; want a repeat that spent nothing", d.RepeatGuess, d.Limits)
	}
	// Without a fingerprint nothing is remembered or waived.
	d := h.check(t, engine.CheckRequest{Flow: rules.Login, Account: "alice", IP: guessIP})
	if d.RepeatGuess || limit(t, d, "login-account") != 1 {
		t.Fatalf("check without a fingerprint: repeat %v, %+v; want a spend", d.RepeatGuess, d.Limits)
	}
	for _, l := range d.Limits {
		if l.Rule == "login-secret" {
			t.Fatalf("check without a fingerprint counted on the key: secret rule: %+v", d.Limits)
		}
	}
}

// testGuessHolds: a guess whose check was reported a failure is
// remembered for 24 hours; one never reported, like any state only
// unreported checks made, for twice the attempt TTL (20 minutes).
func testGuessHolds(t *testing.T, h *harness) {
	h.guess(t, guessIP, "a", engine.Failure)
	h.guess(t, guessIP, "b", "")
	h.clock.Advance(20*time.Minute - time.Millisecond)
	if st := h.status(t); st.RememberedGuesses != 2 {
		t.Fatalf("just before twice the attempt TTL: %d remembered, want 2", st.RememberedGuesses)
	}
	h.clock.Advance(time.Millisecond)
	if st := h.status(t); st.RememberedGuesses != 1 {
		t.Fatalf("at twice the attempt TTL: %d remembered, want the reported one", st.RememberedGuesses)
	}
	h.clock.Set(t0.Add(24*time.Hour - time.Millisecond))
	if d := h.guess(t, guessIP, "a", ""); !d.RepeatGuess {
		t.Fatal("a reported guess forgotten before 24 hours")
	}
	// That unreported repeat kept it 20 minutes more, not a day.
	h.clock.Set(t0.Add(24*time.Hour + 20*time.Minute))
	if st := h.status(t); st.RememberedGuesses != 0 {
		t.Fatalf("a day and the repeat's 20 minutes on: %d remembered, want 0", st.RememberedGuesses)
	}
}

// testSuccessForgets: a success report forgets every remembered guess.
func testSuccessForgets(t *testing.T, h *harness) {
	h.guess(t, guessIP, "a", engine.Failure)
	h.guess(t, guessIP, "b", engine.Failure)
	if st := h.status(t); st.RememberedGuesses != 2 {
		t.Fatalf("remembered %d, want 2", st.RememberedGuesses)
	}
	if d := h.guess(t, guessIP, "right", engine.Success); d.RepeatGuess {
		t.Fatal("the right password was a repeat")
	}
	if st := h.status(t); st.RememberedGuesses != 0 {
		t.Fatalf("after a success: remembered %d, want 0", st.RememberedGuesses)
	}
	if d := h.guess(t, guessIP, "a", engine.Failure); d.RepeatGuess {
		t.Fatal("after a success: an old guess is still a repeat")
	}
}

// testResetForgets: an account reset forgets every remembered guess.
func testResetForgets(t *testing.T, h *harness) {
	h.guess(t, guessIP, "a", engine.Failure)
	if err := h.eng.Reset(context.Background(), "alice"); err != nil {
		t.Fatal(err)
	}
	if st := h.status(t); st.RememberedGuesses != 0 {
		t.Fatalf("after a reset: remembered %d, want 0", st.RememberedGuesses)
	}
	if d := h.guess(t, guessIP, "a", engine.Failure); d.RepeatGuess {
		t.Fatal("after a reset: an old guess is still a repeat")
	}
}

// testConcurrentFirstTries: 50 concurrent first tries of one new wrong
// password spend the account, its pair and its hard-stop count exactly
// once, and leave exactly that guess remembered.
func testConcurrentFirstTries(t *testing.T, h *harness) {
	const callers = 50
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		repeats int
		capped  int
		start   = make(chan struct{})
	)
	for range callers {
		wg.Go(func() {
			<-start
			d, err := h.eng.Check(context.Background(), engine.CheckRequest{Flow: rules.Login, Account: "alice", IP: guessIP, SecretFingerprint: fingerprint("a")})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if d.RepeatGuess {
				repeats++
			}
			if d.RepeatCapped {
				capped++
			}
		})
	}
	close(start)
	wg.Wait()
	// One try records the guess, the next 20 are free (the day's free
	// repeats), and the other 29 count like any failure: 2 fit the
	// account's burst, 27 are slowed.
	if repeats != 20 || capped != callers-21 {
		t.Errorf("%d free repeats and %d capped, want 20 and %d", repeats, capped, callers-21)
	}
	d := h.guess(t, guessIP, "a", "")
	if d.RepeatGuess || !d.RepeatCapped || limit(t, d, "login-account") != 0 || limit(t, d, "login-pair") != 97 || limit(t, d, "login-hard-stop") != 97 {
		t.Errorf("after the race: repeat %v capped %v, %+v; want three spends on each account rule", d.RepeatGuess, d.RepeatCapped, d.Limits)
	}
	if got := limit(t, d, "login-ip"); got != 100-callers-1 {
		t.Errorf("login-ip remaining %d, want %d: every try counts on the address", got, 100-callers-1)
	}
	if st := h.status(t); st.RememberedGuesses != 1 {
		t.Errorf("remembered %d, want 1", st.RememberedGuesses)
	}
}

func TestFingerprintValidation(t *testing.T) {
	for _, tt := range []struct {
		fp string
		ok bool
	}{
		{strings.Repeat("a", 16), true},
		{strings.Repeat("Z9_-", 32), true},
		{strings.Repeat("a", 15), false},
		{strings.Repeat("a", 129), false},
		{strings.Repeat("a", 20) + "=", false},
		{strings.Repeat("a", 20) + "+/", false},
		{strings.Repeat("a", 20) + " ", false},
		{strings.Repeat("é", 10), false},
	} {
		req := engine.CheckRequest{Flow: rules.Login, IP: guessIP, Account: "alice", SecretFingerprint: tt.fp}
		err := req.Validate(nil)
		if tt.ok != (err == nil) || (err != nil && !errors.Is(err, engine.ErrInvalidField)) {
			t.Errorf("Validate(%q) = %v, want ok %v or ErrInvalidField", tt.fp, err, tt.ok)
		}
		if err != nil && strings.Contains(err.Error(), tt.fp) {
			t.Errorf("the error echoes the fingerprint: %v", err)
		}
	}
}

func FuzzFingerprint(f *testing.F) {
	for _, s := range []string{"", strings.Repeat("a", 16), strings.Repeat("-", 128), strings.Repeat("a", 129), "aaaaaaaaaaaaaaa=", "\x00aaaaaaaaaaaaaaaaa"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, fp string) {
		err := engine.CheckFingerprint(fp)
		valid := len(fp) >= 16 && len(fp) <= 128 && strings.Trim(fp, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == ""
		if valid != (err == nil) {
			t.Fatalf("CheckFingerprint(%q) = %v, valid %v", fp, err, valid)
		}
		if err != nil && !errors.Is(err, engine.ErrInvalidField) {
			t.Fatalf("CheckFingerprint(%q) = %v, want ErrInvalidField", fp, err)
		}
		req := engine.CheckRequest{Flow: rules.Login, IP: guessIP, SecretFingerprint: fp}
		if fp != "" && (req.Validate(nil) == nil) != valid {
			t.Fatalf("Validate with %q disagrees with CheckFingerprint", fp)
		}
	})
}

// BenchmarkCheckFingerprint is BenchmarkCheckBuiltinRules with a secret
// fingerprint: two more hashes, the account's memory (a new guess each
// time, since each success forgets it) and the login-secret-spray rule.
func BenchmarkCheckFingerprint(b *testing.B) {
	h := newHarnessSet(b, rules.Default())
	benchmarkLogin(b, h, engine.CheckRequest{Flow: rules.Login, Account: "alice@example.com", IP: "203.0.113.7", SecretFingerprint: fingerprint("a")})
}
