package plan_test

import (
	"slices"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/plan"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
)

// samplePlan is a plan with an entry of each sort: a rate rule's (bit 0),
// a familiar list's, a count's two buckets (bit 1), a global rule's, an
// unsettling rule's, a memory of guesses (bit 63) and a lesson.
func samplePlan() *plan.Plan {
	rate := store.Rate{Interval: time.Second, Burst: 5}
	count := store.Counter{Max: 3, Hold: time.Hour}
	giveBack := store.Settlement{Action: store.GiveBack, Span: time.Second}
	reset, confirm := store.Settlement{Action: store.Reset}, store.Settlement{Action: store.Confirm, Span: time.Hour, Max: 3}
	p := plan.Get()
	p.Add(plan.Entry{Op: store.Op{Key: "rate", Cost: 1, Limit: rate}, Bit: 0, Success: giveBack})
	p.Add(plan.Entry{Kind: plan.Familiar, Op: store.Op{Key: "list", Limit: store.Familiar{}, Member: "m"}, Bit: plan.NoBit})
	p.Add(plan.Entry{Op: store.Op{Key: "count", Cost: 1, Limit: count, When: store.IfUnfamiliar}, Bit: 1, Success: reset, Failure: confirm})
	p.Add(plan.Entry{Op: store.Op{Key: "count:net", Cost: 1, Limit: count, When: store.IfFamiliar}, Bit: 1, Success: reset, Failure: confirm})
	p.Add(plan.Entry{Rule: &rules.Rule{Name: "global"}, Kind: plan.Global, Bit: plan.NoBit})
	p.Add(plan.Entry{Op: store.Op{Key: "attempts", Cost: 1, Limit: rate}, Bit: plan.NoBit})
	p.Add(plan.Entry{Kind: plan.Guesses, Op: store.Op{Key: "guesses", Cost: 1, Guess: 7, Limit: store.Guesses{Max: 3, Hold: time.Hour}}, Bit: 63,
		Success: store.Settlement{Action: store.Forget}, Failure: store.Settlement{Action: store.Confirm, Guess: 7, Span: time.Hour}})
	p.Add(plan.Entry{Kind: plan.Learning, Bit: plan.NoBit, Success: store.Settlement{Key: "list", Action: store.Learn, Member: "m", Span: time.Hour}})
	return p
}

func TestBatchHoldsTheOpsAlone(t *testing.T) {
	p := samplePlan()
	defer p.Release()
	ops, res := p.Batch()
	var keys []string
	for _, op := range ops {
		keys = append(keys, op.Key)
	}
	if want := []string{"rate", "list", "count", "count:net", "attempts", "guesses"}; !slices.Equal(keys, want) || len(res) != len(ops) {
		t.Fatalf("Batch keys %v, %d results; want %v and as many results", keys, len(res), want)
	}
	for i := range p.Entries() {
		e := &p.Entries()[i]
		if r := p.Result(e); (r != nil) != e.HasOp() {
			t.Errorf("entry %d: result %v, has op %v", i, r, e.HasOp())
		}
	}
	if !p.Has(plan.Global) || !p.Has(plan.Learning) || p.Familiar() {
		t.Errorf("Has(Global) %v, Has(Learning) %v, Familiar %v; want true, true, false", p.Has(plan.Global), p.Has(plan.Learning), p.Familiar())
	}
}

func TestSpentAndSettlements(t *testing.T) {
	p := samplePlan()
	defer p.Release()
	_, res := p.Batch()
	// The store spent the rate, found the network familiar (so counted
	// the network's count, not the shared one) and spent the guess.
	res[0] = store.Result{Allowed: true, Spent: true}
	res[1] = store.Result{Allowed: true}
	res[2] = store.Result{Allowed: true}
	res[3] = store.Result{Allowed: true, Spent: true}
	res[4] = store.Result{Allowed: true, Spent: true}
	res[5] = store.Result{Allowed: true, Spent: true}
	spent := p.Spent()
	if want := uint64(1<<63 | 0b11); spent != want {
		t.Fatalf("Spent = %b, want %b", spent, want)
	}
	if !p.Familiar() {
		t.Fatal("Familiar = false, want the list's answer")
	}
	keys := func(ss []store.Settlement) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Key+":"+actions[s.Action])
		}
		return out
	}
	tests := []struct {
		name     string
		success  bool
		spent    uint64
		familiar bool
		want     []string
	}{
		{"success", true, spent, true, []string{"rate:give back", "count:net:reset", "guesses:forget", "list:learn"}},
		{"failure", false, spent, true, []string{"count:net:confirm", "guesses:confirm"}},
		{"success, shared bucket", true, spent, false, []string{"rate:give back", "count:reset", "guesses:forget", "list:learn"}},
		{"success, nothing spent", true, 0, true, []string{"list:learn"}},
		{"failure, nothing spent", false, 0, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := keys(p.Settlements(tt.success, tt.spent, tt.familiar)); !slices.Equal(got, tt.want) {
				t.Fatalf("Settlements = %v, want %v", got, tt.want)
			}
		})
	}
}

var actions = map[store.Action]string{store.GiveBack: "give back", store.Reset: "reset", store.Confirm: "confirm", store.Learn: "learn", store.Forget: "forget"}

func TestReleaseEmpties(t *testing.T) {
	p := samplePlan()
	p.Batch()
	p.Release()
	q := plan.Get()
	defer q.Release()
	if n := len(q.Entries()); n != 0 {
		t.Fatalf("a plan from the pool has %d entries, want none", n)
	}
	if ops, res := q.Batch(); len(ops) != 0 || len(res) != 0 {
		t.Fatalf("a plan from the pool has %d ops, %d results, want none", len(ops), len(res))
	}
}
