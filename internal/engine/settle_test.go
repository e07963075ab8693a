package engine_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/testclock"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// Two rule sets with one account rule of the same name: A gives back a
// success's reservation, B counts attempts and gives back nothing.
const (
	givesBack = `version: 1
rules:
  - {name: acct, flows: [login], key: account, type: rate, count: failures, limit: 1, per: 1h, burst: 3}
`
	keepsAll = `version: 1
rules:
  - {name: acct, flows: [login], key: account, type: rate, count: attempts, limit: 1, per: 1h, burst: 3}
`
)

// instance is one engine of a fleet that shares a store and a signing key.
type instance struct {
	eng     *engine.Engine
	holder  *rules.Holder
	metrics *metrics.Metrics
	logs    *bytes.Buffer
}

func newInstance(tb testing.TB, st store.Store, clock *testclock.Clock, yaml string) *instance {
	tb.Helper()
	key, err := secret.New([]byte("engine-test-signing-key-0123456789abcdef"))
	if err != nil {
		tb.Fatal(err)
	}
	in := &instance{holder: &rules.Holder{}, metrics: metrics.New(prometheus.NewRegistry()), logs: &bytes.Buffer{}}
	in.load(tb, yaml)
	in.eng = engine.New(engine.Config{
		Rules:   in.holder,
		Store:   st,
		Key:     key,
		Metrics: in.metrics,
		Now:     clock.Now,
		Logger:  slog.New(slog.NewJSONHandler(in.logs, nil)),
	})
	return in
}

// load makes yaml the instance's rules, as a reload does.
func (in *instance) load(tb testing.TB, yaml string) {
	tb.Helper()
	set, err := rules.Parse("rules.yaml", []byte(yaml), t0)
	if err != nil {
		tb.Fatal(err)
	}
	in.holder.Store(set)
}

// wantUnsettled checks that n reports were accepted without settling.
func (in *instance) wantUnsettled(tb testing.TB, n float64) {
	tb.Helper()
	if got := testutil.ToFloat64(in.metrics.UnsettledReports); got != n {
		tb.Errorf("guardian_reports_unsettled_total = %v, want %v", got, n)
	}
}

// remaining is what the account's acct bucket holds, read without spending.
func (in *instance) remaining(tb testing.TB, account string) int64 {
	tb.Helper()
	st, err := in.eng.Status(context.Background(), account)
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range st.Limits {
		if l.Rule == "acct" {
			return l.Remaining
		}
	}
	tb.Fatalf("status of %s has no acct limit: %+v", account, st)
	return 0
}

var carol = engine.CheckRequest{Flow: rules.Login, Account: "carol", IP: "192.0.2.1"}

// check checks req, which must be allowed, and returns its attempt id.
func (in *instance) check(tb testing.TB, req engine.CheckRequest) string {
	tb.Helper()
	d, err := in.eng.Check(context.Background(), req)
	if err != nil || d.AttemptID == "" {
		tb.Fatalf("check: %+v, %v; want an attempt id", d, err)
	}
	return d.AttemptID
}

// report reports id as o, which must be accepted.
func (in *instance) report(tb testing.TB, id string, o engine.Outcome) {
	tb.Helper()
	if _, err := in.eng.Report(context.Background(), id, o); err != nil {
		tb.Fatalf("report %s: %v", o, err)
	}
}

// TestReportAfterAReloadSettlesByTheCheckRules: a report settles by the
// rules that decided its check, even after a reload replaced them.
func TestReportAfterAReloadSettlesByTheCheckRules(t *testing.T) {
	clock := testclock.New(t0)
	in := newInstance(t, memstore.New(memstore.Config{Now: clock.Now}), clock, givesBack)
	id := in.check(t, carol)
	in.load(t, keepsAll)
	in.check(t, engine.CheckRequest{Flow: rules.Login, Account: "dave", IP: "192.0.2.2"})
	if got := in.remaining(t, "carol"); got != 2 {
		t.Fatalf("after the check: %d left, want 2", got)
	}
	clock.Advance(time.Minute)
	in.report(t, id, engine.Success)
	// A gave the reservation back; B would have kept it.
	if got := in.remaining(t, "carol"); got != 3 {
		t.Errorf("after the success: %d left, want 3: the rules of the check give back", got)
	}
	in.wantUnsettled(t, 0)
}

// countsFailures has the rule acct of the same name as givesBack's, now a
// consecutive-failure count.
const countsFailures = `version: 1
rules:
  - {name: acct, flows: [login], key: account, type: consecutive_failures, limit: 3}
`

// TestRuleThatChangedTypeStartsAfresh: a reload that changes a rule's
// type under its name finds the accounts' keys holding the old kind's
// state: the rule starts afresh for them, neither reading the old state as
// its own (a rate's arrival time is no count of failures) nor failing to
// the fallback, and a report settled by the old rule leaves the new
// rule's count alone; on the embedded store and on Redis.
func TestRuleThatChangedTypeStartsAfresh(t *testing.T) {
	for _, name := range []string{"memstore", "redis"} {
		t.Run(name, func(t *testing.T) {
			newStore := storeFactory(func(now func() time.Time) store.Store { return memstore.New(memstore.Config{Now: now}) })
			if name == "redis" {
				newStore = redisFactory(t, redistest.Start(t).Client(t))
			}
			clock := testclock.New(t0)
			in := newInstance(t, newStore(clock.Now), clock, givesBack)
			old := in.check(t, carol)
			if got := in.remaining(t, "carol"); got != 2 {
				t.Fatalf("after the rate's check: %d left, want 2", got)
			}
			in.load(t, countsFailures)
			if got := in.remaining(t, "carol"); got != 3 {
				t.Fatalf("after the reload: %d left, want 3: the count starts afresh", got)
			}
			d, err := in.eng.Check(context.Background(), carol)
			if err != nil || d.Action != rules.Allow || d.Degraded {
				t.Fatalf("check under the new rule: %+v, %v; want allowed by the store", d, err)
			}
			in.report(t, d.AttemptID, engine.Failure)
			clock.Advance(time.Minute)
			// The old check's success gives its rate reservation back:
			// nothing of the count it now finds.
			in.report(t, old, engine.Success)
			if got := in.remaining(t, "carol"); got != 2 {
				t.Errorf("after a failure under the new rule and a success under the old: %d left, want 2", got)
			}
			// And back: the rate starts afresh too, and the new rule's
			// success (a reset) leaves the rate alone.
			last := in.check(t, carol)
			in.load(t, givesBack)
			in.check(t, carol)
			in.report(t, last, engine.Success)
			if got := in.remaining(t, "carol"); got != 2 {
				t.Errorf("the rate again after a check and the old rule's success: %d left, want 2", got)
			}
			in.wantUnsettled(t, 0)
		})
	}
}

// TestReportUnderUnknownRulesSettlesNothing: an instance that never knew
// the rules of a check (another reloaded first, or it restarted) accepts
// its report once, gives nothing back, and counts and logs it once.
func TestReportUnderUnknownRulesSettlesNothing(t *testing.T) {
	clock := testclock.New(t0)
	st := memstore.New(memstore.Config{Now: clock.Now})
	first := newInstance(t, st, clock, givesBack)
	other := newInstance(t, st, clock, keepsAll)
	ids := []string{first.check(t, carol), first.check(t, carol)}
	for _, id := range ids {
		other.report(t, id, engine.Success)
	}
	if got := first.remaining(t, "carol"); got != 1 {
		t.Errorf("after two unsettled successes: %d left, want 1: nothing given back", got)
	}
	if _, err := other.eng.Report(context.Background(), ids[0], engine.Failure); !errors.Is(err, engine.ErrAlreadyReported) {
		t.Errorf("second report: %v, want ErrAlreadyReported", err)
	}
	other.wantUnsettled(t, 2)
	if n := strings.Count(other.logs.String(), "rules this instance does not know"); n != 1 {
		t.Errorf("%d log lines of unknown rules, want one per rules hash:\n%s", n, other.logs)
	}
	// The instance that decided the checks settles their like.
	first.report(t, first.check(t, carol), engine.Success)
	if got := first.remaining(t, "carol"); got != 1 {
		t.Errorf("after a settled success: %d left, want 1 (its own reservation back)", got)
	}
}

// TestReportKnowsRulesLoadedBeforeAnyCheck: rules loaded after a restart
// (here: an instance that has decided no check yet) settle the attempts
// of the same rules from before.
func TestReportKnowsRulesLoadedBeforeAnyCheck(t *testing.T) {
	clock := testclock.New(t0)
	st := memstore.New(memstore.Config{Now: clock.Now})
	id := newInstance(t, st, clock, givesBack).check(t, carol)
	after := newInstance(t, st, clock, givesBack)
	after.report(t, id, engine.Success)
	if got := after.remaining(t, "carol"); got != 3 {
		t.Errorf("after the success: %d left, want 3", got)
	}
	after.wantUnsettled(t, 0)
}

// TestReportWithoutRulesSettlesNothing: an attempt id naming no rules (as
// those of the layout before, which an upgraded instance still opens) is
// accepted once and settles nothing; a success still trusts its device.
func TestReportWithoutRulesSettlesNothing(t *testing.T) {
	clock := testclock.New(t0)
	in := newInstance(t, memstore.New(memstore.Config{Now: clock.Now}), clock, givesBack)
	key, err := secret.New([]byte("engine-test-signing-key-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := tokens.NewAttempts(key).Seal(tokens.Attempt{Issued: t0, Flow: "login", Account: "AbCdEfGhIjKlMnOpQrStUg", Spent: 1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := in.eng.Report(context.Background(), id, engine.Success)
	if err != nil || res.DeviceToken == "" {
		t.Fatalf("report: %+v, %v; want it accepted with a device token", res, err)
	}
	in.wantUnsettled(t, 1)
}
