package recall

import (
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

// familiarLogin is a check's batch under familiar networks, from network
// member: the account's familiar list, its shared bucket (counted when the
// network is not familiar) and its network's bucket (when it is), the
// address's rate as a toll, and the network's distinct accounts.
func familiarLogin(member string) []store.Op {
	return []store.Op{
		{Key: "acct:familiar", Limit: store.Familiar{}, Member: member},
		{Key: "acct:rate", Cost: 1, Limit: store.Rate{Interval: time.Minute, Burst: 5}, When: store.IfUnfamiliar},
		{Key: "acct:rate:net:" + member, Cost: 1, Limit: store.Rate{Interval: time.Minute, Burst: 5}, When: store.IfFamiliar},
		{Key: member + ":rate", Role: store.Toll, Cost: 1, Limit: store.Rate{Interval: 20 * time.Second, Burst: 30}},
		{Key: member + ":distinct", Role: store.Soft, Cost: 1, Limit: store.Distinct{Step: 6 * time.Hour, Max: 20}},
	}
}

// unfamiliarSlowed is the store's answer to familiarLogin from a network
// not on the list: the shared bucket slowed for 40 seconds, the network's
// bucket skipped, the address's toll slowed too (so nothing was spent), 3
// accounts counted.
func unfamiliarSlowed() []store.Result {
	return []store.Result{
		{Count: 2, ResetAfter: 0},
		{RetryAfter: 40 * time.Second, ResetAfter: 4*time.Minute + 40*time.Second},
		{Allowed: true},
		{RetryAfter: 15 * time.Second, ResetAfter: 9*time.Minute + 55*time.Second},
		{Allowed: true, Remaining: 17, Count: 3, ResetAfter: 20 * time.Hour},
	}
}

func TestAnswerUnderFamiliarNetworks(t *testing.T) {
	m := New(0)
	m.Listening(true)
	ops := familiarLogin("netA")
	res := make([]store.Result, len(ops))
	m.ObserveAt(ops, unfamiliarSlowed(), t0, m.Epoch())
	if !m.Answer(ops, res, t0.Add(10*time.Second)) {
		t.Fatal("no answer for a slowed account from a network remembered unfamiliar")
	}
	want := []store.Result{
		{Count: 2},
		{RetryAfter: 30 * time.Second, ResetAfter: 4*time.Minute + 30*time.Second},
		{Allowed: true},
		{RetryAfter: 5 * time.Second, ResetAfter: 9*time.Minute + 45*time.Second},
		{Allowed: true, Remaining: 17, Count: 3, ResetAfter: 20*time.Hour - 10*time.Second},
	}
	for i := range want {
		if res[i] != want[i] {
			t.Errorf("op %d: %+v, want %+v", i, res[i], want[i])
		}
	}
	// The network's bucket was skipped: nothing is remembered of it.
	if _, ok := m.lookup("acct:rate:net:netA"); ok {
		t.Error("a skipped op's key was remembered")
	}

	// Another network of the same account: its familiarity was never
	// seen, so the store decides.
	if m.Answer(familiarLogin("netB"), res, t0.Add(time.Second)) {
		t.Error("answered a check from a network whose familiarity was never seen")
	}

	// The same account from a network the store found familiar counts in
	// that network's bucket: the shared bucket's slow must not answer it.
	home := familiarLogin("netH")
	homeRes := unfamiliarSlowed()
	homeRes[0] = store.Result{Allowed: true, Count: 2, ResetAfter: 80 * 24 * time.Hour}
	homeRes[1] = store.Result{Allowed: true}                                                            // skipped
	homeRes[2] = store.Result{Allowed: true, Remaining: 4, ResetAfter: time.Minute}                     // the owner's own bucket
	homeRes[3] = store.Result{RetryAfter: 15 * time.Second, ResetAfter: 9*time.Minute + 55*time.Second} // the address slowed
	m.ObserveAt(home, homeRes, t0, m.Epoch())
	if !m.Answer(home, res, t0.Add(time.Second)) {
		t.Fatal("no answer for a check slowed by its address, its network remembered familiar")
	}
	if !res[0].Allowed || !res[1].Allowed || res[1].RetryAfter != 0 || !res[2].Allowed || res[2].Remaining != 4 {
		t.Errorf("a familiar network's check answered %+v, want its own bucket, the shared one skipped", res)
	}
	// The shared bucket's slow, remembered from netA, still stands.
	if d, ok := m.Denied("acct:rate", t0.Add(time.Second)); !ok || d.Until != t0.Add(40*time.Second) {
		t.Errorf("the shared bucket's slow: %+v %v, want until t0+40s", d, ok)
	}

	// The familiarity is remembered only as long as the check's slow: at
	// the address's retry time the store is asked again.
	if m.Answer(home, res, t0.Add(15*time.Second)) {
		t.Error("answered past the retry time the store gave")
	}
}

func TestAnswerLeavesTollsToTheStore(t *testing.T) {
	m := New(0)
	m.Listening(true)
	ops := familiarLogin("netA")
	res := make([]store.Result, len(ops))
	// The account slowed, the address's toll still fitting: the store
	// would spend the toll, so it must be asked.
	paid := unfamiliarSlowed()
	paid[3] = store.Result{Allowed: true, Remaining: 10, ResetAfter: 400 * time.Second}
	m.ObserveAt(ops, paid, t0, m.Epoch())
	if m.Answer(ops, res, t0.Add(time.Second)) {
		t.Fatal("answered a slowed check whose toll the store would spend")
	}
	// Once the address is slowed as well, no toll is due.
	m.ObserveAt(ops, unfamiliarSlowed(), t0, m.Epoch())
	if !m.Answer(ops, res, t0.Add(time.Second)) {
		t.Fatal("no answer once the toll no longer fits")
	}
}
