package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

// attributeCases test Counters whose units are attributed to members, and
// the Lift that takes one member's units back (store's attribute.go).
var attributeCases = []testCase{
	{"attribute/lift_takes_back_its_member_only", testLiftOwnMember},
	{"attribute/unattributed_units_stay", testLiftUnattributed},
	{"attribute/least_recent_member_forgotten", testLiftBounded},
	{"attribute/confirm_keeps_attribution", testLiftAfterConfirm},
	{"attribute/reset_removes_everything", testLiftAfterReset},
	{"attribute/lift_by_mark_once", testLiftMarkOnce},
	{"attribute/bad_batches", testLiftBadBatches},
	{"familiar/members", testFamiliarMembers},
}

// attrHold is how long the attribution tests keep a count.
const attrHold = time.Hour

// count returns the count Peek finds at key, held to limit 100.
func (h *harness) count(key string) int64 {
	h.t.Helper()
	return h.peekOne(Counter(key, 1, 100, attrHold)).Count
}

// fail spends n units on the Counter at key from member, one at a time.
func (h *harness) fail(key, member string, n int) {
	h.t.Helper()
	for range n {
		res := make([]store.Result, 1)
		if err := h.s.Do(context.Background(), ops(From(Counter(key, 1, 100, attrHold), member)), res); err != nil {
			h.t.Fatalf("Do: %v", err)
		}
	}
}

// lift lifts member's units off key.
func lift(key, member string) store.Settlement {
	return store.Settlement{Key: key, Action: store.Lift, Member: member}
}

// wantCount fails the test unless the count at key is want.
func (h *harness) wantCount(what, key string, want int64) {
	h.t.Helper()
	if got := h.count(key); got != want {
		h.t.Errorf("%s: count = %d, want %d", what, got, want)
	}
}

// testLiftOwnMember: a Lift takes off its member's units and no one
// else's, once; the key goes when nothing is left.
func testLiftOwnMember(h *harness) {
	k := h.key("consecutive")
	h.run([]step{
		{at: t0, ops: ops(From(Counter(k, 3, 100, attrHold), "ownerA")), want: rs(result{Allowed: true, Spent: true, Remaining: 97, ResetAfter: attrHold, Count: 3})},
		{at: t0, ops: ops(From(Counter(k, 2, 100, attrHold), "otherB")), want: rs(result{Allowed: true, Spent: true, Remaining: 95, ResetAfter: attrHold, Count: 5})},
	})
	h.settle(lift(k, "ownerA"))
	h.wantCount("after lifting A", k, 2)
	h.settle(lift(k, "ownerA"))
	h.wantCount("after lifting A twice", k, 2)
	h.fail(k, "ownerA", 1)
	h.wantCount("after A fails again", k, 3)
	h.settle(lift(k, "otherB"), lift(k, "ownerA"))
	h.run([]step{
		{at: t0, peek: true, ops: ops(Counter(k, 1, 100, attrHold)), want: rs(result{Allowed: true, Remaining: 100})},
	})
}

// testLiftUnattributed: units spent without a member are lifted by no
// member.
func testLiftUnattributed(h *harness) {
	k := h.key("consecutive")
	h.fail(k, "", 2)
	h.fail(k, "ownerA", 1)
	h.settle(lift(k, "ownerA"))
	h.wantCount("after lifting A", k, 2)
}

// testLiftBounded: a key remembers the units of store.MaxAttributed
// members, the most recent; the least recent one's units stay counted.
func testLiftBounded(h *harness) {
	k := h.key("consecutive")
	for i := range store.MaxAttributed + 1 {
		h.fail(k, fmt.Sprintf("m%d", i), 2)
	}
	total := int64(2 * (store.MaxAttributed + 1))
	h.settle(lift(k, "m0"))
	h.wantCount("after lifting the forgotten member", k, total)
	h.settle(lift(k, "m1"))
	h.wantCount("after lifting the least recent remembered one", k, total-2)
	// m1 again is the most recent, so m2 goes when a new member comes.
	h.fail(k, "m1", 1)
	h.fail(k, "m9", 1)
	h.settle(lift(k, "m2"))
	h.wantCount("after lifting the member pushed out", k, total)
	h.settle(lift(k, "m1"))
	h.wantCount("after lifting m1", k, total-1)
}

// testLiftAfterConfirm: a Confirm keeps the attribution with the count.
func testLiftAfterConfirm(h *harness) {
	k := h.key("consecutive")
	h.fail(k, "ownerA", 2)
	h.fail(k, "otherB", 1)
	h.settle(store.Settlement{Key: k, Action: store.Confirm, Span: 2 * attrHold, Max: 100})
	h.settle(lift(k, "ownerA"))
	h.wantCount("after confirm and lift", k, 1)
}

// testLiftAfterReset: a Reset removes the count and its attribution; a
// Lift of an absent key does nothing.
func testLiftAfterReset(h *harness) {
	k := h.key("consecutive")
	h.fail(k, "ownerA", 2)
	h.settle(store.Settlement{Key: k, Action: store.Reset})
	h.settle(lift(k, "ownerA"))
	h.wantCount("after reset", k, 0)
	h.fail(k, "otherB", 1)
	h.settle(lift(k, "ownerA"))
	h.wantCount("B's failure after reset", k, 1)
}

// testLiftMarkOnce: a report's Lift applies with its mark, once.
func testLiftMarkOnce(h *harness) {
	k, mark := h.key("consecutive"), h.key("attempt")+":reported"
	h.fail(k, "ownerA", 3)
	h.fail(k, "otherB", 4)
	if !h.markOnce(mark, time.Minute, lift(k, "ownerA")) {
		h.t.Fatal("first MarkOnce did not mark")
	}
	h.wantCount("after the report", k, 4)
}

// testLiftBadBatches: a Counter's member and a Lift's are members as
// store.ValidMember says.
func testLiftBadBatches(h *harness) {
	k := h.key("consecutive")
	b := ops(From(Counter(k, 1, 100, attrHold), "a b"))
	if err := h.s.Do(context.Background(), b, make([]store.Result, 1)); !errors.Is(err, store.ErrBadBatch) {
		h.t.Errorf("Do with a bad member = %v, want ErrBadBatch", err)
	}
	for _, m := range []string{"", "a=1"} {
		if err := h.s.Settle(context.Background(), []store.Settlement{lift(k, m)}); !errors.Is(err, store.ErrBadBatch) {
			h.t.Errorf("Lift of member %q = %v, want ErrBadBatch", m, err)
		}
	}
}

// testFamiliarMembers: Familiar lists the members not forgotten; an
// absent list has none.
func testFamiliarMembers(h *harness) {
	list := h.key("acct") + ":familiar"
	members := func() []string {
		h.t.Helper()
		got, err := h.s.Familiar(context.Background(), list)
		if err != nil {
			h.t.Fatalf("Familiar: %v", err)
		}
		slices.Sort(got)
		return got
	}
	if got := members(); len(got) != 0 {
		h.t.Errorf("absent list: members = %q, want none", got)
	}
	h.learn(list, "netA", hold)
	h.learn(list, "netB", time.Hour)
	if got, want := members(), []string{"netA", "netB"}; !slices.Equal(got, want) {
		h.t.Errorf("members = %q, want %q", got, want)
	}
	h.clock.Set(t0.Add(2 * time.Hour))
	if got, want := members(), []string{"netA"}; !slices.Equal(got, want) {
		h.t.Errorf("after netB's hold: members = %q, want %q", got, want)
	}
}
