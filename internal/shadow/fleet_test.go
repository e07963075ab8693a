package shadow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/rules"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// memShared is a Shared in memory: each instance's last tally of each
// definition.
type memShared struct {
	mu   sync.Mutex
	by   map[string]map[string]Tally // def → instance → tally
	puts int
	err  error
}

func newMemShared() *memShared { return &memShared{by: map[string]map[string]Tally{}} }

func (m *memShared) Put(_ context.Context, ts []Tally, _ time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	m.puts++
	for _, t := range ts {
		if m.by[t.Def] == nil {
			m.by[t.Def] = map[string]Tally{}
		}
		m.by[t.Def][t.Instance] = t
	}
	return nil
}

func (m *memShared) Get(_ context.Context, defs []string) ([]Tally, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return nil, m.err
	}
	var out []Tally
	for _, d := range defs {
		for _, t := range m.by[d] {
			out = append(out, t)
		}
	}
	return out, nil
}

var tf0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func shadowSet(t *testing.T, limit int, at time.Time) *rules.Set {
	t.Helper()
	set, err := rules.Parse("rules.yaml", []byte(fmt.Sprintf(`version: 1
rules:
  - {name: ip-strict, flows: [login], key: ip, type: rate, limit: %d, per: 1m, mode: shadow}
  - {name: enforced, flows: [login], key: ip, type: rate, limit: 100, per: 1m}
`, limit)), at)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// member is one instance: its Book and Fleet.
type member struct {
	book  *Book
	fleet *Fleet
}

func newMember(id string, sh Shared, set *rules.Set) member {
	b := NewBook()
	b.Track(set)
	return member{b, NewFleet(FleetConfig{Book: b, Shared: sh, Instance: id, Logger: quiet})}
}

func report(t *testing.T, f *Fleet) (RuleReport, bool) {
	t.Helper()
	rep, partial := f.Report(context.Background())
	if len(rep) != 1 || rep[0].Rule != "ip-strict" {
		t.Fatalf("report %+v, want ip-strict alone", rep)
	}
	return rep[0], partial
}

func TestFleetSumsEveryInstance(t *testing.T) {
	sh := newMemShared()
	a := newMember("a", sh, shadowSet(t, 1, tf0.Add(time.Minute)))
	b := newMember("b", sh, shadowSet(t, 1, tf0))
	c := newMember("c", sh, shadowSet(t, 1, tf0.Add(2*time.Minute)))
	// a trips on k1 three times and k2 once; b on k2 twice and k3 once.
	for _, k := range []string{"k1", "k1", "k1", "k2"} {
		a.book.Record("ip-strict", rules.Slow, k)
	}
	a.book.Record("ip-strict", "", "k9")
	for _, k := range []string{"k2", "k2", "k3"} {
		b.book.Record("ip-strict", rules.Slow, k)
	}
	c.book.Record("ip-strict", rules.Slow, "k3")
	for _, m := range []member{a, b} {
		if err := m.fleet.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// c's own trip counts from memory, before c ever flushed.
	got, partial := report(t, c.fleet)
	want := RuleReport{Rule: "ip-strict", Evaluated: 9, WouldSlow: 8, Since: tf0,
		TopKeys: []KeyCount{{"k1", 3}, {"k2", 3}, {"k3", 2}}}
	if partial || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("c reports %+v partial %v\nwant       %+v, not partial", got, partial, want)
	}
	// Flushing c and reading from a counts c's trip once.
	if err := c.fleet.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, _ := report(t, a.fleet); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("a reports %+v\nwant       %+v", got, want)
	}
}

func TestFleetChangedDefinitionStartsAfresh(t *testing.T) {
	sh := newMemShared()
	a := newMember("a", sh, shadowSet(t, 1, tf0))
	b := newMember("b", sh, shadowSet(t, 1, tf0))
	a.book.Record("ip-strict", rules.Block, "k1")
	b.book.Record("ip-strict", rules.Block, "k1")
	for _, m := range []member{a, b} {
		if err := m.fleet.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// a reloads a changed definition; b still runs the old one.
	later := tf0.Add(time.Hour)
	a.book.Track(shadowSet(t, 2, later))
	a.book.Record("ip-strict", rules.Block, "k2")
	got, _ := report(t, a.fleet)
	if got.Evaluated != 1 || !got.Since.Equal(later) || fmt.Sprint(got.TopKeys) != "[{k2 1}]" {
		t.Errorf("changed definition: got %+v, want 1 evaluation since %v, k2 alone", got, later)
	}
	if got, _ := report(t, b.fleet); got.Evaluated != 2 || !got.Since.Equal(tf0) {
		t.Errorf("old definition on b: got %+v, want its 2 evaluations since %v", got, tf0)
	}
	// An unchanged reload keeps the counts.
	b.book.Track(shadowSet(t, 1, later))
	if got, _ := report(t, b.fleet); got.Evaluated != 2 || !got.Since.Equal(tf0) {
		t.Errorf("unchanged reload on b: got %+v, want 2 evaluations since %v", got, tf0)
	}
}

func TestFleetFlushesOnlyWhatChanged(t *testing.T) {
	sh := newMemShared()
	a := newMember("a", sh, shadowSet(t, 1, tf0))
	ctx := context.Background()
	// The first flush writes the new definition, with its since.
	for range 3 {
		if err := a.fleet.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if sh.puts != 1 {
		t.Fatalf("three flushes of an unchanged tally: %d writes, want 1", sh.puts)
	}
	for range 1000 {
		a.book.Record("ip-strict", rules.Slow, "k1")
	}
	for range 3 {
		if err := a.fleet.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if sh.puts != 2 {
		t.Errorf("1000 records, three flushes: %d writes, want 2", sh.puts)
	}
}

func TestFleetFlushRacingRecordsLosesNothing(t *testing.T) {
	sh := newMemShared()
	a := newMember("a", sh, shadowSet(t, 1, tf0))
	reader := newMember("r", sh, shadowSet(t, 1, tf0))
	const workers, each = 4, 2000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				a.book.Record("ip-strict", rules.Slow, fmt.Sprintf("k%d", (w+i)%8))
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := a.fleet.Flush(context.Background()); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	done <- struct{}{}
	<-done
	if err := a.fleet.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, _ := report(t, reader.fleet)
	var hits uint64
	for _, k := range got.TopKeys {
		hits += k.Hits
	}
	if got.Evaluated != workers*each || got.WouldSlow != workers*each || hits != workers*each {
		t.Errorf("got %d evaluated, %d slow, %d top-key hits; want %d each", got.Evaluated, got.WouldSlow, hits, workers*each)
	}
}

func TestFleetAlone(t *testing.T) {
	for name, sh := range map[string]Shared{"embedded store": nil, "store unreachable": &memShared{err: errors.New("connection refused")}} {
		t.Run(name, func(t *testing.T) {
			a := newMember("a", sh, shadowSet(t, 1, tf0))
			a.book.Record("ip-strict", rules.Slow, "k1")
			got, partial := report(t, a.fleet)
			if !partial || got.Evaluated != 1 || !got.Since.Equal(tf0) {
				t.Errorf("got %+v partial %v, want this instance's one evaluation since %v, partial", got, partial, tf0)
			}
		})
	}
}

func TestMergeBoundsTopKeys(t *testing.T) {
	// Twelve keys over two instances: the ten with most hits in all, by
	// hits then key.
	var ta, tb Tally
	for i := range 12 {
		ta.Top = append(ta.Top, KeyCount{fmt.Sprintf("k%02d", i), uint64(i + 1)})
		tb.Top = append(tb.Top, KeyCount{fmt.Sprintf("k%02d", 11-i), uint64(i + 1)})
	}
	ta.Top = append(ta.Top, KeyCount{"z", 30})
	got := merge("r", []Tally{ta, tb}).TopKeys
	if len(got) != 10 || got[0] != (KeyCount{"z", 30}) || got[1] != (KeyCount{"k00", 13}) || got[9] != (KeyCount{"k08", 13}) {
		t.Errorf("got %v, want z 30 then k00..k08 at 13", got)
	}
}

// enforcedSet is shadowSet with ip-strict promoted to enforce.
func enforcedSet(t *testing.T, limit int, at time.Time) *rules.Set {
	t.Helper()
	set, err := rules.Parse("rules.yaml", []byte(fmt.Sprintf(`version: 1
rules:
  - {name: ip-strict, flows: [login], key: ip, type: rate, limit: %d, per: 1m}
  - {name: enforced, flows: [login], key: ip, type: rate, limit: 100, per: 1m}
`, limit)), at)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func TestBookKeepsAPromotedRulesTallies(t *testing.T) {
	clock := tf0
	b := NewBook().WithClock(func() time.Time { return clock })
	b.Track(shadowSet(t, 1, tf0))
	for _, k := range []string{"k1", "k1", "k2"} {
		b.Record("ip-strict", rules.Slow, k)
	}
	b.Record("ip-strict", "", "k3")
	want := RuleReport{Rule: "ip-strict", Evaluated: 4, WouldSlow: 3, Since: tf0, TopKeys: []KeyCount{{"k1", 2}, {"k2", 1}}}

	promotedAt := tf0.Add(time.Hour)
	clock = promotedAt
	b.Track(enforcedSet(t, 1, promotedAt))
	// The enforced rule is recorded no more: its tally stopped.
	b.Record("ip-strict", rules.Slow, "k9")
	want.PromotedAt = promotedAt
	if got := b.Report(); fmt.Sprint(got) != fmt.Sprint([]RuleReport{want}) {
		t.Fatalf("after the promotion: %+v\nwant %+v", got, []RuleReport{want})
	}
	// Another reload keeps it, retuned or not, until 24 hours after the
	// promotion.
	clock = promotedAt.Add(23 * time.Hour)
	b.Track(enforcedSet(t, 2, clock))
	if got := b.Report(); fmt.Sprint(got) != fmt.Sprint([]RuleReport{want}) {
		t.Fatalf("23 hours on: %+v\nwant %+v", got, []RuleReport{want})
	}
	clock = promotedAt.Add(PromotedFor)
	if got := b.Report(); len(got) != 0 {
		t.Fatalf("24 hours on: %+v, want nothing", got)
	}
	b.Track(enforcedSet(t, 2, clock))
	if n := len(*b.promoted.Load()); n != 0 {
		t.Errorf("%d promotions kept past their 24 hours, want none", n)
	}
}

func TestBookPromotionUndoneOrRemoved(t *testing.T) {
	clock := tf0
	b := NewBook().WithClock(func() time.Time { return clock })
	b.Track(shadowSet(t, 1, tf0))
	b.Record("ip-strict", rules.Block, "k1")
	b.Track(enforcedSet(t, 1, tf0.Add(time.Minute)))
	// Back in shadow as it was: it counts on from its last tally.
	b.Track(shadowSet(t, 1, tf0.Add(2*time.Minute)))
	b.Record("ip-strict", rules.Block, "k1")
	want := []RuleReport{{Rule: "ip-strict", Evaluated: 2, WouldBlock: 2, Since: tf0, TopKeys: []KeyCount{{"k1", 2}}}}
	if got := b.Report(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("back in shadow: %+v\nwant %+v", got, want)
	}
	// Promoted, then removed: nothing left to show.
	b.Track(enforcedSet(t, 1, tf0.Add(3*time.Minute)))
	removed, err := rules.Parse("rules.yaml", []byte("version: 1\nrules:\n  - {name: enforced, flows: [login], key: ip, type: rate, limit: 100, per: 1m}\n"), tf0.Add(4*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	b.Track(removed)
	if got := b.Report(); len(got) != 0 {
		t.Fatalf("promoted then removed: %+v, want nothing", got)
	}
}

// TestFleetReportsAPromotedRule: the fleet's tallies of a promoted rule are
// its last ones on every instance, this instance's and the others' as they
// last wrote them, while the promotion is reported.
func TestFleetReportsAPromotedRule(t *testing.T) {
	sh := newMemShared()
	a := newMember("a", sh, shadowSet(t, 1, tf0))
	b := newMember("b", sh, shadowSet(t, 1, tf0))
	a.book.Record("ip-strict", rules.Slow, "k1")
	b.book.Record("ip-strict", rules.Slow, "k1")
	b.book.Record("ip-strict", rules.Slow, "k2")
	if err := b.fleet.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	promotedAt := tf0.Add(time.Hour)
	for _, m := range []member{a, b} {
		m.book.WithClock(func() time.Time { return promotedAt.Add(time.Minute) })
	}
	// a's last trip is not written yet when it promotes the rule.
	a.book.Track(enforcedSet(t, 1, promotedAt))
	b.book.Track(enforcedSet(t, 1, promotedAt.Add(2*time.Second)))
	want := RuleReport{Rule: "ip-strict", Evaluated: 3, WouldSlow: 3, Since: tf0, TopKeys: []KeyCount{{"k1", 2}, {"k2", 1}}, PromotedAt: promotedAt}
	got, partial := report(t, a.fleet)
	if partial || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("a reports %+v\nwant       %+v", got, want)
	}
	// a writes its last tally once promoted; b then sees the fleet's too.
	if err := a.fleet.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	want.PromotedAt = promotedAt.Add(2 * time.Second)
	if got, _ := report(t, b.fleet); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("b reports %+v\nwant       %+v", got, want)
	}
}
