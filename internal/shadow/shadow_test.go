package shadow

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/guardian-sec/guardian/internal/rules"
)

// event is one Record call.
type event struct {
	rule    string
	tripped rules.Action
	key     string
}

// tallyEvents counts events independently of Book, for the rules named.
func tallyEvents(tb testing.TB, tracked []string, events []event) []RuleReport {
	tb.Helper()
	byRule := make(map[string]*RuleReport)
	hits := make(map[string]map[string]uint64)
	for _, r := range tracked {
		byRule[r] = &RuleReport{Rule: r}
		hits[r] = make(map[string]uint64)
	}
	for _, e := range events {
		rr, ok := byRule[e.rule]
		if !ok {
			continue
		}
		rr.Evaluated++
		switch e.tripped {
		case rules.Slow:
			rr.WouldSlow++
		case rules.Block:
			rr.WouldBlock++
		case rules.Challenge:
			rr.WouldChallenge++
		default:
			continue
		}
		if e.key != "" {
			hits[e.rule][e.key]++
		}
	}
	out := make([]RuleReport, 0, len(byRule))
	for r, rr := range byRule {
		rr.TopKeys = []KeyCount{}
		for k, h := range hits[r] {
			rr.TopKeys = append(rr.TopKeys, KeyCount{Key: k, Hits: h})
		}
		slices.SortFunc(rr.TopKeys, func(a, b KeyCount) int {
			if a.Hits != b.Hits {
				if a.Hits > b.Hits {
					return -1
				}
				return 1
			}
			if a.Key < b.Key {
				return -1
			}
			return 1
		})
		rr.TopKeys = rr.TopKeys[:min(len(rr.TopKeys), reportedKeys)]
		out = append(out, *rr)
	}
	slices.SortFunc(out, func(a, b RuleReport) int {
		if a.Rule < b.Rule {
			return -1
		}
		return 1
	})
	return out
}

// repeat returns e n times.
func repeat(e event, n int) []event {
	out := make([]event, n)
	for i := range out {
		out[i] = e
	}
	return out
}

func TestBookReportMatchesTally(t *testing.T) {
	manyKeys := make([]event, 0, 15*16/2)
	for i := range 15 {
		manyKeys = append(manyKeys, repeat(event{"ip-strict", rules.Slow, fmt.Sprintf("h%02d", i)}, i+1)...)
	}
	tests := []struct {
		name    string
		tracked []string
		events  []event
	}{
		{
			name:    "no events",
			tracked: []string{"login-ip-strict"},
		},
		{
			name:    "no rules",
			tracked: nil,
			events:  []event{{"login-ip-strict", rules.Block, "h1"}},
		},
		{
			name:    "allow only counts the evaluation",
			tracked: []string{"r"},
			events:  []event{{"r", "", "h1"}, {"r", rules.Allow, "h2"}, {"r", "", ""}},
		},
		{
			name:    "each action in its own counter",
			tracked: []string{"r"},
			events: []event{
				{"r", rules.Slow, "h1"}, {"r", rules.Slow, "h2"}, {"r", rules.Block, "h1"},
				{"r", rules.Challenge, "h3"}, {"r", "", "h4"}, {"r", rules.Slow, "h1"},
			},
		},
		{
			name:    "empty key counted but not listed",
			tracked: []string{"global-challenge"},
			events:  []event{{"global-challenge", rules.Challenge, ""}, {"global-challenge", rules.Challenge, ""}},
		},
		{
			name:    "several rules sorted by name, untracked dropped",
			tracked: []string{"zeta", "alpha", "mid"},
			events: []event{
				{"zeta", rules.Block, "h1"}, {"alpha", rules.Slow, "h2"}, {"gone", rules.Slow, "h3"},
				{"mid", "", "h4"}, {"alpha", rules.Slow, "h2"}, {"zeta", rules.Challenge, "h5"},
			},
		},
		{
			name:    "top keys cut at ten",
			tracked: []string{"ip-strict"},
			events:  manyKeys,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBook()
			b.Sync(tt.tracked)
			for _, e := range tt.events {
				b.Record(e.rule, e.tripped, e.key)
			}
			got := b.Report()
			want := tallyEvents(t, tt.tracked, tt.events)
			if !reportsEqual(got, want) {
				t.Errorf("Report() = %+v, want %+v", got, want)
			}
			for _, rr := range got {
				if rr.TopKeys == nil {
					t.Errorf("rule %s: TopKeys is nil, want an empty slice", rr.Rule)
				}
				if len(rr.TopKeys) > reportedKeys {
					t.Errorf("rule %s: %d top keys, want at most %d", rr.Rule, len(rr.TopKeys), reportedKeys)
				}
			}
		})
	}
}

// reportsEqual compares reports field by field, including top keys.
func reportsEqual(a, b []RuleReport) bool {
	return slices.EqualFunc(a, b, func(x, y RuleReport) bool {
		return x.Rule == y.Rule && x.Evaluated == y.Evaluated && x.WouldSlow == y.WouldSlow &&
			x.WouldBlock == y.WouldBlock && x.WouldChallenge == y.WouldChallenge &&
			slices.Equal(x.TopKeys, y.TopKeys)
	})
}

func TestBookSync(t *testing.T) {
	b := NewBook()
	b.Sync([]string{"keep", "drop"})
	b.Record("keep", rules.Slow, "h1")
	b.Record("drop", rules.Block, "h2")

	b.Sync([]string{"keep", "new"})
	b.Record("keep", "", "h1")
	b.Record("drop", rules.Block, "h2")
	b.Record("new", rules.Challenge, "h3")

	got := b.Report()
	want := []RuleReport{
		{Rule: "keep", Evaluated: 2, WouldSlow: 1, TopKeys: []KeyCount{{"h1", 1}}},
		{Rule: "new", Evaluated: 1, WouldChallenge: 1, TopKeys: []KeyCount{{"h3", 1}}},
	}
	if !reportsEqual(got, want) {
		t.Errorf("after Sync, Report() = %+v, want %+v", got, want)
	}

	// A rule dropped and named again starts from zero.
	b.Sync([]string{"keep", "new", "drop"})
	got = b.Report()
	want = []RuleReport{
		{Rule: "drop", TopKeys: []KeyCount{}},
		{Rule: "keep", Evaluated: 2, WouldSlow: 1, TopKeys: []KeyCount{{"h1", 1}}},
		{Rule: "new", Evaluated: 1, WouldChallenge: 1, TopKeys: []KeyCount{{"h3", 1}}},
	}
	if !reportsEqual(got, want) {
		t.Errorf("after re-adding drop, Report() = %+v, want %+v", got, want)
	}

	b.Sync(nil)
	if got := b.Report(); len(got) != 0 {
		t.Errorf("after Sync(nil), Report() = %+v, want none", got)
	}
}

func TestBookReset(t *testing.T) {
	b := NewBook()
	b.Sync([]string{"changed", "same"})
	b.Record("changed", rules.Block, "h1")
	b.Record("same", rules.Slow, "h2")

	b.Reset("changed")
	b.Reset("added")
	b.Record("added", rules.Slow, "h3")

	got := b.Report()
	want := []RuleReport{
		{Rule: "added", Evaluated: 1, WouldSlow: 1, TopKeys: []KeyCount{{"h3", 1}}},
		{Rule: "changed", TopKeys: []KeyCount{}},
		{Rule: "same", Evaluated: 1, WouldSlow: 1, TopKeys: []KeyCount{{"h2", 1}}},
	}
	if !reportsEqual(got, want) {
		t.Errorf("after Reset, Report() = %+v, want %+v", got, want)
	}
}

func TestBookRecordUntrackedRule(t *testing.T) {
	b := NewBook()
	b.Record("never-synced", rules.Block, "h1")
	if got := b.Report(); len(got) != 0 {
		t.Errorf("Report() = %+v, want none for a rule never synced", got)
	}
}

func TestRuleReportJSON(t *testing.T) {
	b := NewBook()
	b.Sync([]string{"login-ip-strict", "quiet"})
	b.Record("login-ip-strict", rules.Block, "9f86d081")
	b.Record("login-ip-strict", rules.Slow, "9f86d081")
	b.Record("login-ip-strict", "", "60303ae2")

	got, err := json.Marshal(b.Report())
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"rule":"login-ip-strict","evaluated":3,"would_slow":1,"would_block":1,"would_challenge":0,` +
		`"top_keys":[{"key":"9f86d081","hits":2}]},` +
		`{"rule":"quiet","evaluated":0,"would_slow":0,"would_block":0,"would_challenge":0,"top_keys":[]}]`
	if string(got) != want {
		t.Errorf("JSON\n got %s\nwant %s", got, want)
	}
}

func TestBookConcurrent(t *testing.T) {
	const (
		goroutines = 50
		perG       = 400
	)
	actions := []rules.Action{"", rules.Slow, rules.Block, rules.Challenge}
	b := NewBook()
	b.Sync([]string{"a", "b"})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				rule := "a"
				if i%2 == 1 {
					rule = "b"
				}
				b.Record(rule, actions[i%len(actions)], fmt.Sprintf("h%d", g%5))
			}
		})
	}
	// Reports and syncs of the same rules race with the records.
	wg.Go(func() {
		for range 100 {
			for _, rr := range b.Report() {
				if sum := rr.WouldSlow + rr.WouldBlock + rr.WouldChallenge; sum > rr.Evaluated {
					t.Errorf("rule %s: would-be counts %d exceed evaluated %d", rr.Rule, sum, rr.Evaluated)
				}
			}
			b.Sync([]string{"a", "b"})
		}
	})
	wg.Wait()

	// Rule a sees i = 0, 2 (allow, block); rule b sees i = 1, 3 (slow,
	// challenge), each a quarter of the records.
	n := uint64(goroutines * perG / 4)
	perKey := uint64(goroutines / 5 * perG / 4)
	keys := []KeyCount{{"h0", perKey}, {"h1", perKey}, {"h2", perKey}, {"h3", perKey}, {"h4", perKey}}
	want := []RuleReport{
		{Rule: "a", Evaluated: 2 * n, WouldBlock: n, TopKeys: keys},
		{Rule: "b", Evaluated: 2 * n, WouldSlow: n, WouldChallenge: n, TopKeys: slices.Clone(keys)},
	}
	for i := range want[1].TopKeys {
		want[1].TopKeys[i].Hits = 2 * perKey
	}
	if got := b.Report(); !reportsEqual(got, want) {
		t.Errorf("Report() = %+v, want %+v", got, want)
	}
}

func BenchmarkRecord(b *testing.B) {
	keys := keyNames(b, 10_000)
	cases := []struct {
		name    string
		tripped rules.Action
		keys    []string
	}{
		{"allow", "", keys[:1]},
		{"slow/few-keys", rules.Slow, keys[:10]},
		{"block/many-keys", rules.Block, keys},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			book := NewBook()
			book.Sync([]string{"login-ip-strict", "otp-recipient"})
			for _, k := range c.keys {
				book.Record("login-ip-strict", c.tripped, k)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				book.Record("login-ip-strict", c.tripped, c.keys[i%len(c.keys)])
			}
		})
	}
}

func BenchmarkRecordParallel(b *testing.B) {
	keys := keyNames(b, 1_000)
	book := NewBook()
	book.Sync([]string{"login-ip-strict"})
	for _, k := range keys {
		book.Record("login-ip-strict", rules.Slow, k)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var i int
		for pb.Next() {
			tripped := rules.Action("")
			if i%4 == 0 {
				tripped = rules.Slow
			}
			book.Record("login-ip-strict", tripped, keys[i%len(keys)])
			i++
		}
	})
}
