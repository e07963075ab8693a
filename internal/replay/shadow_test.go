package replay_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/guardian-sec/guardian/internal/aggregate"
	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/shadow"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/testclock"
)

// Replay counts every rule on its own by running it in shadow mode, which
// is only sound if shadow rules never change a decision. This file proves
// that over random traffic, and that the shadow book counts exactly what
// the checks said.

// enforcedRules trip often on the small pools of the random traffic.
const enforcedRules = `version: 1
rules:
  - name: acct
    flows: [login, password_reset]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1m
    burst: 3
  - name: ip
    flows: [login, password_reset, otp_send]
    key: ip
    type: rate
    limit: 1
    per: 10s
    burst: 6
  - name: stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 6
    action: block
  - name: pair
    flows: [login]
    key: account+ip
    type: rate
    limit: 1
    per: 30s
    burst: 2
    action: challenge
  - name: send
    flows: [otp_send]
    key: recipient
    type: rate
    limit: 1
    per: 1m
    burst: 2
  - name: verify
    flows: [otp_verify]
    key: recipient
    type: rate
    count: failures
    limit: 1
    per: 1m
    burst: 2
  - name: global
    flows: [login]
    key: global
    type: failure_rate
    limit: 5
    per: 1m
    hysteresis: 5s
`

// shadowRules are added to enforcedRules: every key and type, some
// stricter than the enforced rules, some looser.
const shadowRules = `
  - name: s-acct
    flows: [login, password_reset, otp_verify]
    key: account
    type: rate
    limit: 1
    per: 20s
    burst: 2
    mode: shadow
  - name: s-net
    flows: [login, otp_send, otp_verify]
    key: ip
    ipv4_prefix: 24
    ipv6_prefix: 48
    type: rate
    count: failures
    limit: 1
    per: 5s
    burst: 4
    action: block
    mode: shadow
  - name: s-pair
    flows: [login, password_reset]
    key: account+ip
    type: rate
    limit: 1
    per: 1m
    burst: 1
    action: challenge
    mode: shadow
  - name: s-recipient
    flows: [otp_send, otp_verify]
    key: recipient
    type: rate
    limit: 1
    per: 2m
    burst: 1
    mode: shadow
  - name: s-stop
    flows: [login, password_reset]
    key: account
    type: consecutive_failures
    limit: 2
    action: slow
    mode: shadow
  - name: s-global
    flows: [login, password_reset]
    key: global
    type: failure_rate
    limit: 3
    per: 30s
    hysteresis: 2s
    mode: shadow
`

// testEngine is an engine on the embedded store, on a clock of its own.
type testEngine struct {
	eng     *engine.Engine
	clock   *testclock.Clock
	book    *shadow.Book
	metrics *metrics.Metrics
	set     *rules.Set
}

func newTestEngine(tb testing.TB, yaml string, key secret.Key) *testEngine {
	tb.Helper()
	set := mustParse(tb, yaml)
	var holder rules.Holder
	holder.Store(set)
	clock := testclock.New(day)
	book := shadow.NewBook()
	book.Sync(set.ShadowNames())
	m := metrics.New(prometheus.NewRegistry())
	return &testEngine{
		eng: engine.New(engine.Config{
			Rules:     &holder,
			Store:     memstore.New(memstore.Config{Now: clock.Now}),
			Key:       key,
			Aggregate: aggregate.New(aggregate.Config{Now: clock.Now}),
			Shadow:    book,
			Metrics:   m,
			Now:       clock.Now,
		}),
		clock:   clock,
		book:    book,
		metrics: m,
		set:     set,
	}
}

// applies reports whether rule r is evaluated on req: the engine's rules,
// restated. A trusted device exempts a check from failure_rate rules.
func applies(r *rules.Rule, req engine.CheckRequest, trusted bool) bool {
	if !slices.Contains(r.Flows, req.Flow) {
		return false
	}
	switch r.Key {
	case rules.KeyAccount, rules.KeyAccountIP:
		return req.Account != ""
	case rules.KeyRecipient:
		return req.Recipient != ""
	case rules.KeyGlobal:
		return !trusted
	}
	return true
}

func TestShadowRulesNeverChangeADecision(t *testing.T) {
	t.Parallel()
	key, err := secret.New([]byte("replay-shadow-property-key-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	plain := newTestEngine(t, enforcedRules, key)
	shadowed := newTestEngine(t, enforcedRules+shadowRules, key)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 11))

	accounts := []string{"", "alice", "Alice", "bob", "carol@example.com", "dave"}
	ips := []string{"192.0.2.1", "192.0.2.2", "198.51.100.9", "2001:db8:1:1::1", "2001:db8:1:2::9", "2001:db8:7::1"}
	recipients := []string{"+15550100000", "+1 (555) 010-0001", "eve@example.com"}
	// The traffic alternates calm stretches with bursts of quick checks and
	// failure reports, which trip the failure_rate rules.
	calm := []time.Duration{0, 100 * time.Millisecond, time.Second, 3 * time.Second, 20 * time.Second, 2 * time.Minute}
	burst := []time.Duration{0, 50 * time.Millisecond, 200 * time.Millisecond}

	type attempt struct{ plain, shadowed string }
	type device struct{ plain, shadowed string }
	var pending []attempt
	devices := map[string]device{} // by normalised account

	type tally struct{ evaluated, slow, block, challenge uint64 }
	want := map[string]*tally{}
	for _, r := range shadowed.set.Rules {
		if r.Mode == rules.Shadow {
			want[r.Name] = &tally{}
		}
	}

	const n = 4000
	for i := range n {
		steps, reportOdds, successOdds := calm, 3, 2
		if i/250%3 == 2 {
			steps, reportOdds, successOdds = burst, 2, 5
		}
		step := steps[rng.IntN(len(steps))]
		plain.clock.Advance(step)
		shadowed.clock.Advance(step)

		if len(pending) > 0 && rng.IntN(reportOdds) == 0 {
			j := rng.IntN(len(pending))
			at := pending[j]
			pending = append(pending[:j], pending[j+1:]...)
			outcome := engine.Failure
			if rng.IntN(successOdds) == 0 {
				outcome = engine.Success
			}
			rp, errP := plain.eng.Report(ctx, at.plain, outcome)
			rs, errS := shadowed.eng.Report(ctx, at.shadowed, outcome)
			if !sameError(errP, errS) || (rp.DeviceToken == "") != (rs.DeviceToken == "") {
				t.Fatalf("step %d: reports differ: %v %v / %v %v", i, rp, errP, rs, errS)
			}
			continue
		}

		req := engine.CheckRequest{
			Flow:    rules.Flows[rng.IntN(len(rules.Flows))],
			Account: accounts[rng.IntN(len(accounts))],
			IP:      ips[rng.IntN(len(ips))],
			Cost:    int64(1 + rng.IntN(2)),
		}
		if req.Flow == rules.OTPSend || req.Flow == rules.OTPVerify {
			req.Recipient = recipients[rng.IntN(len(recipients))]
		}
		norm, _ := keys.Account(req.Account)
		dev, trusted := devices[norm]
		trusted = trusted && req.Account != "" && rng.IntN(3) == 0
		reqP, reqS := req, req
		if trusted {
			reqP.DeviceToken, reqS.DeviceToken = dev.plain, dev.shadowed
		}
		dp, errP := plain.eng.Check(ctx, reqP)
		ds, errS := shadowed.eng.Check(ctx, reqS)
		if !sameError(errP, errS) {
			t.Fatalf("step %d: %+v: errors %v and %v", i, req, errP, errS)
		}
		if errP != nil {
			continue
		}
		if got, want := verdict(ds), verdict(dp); !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: %+v: with shadow rules %+v, without %+v", i, req, got, want)
		}
		if len(dp.Shadow) != 0 {
			t.Fatalf("step %d: a set without shadow rules lists %v", i, dp.Shadow)
		}
		if dp.AttemptID != "" {
			pending = append(pending, attempt{dp.AttemptID, ds.AttemptID})
		}
		for _, r := range shadowed.set.Rules {
			if r.Mode == rules.Shadow && applies(&r, req, trusted) {
				want[r.Name].evaluated++
			}
		}
		for _, trip := range ds.Shadow {
			w := want[trip.Rule]
			switch trip.Action {
			case rules.Slow:
				w.slow++
			case rules.Block:
				w.block++
			case rules.Challenge:
				w.challenge++
			default:
				t.Fatalf("step %d: shadow trip %+v", i, trip)
			}
		}
		// A success report of this check will trust its device: keep a
		// token for later checks of the account.
		if req.Account != "" && req.Flow != rules.OTPSend && dp.AttemptID != "" && rng.IntN(4) == 0 {
			rp, errP := plain.eng.Report(ctx, dp.AttemptID, engine.Success)
			rs, errS := shadowed.eng.Report(ctx, ds.AttemptID, engine.Success)
			if errP != nil || errS != nil || rp.DeviceToken == "" || rs.DeviceToken == "" {
				t.Fatalf("step %d: success reports: %v %v, %v %v", i, rp, errP, rs, errS)
			}
			devices[norm] = device{rp.DeviceToken, rs.DeviceToken}
			pending = pending[:len(pending)-1]
		}
	}

	var trips uint64
	for _, got := range shadowed.book.Report() {
		w := want[got.Rule]
		if w == nil {
			t.Errorf("the book reports %s, not a shadow rule", got.Rule)
			continue
		}
		if got.Evaluated != w.evaluated || got.WouldSlow != w.slow || got.WouldBlock != w.block || got.WouldChallenge != w.challenge {
			t.Errorf("%s: book %d evaluated, %d/%d/%d slow/block/challenge; the checks said %d, %d/%d/%d",
				got.Rule, got.Evaluated, got.WouldSlow, got.WouldBlock, got.WouldChallenge, w.evaluated, w.slow, w.block, w.challenge)
		}
		for action, n := range map[rules.Action]uint64{rules.Slow: w.slow, rules.Block: w.block, rules.Challenge: w.challenge} {
			c := testutil.ToFloat64(shadowed.metrics.RuleTrips.WithLabelValues(got.Rule, string(rules.Shadow), string(action)))
			if uint64(c) != n {
				t.Errorf("guardian_rule_trips_total{rule=%q,mode=\"shadow\",action=%q} = %v, want %d", got.Rule, action, c, n)
			}
		}
		trips += w.slow + w.block + w.challenge
	}
	// The traffic must have exercised the rules it claims to test.
	for name, w := range want {
		if w.evaluated == 0 || w.slow+w.block+w.challenge == 0 {
			t.Errorf("shadow rule %s never tripped in %d steps: the traffic proves nothing about it", name, n)
		}
	}
	for _, r := range plain.set.Rules {
		if testutil.ToFloat64(plain.metrics.RuleTrips.WithLabelValues(r.Name, string(rules.Enforce), string(r.Action))) == 0 {
			t.Errorf("enforced rule %s never tripped in %d steps: the traffic proves nothing about it", r.Name, n)
		}
	}
	t.Logf("%d shadow trips over %d steps", trips, n)
}

// decision is what a check's caller sees of a decision, the attempt id's
// value (random) and the shadow list aside.
type decision struct {
	Action     rules.Action
	Rule       string
	RetryAfter time.Duration
	Degraded   bool
	Limits     []engine.Limit
	Quota      *engine.Quota
	Attempt    bool
}

func verdict(d engine.Decision) decision {
	return decision{d.Action, d.Rule, d.RetryAfter, d.Degraded, d.Limits, d.Quota, d.AttemptID != ""}
}

// sameError reports whether two errors are both nil or both the same
// error message.
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Error() == b.Error() || errors.Is(a, b)
}
