package storetest

import (
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

// kindCases test a key that holds another kind of limit's state than its
// op's: what the key of a rule that changed type under the same name
// holds, while reports of checks decided by the old rule still come.
var kindCases = []testCase{
	{"kinds/rule_changed_type", testRuleChangedType},
	{"kinds/look_leaves_the_old_state", testLookLeavesOldState},
}

// kindOp is a rule's op of one kind: what its spend on an empty key
// returns, what a Peek of look finds on an empty key (fresh) and after the
// spend (found), and what reports of it settle.
type kindOp struct {
	name   string
	spend  func(k string) store.Op
	spent  result
	look   func(k string) store.Op
	fresh  result
	found  result
	settle func(k string) []store.Settlement
}

// ruleKinds are the three kinds of op a rule's key may hold the state of.
var ruleKinds = []kindOp{
	{
		name:  "rate",
		spend: func(k string) store.Op { return Rate(k, 1, time.Minute, 5) },
		spent: result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Minute},
		look:  func(k string) store.Op { return Rate(k, 1, time.Minute, 5) },
		fresh: result{Allowed: true, Remaining: 5},
		found: result{Allowed: true, Remaining: 4, ResetAfter: time.Minute},
		settle: func(k string) []store.Settlement {
			return []store.Settlement{{Key: k, Action: store.GiveBack, Span: time.Minute}}
		},
	},
	{
		name:  "counter",
		spend: func(k string) store.Op { return From(Counter(k, 1, 5, time.Hour), "src") },
		spent: result{Allowed: true, Spent: true, Remaining: 4, Count: 1, ResetAfter: time.Hour},
		look:  func(k string) store.Op { return Counter(k, 1, 5, time.Hour) },
		fresh: result{Allowed: true, Remaining: 5},
		found: result{Allowed: true, Remaining: 4, Count: 1, ResetAfter: time.Hour},
		// a failure's Confirm, a success's Reset and an unlock's Lift
		settle: func(k string) []store.Settlement {
			return []store.Settlement{{Key: k, Action: store.Confirm, Span: 2 * time.Hour, Max: 5}, {Key: k, Action: store.Reset}, lift(k, "src")}
		},
	},
	{
		name:  "distinct",
		spend: func(k string) store.Op { return heldDistinct(k, "m", 1) },
		spent: result{Allowed: true, Spent: true, Remaining: 100, ResetAfter: 20 * time.Minute},
		look:  func(k string) store.Op { return heldDistinct(k, "z", 0) },
		fresh: result{Allowed: true, Remaining: 100},
		found: result{Allowed: true, Remaining: 99, Count: 1, ResetAfter: 20 * time.Minute},
		settle: func(k string) []store.Settlement {
			return []store.Settlement{add(k, "q", time.Hour), confirmDistinct(k, time.Hour)}
		},
	},
}

// testRuleChangedType: an op whose key holds another kind's state reads
// it as absent and its spend replaces it; the old kind's settlements
// then leave the new state alone, without an error; and the old kind's
// op, back again, starts afresh too.
func testRuleChangedType(h *harness) {
	eachChange(h, func(k string, was, is kindOp) {
		h.run([]step{
			{at: t0, ops: ops(was.spend(k)), want: rs(was.spent)},
			{at: t0, ops: ops(is.spend(k)), want: rs(is.spent)},
		})
		h.settle(was.settle(k)...)
		h.run([]step{
			{at: t0, peek: true, ops: ops(is.look(k)), want: rs(is.found)},
			{at: t0, ops: ops(was.spend(k)), want: rs(was.spent)},
		})
	})
}

// eachChange calls f for every change of a rule's kind, was to is, with a
// key of its own.
func eachChange(h *harness, f func(k string, was, is kindOp)) {
	for _, was := range ruleKinds {
		for _, is := range ruleKinds {
			if was.name != is.name {
				h.t.Logf("%s, then %s", was.name, is.name)
				f(h.key(was.name+"-"+is.name), was, is)
			}
		}
	}
}

// testLookLeavesOldState: a Peek of an op whose key holds another kind's
// state finds it empty and changes nothing: the old kind's op still finds
// its own.
func testLookLeavesOldState(h *harness) {
	eachChange(h, func(k string, was, is kindOp) {
		h.run([]step{
			{at: t0, ops: ops(was.spend(k)), want: rs(was.spent)},
			{at: t0, peek: true, ops: ops(is.look(k)), want: rs(is.fresh)},
			{at: t0, peek: true, ops: ops(was.look(k)), want: rs(was.found)},
		})
	})
}
