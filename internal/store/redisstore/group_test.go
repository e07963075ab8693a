package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
)

// gate is a go-redis hook that holds the first EVALSHA until opened, so
// that a test can line up the batches that queue behind it.
type gate struct {
	once   sync.Once
	held   chan struct{}
	opened chan struct{}
}

func newGate() *gate { return &gate{held: make(chan struct{}), opened: make(chan struct{})} }

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			first := false
			g.once.Do(func() { first = true })
			if first {
				close(g.held)
				<-g.opened
			}
		}
		return next(ctx, cmd)
	}
}

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// holdLane starts a Redis and a Store on it (cfg, one lane) and a check
// spending op whose script call the gate holds: every lane is busy until
// the gate opens. wg waits for that check.
func holdLane(t *testing.T, cfg redisstore.Config, op store.Op) (s *redisstore.Store, node *redis.Client, g *gate, wg *sync.WaitGroup) {
	t.Helper()
	node = redistest.Start(t).Client(t)
	g = newGate()
	node.AddHook(g)
	cfg.Lanes = 1
	s = redisstore.New(node, cfg)
	wg = &sync.WaitGroup{}
	wg.Go(func() { do(t, s, op) })
	<-g.held
	return s, node, g, wg
}

// TestGroupCommit: with its one lane busy, 49 checks against a budget of 20
// queue and go out as one script call; exactly 20 of the 50 are spent, a
// peek among them spends nothing and sees what the batches before it
// spent, and a check on a key that is not guardian's state fails alone.
func TestGroupCommit(t *testing.T) {
	srv := redistest.Start(t)
	node := srv.Client(t)
	g := newGate()
	node.AddHook(g)
	s := redisstore.New(node, redisstore.Config{Lanes: 1})
	ctx := context.Background()
	setState(t, node, "guardian:v3:{junk}:r", "garbage")

	const callers = 50
	budget := rate("guardian:v3:{acct}:login", 1, time.Hour, 20)
	type outcome struct {
		res store.Result
		err error
	}
	out := make([]outcome, callers)
	var wg sync.WaitGroup
	run := func(i int) {
		ops := []store.Op{budget}
		if i == callers-1 {
			ops = []store.Op{rate("guardian:v3:{junk}:r", 1, time.Hour, 20)}
		}
		res := make([]store.Result, 1)
		var err error
		if i == 30 {
			err = s.Peek(ctx, ops, res)
		} else {
			err = s.Do(ctx, ops, res)
		}
		out[i] = outcome{res[0], err}
	}
	before := redistest.CommandStats(t, node)
	wg.Go(func() { run(0) })
	<-g.held
	for i := 1; i < callers; i++ {
		wg.Go(func() { run(i) })
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Queued() < callers-1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d batches queued, want %d", s.Queued(), callers-1)
		}
		time.Sleep(time.Millisecond)
	}
	close(g.opened)
	wg.Wait()
	ran := redistest.Ran(before, redistest.CommandStats(t, node))
	if ran["evalsha"] != 2 || ran["time"] != 2 {
		t.Errorf("Redis ran %v: want 2 script calls (the first check, then the 49 queued), each reading the clock once", ran)
	}

	spent := 0
	for i, o := range out {
		switch {
		case i == callers-1:
			if o.err == nil || !strings.Contains(o.err.Error(), "redisstore: do: ") {
				t.Errorf("check on a garbage key: err %v, want a redisstore error", o.err)
			}
			continue
		case o.err != nil:
			t.Errorf("caller %d: %v", i, o.err)
		case i == 30 && o.res.Spent:
			t.Errorf("the peek spent: %+v", o.res)
		}
		if o.res.Spent {
			spent++
		}
	}
	if spent != 20 {
		t.Errorf("%d checks spent against a budget of 20", spent)
	}
	// The queue went out in arrival order, so what the peek saw is what
	// the batches ahead of it left: consistent with the store's end state.
	if p := out[30].res; p.Allowed != (p.Remaining > 0) {
		t.Errorf("peek: %+v", p)
	}
	res := peek(t, s, budget)
	if res[0].Allowed || res[0].Remaining != 0 {
		t.Errorf("after the group: %+v, want the budget spent", res[0])
	}
}

// TestGroupCommitIdle: one check at a time never waits for another: every
// check is a script call of its own.
func TestGroupCommitIdle(t *testing.T) {
	srv := redistest.Start(t)
	node := srv.Client(t)
	s := redisstore.New(node, redisstore.Config{})
	op := rate("guardian:v3:{acct}:login", 1, time.Microsecond, 1<<30)
	do(t, s, op)
	before := redistest.CommandStats(t, node)
	for range 20 {
		do(t, s, op)
	}
	if ran := redistest.Ran(before, redistest.CommandStats(t, node)); ran["evalsha"] != 20 {
		t.Errorf("20 checks one after another: Redis ran %v, want 20 script calls", ran)
	}
}

// TestAdmissionControl: with the lane held, batches queue until MaxQueued
// ops wait; the next is refused at once with store.ErrOverloaded, sending
// nothing. Of the queued batches, those whose caller went away before the
// held call returned are never sent (store.ErrAbandoned) and spend
// nothing; the others are spent exactly once each, in one grouped call.
func TestAdmissionControl(t *testing.T) {
	const maxQueued = 10
	budget := rate("guardian:v3:{acct}:login", 1, time.Hour, 100)
	s, node, g, wg := holdLane(t, redisstore.Config{MaxQueued: maxQueued}, budget)
	before := redistest.CommandStats(t, node)

	// maxQueued batches of one op fill the queue; every other caller goes
	// away while its batch waits.
	errs := make([]error, maxQueued)
	cancels := make([]context.CancelFunc, maxQueued)
	for i := range maxQueued {
		caller, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		ctx := store.WithCaller(context.WithoutCancel(caller), caller)
		wg.Go(func() { errs[i] = s.Do(ctx, []store.Op{budget}, make([]store.Result, 1)) })
		for s.Queued() < i+1 {
			time.Sleep(time.Millisecond)
		}
	}
	err := s.Do(context.Background(), []store.Op{budget}, make([]store.Result, 1))
	if !errors.Is(err, store.ErrOverloaded) {
		t.Fatalf("a batch past a full queue: err %v, want store.ErrOverloaded", err)
	}
	for i := 0; i < maxQueued; i += 2 {
		cancels[i]()
	}
	for s.Queued() > maxQueued/2 {
		time.Sleep(time.Millisecond)
	}
	close(g.opened)
	wg.Wait()

	abandoned := 0
	for i, err := range errs {
		switch {
		case i%2 == 0 && errors.Is(err, store.ErrAbandoned):
			abandoned++
		case i%2 == 1 && err != nil:
			t.Errorf("caller %d, still there: %v", i, err)
		case i%2 == 0:
			t.Errorf("caller %d, gone while queued: err %v, want store.ErrAbandoned", i, err)
		}
		cancels[i]()
	}
	if abandoned != maxQueued/2 {
		t.Errorf("%d batches abandoned, want %d", abandoned, maxQueued/2)
	}
	// The held call, then one grouped call of the 5 that stayed; the
	// refused batch and the abandoned ones sent nothing.
	if ran := redistest.Ran(before, redistest.CommandStats(t, node)); ran["evalsha"] != 2 {
		t.Errorf("Redis ran %v: want 2 script calls", ran)
	}
	if res := peek(t, s, budget); res[0].Remaining != 100-1-maxQueued/2 {
		t.Errorf("after: %d remaining, want %d: exactly the held check and the %d that stayed spent", res[0].Remaining, 100-1-maxQueued/2, maxQueued/2)
	}
}

// TestAbandonedBeforeSent: a caller already gone is never sent, even with a
// lane free.
func TestAbandonedBeforeSent(t *testing.T) {
	srv := redistest.Start(t)
	node := srv.Client(t)
	s := redisstore.New(node, redisstore.Config{})
	caller, cancel := context.WithCancel(context.Background())
	cancel()
	ctx := store.WithCaller(context.WithoutCancel(caller), caller)
	before := redistest.CommandStats(t, node)
	if err := s.Do(ctx, []store.Op{rate("guardian:v3:{acct}:login", 1, time.Hour, 5)}, make([]store.Result, 1)); !errors.Is(err, store.ErrAbandoned) {
		t.Fatalf("err %v, want store.ErrAbandoned", err)
	}
	if ran := redistest.Ran(before, redistest.CommandStats(t, node)); ran["evalsha"] != 0 {
		t.Errorf("Redis ran %v for a check whose caller was gone", ran)
	}
}

// TestAdmissionByDeadline: with the lane held and calls taking 10ms of
// late, a batch whose deadline is 5ms away is refused at once — what is
// left of the call in flight and its own call would outlast it — while one
// with a second to spare queues and is spent.
func TestAdmissionByDeadline(t *testing.T) {
	budget := rate("guardian:v3:{acct}:login", 1, time.Hour, 100)
	s, _, g, wg := holdLane(t, redisstore.Config{}, budget)
	s.SetCallTime(10 * time.Millisecond)

	short, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if err := s.Do(short, []store.Op{budget}, make([]store.Result, 1)); !errors.Is(err, store.ErrOverloaded) {
		t.Fatalf("a batch due in 5ms behind a 10ms call: err %v, want store.ErrOverloaded", err)
	}
	long, cancelLong := context.WithTimeout(context.Background(), time.Second)
	defer cancelLong()
	var err error
	wg.Go(func() { err = s.Do(long, []store.Op{budget}, make([]store.Result, 1)) })
	for s.Queued() < 1 {
		time.Sleep(time.Millisecond)
	}
	close(g.opened)
	wg.Wait()
	if err != nil {
		t.Fatalf("a batch with a second to spare: %v", err)
	}
	if res := peek(t, s, budget); res[0].Remaining != 98 {
		t.Errorf("after: %d remaining, want 98: the held check and the queued one spent, the refused one not", res[0].Remaining)
	}
}

// waitQueued waits until n batches or marks wait for a grouped call.
func waitQueued(t *testing.T, s *redisstore.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Queued() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d queued, want %d", s.Queued(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGroupCommitReports: with the lane held, a check of a distinct op
// (its own and another key's sub-windows and its count, thirteen keys) and
// an attributed counter, eight reports of one attempt (MarkOnce, each
// giving back one unit of the budget and adding a member to the distinct
// key: seven give-back entries), a report whose give-back finds a key that
// is not guardian's state, and twenty checks of the budget queue, in that
// order, and go out as one script call (96 ops' weight at most). Exactly
// one of the eight sets the mark and gives back, exactly once: the held
// check spent 5 of the budget of 20, one report gives one back, so exactly
// 16 of the twenty spend. The distinct key holds the check's member and the
// report's. The bad report fails alone. A report whose caller went away
// while it waited is still applied: what a report settles is never
// dropped for its caller.
func TestGroupCommitReports(t *testing.T) {
	budget := rate("guardian:v3:{acct}:login", 1, time.Hour, 20)
	held := budget
	held.Cost = 5
	s, node, g, wg := holdLane(t, redisstore.Config{}, held)
	setState(t, node, "guardian:v3:{junk}:r", "garbage")
	distinct := store.Op{Key: "guardian:v3:{net}:distinct", Member: "acct1", Cost: 1,
		Limit: store.Distinct{Step: time.Hour, Max: 20}, Except: "guardian:v3:{net}:succeeded"}
	attributed := counter("guardian:v3:{acct}:hard-stop", 1, 100, time.Hour)
	attributed.Member = "net1"
	settlements := []store.Settlement{
		{Key: distinct.Key, Action: store.Add, Span: time.Hour, Member: "acct9"},
		{Key: budget.Key, Action: store.GiveBack, Span: time.Hour},
	}
	before := redistest.CommandStats(t, node)

	wg.Go(func() { do(t, s, distinct, attributed) })
	waitQueued(t, s, 1)
	const reports = 8
	firsts := make([]bool, reports)
	errs := make([]error, reports)
	caller, cancel := context.WithCancel(context.Background())
	gone := store.WithCaller(context.WithoutCancel(caller), caller)
	for i := range reports {
		ctx := context.Background()
		if i == 0 {
			ctx = gone
		}
		wg.Go(func() {
			firsts[i], errs[i] = s.MarkOnce(ctx, "guardian:v3:{att1}:reported", time.Hour, settlements...)
		})
	}
	waitQueued(t, s, 1+reports)
	cancel()
	var badErr error
	wg.Go(func() {
		_, badErr = s.MarkOnce(context.Background(), "guardian:v3:{att2}:reported", time.Hour,
			store.Settlement{Key: "guardian:v3:{junk}:r", Action: store.GiveBack, Span: time.Hour})
	})
	waitQueued(t, s, 2+reports)
	const checks = 20
	spent := make([]bool, checks)
	for i := range checks {
		wg.Go(func() {
			res := make([]store.Result, 1)
			if err := s.Do(context.Background(), []store.Op{budget}, res); err != nil {
				t.Errorf("check %d: %v", i, err)
			}
			spent[i] = res[0].Spent
		})
	}
	waitQueued(t, s, 2+reports+checks)
	close(g.opened)
	wg.Wait()

	if ran := redistest.Ran(before, redistest.CommandStats(t, node)); ran["evalsha"] != 2 {
		t.Errorf("Redis ran %v: want 2 script calls, the held check and one for every report and check queued behind it", ran)
	}
	marked := 0
	for i := range reports {
		if errs[i] != nil {
			t.Errorf("report %d: %v", i, errs[i])
		}
		if firsts[i] {
			marked++
		}
	}
	if marked != 1 {
		t.Errorf("%d of %d reports of one attempt set its mark, want exactly 1", marked, reports)
	}
	if !errors.Is(badErr, redisstore.ErrBadReply) {
		t.Errorf("a report giving back on a key that is not guardian's state: err %v, want redisstore.ErrBadReply", badErr)
	}
	n := 0
	for _, ok := range spent {
		if ok {
			n++
		}
	}
	if n != 16 {
		t.Errorf("%d of %d queued checks spent, want 16: 15 left by the held check and one given back once", n, checks)
	}
	if res := peek(t, s, budget); res[0].Remaining != 0 {
		t.Errorf("after: %d remaining, want 0", res[0].Remaining)
	}
	look := distinct
	look.Member = "acct2"
	if res := peek(t, s, look); res[0].Count != 2 {
		t.Errorf("distinct key after: count %d, want 2 (the check's member and the report's)", res[0].Count)
	}
}

// TestReportPastFullQueue: a report is never refused for a full queue. With
// the lane held and the queue full, a check is refused with
// store.ErrOverloaded while a report goes out on its own at once, ahead of
// the held call, and is applied.
func TestReportPastFullQueue(t *testing.T) {
	budget := rate("guardian:v3:{acct}:login", 1, time.Hour, 5)
	s, _, g, wg := holdLane(t, redisstore.Config{MaxQueued: 1}, budget)
	wg.Go(func() { do(t, s, budget) })
	waitQueued(t, s, 1)
	if err := s.Do(context.Background(), []store.Op{budget}, make([]store.Result, 1)); !errors.Is(err, store.ErrOverloaded) {
		t.Fatalf("a check past a full queue: err %v, want store.ErrOverloaded", err)
	}
	reportAlone(t, s, "guardian:v3:{att}:reported")
	close(g.opened)
	wg.Wait()
	if first, err := s.MarkOnce(context.Background(), "guardian:v3:{att}:reported", time.Hour); err != nil || first {
		t.Errorf("the same report again: first %v, err %v; want it refused as already marked", first, err)
	}
	if res := peek(t, s, budget); res[0].Remaining != 3 {
		t.Errorf("after: %d remaining, want 3: the held and the queued check spent", res[0].Remaining)
	}
}

// TestReportPastDeadline: a report the queue would keep past its deadline
// goes out on its own at once, ahead of the held call, and is applied.
func TestReportPastDeadline(t *testing.T) {
	s, _, g, wg := holdLane(t, redisstore.Config{}, rate("guardian:v3:{acct}:login", 1, time.Hour, 5))
	s.SetCallTime(time.Hour)
	reportAlone(t, s, "guardian:v3:{att}:reported")
	close(g.opened)
	wg.Wait()
}

// reportAlone reports an attempt (MarkOnce at mark, learning a network)
// while the lane is held and checks that it went out on its own: it returns
// before the held call, queues nothing, and its settlement is applied.
func reportAlone(t *testing.T, s *redisstore.Store, mark string) {
	t.Helper()
	queued := s.Queued()
	// Were it queued behind the held call, it would end with this context.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	familiar := "guardian:v3:{acct}:familiar"
	first, err := s.MarkOnce(ctx, mark, time.Hour,
		store.Settlement{Key: familiar, Action: store.Learn, Span: time.Hour, Member: "net1"})
	if err != nil || !first {
		t.Fatalf("the report: first %v, err %v; want it marked while the lane is held", first, err)
	}
	if s.Queued() != queued {
		t.Errorf("%d queued after the report, want %d as before it", s.Queued(), queued)
	}
	members, err := s.Familiar(context.Background(), familiar)
	if err != nil || len(members) != 1 || members[0] != "net1" {
		t.Errorf("familiar list after the report: %v, err %v; want [net1]", members, err)
	}
}
