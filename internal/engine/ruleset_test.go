package engine

import (
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/plan"
	"github.com/guardian-sec/guardian/internal/rules"
)

// parse parses a rules file of one rule of type and count.
func parse(tb testing.TB, typ, count string) *rules.Set {
	tb.Helper()
	yaml := "version: 1\nrules:\n  - {name: r, flows: [login], key: account, type: " + typ + ", limit: 5"
	if typ == "rate" {
		yaml += ", per: 1m, count: " + count
	}
	set, err := rules.Parse("rules.yaml", []byte(yaml+"}\n"), time.Time{})
	if err != nil {
		tb.Fatal(err)
	}
	return set
}

func TestHistoryKeepsReplacedSetsForKeep(t *testing.T) {
	const keep = 12 * time.Minute
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	a, b, c := parse(t, "rate", "failures"), parse(t, "rate", "attempts"), parse(t, "consecutive_failures", "")
	h := newHistory(keep, 20*time.Minute)
	if rs := h.current(a, t0); rs.set != a || h.current(a, t0) != rs {
		t.Fatal("current compiles a set once")
	}
	h.current(b, t0.Add(time.Minute))
	if rs := h.lookup(a.Hash()); rs == nil || rs.set != a {
		t.Fatal("a set replaced a minute ago is not known")
	}
	h.current(c, t0.Add(time.Minute+keep+time.Second))
	if h.lookup(a.Hash()) != nil {
		t.Error("a set replaced longer ago than keep is still known")
	}
	if h.lookup(b.Hash()) == nil || h.lookup(c.Hash()) == nil {
		t.Error("the set just replaced, or the one in force, is not known")
	}
	// A set that comes back is in force again, whatever its past.
	back := parse(t, "rate", "failures")
	if rs := h.current(back, t0.Add(time.Hour)); rs.set != back || h.lookup(a.Hash()) != rs {
		t.Error("a set loaded again is not the one known by its hash")
	}
	if !h.missed("0123456789abcdef") || h.missed("0123456789abcdef") {
		t.Error("missed reports the first miss of a hash, and only the first")
	}
}

func TestCompileGivesSettlingRulesTheirBits(t *testing.T) {
	rs := compile(rules.Default(), 20*time.Minute)
	want := map[string]int{
		"login-account": 0, "login-ip": 1, "login-ip6-48": 2, "login-hard-stop": 3,
		"login-global-failures": plan.NoBit, "login-secret-spray": 4, "login-ip-distinct-accounts": 5,
	}
	for _, c := range rs.flows[rules.Login] {
		if bit, ok := want[c.rule.Name]; ok && c.bit != bit {
			t.Errorf("%s: bit %d, want %d", c.rule.Name, c.bit, bit)
		}
		if c.rule.GivesBack() != (c.bit != plan.NoBit) {
			t.Errorf("%s: bit %d, but GivesBack %v", c.rule.Name, c.bit, c.rule.GivesBack())
		}
	}
}
