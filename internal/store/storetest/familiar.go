package storetest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

// familiarCases test familiar lists, the ops conditional on them, and tolls.
var familiarCases = []testCase{
	{"familiar/unknown_counts_the_shared_bucket", testFamiliarUnknown},
	{"familiar/learned_counts_the_network_bucket", testFamiliarLearned},
	{"familiar/forgotten_after_hold", testFamiliarForgotten},
	{"familiar/bounded_list", testFamiliarBounded},
	{"familiar/refresh_keeps_the_later_deadline", testFamiliarRefresh},
	{"familiar/learned_by_mark_once", testFamiliarMarkOnce},
	{"familiar/bad_batches", testFamiliarBadBatches},
	{"familiar/across_subjects", testFamiliarAcrossSubjects},
	{"toll/spent_when_the_batch_is_denied", testTollSpent},
	{"toll/denies_when_it_does_not_fit", testTollDenies},
	{"toll/paid_together", testTollsTogether},
}

// hold is how long the familiar tests keep a network.
const hold = 90 * 24 * time.Hour

// learn makes member familiar on the list at key for d.
func (h *harness) learn(key, member string, d time.Duration) {
	h.t.Helper()
	h.settle(store.Settlement{Key: key, Action: store.Learn, Member: member, Span: d})
}

// familiarBatch is the batch of a check of an account: its familiar list
// looking for member, the shared bucket counting when the member is not
// familiar, and the network's bucket when it is.
func (h *harness) familiarBatch(member string) []store.Op {
	return ops(
		Familiar(h.key("acct")+":familiar", member),
		When(Rate(h.key("acct")+":r", 1, time.Minute, 2), store.IfUnfamiliar),
		When(Rate(h.key("acct")+":r:"+member, 1, time.Minute, 2), store.IfFamiliar),
	)
}

var skipped = result{Allowed: true}

// testFamiliarUnknown: with no list, the shared bucket counts and the
// network's is skipped; a skipped op that would deny denies nothing.
func testFamiliarUnknown(h *harness) {
	b := h.familiarBatch("netA")
	h.run([]step{
		{at: t0, ops: b, want: rs(result{}, result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: time.Minute}, skipped)},
		{at: t0, ops: b, want: rs(result{}, result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 2 * time.Minute}, skipped)},
		{at: t0, ops: b, want: rs(result{}, result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: 2 * time.Minute}, skipped)},
		{at: t0, peek: true, ops: b, want: rs(result{}, result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: 2 * time.Minute}, skipped)},
	})
}

// testFamiliarLearned: a learned network counts on its own bucket, while
// the shared one, drained, is skipped; another network is not familiar.
func testFamiliarLearned(h *harness) {
	drained := h.familiarBatch("netB")
	h.run([]step{
		{at: t0, ops: drained, want: rs(result{}, result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: time.Minute}, skipped)},
		{at: t0, ops: drained, want: rs(result{}, result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 2 * time.Minute}, skipped)},
	})
	h.learn(h.key("acct")+":familiar", "netA", hold)
	home := h.familiarBatch("netA")
	found := result{Allowed: true, ResetAfter: hold, Count: 1}
	h.run([]step{
		{at: t0, ops: home, want: rs(found, skipped, result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: time.Minute})},
		{at: t0, ops: home, want: rs(found, skipped, result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 2 * time.Minute})},
		{at: t0, ops: home, want: rs(found, skipped, result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: 2 * time.Minute})},
		{at: t0, ops: drained, want: rs(result{Count: 1}, result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: 2 * time.Minute}, skipped)},
	})
}

// testFamiliarForgotten: a network is forgotten when its hold runs out.
func testFamiliarForgotten(h *harness) {
	list := h.key("acct") + ":familiar"
	h.learn(list, "netA", time.Minute)
	h.run([]step{
		{at: t0.Add(time.Minute - time.Microsecond), peek: true, ops: ops(Familiar(list, "netA")), want: rs(result{Allowed: true, ResetAfter: time.Microsecond, Count: 1})},
		{at: t0.Add(time.Minute), peek: true, ops: ops(Familiar(list, "netA")), want: rs(result{})},
	})
}

// testFamiliarBounded: a list holds store.MaxFamiliar networks; one more
// drops the network forgotten soonest.
func testFamiliarBounded(h *harness) {
	list := h.key("acct") + ":familiar"
	for i := range store.MaxFamiliar {
		h.learn(list, fmt.Sprintf("net%d", i), hold+time.Duration(i)*time.Hour)
	}
	h.learn(list, "newest", hold+time.Duration(store.MaxFamiliar)*time.Hour)
	full := int64(store.MaxFamiliar)
	h.run([]step{
		{at: t0, peek: true, ops: ops(Familiar(list, "net0")), want: rs(result{Count: full})},
		{at: t0, peek: true, ops: ops(Familiar(list, "net1")), want: rs(result{Allowed: true, ResetAfter: hold + time.Hour, Count: full})},
		{at: t0, peek: true, ops: ops(Familiar(list, "newest")), want: rs(result{Allowed: true, ResetAfter: hold + time.Duration(store.MaxFamiliar)*time.Hour, Count: full})},
	})
}

// testFamiliarRefresh: learning a network again keeps the later of its
// deadlines and adds no member.
func testFamiliarRefresh(h *harness) {
	list := h.key("acct") + ":familiar"
	h.learn(list, "netA", hold)
	h.learn(list, "netA", time.Hour)
	h.clock.Set(t0.Add(time.Hour))
	h.learn(list, "netA", hold)
	h.run([]step{
		{at: t0.Add(time.Hour), peek: true, ops: ops(Familiar(list, "netA")), want: rs(result{Allowed: true, ResetAfter: hold, Count: 1})},
	})
}

// testFamiliarMarkOnce: a success report's mark carries the network it
// makes familiar, applied with the mark.
func testFamiliarMarkOnce(h *harness) {
	list := h.key("acct") + ":familiar"
	learn := store.Settlement{Key: list, Action: store.Learn, Member: "netA", Span: hold}
	if !h.markOnce(h.key("acct")+":once", time.Minute, learn) {
		h.t.Fatal("MarkOnce of a new mark = false")
	}
	h.run([]step{
		{at: t0, peek: true, ops: ops(Familiar(list, "netA")), want: rs(result{Allowed: true, ResetAfter: hold, Count: 1})},
	})
}

// testFamiliarBadBatches: conditional ops need one Familiar op, which has
// a valid member, spends nothing and enforces.
func testFamiliarBadBatches(h *harness) {
	list := h.key("acct") + ":familiar"
	rate := Rate(h.key("acct")+":r", 1, time.Minute, 2)
	for name, b := range map[string][]store.Op{
		"conditional without familiar": ops(When(rate, store.IfFamiliar)),
		"two familiar ops":             ops(Familiar(list, "a"), Familiar(list+"2", "b")),
		"empty member":                 ops(Familiar(list, "")),
		"member with a colon":          ops(Familiar(list, "a:1")),
		"familiar with a cost":         ops(func() store.Op { op := Familiar(list, "a"); op.Cost = 1; return op }()),
		"shadow familiar":              ops(Shadow(Familiar(list, "a"))),
	} {
		err := h.s.Do(context.Background(), b, make([]store.Result, len(b)))
		if !errors.Is(err, store.ErrBadBatch) {
			h.t.Errorf("%s: Do = %v, want ErrBadBatch", name, err)
		}
	}
	err := h.s.Settle(context.Background(), []store.Settlement{{Key: list, Action: store.Learn, Member: "a;b", Span: hold}})
	if !errors.Is(err, store.ErrBadBatch) {
		h.t.Errorf("Learn of a bad member = %v, want ErrBadBatch", err)
	}
}

// testTollSpent: a toll is paid by a batch another op denies; the batch's
// other enforced ops spend nothing.
func testTollSpent(h *harness) {
	acct, ip, other := h.key("acct"), h.key("ip"), h.key("other")
	h.run([]step{
		{at: t0, ops: ops(Rate(acct, 1, time.Minute, 1)), want: rs(result{Allowed: true, Spent: true, ResetAfter: time.Minute})},
		{at: t0, ops: ops(Rate(acct, 1, time.Minute, 1), Toll(Rate(ip, 1, time.Minute, 3)), Counter(other, 1, 5, time.Hour)), want: rs(
			result{RetryAfter: time.Minute, ResetAfter: time.Minute},
			result{Allowed: true, Spent: true, Remaining: 2, ResetAfter: time.Minute},
			result{Allowed: true, Remaining: 5},
		)},
		{at: t0, ops: ops(Rate(acct, 1, time.Minute, 1), Toll(Rate(ip, 1, time.Minute, 3))), want: rs(
			result{RetryAfter: time.Minute, ResetAfter: time.Minute},
			result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: 2 * time.Minute},
		)},
	})
}

// testTollDenies: a toll that does not fit denies the batch like any
// enforced op, and is not spent.
func testTollDenies(h *harness) {
	acct, ip := h.key("acct"), h.key("ip")
	toll := Toll(Rate(ip, 1, time.Minute, 1))
	h.run([]step{
		{at: t0, ops: ops(toll), want: rs(result{Allowed: true, Spent: true, ResetAfter: time.Minute})},
		{at: t0, ops: ops(Rate(acct, 1, time.Minute, 1), toll), want: rs(
			result{Allowed: true, ResetAfter: 0, Remaining: 1},
			result{RetryAfter: time.Minute, ResetAfter: time.Minute},
		)},
	})
}

// testTollsTogether: tolls are paid together or not at all: a batch that
// one toll denies spends no other.
func testTollsTogether(h *harness) {
	acct, ip, net := h.key("acct"), h.key("ip"), h.key("net")
	h.run([]step{
		{at: t0, ops: ops(Toll(Rate(net, 1, time.Minute, 1))), want: rs(result{Allowed: true, Spent: true, ResetAfter: time.Minute})},
		{at: t0, ops: ops(Rate(acct, 1, time.Minute, 1), Toll(Rate(ip, 1, time.Minute, 3)), Toll(Rate(net, 1, time.Minute, 1))), want: rs(
			result{Allowed: true, Remaining: 1},
			result{Allowed: true, Remaining: 3},
			result{RetryAfter: time.Minute, ResetAfter: time.Minute},
		)},
	})
}

// testFamiliarAcrossSubjects: a batch whose familiar list and buckets
// belong to one subject and whose other op to another (two slots on a
// cluster) spends like any batch: an unfamiliar member denies nothing.
func testFamiliarAcrossSubjects(h *harness) {
	b := append(h.familiarBatch("netA"), Rate(h.key("ip"), 1, time.Minute, 5))
	h.run([]step{
		{at: t0, ops: b, want: rs(result{}, result{Allowed: true, Spent: true, Remaining: 1, ResetAfter: time.Minute}, skipped, result{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Minute})},
		{at: t0, ops: b, want: rs(result{}, result{Allowed: true, Spent: true, Remaining: 0, ResetAfter: 2 * time.Minute}, skipped, result{Allowed: true, Spent: true, Remaining: 3, ResetAfter: 2 * time.Minute})},
		{at: t0, ops: b, want: rs(result{}, result{Remaining: 0, RetryAfter: time.Minute, ResetAfter: 2 * time.Minute}, skipped, result{Allowed: true, Remaining: 3, ResetAfter: 2 * time.Minute})},
	})
}
