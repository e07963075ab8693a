package engine_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/lists"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/testclock"
)

// countingStore counts the batches a store is asked to evaluate.
type countingStore struct {
	store.Store
	calls int
}

func (c *countingStore) Do(ctx context.Context, ops []store.Op, res []store.Result) error {
	c.calls++
	return c.Store.Do(ctx, ops, res)
}

const listRules = `version: 1
rules:
  - {name: login-account, flows: [login], key: account, type: rate, count: failures, limit: 1, per: 1m, burst: 3}
  - {name: login-ip, flows: [login], key: ip, type: rate, count: failures, limit: 1, per: 1m, burst: 2}
`

// listHarness is an engine under listRules with lists on its own store.
func listHarness(t *testing.T) (*engine.Engine, *lists.List, *countingStore, *metrics.Metrics) {
	t.Helper()
	var l *lists.List
	eng, st, m := listEngine(t, func(holder *rules.Holder, h *keys.Hasher, clock *testclock.Clock) engine.Lists {
		l = lists.New(lists.Config{Store: memstore.New(memstore.Config{Now: clock.Now}), Rules: holder.Load, Hasher: h, Now: clock.Now})
		return l
	})
	return eng, l, st, m
}

// listEngine is an engine under listRules whose lists newLists makes.
func listEngine(t *testing.T, newLists func(*rules.Holder, *keys.Hasher, *testclock.Clock) engine.Lists) (*engine.Engine, *countingStore, *metrics.Metrics) {
	t.Helper()
	set, err := rules.Parse("test.yaml", []byte(listRules), t0)
	if err != nil {
		t.Fatal(err)
	}
	holder := new(rules.Holder)
	holder.Store(set)
	clock := testclock.New(t0)
	st := &countingStore{Store: memstore.New(memstore.Config{Now: clock.Now})}
	key := secret.Generate()
	h := keys.NewHasher(key)
	m := metrics.New(prometheus.NewRegistry())
	eng := engine.New(engine.Config{Rules: holder, Store: st, Key: key, Hasher: h, Metrics: m, Now: clock.Now, Lists: newLists(holder, h, clock)})
	return eng, st, m
}

func TestDenyListBlocksBeforeAnyRule(t *testing.T) {
	eng, l, st, m := listHarness(t)
	ctx := context.Background()
	for _, spec := range []lists.Spec{
		{List: lists.Deny, Network: "198.51.100.0/24", TTL: "1h"},
		{List: lists.Deny, Account: "Victim", TTL: "10m"},
	} {
		if _, err := l.Add(ctx, spec, "ops"); err != nil {
			t.Fatal(err)
		}
	}
	for _, req := range []engine.CheckRequest{
		{Flow: rules.Login, Account: "a", IP: "198.51.100.7"},
		{Flow: rules.Login, Account: "victim", IP: "192.0.2.1"},
	} {
		d, err := eng.Check(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if d.Action != rules.Block || d.Rule != rules.DenyListRule || d.AttemptID != "" || len(d.Limits) != 0 {
			t.Errorf("Check(%+v) = %+v, want block by deny-list without an attempt id", req, d)
		}
	}
	if st.calls != 0 {
		t.Errorf("denied checks made %d store calls, want 0", st.calls)
	}
	d, _ := eng.Check(ctx, engine.CheckRequest{Flow: rules.Login, Account: "victim", IP: "192.0.2.1"})
	if d.RetryAfter != 10*time.Minute {
		t.Errorf("retry_after = %v, want the entry's remaining 10m", d.RetryAfter)
	}
	if got := testutil.ToFloat64(m.ListMatches.WithLabelValues(lists.Deny, rules.DenyListRule)); got != 3 {
		t.Errorf("deny matches = %v, want 3", got)
	}
}

func TestAllowListSkipsOnlyExemptableRules(t *testing.T) {
	eng, l, _, m := listHarness(t)
	ctx := context.Background()
	if _, err := l.Add(ctx, lists.Spec{List: lists.Allow, Network: "203.0.113.0/24", Exempt: []string{"login-ip"}}, "ops"); err != nil {
		t.Fatal(err)
	}
	// Ten accounts from the office: login-ip (burst 2) neither counts nor
	// decides them.
	for i := range 10 {
		req := engine.CheckRequest{Flow: rules.Login, Account: string(rune('a' + i)), IP: "203.0.113.9"}
		d, err := eng.Check(ctx, req)
		if err != nil || d.Action != rules.Allow {
			t.Fatalf("office check %d = %+v, %v, want allow", i, d, err)
		}
		for _, lim := range d.Limits {
			if lim.Rule == "login-ip" {
				t.Fatalf("office check %d counted on login-ip: %+v", i, d.Limits)
			}
		}
	}
	if got := testutil.ToFloat64(m.ListMatches.WithLabelValues(lists.Allow, "login-ip")); got != 10 {
		t.Errorf("allow matches = %v, want 10", got)
	}
	// The account's own limit still holds for an office check: 3, then slow.
	for i := range 4 {
		d, _ := eng.Check(ctx, engine.CheckRequest{Flow: rules.Login, Account: "z", IP: "203.0.113.9"})
		if want := i == 3; (d.Action == rules.Slow) != want || want && d.Rule != "login-account" {
			t.Errorf("office check %d of one account = %s by %s", i, d.Action, d.Rule)
		}
	}
	// Outside the office, login-ip still applies: 2, then slow.
	for i := range 3 {
		d, _ := eng.Check(ctx, engine.CheckRequest{Flow: rules.Login, Account: string(rune('a' + i)), IP: "192.0.2.1"})
		if want := i == 2; (d.Action == rules.Slow) != want || want && d.Rule != "login-ip" {
			t.Errorf("outside check %d = %s by %s", i, d.Action, d.Rule)
		}
	}
}

// fixedLists names whatever rules it is told, exemptable or not: what a
// list made before a reload changed a rule's key would say.
type fixedLists struct{ exempt []string }

func (f fixedLists) Match(context.Context, netip.Addr, string, time.Time) lists.Match {
	return lists.Match{Exempt: f.exempt}
}

func TestAllowListNeverSkipsAnAccountRule(t *testing.T) {
	eng, _, _ := listEngine(t, func(*rules.Holder, *keys.Hasher, *testclock.Clock) engine.Lists {
		return fixedLists{exempt: []string{"login-account", "login-ip"}}
	})
	for i := range 4 {
		d, err := eng.Check(context.Background(), engine.CheckRequest{Flow: rules.Login, Account: "z", IP: "203.0.113.9"})
		if err != nil {
			t.Fatal(err)
		}
		if want := i == 3; (d.Action == rules.Slow) != want || want && d.Rule != "login-account" {
			t.Errorf("check %d = %s by %s, want login-account to slow the 4th", i, d.Action, d.Rule)
		}
	}
}
